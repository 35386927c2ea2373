"""Tensor parallelism on CPU (gloo, two processes): bad input, the workers' lifecycle, errors
that reach rank 0, and the cross-rank check. Token equality with one rank, KV shards and
accounting are the law tp_equals_single (harness/laws/tp_equals_single.py, drawn in
tests/test_properties.py)."""
from __future__ import annotations

import pytest
import torch

from specdec import Engine, SpecConfig
from specdec.tp.group import TPGroup, TPWorkerError
from specdec.tp.replicate import TPDivergence

SPEC = SpecConfig(topk=1, num_steps=3, num_draft_tokens=4)


@pytest.mark.parametrize("tp_size,match", [
    (0, r"tp_size=0: expected an integer >= 1"),
    (-2, r"tp_size=-2: expected an integer >= 1"),
    ("2", r"tp_size='2': expected an integer >= 1"),
    (True, r"tp_size=True: expected an integer >= 1"),
    (3, r"tp_size=3 must divide the model's num_kv_heads=2"),
])
def test_bad_tp_size(tp_size, match):
    with pytest.raises(ValueError, match=match):
        Engine(spec=SPEC, tp_size=tp_size)


def test_tp_device_forms():
    with pytest.raises(ValueError, match=r"device='cuda:1' with tp_size=2: pass device='cuda'"):
        Engine(device="cuda:1", tp_size=2)
    if torch.cuda.device_count() < 2:
        with pytest.raises(ValueError, match=r"tp_size=2 but \d GPU\(s\) are visible"):
            Engine(device="cuda", tp_size=2)
    with pytest.raises(ValueError, match=r"device='meta': tensor parallelism runs on 'cpu'"):
        Engine(device="meta", tp_size=2)


# -- probes, run on every rank (module level: pickled to the worker) ------------------------
def _boom(engine):
    if engine.tp_group.rank > 0:
        raise ValueError("boom on the worker")


def _steal_a_page(engine):
    """Desynchronise the worker's allocator (a page taken on rank 1 only)."""
    if engine.tp_group.rank > 0:
        engine.memory.allocator.alloc(1, owner=-7)


def _pid(engine):
    import os
    return os.getpid()


def _visible_gpus(engine):
    import os
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def _gil_hog(rank, *, errors, heartbeat):
    """A worker that beats, then holds the GIL in one C call that never ends (killed)."""
    import os
    import time
    from specdec.tp.worker import start_daemons
    start_daemons(os.getppid(), heartbeat)
    time.sleep(1.0)
    sum(range(10**12))


def test_a_worker_starved_of_the_gil_is_not_hung_until_stopped(monkeypatch):
    """Law: heartbeat silence makes a worker hung only if it is not still running. A live
    worker whose main thread holds the GIL (its beat thread starved, state R) is not called
    hung at SPECDEC_TP_HANG_S; once stopped (SIGSTOP, state T) it is."""
    import multiprocessing
    import os
    import signal
    import time
    from specdec.tp import workers
    monkeypatch.setattr(workers, "HANG_S", 0.5)
    w = workers.Workers(multiprocessing.get_context("spawn"), 2, _gil_hog, {})
    proc = w.procs[1]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                w.beats[1].value == 0 or time.monotonic() - w.beats[1].value < 1.5):
            time.sleep(0.1)
        silent = time.monotonic() - w.beats[1].value
        assert w.beats[1].value > 0 and silent >= 1.5, "the worker never went silent"
        assert w.hung() == [], f"silent {silent:.1f} s while running: starved, not hung"
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and w.hung() != [1]:
            time.sleep(0.1)
        assert w.hung() == [1], "a stopped worker was not called hung"
    finally:
        proc.kill()
        proc.join(10)


def test_cpu_workers_never_see_the_gpus():
    """A CPU group's workers start with CUDA hidden, as on a machine without a GPU (no driver
    state of theirs to tear down when one is killed); rank 0's environment is unchanged."""
    import os
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    with _engine() as eng:
        seen = eng.tp_each(_visible_gpus)
    assert seen[0] == before and seen[1:] == [""]
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before


def _engine(**kw):
    return Engine(spec=SPEC, max_batch=4, max_context=64, tp_size=2, **kw)


def test_prestarted_workers_serve_the_next_group():
    """prestart() spawns the next group's workers ahead of it: the next TP engine joins
    those very processes; with a group to reuse it does nothing; workers prestarted for
    another group size are ended when an engine asks for this one, not joined."""
    if TPGroup._current is not None:
        TPGroup._current.shutdown()
    TPGroup.prestart(2, "cpu")
    early = [p.pid for p in TPGroup._pending[4].procs.values()]
    with _engine() as eng:
        assert eng.tp_each(_pid)[1:] == early and TPGroup._pending is None
    TPGroup.prestart(2, "cpu")  # the current group serves the next engine: nothing starts
    assert TPGroup._pending is None
    TPGroup._current.shutdown()
    TPGroup.prestart(3, "cpu")
    wrong = list(TPGroup._pending[4].procs.values())
    with _engine() as eng:
        assert TPGroup._pending is None and len(eng.tp_each(_pid)) == 2
        assert all(p.exitcode is not None for p in wrong)


def test_tp_lifecycle_errors_and_checks():
    """One group of workers serves every engine of this test (starting one costs seconds)."""
    with _engine(cuda_graph=True, cuda_graph_bs=[2, 4]) as eng:
        single = Engine(spec=SPEC, max_batch=4, max_context=64, cuda_graph=True,
                        cuda_graph_bs=[2, 4])
        # continuous batching with an abort, through the replicated calls
        prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9]]
        for e in (eng, single):
            rids = [e.add_request(p, 6) for p in prompts]
            e.step()
            e.abort(rids[1])
            while e.has_unfinished():
                e.step()
        assert [eng.output(r).tokens for r in rids] == [single.output(r).tokens for r in rids]
        # bad input is refused on rank 0 before the workers see it: the group stays usable
        with pytest.raises(ValueError, match=r"prompt token 2 = 999 is outside the vocabulary"):
            eng.add_request([1, 2, 999])
        with pytest.raises(ValueError, match=r"abort\(77\): no live request"):
            eng.abort(77)
        assert eng.generate([[5, 6]], max_new_tokens=4) == single.generate([[5, 6]], max_new_tokens=4)
        pids = eng.tp_each(_pid)
        with pytest.raises(RuntimeError, match=r"one tensor-parallel Engine per process"):
            _engine()
    with _engine() as again:  # closed: the same workers serve the next engine
        assert again.tp_each(_pid) == pids
        # the cross-rank check: a worker whose accounting differs is refused at the next call
        again.tp_each(_steal_a_page)
        with pytest.raises(TPDivergence, match=r"tp rank 1 diverged from rank 0.*owner"):
            again.add_request([1, 2, 3], 4)
    with _engine() as third:  # a failure ends the group; the next engine starts a fresh one
        with pytest.raises(TPWorkerError, match=r"tp rank 1: ValueError: boom on the worker"):
            third.tp_each(_boom)
        with pytest.raises(RuntimeError, match=r"group failed earlier"):
            third.generate([[1]], max_new_tokens=2)
    assert TPGroup._current is None or not TPGroup._current.in_use


@pytest.mark.parametrize("vocab", [320, 321])
def test_vocab_seams_are_the_shard_edges(vocab):
    """The law's seam ids (harness/strategies/vocab_seams.py, written from the sharding rule)
    are the edges of the rows each rank keeps (specdec/tp/comm.py), and the drawn prompts of
    a batch hold every one of them."""
    from harness.strategies.runs import make_prompts
    from harness.strategies.vocab_seams import seam_stops, vocab_seams, with_seams
    from specdec.tp.comm import TPComm
    edges = {0, vocab - 1}
    for rank in range(2):
        first, count = TPComm(rank, 2, "unused").vocab_rows(vocab)
        edges.update((first, first + count - 1))
    assert vocab_seams(vocab, 2) == sorted(edges)
    assert sum(TPComm(r, 2, "unused").vocab_rows(vocab)[1] for r in range(2)) == vocab
    seams = vocab_seams(vocab, 2)
    prompts = with_seams(make_prompts(7, 4, vocab, 6), seams, 7)
    assert set(seams) <= {t for p in prompts for t in p}
    assert all(0 <= t < vocab for p in prompts for t in p)
    assert {s for stop in seam_stops(4, seams) for s in stop} == set(seams)


def test_odd_vocab_needs_no_division():
    """An odd vocabulary shards unevenly (tiny-odd: 161 + 160 rows); too many ranks for the
    vocabulary is refused by name."""
    from specdec import ModelConfig
    from specdec.tp.shard import check_divisible
    check_divisible(ModelConfig(vocab_size=321, hidden_size=64, intermediate_size=128,
                                num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16), 2)
    with pytest.raises(ValueError, match=r"tp_size=4 is too many ranks for the model's "
                                         r"vocab_size=3"):
        check_divisible(ModelConfig(vocab_size=3, hidden_size=64, intermediate_size=128,
                                    num_layers=2, num_heads=4, num_kv_heads=4, head_dim=16), 4)
