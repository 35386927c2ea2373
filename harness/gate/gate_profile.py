"""Where the gate's time goes: `SPECDEC_GATE_PROFILE=DIR pytest -n auto`, then
`python -m harness gate-profile DIR` (docs/contract.md, Tiers and profiles).

Each pytest process (every xdist worker) times, per test, the phases that a test pays for
beside its examples: building models, the rest of an engine's build, capturing CUDA graphs,
compiling Triton kernels, starting a tensor-parallel group, waiting for the GPU locks. The
clock is exclusive: a phase inside another (a capture inside a build, a compile inside a
capture) is taken out of the outer one, so a test's phases sum to its wall time and what is
left is its examples ("examples"). A worker's time outside every test is "idle" (waiting
for work, start-up, collection). A subprocess a test starts is inside its test's time; a zoo
fault's detection process (harness/runners/zoo.py) also times its own phases under the test
(PARENT_ENV, `inside`), so its waits for the GPU locks count as waits, not as the test's own
time. TP worker processes are not split.

The wrappers are installed only with SPECDEC_GATE_PROFILE set; without it nothing here runs."""
from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections import defaultdict

ENV = "SPECDEC_GATE_PROFILE"
LOCK_WAIT = "gpu lock wait"  # not a test's own time (seconds_per_test)
PARENT_ENV = "SPECDEC_GATE_PROFILE_TEST"  # in a test's subprocess: the test's node id
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
        self.current_id: str | None = None
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
    CLOCK.current_id = nodeid
    CLOCK.enter("examples")


def test_ended() -> None:
    CLOCK.leave()
    CLOCK.current = CLOCK.current_id = None


def child_env(env: dict) -> dict:
    """`env` for a subprocess of the test running now: it names the test (PARENT_ENV), so the
    subprocess's phases (`inside_parent`) are told apart under it; unchanged when profiling
    is off or no test runs."""
    if env.get(ENV) and CLOCK.current_id is not None:
        env = {**env, PARENT_ENV: CLOCK.current_id}
    return env


@contextlib.contextmanager
def inside_parent():
    """In a subprocess that a profiled test started (PARENT_ENV set): time this block's phases
    under that test and write them to DIR/sub-<pid>.json, marked `inside` it (they are part
    of the test's wall time, not more process-seconds). Elsewhere: nothing."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not install():
        yield
        return
    test_started(parent)
    try:
        yield
    finally:
        test_ended()
        write(f"sub-{os.getpid()}", inside=parent)


def write(worker: str, inside: str | None = None) -> None:
    """This process's record: DIR/<worker>.json; `inside`: the test whose subprocess it is."""
    out = os.environ[ENV]
    os.makedirs(out, exist_ok=True)
    record = {"worker": worker, "wall": time.monotonic() - CLOCK.started, "tests": CLOCK.tests}
    if inside is not None:
        record["inside"] = inside
    with open(os.path.join(out, f"{worker}.json"), "w") as f:
        json.dump(record, f)


def _records(directory: str) -> list[dict]:
    records = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                records.append(json.load(f))
    if not records:
        raise ValueError(f"no gate profile records (*.json) in {directory}")
    return records


def _split(records: list[dict]) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """The test processes' records, and per test the phases of the subprocesses it started
    (records marked `inside` it), summed."""
    subs: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for rec in records:
        if "inside" in rec:
            for times in rec["tests"].values():
                for label, s in times.items():
                    subs[rec["inside"]][label] += s
    return [r for r in records if "inside" not in r], subs


def lock_wait(times: dict[str, float], sub: dict[str, float] | None) -> float:
    """A test's waits for the GPU locks, its own and its subprocesses'."""
    return times.get(LOCK_WAIT, 0.0) + (sub or {}).get(LOCK_WAIT, 0.0)


def seconds_per_test(directory: str) -> dict[str, float]:
    """Each test's own time, what harness/gate/gate_order.py orders by: its phases summed
    but its waits for the GPU locks (its subprocesses' included), which measure the other TP
    tests running beside it (with them, the tests that met the most waiting would go first
    and meet more)."""
    records, subs = _split(_records(directory))
    return {n: sum(t.values()) - lock_wait(t, subs.get(n))
            for rec in records for n, t in rec["tests"].items()}


def table(directory: str, top: int = 10) -> str:
    """The per-phase table over every test process's record, the tests that pay most, and
    the tests whose subprocesses were timed (zoo detections) with and without lock waits."""
    records, subs = _split(_records(directory))
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
        lines.append(f"{s:7.1f}  {nodeid}: {_parts(by_test[nodeid])}"
                     + (f" | in its subprocess: {_parts(subs[nodeid])}" if nodeid in subs else ""))
    timed = sorted(((n, sum(by_test[n].values()), lock_wait(by_test[n], subs[n]))
                    for n in subs if n in by_test), key=lambda r: -(r[1] - r[2]))
    if timed:
        lines.append("\ntests with a timed subprocess (seconds: wall, GPU lock waits, wall "
                     "without them)")
        lines += [f"{s:7.1f} {w:6.1f} {s - w:7.1f}  {n}" for n, s, w in timed]
    return "\n".join(lines)


def _parts(times: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in sorted(times.items(), key=lambda kv: -kv[1])
                     if v >= 0.05)


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
