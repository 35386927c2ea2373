"""The torch.distributed groups of a TP group: made the same way on every rank, and ended in
one defined order with every wait bounded.

Two groups over the same ranks: the default (data) group, NCCL on CUDA and gloo on CPU, for
the forward's collectives; a gloo control group for commands and replies. Ending them:

- healthy (every rank alive and at the same point): every rank calls
  `destroy_process_group()`, which shuts the groups down newest first (control, then data);
  NCCL's teardown may synchronise with the peers, so all ranks do it at about the same time.
- otherwise (a peer dead, stuck or diverged), or when the destroy does not return in time:
  abort, which is local and does not wait for peers (NCCL: ncclCommAbort, also ending
  kernels stuck on a dead peer). A blocking destroy is never called when a peer is not
  known to be alive.
"""
from __future__ import annotations

import datetime
import os
import threading

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

TIMEOUT_S = float(os.environ.get("SPECDEC_TP_TIMEOUT", "300"))  # a collective's time-out
END_WAIT_S = float(os.environ.get("SPECDEC_TP_END_WAIT", "10"))  # a bounded teardown step


def serve_store(world: int):
    """Rank 0's rendezvous store, listening on a port the OS picks, before any worker starts.
    A port picked free and then handed on can be taken by another process meanwhile: on 2
    H100s a gate run's TP script died in init_process_group with EADDRINUSE, and a worker
    connecting to a store some other group serves would join that group."""
    return dist.TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=TIMEOUT_S))


def init_groups(rank: int, *, world: int, device_type: str, port: int | None,
                cuda_index: int | None = None, store=None):
    """Join the data group (through rank 0's store: `store`, else one rank 0 serves at
    127.0.0.1:port; env:// under torchrun) and make the gloo control group; returns the
    control group.

    On CUDA every NCCL communicator and connection is made here, while rank 0 watches its
    workers start (workers.py), and one all-reduce proves them. Made lazily instead (torch's
    default: at the first collective; NCCL's: a connection at its first use), their setup
    blocks the host on the peers inside a forward, where no abort reaches it: a worker
    stopped then held rank 0 for good (seen on 2 H200s)."""
    backend = "nccl" if device_type == "cuda" else "gloo"
    timeout = datetime.timedelta(seconds=TIMEOUT_S)
    extra = {}
    if device_type == "cuda":
        os.environ.setdefault("NCCL_RUNTIME_CONNECT", "0")  # every connection at init
        extra["device_id"] = torch.device("cuda", cuda_index)  # the communicator at init
    if store is None and port is not None:  # rank 0 serves at `port` unless it has a store
        store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0,
                              wait_for_workers=False, timeout=timeout)
    if store is not None:
        extra["store"] = store
    else:
        extra["init_method"] = "env://"
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout, **extra)
    control = dist.new_group(backend="gloo")
    if device_type == "cuda":
        probe = torch.ones(1, device=extra["device_id"])
        dist.all_reduce(probe)
        torch.cuda.synchronize(cuda_index)
        if float(probe) != world:
            raise RuntimeError(f"NCCL all-reduce over {world} ranks gave {float(probe)}")
    return control


_ENDING = threading.Lock()  # the watchdog's abort and shutdown's, one at a time


def bounded(fn, timeout: float) -> bool:
    """fn() in a daemon thread; True if it returned within `timeout` seconds (False if it
    raised, or is still running: a thread left behind is blocked in C++ without the GIL and
    does not hold up exit)."""
    done, ok = threading.Event(), []

    def run() -> None:
        try:
            fn()
            ok.append(True)
        except Exception:  # noqa: BLE001  a failed teardown step: the caller's fallback
            pass
        finally:
            done.set()
    threading.Thread(target=run, daemon=True, name="specdec-tp-teardown").start()
    return done.wait(timeout) and bool(ok)


def abort_groups(timeout: float = END_WAIT_S) -> bool:
    """End every group of this process without waiting for peers (NCCL: ncclCommAbort on
    each communicator; gloo: its sockets are closed)."""
    if not dist.is_initialized():
        return True

    def abort() -> None:
        with _ENDING:
            if not dist.is_initialized():
                return
            try:
                c10d._abort_process_group()
            except Exception:  # noqa: BLE001  a backend without abort: destroy is local there
                if dist.is_initialized():
                    dist.destroy_process_group()
    return bounded(abort, timeout)


def end_groups(healthy: bool, timeout: float = END_WAIT_S) -> bool:
    """End this process's groups: destroyed in order when `healthy`, else (or when the
    destroy does not return within `timeout`) aborted. True if they ended in time."""
    if not dist.is_initialized():
        return True
    def destroy() -> None:  # not under _ENDING: an abort must be able to end a stuck destroy
        if dist.is_initialized():
            dist.destroy_process_group()
    if healthy and bounded(destroy, timeout):
        return True
    return abort_groups(timeout)
