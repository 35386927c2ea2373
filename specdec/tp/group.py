"""The process group of a tensor-parallel engine: rank 0 (the process that built the Engine)
and its workers, started here (torch.multiprocessing, spawn) or by torchrun.

Two groups over the same ranks (specdec/tp/process_groups.py): the data group carries the
forward's collectives (specdec/tp/comm.py); a gloo control group carries rank 0's commands
and the workers' replies as pickled objects. A spawned group outlives one engine: rank 0's
next Engine(tp_size=N) reuses its workers (starting processes costs seconds), so one
process holds one group at a time, used by one engine at a time.

It always ends: close(), `with`, garbage, interpreter exit (atexit), a failed or hung worker.
Rank 0 watches its workers (specdec/tp/workers.py) while they start and while it runs, and
ends the group in one order (shutdown): the workers told to exit, every rank's groups
destroyed together, the workers joined; any step that does not finish in time, or a peer
not known to be alive, turns it into abort and kill."""
from __future__ import annotations

import atexit
import gc
import multiprocessing.spawn
import os
import sys
import threading
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from specdec.tp import process_groups as pg
from specdec.tp.captured import CapturedGraphs
from specdec.tp.comm import TPComm
from specdec.tp import gpu_lock
from specdec.tp.gpu_lock import GPULocks
from specdec.tp.worker import serve, start_daemons
from specdec.tp.workers import TPWorkerError, Workers

__all__ = ["TPGroup", "TPWorkerError", "check_tp_args", "serve"]


def check_tp_args(tp_size, device: str) -> None:
    """tp_size: an integer >= 1; on CUDA at most the visible GPUs, with device 'cuda' (rank r
    runs on GPU (current + r) mod count)."""
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1:
        raise ValueError(f"tp_size={tp_size!r}: expected an integer >= 1")
    if tp_size == 1:
        return
    kind = torch.device(device).type
    if kind == "cuda":
        if device != "cuda":
            raise ValueError(f"device={device!r} with tp_size={tp_size}: pass device='cuda'; "
                             "rank r runs on GPU (current + r) mod count")
        if tp_size > torch.cuda.device_count():
            raise ValueError(f"tp_size={tp_size} but {torch.cuda.device_count()} GPU(s) are "
                             "visible: tp_size must be at most the visible GPUs")
    elif kind != "cpu":
        raise ValueError(f"device={device!r}: tensor parallelism runs on 'cpu' (gloo) or "
                         "'cuda' (NCCL)")


def _not_importing_main() -> None:
    """A spawned worker re-importing an unguarded main script fails here at once, with
    multiprocessing's own 'bootstrapping phase' error (which rank 0 names, with the fix),
    before it waits on anything its parent holds: the GPU locks (gpu_lock.py) made it wait
    for its parent, and its parent for it, until the store's time-out."""
    check = getattr(multiprocessing.spawn, "_check_not_importing_main", None)
    if check is not None:
        check()


def _torchrun_world() -> int | None:
    return int(os.environ["WORLD_SIZE"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ \
        else None


class TPGroup:
    _current: "TPGroup | None" = None
    _pending: "tuple | None" = None  # workers prestart() spawned for the next leader()

    def __init__(self, rank: int, *, world: int, device_type: str, control, workers=None,
                 errors=None, cuda_index: int | None = None) -> None:
        self.rank, self.world, self.device_type = rank, world, device_type
        self.cuda_index = cuda_index  # this rank's GPU (CUDA), else None
        self.control, self.workers = control, workers  # workers: rank 0 of a spawned group
        self.errors = workers.errors if workers is not None else errors
        self.comm = TPComm(rank, world, dist.group.WORLD.group_name)
        self.executing = rank > 0  # a worker runs what it is told; rank 0 sends first
        self.in_use = False
        self.owner = lambda: None  # the engine using the group (a weak reference)
        self.alive = True   # usable: no rank has failed
        self.closed = False
        self.failed: TPWorkerError | None = None  # a worker that ended or hung
        self.reported = False  # `failed` was raised to the caller
        self._stop_watch = threading.Event()
        self.locks = GPULocks([])  # rank 0 of a spawned CUDA group: its GPUs (gpu_lock.py)
        self.graphs = CapturedGraphs()  # graphs holding this group's collectives (captured.py)
        if workers is not None:
            threading.Thread(target=self._watch, daemon=True, name="specdec-tp-watch").start()

    # -- rank 0 -----------------------------------------------------------------------------
    @classmethod
    def leader(cls, world: int, device_type: str, owner) -> "TPGroup":
        """Rank 0's group of `world` ranks: the current one if it matches and is free, else
        a fresh one (spawned workers, or torchrun's ranks). An engine that was dropped
        without close() frees its group when it is garbage."""
        cur = cls._current
        if cur is not None and cur.in_use and cur.owner() is not None:
            gc.collect()  # an engine is a reference cycle: dropped, it is garbage only now
        if cur is not None and cur.alive and cur.in_use and cur.owner() is None \
                and cur.rank == 0:
            try:
                cur.send(("drop",))
                cur.replies(("ok", None, None))
                cur.release()
            except Exception:  # noqa: BLE001  a worker failed meanwhile: start afresh
                cur.alive = False
        if cur is not None and cur.alive and cur.world == world and cur.device_type == device_type:
            if cur.in_use:
                raise RuntimeError("one tensor-parallel Engine per process at a time: close() "
                                   "the previous one (or use it as a context manager)")
            cur.in_use, cur.owner = True, weakref.ref(owner)
            return cur
        if cur is not None:
            if cur.in_use and cur.alive:
                raise RuntimeError(f"a tp_size={cur.world} Engine is still open in this "
                                   "process: close() it before building another")
            cur.shutdown()
        group = cls._torchrun(world, device_type) if _torchrun_world() is not None \
            else cls._spawn(world, device_type)
        group.in_use, group.owner = True, weakref.ref(owner)
        cls._current = group
        # Registered now, after torch's own exit handlers: it runs before them (a gloo group
        # with functional collectives left to interpreter exit aborts the process).
        atexit.register(group.shutdown)
        return group

    @classmethod
    def _torchrun(cls, world: int, device_type: str) -> "TPGroup":
        if _torchrun_world() != world:
            raise ValueError(f"tp_size={world} but torchrun started WORLD_SIZE="
                             f"{_torchrun_world()} ranks")
        rank = int(os.environ["RANK"])
        local = int(os.environ.get("LOCAL_RANK", rank)) if device_type == "cuda" else None
        if local is not None:
            torch.cuda.set_device(local)
        return cls(rank, world=world, device_type=device_type,
                   control=pg.init_groups(rank, world=world, device_type=device_type, port=None,
                                          cuda_index=local), cuda_index=local)

    @classmethod
    def prestart(cls, world: int, device_type: str) -> None:
        """Start the workers that the next `leader(world, device_type)` would spawn, now,
        without waiting for them: their Python start, imports and CUDA context overlap the
        caller's own work meanwhile (tp_equals_single builds and runs its one-rank engine),
        and leader() then only joins them. A no-op where leader() would reuse the current
        group, under torchrun, or with workers already pending; pending workers that the
        next leader() cannot use (another size or GPU) are ended there."""
        cur = cls._current
        if world <= 1 or _torchrun_world() is not None or cls._pending is not None or (
                cur is not None and cur.alive and cur.world == world
                and cur.device_type == device_type):
            return
        _not_importing_main()
        cls._pending = cls._start_workers(world, device_type)
        atexit.register(cls._end_pending)

    @classmethod
    def _end_pending(cls) -> None:
        """Workers prestart() spawned and no leader() joined: ended."""
        pending, cls._pending = cls._pending, None
        if pending is not None:
            pending[4].end(0)

    @classmethod
    def _start_workers(cls, world: int, device_type: str) -> tuple:
        """(world, device_type, base GPU, store, workers): spawned, not yet joined."""
        # Rank r runs on GPU (current + r) mod count: rank 0 stays where it is (an xdist
        # worker's pin): no tensor of its moves.
        base = torch.cuda.current_device() if device_type == "cuda" else None
        store = pg.serve_store(world)  # listening before the workers start
        # A CPU group's workers never see the GPUs (CUDA_VISIBLE_DEVICES=""), as on CI: no
        # CUDA driver state of theirs to tear down when one is killed. On a loaded 1-GPU host
        # rank 0 waited in gloo 25 s after its worker was SIGKILLed (bench/results/gate-series-
        # h100-2026-11-26-b011bb9-partial.txt), the likely cause that teardown delaying the
        # close of the dying worker's sockets.
        workers = Workers(mp.get_context("spawn"), world, _worker_main,
                          dict(world=world, device_type=device_type, port=store.port,
                               parent=os.getpid(), threads=torch.get_num_threads(), base=base),
                          env=None if device_type == "cuda" else {"CUDA_VISIBLE_DEVICES": ""})
        return world, device_type, base, store, workers

    @classmethod
    def _spawn(cls, world: int, device_type: str) -> "TPGroup":
        _not_importing_main()
        base = torch.cuda.current_device() if device_type == "cuda" else None
        pending, cls._pending = cls._pending, None
        if pending is not None and pending[:3] != (world, device_type, base):
            pending[4].end(0)  # started for another group: ended, not joined
            pending = None
        _, _, base, store, workers = pending or cls._start_workers(world, device_type)
        control = workers.while_starting(
            lambda: pg.init_groups(0, world=world, device_type=device_type, port=store.port,
                                   cuda_index=base, store=store),
            pg.TIMEOUT_S)
        group = cls(0, world=world, device_type=device_type, control=control, workers=workers,
                    cuda_index=base)
        # Taken at the first command that runs on the GPUs (use()): starting the workers
        # (seconds of Python and imports), their communicators (one probe all-reduce) and
        # building an engine are no engine's use of the GPUs, and nobody else's engine waits
        # through them (gpu_lock.py).
        group.locks = GPULocks([] if base is None else
                               [(base + r) % torch.cuda.device_count() for r in range(world)])
        return group

    def use(self) -> None:
        """Rank 0, before a command that runs on the GPUs (a replicated call, a per-rank
        probe): this group's GPU locks, held until the engine is released (gpu_lock.py).
        Between calls, nothing in flight: a red gate may end the test here (check_stop)."""
        if gpu_lock.check_stop is not None:
            gpu_lock.check_stop()
        if self.rank == 0 and self.in_use:
            self.locks.acquire(pg.TIMEOUT_S)

    def _watch(self) -> None:
        """Rank 0: a worker that ends or hangs while the group runs is recorded (and a hung
        one killed), so a collective waiting on it fails at once and is named. On NCCL a
        dead peer does not fail a collective: the groups are aborted to end it."""
        while not self._stop_watch.is_set():
            self.workers.wait_any_end(0.25)
            if self._stop_watch.is_set():
                return
            err = self.workers.failure()
            if err is not None and not self._stop_watch.is_set():  # set: an ordered exit
                self.failed, self.alive = err, False
                if self.device_type == "cuda":
                    self.graphs.keep()
                    self.comm.abort_peers()  # our kernels waiting on the peer end too
                    pg.abort_groups()
                return

    def check_alive(self) -> None:
        """Before a call: raise a worker failure the watchdog saw and nobody has reported
        yet, or refuse a group that failed earlier."""
        if self.failed is not None and not self.reported:
            self.reported = True
            raise TPWorkerError(str(self.failed))
        if not self.alive:
            why = f" ({str(self.failed).splitlines()[0]})" if self.failed is not None else ""
            raise RuntimeError(f"this tensor-parallel engine's group failed earlier{why}: see "
                               "that error, and build a new Engine")

    def send(self, msg) -> None:
        box = [msg]
        dist.broadcast_object_list(box, src=0, group=self.control)

    def replies(self, mine) -> list:
        """Every rank's reply to the command just run (rank 0's own first)."""
        out = [None] * self.world
        dist.all_gather_object(out, mine, group=self.control)
        return out

    def worker_failure(self, wait_s: float = 2.0) -> TPWorkerError | None:
        """After a collective failed: the worker that ended or hung (waiting up to `wait_s`
        for its exit to be seen), as a TPWorkerError; None if every worker is well."""
        if self.failed is not None:
            return self.failed
        if self.workers is None:  # torchrun: no handles; its error queue is none either
            return None
        self.workers.wait_any_end(wait_s)
        err = self.workers.failure()
        if err is not None:
            self.failed = err
        return err

    def release(self) -> None:
        """No engine uses the group now: its workers wait, its GPUs are free to others."""
        self.in_use = False
        self.locks.release()

    def end_graphs(self, healthy: bool) -> None:
        """Before the groups end: their captured graphs destroyed (healthy) or kept for good,
        then the peer buffers the graphs read dropped (healthy) or kept, every wait in them
        ended (peer_memory.py)."""
        if healthy:  # every rank answered: no kernel of ours waits on a peer
            gc.collect()  # dropped engines (reference cycles): their graphs go now, not later
            self.graphs.destroy(self.cuda_index)
        else:
            self.graphs.keep()
        self.comm.close_peers(healthy)

    def shutdown(self) -> None:
        """End the group, in order, every wait bounded (see the module docstring)."""
        if self.closed:
            return
        self.closed = True
        self._stop_watch.set()  # the workers' exits from here on are expected
        if TPGroup._current is self:
            TPGroup._current = None
        workers = self.workers
        healthy = self.alive and self.failed is None and (
            workers is None or not (workers.ended() or workers.hung()))
        self.alive = False
        if self.rank == 0 and healthy:  # every worker answers "exit", then all destroy
            healthy = pg.bounded(lambda: (self.send(("exit",)), self.replies(("ok",))),
                                 pg.END_WAIT_S)
        if not healthy and workers is not None:
            workers.end(0)  # kill first: gloo waits on them fail, nothing is left to wait for
        self.end_graphs(healthy)
        pg.end_groups(healthy)
        if workers is not None:
            workers.end(pg.END_WAIT_S)
        self.locks.release()


# -- a spawned worker -----------------------------------------------------------------------
def _worker_main(rank: int, *, world: int, device_type: str, port: int, parent: int,
                 threads: int, base: int | None, errors, heartbeat) -> None:
    torch.set_num_threads(threads)  # as rank 0 (one thread under pytest on CPU)
    start_daemons(parent, heartbeat)
    index = None if base is None else (base + rank) % torch.cuda.device_count()
    if index is not None:
        torch.cuda.set_device(index)
    control = pg.init_groups(rank, world=world, device_type=device_type, port=port,
                             cuda_index=index)
    group = TPGroup(rank, world=world, device_type=device_type, control=control, errors=errors,
                    cuda_index=index)
    serve(group)
    group.end_graphs(healthy=True)
    pg.end_groups(healthy=True)
    # Leave now: nothing of a worker's needs finalizing, and interpreter teardown has aborted
    # a worker ("terminate called without an active exception": a C++ thread of torch's
    # destroyed joinable) or could wait on groups that would not end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
