"""Where the gate's time goes: `SPECDEC_GATE_PROFILE=DIR pytest -n auto`, then
`python -m harness gate-profile DIR` (docs/contract.md, Tiers and profiles).

Each pytest process (every xdist worker) times, per test, the phases that a test pays for
beside its examples: building models, the rest of an engine's build, capturing CUDA graphs,
compiling Triton kernels, starting a tensor-parallel group, waiting for the GPU locks. The
clock is exclusive: a phase inside another (a capture inside a build, a compile inside a
capture) is taken out of the outer one, so a test's phases sum to its wall time and what is
left is its examples ("examples"). A worker's time outside every test is "idle" (waiting
for work, start-up, collection). Subprocesses the tests start (zoo runs, TP workers) are
inside their test's time, not split.

The wrappers are installed only with SPECDEC_GATE_PROFILE set; without it nothing here runs."""
from __future__ import annotations

import functools
import json
import os
import time
from collections import defaultdict

ENV = "SPECDEC_GATE_PROFILE"
LOCK_WAIT = "gpu lock wait"  # not a test's own time (seconds_per_test)
# (label, module, qualified attribute): the phases timed inside a test.
PHASES = (
    ("model build", "specdec.engine", "Engine._build_models"),
    ("engine build", "specdec.engine", "Engine.__init__"),
    ("graph capture", "specdec.graphs.runner", "PhaseRunner.capture_size"),
    ("tp group start", "specdec.tp.group", "TPGroup.leader"),
    (LOCK_WAIT, "specdec.tp.gpu_lock", "GPULocks.acquire"),
    ("triton compile", "triton.runtime.jit", "JITFunction._do_compile"),
)


class _Clock:
    """Exclusive time per label for the test running now; a stack of open regions."""

    def __init__(self) -> None:
        self.tests: dict[str, dict[str, float]] = {}
        self.stack: list[list] = []  # [label, start, time taken by inner regions]
        self.current: dict[str, float] | None = None
        self.started = time.monotonic()

    def enter(self, label: str) -> None:
        self.stack.append([label, time.monotonic(), 0.0])

    def leave(self) -> None:
        label, start, inner = self.stack.pop()
        took = time.monotonic() - start
        if self.stack:
            self.stack[-1][2] += took
        if self.current is not None:
            self.current[label] = self.current.get(label, 0.0) + took - inner


CLOCK = _Clock()


def _timed(label: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        CLOCK.enter(label)
        try:
            return fn(*args, **kwargs)
        finally:
            CLOCK.leave()
    return wrapper


HOLDS = "gpu-lock-holds.jsonl"  # the TP engines' GPU lock holds (specdec/tp/gpu_lock.py)


def install() -> bool:
    """Wrap the phases (once per process) when ENV is set; whether profiling is on. The GPU
    lock holds of this process and those it starts (zoo runs, TP scripts) go to DIR/HOLDS."""
    if not os.environ.get(ENV):
        return False
    if getattr(install, "done", False):
        return True
    from specdec.tp.gpu_lock import HOLDS_ENV
    os.makedirs(os.environ[ENV], exist_ok=True)
    os.environ.setdefault(HOLDS_ENV, os.path.join(os.path.abspath(os.environ[ENV]), HOLDS))
    import importlib
    for label, module, attr in PHASES:
        try:
            owner = importlib.import_module(module)
        except ImportError:  # no triton: nothing of it to time
            continue
        cls_name, name = attr.split(".")
        cls = getattr(owner, cls_name)
        raw = cls.__dict__[name]
        fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        wrapped = _timed(label, fn)
        setattr(cls, name, type(raw)(wrapped) if isinstance(raw, (staticmethod, classmethod))
                else wrapped)
    install.done = True
    return True


def test_started(nodeid: str) -> None:
    CLOCK.current = CLOCK.tests.setdefault(nodeid, {})
    CLOCK.enter("examples")


def test_ended() -> None:
    CLOCK.leave()
    CLOCK.current = None


def write(worker: str) -> None:
    """This process's record: DIR/<worker>.json."""
    out = os.environ[ENV]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{worker}.json"), "w") as f:
        json.dump({"worker": worker, "wall": time.monotonic() - CLOCK.started,
                   "tests": CLOCK.tests}, f)


def _records(directory: str) -> list[dict]:
    records = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                records.append(json.load(f))
    if not records:
        raise ValueError(f"no gate profile records (*.json) in {directory}")
    return records


def seconds_per_test(directory: str) -> dict[str, float]:
    """Each test's own time, what harness/runners/gate_order.py orders by: its phases summed
    but its waits for the GPU locks, which measure the other TP tests running beside it (with
    them, the tests that met the most waiting would go first and meet more)."""
    return {n: sum(v for k, v in t.items() if k != LOCK_WAIT)
            for rec in _records(directory) for n, t in rec["tests"].items()}


def table(directory: str, top: int = 10) -> str:
    """The per-phase table over every worker's record, and the tests that pay most."""
    records = _records(directory)
    phase: dict[str, float] = defaultdict(float)
    by_test = {n: t for rec in records for n, t in rec["tests"].items()}  # a test runs once
    for rec in records:
        for times in rec["tests"].values():
            for label, s in times.items():
                phase[label] += s
        phase["idle"] += max(0.0, rec["wall"] - sum(sum(t.values()) for t in rec["tests"].values()))
    total = sum(phase.values())
    lines = [f"{len(records)} processes, {total:.0f} process-seconds in all",
             f"{'phase':<16} {'seconds':>9} {'share':>6}"]
    for label, s in sorted(phase.items(), key=lambda kv: -kv[1]):
        lines.append(f"{label:<16} {s:9.1f} {100 * s / total:5.1f}%")
    lines += _holds(directory, max(r["wall"] for r in records))
    lines.append(f"\nthe {top} tests that take longest (seconds: phases)")
    for nodeid, s in sorted(((n, sum(t.values())) for n, t in by_test.items()),
                            key=lambda kv: -kv[1])[:top]:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(by_test[nodeid].items(),
                                                            key=lambda kv: -kv[1]) if v >= 0.05)
        lines.append(f"{s:7.1f}  {nodeid}: {parts}")
    return "\n".join(lines)


def _holds(directory: str, wall: float) -> list[str]:
    """The GPU locks' use: how long some TP engine held each GPU, against the run's wall
    (a GPU held nearly all the time is the gate's critical path on several GPUs)."""
    path = os.path.join(directory, HOLDS)
    if not os.path.exists(path):
        return []
    held: dict[int, float] = defaultdict(float)
    count = 0
    with open(path) as f:
        for line in f:
            hold = json.loads(line)
            count += 1
            for gpu in hold["gpus"]:
                held[gpu] += hold["end"] - hold["start"]
    return [f"GPU locks: {count} holds; " + ", ".join(
        f"GPU {g} held {s:.0f} s ({100 * s / wall:.0f}% of the {wall:.0f} s run)"
        for g, s in sorted(held.items()))]
