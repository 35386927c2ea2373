"""The ordinary property suite, defined once: pytest (tests/test_properties.py), the bug zoo
(harness/runners/zoo.py) and `python -m harness check` run the same laws, strategies and regression
examples.

A law is a property (a function whose docstring states what must hold) with the strategy of
configurations it is drawn over. An entry is one law over one slice of its space (coarse
axes fixed per entry so xdist spreads them). Its explicit examples are the configurations of
the historical cases (cases/, found by harness/runners/cases.py) whose property it is and
whose axes it covers: regression examples, judged by the same generic oracles as every
generated example."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from hypothesis import HealthCheck, Phase, example, given, settings

from harness.laws.acceptance_floor import FloorConfig, floor_configs, prop_acceptance_floor
from harness.laws.acceptance_path_invariant import (PathPair, path_pairs,
                                                   prop_acceptance_path_invariant)
from harness.laws.distribution import DistConfig, distribution_configs, prop_sampled_distribution
from harness.laws.eager_vs_graph import prop_eager_vs_graph
from harness.laws.eagle_draft import prop_eagle_draft
from harness.laws.finish import prop_finish
from harness.laws.kv_content import prop_kv_content
from harness.laws.long_context import prop_long_context
from harness.laws.lossless_greedy import prop_lossless_greedy
from harness.laws.overlap_equals_sync import prop_overlap_equals_sync
from harness.laws.prefix_transparent import prop_prefix_transparent
from harness.laws.random_streams import StreamConfig, prop_random_streams, stream_configs
from harness.laws.sampling_bounds import EXAMPLES as BOUND_EXAMPLES
from harness.laws.sampling_bounds import SamplingBoundsCase, prop_sampling_vocab, sampling_bounds_cases
from harness.laws.sampling_edges import EXAMPLES as EDGE_EXAMPLES
from harness.laws.sampling_edges import SamplingEdgesCase, prop_sampling_edges, sampling_edges_cases
from harness.laws.sampling_filter import (SamplingFilterCase, prop_sampling_filter,
                                          sampling_filter_cases)
from harness.laws.lifecycle import LifecycleRun, lifecycle_runs, prop_lifecycle
from harness.laws.radix_tree import EXAMPLES as RADIX_EXAMPLES
from harness.laws.radix_tree import RadixCase, prop_radix_tree, radix_cases
from harness.laws.self_draft import prop_self_draft
from harness.laws.structure import prop_structure
from harness.laws.structure_under_churn import prop_structure_under_churn
from harness.strategies.churn import ChurnConfig, churn_configs
from harness.strategies.configs import RunConfig, long_context_configs, run_configs, tp_configs
from harness.laws.tp_equals_single import prop_tp_equals_single
from harness.runners.cases import load_cases

_AXIS_ARG = {"page_size": "page_sizes", "draft": "drafts", "cuda_graph": "graphs"}
# Found by `harness check` on the GPU: a tree smaller than its depth (ndt < num_steps + 1).
_FOUND = {"lossless_greedy": (2, 2, 2), "self_draft": (2, 2, 2)}


def _runs(**extra):
    """Engine runs: the CPU tier draws smaller runs, the GPU tier the full space and dtypes
    (docs/contract.md, Tiers and profiles)."""
    def strategy(on_gpu: bool, fixed: dict):
        size = dict(max_batch=10) if on_gpu else dict(max_batch=10, max_prompt_len=24,
                                                       max_new_tokens=16)
        dtypes = ("float32", "bfloat16", "float16") if on_gpu else ("float32",)
        axes = {_AXIS_ARG[k]: (v,) for k, v in fixed.items()}
        return run_configs(dtypes=dtypes, **axes, **size, **extra)
    return strategy


def _eagle_runs(on_gpu: bool, fixed: dict):
    """EAGLE-head runs in float32 (the dense recomputation's tolerance is set for it), every
    other axis drawn as for the other engine laws."""
    size = dict(max_batch=10) if on_gpu else dict(max_batch=6, max_prompt_len=24,
                                                  max_new_tokens=16)
    graphs = (fixed["cuda_graph"],) if "cuda_graph" in fixed else (False, True)
    return run_configs(drafts=("eagle",), graphs=graphs, sampled=True, prefix=(False, True),
                       **size)


def _long(on_gpu: bool, fixed: dict):
    graphs = (fixed["cuda_graph"],) if "cuda_graph" in fixed else (False, True)
    if on_gpu:  # contexts of thousands of tokens, a drafter configured for 2048 among them
        return long_context_configs(4, (1500, 4000), graphs, (64, 2048),
                                    ("float32", "bfloat16"))
    return long_context_configs(graphs=graphs)


def _dist(on_gpu: bool, fixed: dict):
    return distribution_configs((fixed["cuda_graph"],) if "cuda_graph" in fixed else (False, True))


def _tp(on_gpu: bool, fixed: dict):
    graphs = (fixed["cuda_graph"],) if "cuda_graph" in fixed else (False, True)
    sizes = (fixed["tp_size"],) if "tp_size" in fixed else (2,)
    if on_gpu:
        return tp_configs(sizes, max_batch=8, max_prompt_len=40, max_new_tokens=24,
                          graphs=graphs, dtypes=("float32", "bfloat16"))
    return tp_configs(sizes, graphs=graphs)


def _paths(on_gpu: bool, fixed: dict):
    """acceptance_path_invariant: the tiny model with drafters of every acceptance, or
    (pair=trained) the trained target with its EAGLE head and a standalone drafter; tensor
    parallel path B only where two GPUs are visible."""
    import torch
    kw = {}
    if fixed.get("pair") == "trained":
        from harness.strategies.trained_pair import trained_pair
        pair = trained_pair(os.environ.get("SPECDEC_TRAINED_PAIR"))
        kw = dict(model=pair.target, drafts=(pair.eagle, pair.draft_arg("standalone")))
    if on_gpu:
        tp = (1, 2) if torch.cuda.device_count() >= 2 else (1,)
        return path_pairs(dtypes=("float32", "bfloat16"), tp_sizes=tp, max_batch=8,
                          max_prompt_len=40, max_new_tokens=24, **kw)
    if kw:  # the trained pair on a CPU: small runs, no shared-prefix workloads (their
        # prompts come from greedy references of the larger model)
        return path_pairs(max_batch=3, max_prompt_len=12, max_new_tokens=10, max_ndt=8,
                          prefix=(False,), **kw)
    return path_pairs(max_batch=4, max_prompt_len=16, max_new_tokens=12, max_ndt=8, **kw)


# The CPU tier's floors: a chain and a tree per drafter (the gate runs every configuration).
_CPU_FLOORS = ("eagle topk=1 steps=3 ndt=4", "eagle topk=4 steps=4 ndt=8",
               "standalone topk=1 steps=3 ndt=4", "standalone topk=2 steps=3 ndt=6")


def _floors(on_gpu: bool, fixed: dict):
    if on_gpu:
        return floor_configs("cuda", "bfloat16", buckets=((1, 2, 4), (1, 2, 4, 8, 16, 32)))
    return floor_configs("cpu", "float32", keys=_CPU_FLOORS)


def gpus_needed(cfg_or_axes, device: str) -> int:
    """GPUs a configuration needs on `device` (its tp_size on CUDA; none on CPU)."""
    tp = (dict(cfg_or_axes).get("tp_size", 1) if isinstance(cfg_or_axes, tuple)
          else getattr(cfg_or_axes, "tp_size", 1))
    return tp if device.startswith("cuda") else 0


def runnable(cfg_or_axes, device: str) -> bool:
    """False where a tensor-parallel configuration needs more GPUs than are visible."""
    import torch
    need = gpus_needed(cfg_or_axes, device)
    return need <= 1 or torch.cuda.device_count() >= need


@dataclass(frozen=True)
class Law:
    prop: Callable
    strategy: Callable  # (on_gpu, fixed axes) -> a Hypothesis strategy of configurations
    config: type = RunConfig
    examples: tuple = ()  # explicit examples of its own (kernel laws), besides the cases'
    # False: a failing example is reported as drawn. Shrinking reruns it hundreds of times,
    # and where each run builds and captures an engine that outlasts pytest's time-out.
    shrink: bool = True
    nested: bool = False  # its property runs Hypothesis itself (a stateful machine)

    @property
    def phases(self) -> list[Phase]:
        return [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if self.shrink
                                                                else [])


LAWS: dict[str, Law] = {
    "structure": Law(prop_structure, _runs(prefix=(False, True))),
    "structure_under_churn": Law(prop_structure_under_churn,
                                 lambda on_gpu, fixed: churn_configs(), ChurnConfig,
                                 shrink=False),
    "kv_content": Law(prop_kv_content, _runs(sampled=True, prefix=(False, True))),
    "eager_vs_graph": Law(prop_eager_vs_graph, _runs(sampled=True, prefix=(False, True))),
    "lossless_greedy": Law(prop_lossless_greedy, _runs(sampled="mixed", prefix=(False, True))),
    "self_draft": Law(prop_self_draft, _runs(prefix=(False, True))),
    "eagle_draft": Law(prop_eagle_draft, _eagle_runs),
    "prefix_transparent": Law(prop_prefix_transparent, _runs(prefix=(True,))),
    "finish": Law(prop_finish, _runs(sampled=True, stops=True, prefix=(False, True))),
    # Not over the prefix cache: its tree fills one round later under overlap (deferred
    # release), so which positions a request recomputes, and their rounding, may differ; the
    # two compose under prefix_transparent, kv_content, lossless_greedy and self_draft.
    "overlap_equals_sync": Law(prop_overlap_equals_sync, _runs(sampled=True, stops=True)),
    "long_context": Law(prop_long_context, _long),
    "sampled_distribution": Law(prop_sampled_distribution, _dist, DistConfig),
    "random_streams": Law(prop_random_streams, lambda on_gpu, fixed: stream_configs(),
                          StreamConfig),
    "sampling_vocab": Law(prop_sampling_vocab, lambda on_gpu, fixed: sampling_bounds_cases(),
                          SamplingBoundsCase, tuple(BOUND_EXAMPLES)),
    "sampling_edges": Law(prop_sampling_edges, lambda on_gpu, fixed: sampling_edges_cases(),
                          SamplingEdgesCase, tuple(EDGE_EXAMPLES)),
    "sampling_filter": Law(prop_sampling_filter, lambda on_gpu, fixed: sampling_filter_cases(),
                           SamplingFilterCase),
    # The stateful machine draws its own rules: a case seeds a few of its runs.
    "lifecycle": Law(prop_lifecycle, lambda on_gpu, fixed: lifecycle_runs(), LifecycleRun,
                     shrink=False, nested=True),
    "radix_tree": Law(prop_radix_tree, lambda on_gpu, fixed: radix_cases(), RadixCase,
                      RADIX_EXAMPLES),
    "tp_equals_single": Law(prop_tp_equals_single, _tp),
    "acceptance_path_invariant": Law(prop_acceptance_path_invariant, _paths, PathPair),
    "acceptance_floor": Law(prop_acceptance_floor, _floors, FloorConfig),
}
ALL_PROPERTIES = {name: law.prop for name, law in LAWS.items()}


@dataclass(frozen=True)
class Entry:
    prop: str
    axes: tuple = ()     # ((name, value), ...) fixed for this entry
    fraction: int = 1    # properties that run the engine several times draw fewer examples

    @property
    def id(self) -> str:
        return "-".join([self.prop] + [f"{k}={v}" for k, v in self.axes])

    def covers(self, cfg) -> bool:
        return isinstance(cfg, LAWS[self.prop].config) and all(
            getattr(cfg, k, None) == v for k, v in self.axes)

    def strategy(self, on_gpu: bool):
        return LAWS[self.prop].strategy(on_gpu, dict(self.axes))

    def examples(self) -> list:
        out = [c.example for c in load_cases().values() if c.prop == self.prop and self.covers(c.example)]
        out += [e for e in LAWS[self.prop].examples if e not in out]
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
        # A law that runs a stateful machine nests Hypothesis on purpose (one case: its seed).
        nested = [HealthCheck.nested_given] if LAWS[self.prop].nested else []
        return settings(base, max_examples=n, phases=LAWS[self.prop].phases,
                        suppress_health_check=[*base.suppress_health_check, *nested])(law)


def suite() -> list[Entry]:
    out = [Entry("structure", (("page_size", p), ("cuda_graph", g)))
           for p in (1, 4, 64) for g in (False, True)]
    out += [Entry("structure_under_churn")]
    out += [Entry("kv_content", (("draft", d), ("cuda_graph", g)))
            for d in ("eagle", "self", "perturbed") for g in (False, True)]
    out += [Entry("eager_vs_graph", (("page_size", p), ("cuda_graph", True)), 3) for p in (1, 16)]
    out += [Entry("lossless_greedy", (("draft", d), ("page_size", p)), 2)
            for d in ("eagle", "self", "perturbed") for p in (1, 4, 64)]
    out += [Entry("self_draft", (("page_size", p), ("draft", "self"))) for p in (1, 4, 64)]
    out += [Entry("eagle_draft", (("draft", "eagle"), ("cuda_graph", g)), 2)
            for g in (False, True)]
    out += [Entry("prefix_transparent", (("draft", d),), 4)  # graphs on and off drawn
            for d in ("eagle", "self", "perturbed")]
    out += [Entry("finish", (("cuda_graph", g),), 2) for g in (False, True)]
    out += [Entry("overlap_equals_sync", (("cuda_graph", g),), 2) for g in (False, True)]
    out += [Entry("long_context", (("cuda_graph", g),), 2) for g in (False, True)]
    out += [Entry("sampled_distribution", (("cuda_graph", g),), 2) for g in (False, True)]
    out += [Entry("random_streams"), Entry("sampling_vocab"), Entry("sampling_edges"),
            Entry("sampling_filter"), Entry("radix_tree")]
    # pytest also runs the machine directly (tests/test_lifecycle.py, 40 runs or more).
    out += [Entry("lifecycle", (), 10)]
    # Tensor parallelism: processes cost seconds to start, so few examples (one worker group
    # serves them all); on CUDA these need tp_size GPUs (skipped with fewer, runnable()).
    out += [Entry("tp_equals_single", (("tp_size", 2), ("cuda_graph", g)), 5)
            for g in (False, True)]
    # Acceptance: each example runs two paths (or, the floor, the held-out prompts).
    out += [Entry("acceptance_path_invariant", (("pair", "tiny"),), 2),
            Entry("acceptance_path_invariant", (("pair", "trained"),), 5)]
    out += [Entry("acceptance_floor", (), 5)]
    return out
