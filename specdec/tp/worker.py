"""A worker rank's side: its loop over rank 0's commands, its heartbeat, and dying with rank 0.

A worker builds its engine through the factory rank 0 sends (a picklable callable, e.g.
`functools.partial(Engine, **kwargs)`), so nothing under specdec/tp imports the engine."""
from __future__ import annotations

import os
import threading
import time
import traceback

import torch.distributed as dist

from specdec import faults

BEAT_S = 0.5  # heartbeat period; rank 0 calls a worker hung after SPECDEC_TP_HANG_S of silence


def watch_parent(parent: int) -> None:
    """Die with rank 0: a worker whose parent is gone would wait in a collective forever."""
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(BEAT_S)


def beat(heartbeat) -> None:
    """Stamp a shared value with the (system-wide) monotonic clock. A stopped or frozen
    process stops stamping; a worker busy in one long op does not (this thread runs)."""
    while True:
        heartbeat.value = time.monotonic()
        time.sleep(BEAT_S)


def start_daemons(parent: int, heartbeat) -> None:
    threading.Thread(target=watch_parent, args=(parent,), daemon=True,
                     name="specdec-tp-parent").start()
    if heartbeat is not None:
        threading.Thread(target=beat, args=(heartbeat,), daemon=True,
                         name="specdec-tp-beat").start()


def serve(group) -> None:
    """A worker's loop: build an engine, run rank 0's calls on it, reply, until "exit" (which
    is answered, so that every rank then ends its groups together). A failure is put on the
    error queue with its traceback and ends the process: rank 0 may be waiting inside a
    collective this rank will never join, and a dead peer ends it."""
    from specdec.tp.replicate import state_digest
    engine = None
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0, group=group.control)
        msg = box[0]
        kind = msg[0]
        try:
            if kind == "exit":
                group.replies(("ok", None, None))
                return
            if kind in ("build", "call"):  # rank 0's bug-zoo switches (faultpoints/)
                faults.set_active(msg[-1])
            if kind == "build":
                engine = None
                engine = msg[1](_tp_group=group)  # rank 0's factory: the same Engine(...)
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
                group.errors.put((group.rank, f"tp rank {group.rank}: {type(exc).__name__}: "
                                  f"{exc}\n" + traceback.format_exc()))
                time.sleep(0.5)  # let the queue's feeder thread flush
            os._exit(1)
        group.replies(reply)
