"""The ordinary property suite: pytest (tests/test_properties.py), the bug zoo
(harness/runners/zoo.py) and `python -m harness check` run the same laws, strategies and
regression examples, read from each law's one declaration (`LAW = Law(...)` in its module,
harness/laws/declaration.py; harness/laws/index.py finds them).

An entry is one white-box law over one slice of its space (coarse axes fixed per entry so
xdist spreads them). Its explicit examples are the configurations of the historical cases
(cases/, found by harness/runners/cases.py) whose law it is and whose axes it cover, then the
law's own: regression examples, judged by the same generic oracles as every generated
example."""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, example, given, settings

from harness.base import stop
from harness.laws.declaration import Law
from harness.laws.index import white_box
from harness.runners.cases import load_cases

LAWS: dict[str, Law] = white_box()
ALL_PROPERTIES = {name: law.prop for name, law in LAWS.items()}


def gpus_needed(cfg_or_axes, device: str) -> int:
    """GPUs a configuration needs on `device` (its largest tp_size on CUDA, path B's
    included; none on CPU)."""
    get = ((lambda k: dict(cfg_or_axes).get(k, 1)) if isinstance(cfg_or_axes, tuple)
           else (lambda k: getattr(cfg_or_axes, k, 1)))
    tp = max(get("tp_size"), get("b_tp_size"))
    return tp if device.startswith("cuda") else 0


def runnable(cfg_or_axes, device: str) -> bool:
    """False where a tensor-parallel configuration needs more GPUs than are visible."""
    import torch
    need = gpus_needed(cfg_or_axes, device)
    return need <= 1 or torch.cuda.device_count() >= need


def case_skip_reason(case, device: str) -> str | None:
    """Why a historical case cannot run here, None where it can: its fault's code path does
    not exist on this device type (the peer-memory all-reduce has no CPU form), or its
    example needs more GPUs than are visible."""
    from specdec.faults import REGISTRY
    devices = REGISTRY[case.fault].devices
    if device.split(":")[0] not in devices:
        return f"its code path runs on {'/'.join(devices)} only"
    if not runnable(case.example, device):
        return f"needs {gpus_needed(case.example, device)} GPUs"
    return None


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
        out += [e for e in LAWS[self.prop].examples if e not in out and self.covers(e)]
        return out

    def law(self, device: str, check, profile: settings | None = None):
        """The Hypothesis test: `check(prop, example)` judges one example."""
        on_gpu = device.startswith("cuda")

        @given(cfg=self.strategy(on_gpu))
        def law(cfg):
            stop.check()  # a red gate ends this test between examples
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
    """Every white-box law's entries, laws in rank order."""
    return [Entry(name, sl.axes, sl.fraction) for name, law in LAWS.items() for sl in law.slices]
