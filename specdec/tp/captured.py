"""The CUDA graphs that captured a TP group's NCCL collectives, ended before the group.

NCCL ties a captured collective's resources to the graph: destroying the graph hands them
back through the communicator. A graph destroyed after its communicator (at interpreter exit,
after the group's atexit teardown) touches freed memory: seen on 2 H200s as "corrupted
double-linked list" and "terminate called without an active exception". So before a group's
communicators are destroyed, its graphs are destroyed first (every rank healthy: synchronize,
then reset each); before they are aborted (a peer dead, hung or diverged, when a graph may
still be in flight), the graphs are kept alive for good, never destroyed."""
from __future__ import annotations

import ctypes
import weakref

import torch

from specdec.graphs.cuda_graph import CudaGraph


class CapturedGraphs:
    def __init__(self) -> None:
        self._graphs: weakref.WeakSet = weakref.WeakSet()  # CudaGraph (CPU stand-ins: none)
        self._kept: list = []

    def add(self, graphs) -> None:
        self._graphs.update(g for g in graphs if isinstance(g, CudaGraph))

    def destroy(self, device: int | None) -> None:
        """Every rank is healthy and about to destroy its communicators: free the graphs
        (after this rank's GPU, `device`, has finished them)."""
        graphs = list(self._graphs)
        if not graphs:
            return
        torch.cuda.synchronize(device)
        for g in graphs:
            g.graph.reset()
        self._graphs = weakref.WeakSet()

    def keep(self) -> None:
        """The communicators are about to be aborted: no graph of theirs is ever destroyed.
        An extra reference held by nothing in Python outlives interpreter teardown too."""
        for g in list(self._graphs):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(g))
            self._kept.append(g)
        self._graphs = weakref.WeakSet()
