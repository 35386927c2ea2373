"""The ordinary property suite, defined once: pytest (tests/test_properties.py) and the bug
zoo (harness/zoo.py) run the same entries, strategies and regression examples.

An entry is one property over one slice of the configuration space (coarse axes fixed so
xdist spreads them). Its explicit examples are the configurations of the historical cases
(cases/) whose property it is and whose axes it covers: regression examples, judged by the
same generic oracles as every generated example."""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import example, given, settings

from harness.properties import PROPERTIES
from harness.sampling_bounds import EXAMPLES as BOUND_EXAMPLES
from harness.sampling_bounds import prop_sampling_vocab, sampling_bounds_cases
from harness.sampling_edges import EXAMPLES as EDGE_EXAMPLES
from harness.sampling_edges import prop_sampling_edges, sampling_edges_cases
from harness.strategies import RunConfig, run_configs

ALL_PROPERTIES = {**PROPERTIES, "sampling_vocab": prop_sampling_vocab,
                  "sampling_edges": prop_sampling_edges}
# Kernel-level properties: their own case type, strategy and explicit examples (no engine run).
KERNEL_PROPERTIES = {"sampling_vocab": (sampling_bounds_cases, BOUND_EXAMPLES),
                     "sampling_edges": (sampling_edges_cases, EDGE_EXAMPLES)}
_AXIS_ARG = {"page_size": "page_sizes", "draft": "drafts", "cuda_graph": "graphs"}
# Found by `harness check` on the GPU: a tree smaller than its depth (ndt < num_steps + 1).
_FOUND = {"lossless_greedy": (2, 2, 2), "self_draft": (2, 2, 2)}


@dataclass(frozen=True)
class Entry:
    prop: str
    axes: tuple = ()     # ((name, value), ...) fixed for this entry
    fraction: int = 1    # properties that run the engine several times draw fewer examples

    @property
    def id(self) -> str:
        return "-".join([self.prop] + [f"{k}={v}" for k, v in self.axes])

    def covers(self, cfg) -> bool:
        return isinstance(cfg, RunConfig) and all(getattr(cfg, k) == v for k, v in self.axes)

    def strategy(self, on_gpu: bool):
        if self.prop in KERNEL_PROPERTIES:
            return KERNEL_PROPERTIES[self.prop][0]()
        # The CPU tier draws smaller runs; the GPU tier the full space (harness.md, tiers).
        size = dict(max_batch=10) if on_gpu else dict(max_batch=10, max_prompt_len=24,
                                                       max_new_tokens=16)
        dtypes = ("float32", "bfloat16", "float16") if on_gpu else ("float32",)
        fixed = {_AXIS_ARG[k]: (v,) for k, v in self.axes}
        return run_configs(dtypes=dtypes, **fixed, **size)

    def examples(self) -> list:
        from cases import CASES
        out = [c.example for c in CASES.values() if c.prop == self.prop
               and (self.prop in KERNEL_PROPERTIES or self.covers(c.example))]
        if self.prop in KERNEL_PROPERTIES:
            out += [e for e in KERNEL_PROPERTIES[self.prop][1] if e not in out]
        if self.prop in _FOUND:
            page = dict(self.axes).get("page_size", 1)
            draft = dict(self.axes).get("draft", "self")
            out.append(RunConfig(*_FOUND[self.prop], page, draft, 1, 1, 2, 0))
        return out

    def law(self, device: str, check, profile: settings | None = None):
        """The Hypothesis test: `check(prop, example)` judges one example."""
        on_gpu = device.startswith("cuda")

        @given(cfg=self.strategy(on_gpu))
        def law(cfg):
            check(self.prop, cfg)
        for ex in reversed(self.examples()):
            law = example(cfg=ex)(law)
        base = profile or settings.default
        n = max(2, base.max_examples // self.fraction)
        return settings(base, max_examples=n)(law)


def suite() -> list[Entry]:
    out = [Entry("structure", (("page_size", p), ("cuda_graph", g)))
           for p in (1, 4, 64) for g in (False, True)]
    out += [Entry("kv_content", (("draft", d), ("cuda_graph", g)))
            for d in ("eagle", "self") for g in (False, True)]
    out += [Entry("eager_vs_graph", (("page_size", p), ("cuda_graph", True)), 3) for p in (1, 16)]
    out += [Entry("lossless_greedy", (("draft", d), ("page_size", p)), 2)
            for d in ("eagle", "self") for p in (1, 4, 64)]
    out += [Entry("self_draft", (("page_size", p), ("draft", "self"))) for p in (1, 4, 64)]
    out += [Entry("sampling_vocab"), Entry("sampling_edges")]
    return out
