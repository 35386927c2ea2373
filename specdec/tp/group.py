"""The process group of a tensor-parallel engine: rank 0 (the process that built the Engine)
and its workers, started here (torch.multiprocessing, spawn) or by torchrun.

Two groups over the same ranks: the data group (NCCL on CUDA, gloo on CPU) carries the
forward's collectives (specdec/tp/comm.py); a gloo control group carries rank 0's commands
and the workers' replies as pickled objects. A spawned group outlives one engine: rank 0's
next Engine(tp_size=N) reuses its workers (starting processes costs seconds), so one
process holds one group at a time, used by one engine at a time."""
from __future__ import annotations

import atexit
import datetime
import os
import queue
import socket
import threading
import time
import traceback
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from specdec import faults
from specdec.tp.comm import TPComm

TIMEOUT_S = float(os.environ.get("SPECDEC_TP_TIMEOUT", "300"))


class TPWorkerError(RuntimeError):
    """A worker rank failed: its message and traceback, raised on rank 0."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _torchrun_world() -> int | None:
    return int(os.environ["WORLD_SIZE"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ \
        else None


def _init(rank: int, world: int, device_type: str, port: int | None,
          cuda_index: int | None = None) -> None:
    if cuda_index is not None and rank > 0:  # rank 0 keeps its current device (an xdist
        torch.cuda.set_device(cuda_index)     # worker's pin): no tensor of its moves
    backend = "nccl" if device_type == "cuda" else "gloo"
    init = f"tcp://127.0.0.1:{port}" if port is not None else "env://"
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))


class TPGroup:
    _current: "TPGroup | None" = None

    def __init__(self, rank: int, world: int, device_type: str, procs=(), errors=None,
                 cuda_index: int | None = None) -> None:
        self.rank, self.world, self.device_type = rank, world, device_type
        self.cuda_index = cuda_index  # this rank's GPU (CUDA), else None
        self.procs, self.errors = list(procs), errors
        self.control = dist.new_group(backend="gloo")
        self.comm = TPComm(rank, world, dist.group.WORLD.group_name)
        self.executing = rank > 0  # a worker runs what it is told; rank 0 sends first
        self.in_use = False
        self.owner = lambda: None  # the engine using the group (a weak reference)
        self.alive = True   # usable: no rank has failed
        self.closed = False

    # -- rank 0 -----------------------------------------------------------------------------
    @classmethod
    def leader(cls, world: int, device_type: str, owner) -> "TPGroup":
        """Rank 0's group of `world` ranks: the current one if it matches and is free, else
        a fresh one (spawned workers, or torchrun's ranks). An engine that was dropped
        without close() frees its group when it is garbage."""
        cur = cls._current
        if cur is not None and cur.in_use and cur.owner() is None and cur.rank == 0:
            cur.send(("drop",))
            cur.replies(("ok", None, None))
            cur.in_use = False
        if cur is not None and cur.alive and cur.world == world and cur.device_type == device_type:
            if cur.in_use:
                raise RuntimeError("one tensor-parallel Engine per process at a time: close() "
                                   "the previous one (or use it as a context manager)")
            cur.in_use, cur.owner = True, weakref.ref(owner)
            return cur
        if cur is not None:
            if cur.in_use:
                raise RuntimeError(f"a tp_size={cur.world} Engine is still open in this "
                                   "process: close() it before building another")
            cur.shutdown()
        tr = _torchrun_world()
        if tr is not None:
            if tr != world:
                raise ValueError(f"tp_size={world} but torchrun started WORLD_SIZE={tr} ranks")
            rank = int(os.environ["RANK"])
            local = int(os.environ.get("LOCAL_RANK", rank)) if device_type == "cuda" else None
            if local is not None:
                torch.cuda.set_device(local)
            _init(rank, world, device_type, None)
            group = cls(rank, world, device_type, cuda_index=local)
        else:
            # Rank r runs on GPU (current + r) mod count: rank 0 stays where it is.
            base = torch.cuda.current_device() if device_type == "cuda" else None
            port = _free_port()
            ctx = mp.get_context("spawn")
            errors = ctx.Queue()
            procs = [ctx.Process(target=_worker_main, daemon=True, name=f"specdec-tp{r}",
                                 args=(r, world, device_type, port, errors, os.getpid(),
                                       torch.get_num_threads(), base))
                     for r in range(1, world)]
            for p in procs:
                p.start()
            _init(0, world, device_type, port)
            group = cls(0, world, device_type, procs, errors, base)
        group.in_use, group.owner = True, weakref.ref(owner)
        cls._current = group
        # Registered now, after torch's own exit handlers: it runs before them (a gloo group
        # with functional collectives left to interpreter exit aborts the process).
        atexit.register(group.shutdown)
        return group

    def send(self, msg) -> None:
        box = [msg]
        dist.broadcast_object_list(box, src=0, group=self.control)

    def replies(self, mine) -> list:
        """Every rank's reply to the command just run (rank 0's own first)."""
        out = [None] * self.world
        dist.all_gather_object(out, mine, group=self.control)
        return out

    def worker_failure(self, wait_s: float = 5.0) -> str | None:
        """A dead worker's last words, if any (it puts them on the queue, then exits)."""
        if self.errors is None:
            return None
        try:
            return self.errors.get(timeout=wait_s)
        except queue.Empty:
            dead = [p.name for p in self.procs if not p.is_alive()]
            return f"worker(s) {dead} exited without a message" if dead else None

    def release(self) -> None:
        self.in_use = False

    def shutdown(self) -> None:
        """Workers leave their loop and exit; the process groups are destroyed."""
        if self.closed:
            return
        healthy, self.alive, self.closed = self.alive, False, True
        if TPGroup._current is self:
            TPGroup._current = None
        if self.rank == 0 and healthy and all(p.is_alive() for p in self.procs):
            try:
                self.send(("exit",))
            except Exception:  # noqa: BLE001  a broken group: the workers are killed below
                pass
        for p in self.procs:  # a failed group's workers may wait in a collective: end them
            p.join(timeout=10 if healthy else 0)
            if p.is_alive():
                p.kill()
                p.join()
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001  already torn down by a failure
            pass




# -- workers --------------------------------------------------------------------------------
def _watch_parent(parent: int) -> None:
    """Die with rank 0: a worker whose parent is gone would wait in a collective forever."""
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(0.5)


def _worker_main(rank: int, world: int, device_type: str, port: int, errors, parent: int,
                 threads: int, base: int | None) -> None:
    torch.set_num_threads(threads)  # as rank 0 (one thread under pytest on CPU)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    index = None if base is None else (base + rank) % torch.cuda.device_count()
    _init(rank, world, device_type, port, index)
    group = TPGroup(rank, world, device_type, errors=errors, cuda_index=index)
    serve(group)
    dist.destroy_process_group()


def serve(group: TPGroup) -> None:
    """A worker's loop: build an engine, run rank 0's calls on it, reply, until "exit".
    A failure is put on the error queue with its traceback and ends the process: rank 0 may
    be waiting inside a collective this rank will never join, and a dead peer ends it."""
    from specdec.tp.replicate import state_digest
    engine = None
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0, group=group.control)
        msg = box[0]
        kind = msg[0]
        try:
            if kind == "exit":
                return
            if kind in ("build", "call"):  # rank 0's bug-zoo switches (faultpoints/)
                faults.set_active(msg[-1])
            if kind == "build":
                engine = None
                from specdec.engine import Engine
                engine = Engine(**msg[1], _tp_group=group)
                reply = ("ok", None, None)
            elif kind == "call":
                result = getattr(engine, msg[1])(*msg[2], **msg[3])
                reply = ("ok", state_digest(engine, result) if msg[4] else None, None)
            elif kind == "each":
                reply = ("ok", None, msg[1](engine, *msg[2]))
            elif kind == "drop":
                engine = None
                reply = ("ok", None, None)
            else:
                raise ValueError(f"unknown tp command {kind!r}")
        except BaseException as exc:  # noqa: BLE001  reported to rank 0, then this rank ends
            if group.errors is not None:
                group.errors.put(f"tp rank {group.rank}: {type(exc).__name__}: {exc}\n"
                                 + traceback.format_exc())
                time.sleep(0.5)  # let the queue's feeder thread flush
            os._exit(1)
        group.replies(reply)
