"""The specdec pytest plugin, registered as the `pytest11` entry point `specdec`: any test
directory run where specdec is installed gets what this repository's own tests get.

- `--faults NAME[,NAME]`: bug-zoo faults on for the whole run (faultpoints/);
- the Hypothesis profiles dev / ci / gpu / nightly, chosen by SPECDEC_PROFILE, CI or the
  device (harness/gate/profiles.py; `--hypothesis-profile` still overrides);
- one torch thread on CPU and in xdist workers;
- under xdist, one GPU per worker and a Triton cache per worker; `-n auto` sized for the
  device; on a host with several GPUs the multi_gpu tests first, in xdist groups (bins),
  and a lock per GPU for TP engines (harness/gate/xdist_gpu.py);
- `--engine NAME` (repeatable): run only the adapter-aware laws, on that engine (items
  marked `engine_law`; harness/runners/test_engine_laws.py, and specdec's white-box suite
  for `--engine specdec`); without it, everything, the black-box laws on both built-in
  adapters;
- the device and profile in the report header;
- with SPECDEC_GATE_PROFILE=DIR, where each test's time goes (harness/gate/gate_profile.py);
- on GPUs, a fork server for the zoo's detection processes (harness/gate/fork_server.py);
- the heap collection left behind frozen out of the garbage collector;
- bytecode written under a private prefix where PYTHONDONTWRITEBYTECODE forbids writing it
  beside the sources (harness/gate/bytecode.py).
"""
from __future__ import annotations

# First, before the big imports and before xdist starts its workers: bytecode under a
# private prefix where the environment forbids writing it (harness/gate/bytecode.py).
from harness.gate import bytecode  # noqa: I001
bytecode.redirect()
# Then, before anything imports triton: without CUDA it must run under the interpreter, and
# TRITON_INTERPRET is read when triton is imported. Entry-point plugins load before any
# conftest or test module, so this is as early as pytest allows.
import kernels._triton_env  # noqa: F401,E402,I001

import gc
import importlib.util
import os

import pytest
import torch

from harness.base import stop
from harness.base.failure import OracleFailure

from harness.gate import fork_server, gate_profile, gate_order, red_gate, xdist_gpu


# Hypothesis comes with the `test` extra; an environment with a plain `pip install specdec`
# still runs its own pytest, just without the profiles.
HAVE_HYPOTHESIS = importlib.util.find_spec("hypothesis") is not None

if not torch.cuda.is_available() or xdist_gpu.worker_index() is not None:
    # The tiny models' CPU work is all overhead: OpenMP threads only contend, with each other
    # and with the other xdist workers (measured: one thread runs a property example 12x
    # faster on CPU; on a GPU machine the CPU-side references and smoke benches likewise).
    torch.set_num_threads(1)

if HAVE_HYPOTHESIS:
    from harness.gate import profiles
    profiles.load_default()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("specdec", "specdec (harness/gate/pytest_plugin.py)")
    group.addoption("--faults", default=None, metavar="NAME[,NAME]",
                    help="switch on bug-zoo faults for the whole run (names and the mistake "
                         "each one makes: faultpoints/__init__.py, cases/)")
    group.addoption("--engine", action="append", default=None, metavar="NAME",
                    help="run only the adapter-aware laws, on this engine: a built-in "
                         "(specdec, transformers), an entry point of group specdec.adapters, "
                         "or module:Class (docs/adapters.md); or a kernel adapter "
                         "(specdec-kernels, sglang-kernels@V, vllm-kernels@V); repeatable")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "engine_law(name=None): an adapter-aware law; with "
                            "--engine only these run (name: the one engine it is for)")
    for engine in config.getoption("--engine") or ():
        from harness.adapters.registry import validate
        try:
            validate(engine)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    names = config.getoption("--faults")
    if names:
        import faultpoints
        try:
            faultpoints.set_active(names.split(","))
        except ValueError as exc:  # an unknown name: a usage error, not a crash
            raise pytest.UsageError(f"--faults: {exc}") from None
    idx = xdist_gpu.worker_index()
    config.pluginmanager.register(red_gate.Plugin(config), "specdec-red-gate")
    from specdec.tp import gpu_lock  # its long waits speak to the terminal, and end when red
    gpu_lock.say_waiting, gpu_lock.check_stop = red_gate.say, stop.check
    if idx is not None:
        xdist_gpu.pin_worker(idx)
    xdist_gpu.configure_multi_gpu(config)
    config._specdec_gate_profile = gate_profile.install()
    if idx is None and xdist_gpu.on_gpus() and not os.environ.get(fork_server.SERVER_ENV):
        # Before xdist starts the workers: they inherit it, and their zoo tests' detection
        # processes are forked from it instead of starting Python and torch again.
        config._specdec_fork_server = fork_server.start()


def pytest_unconfigure(config) -> None:
    server = getattr(config, "_specdec_fork_server", None)
    if server is not None:
        server.stop()
    if getattr(config, "_specdec_gate_profile", False):
        gate_profile.write(os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under SPECDEC_GATE_PROFILE: the test's setup, call and teardown on its own clock. On a
    host with GPU locks: the test's deadline, by which its TP engines, and those of the
    processes it starts, ask for the GPUs (xdist_gpu.test_deadline)."""
    on = getattr(item.config, "_specdec_gate_profile", False)
    if on:
        gate_profile.test_started(item.nodeid)
    try:
        with xdist_gpu.test_deadline():
            yield
    finally:
        if on:
            gate_profile.test_ended()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A law's failure escaping a test reads as what it is, first: "the engine breaks law X:
    <the law's message>", whatever the test is named (a negative control whose unbroken
    baseline fails says so, not that its control failed to reject)."""
    outcome = yield
    rep = outcome.get_result()
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, BaseExceptionGroup):  # Hypothesis: several distinct failures
        exc = next((e for e in exc.exceptions if isinstance(e, OracleFailure)), exc)
    if rep.failed and isinstance(exc, OracleFailure):
        line = f"the engine breaks law {exc.law}: {exc}"
        crash = getattr(rep.longrepr, "reprcrash", None)
        if crash is not None:
            crash.message = line
        rep.sections.insert(0, ("the law that failed", line))


@pytest.hookimpl(tryfirst=True)  # before xdist's own: it reads the xdist_group marks
def pytest_collection_modifyitems(config, items) -> None:
    _select_engines(config, items)
    if xdist_gpu.on_gpus():
        gate_order.longest_first(items, gate_order.load())
    xdist_gpu.group_multi_gpu(config, items)


def pytest_collection_finish(session) -> None:
    """Collection imported torch, transformers, Hypothesis and every law: hundreds of
    thousands of objects that live as long as the process. Frozen out of the cyclic
    collector, a full collection walks only what the tests make (0.2 s -> under 1 ms
    measured), so the collections Python starts on its own, and the engine's before its
    first graph capture (specdec/graphs/cuda_graph.py), stop re-walking them."""
    gc.collect()
    gc.freeze()


def _select_engines(config, items) -> None:
    """With --engine, keep the adapter-aware laws for those engines and deselect the rest."""
    engines = config.getoption("--engine")
    if not engines:
        return
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("engine_law")
        engine = (mark.args[0] if mark and mark.args else
                  _engine_param(getattr(getattr(item, "callspec", None), "params", {})))
        (keep if mark and engine in engines else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _engine_param(params: dict):
    return params.get("engine", params.get("kernel_engine"))


def pytest_report_header(config) -> str:
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    line = f"specdec: device={dev}"
    if HAVE_HYPOTHESIS:
        from hypothesis import settings
        line += f" hypothesis-profile={settings._current_profile}"
    faults = config.getoption("--faults")
    engines = config.getoption("--engine")
    return (line + (f" faults={faults}" if faults else "")
            + (f" engines={','.join(engines)}" if engines else ""))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist, nothing to size
def pytest_xdist_auto_num_workers(config) -> int:
    return xdist_gpu.auto_num_workers()


@pytest.hookimpl(optionalhook=True)  # an xdist hook: LoadGroupScheduling on GPUs
def pytest_xdist_make_scheduler(config, log):
    return xdist_gpu.make_scheduler(config, log)
