"""Graphs on CUDA: torch.cuda.CUDAGraph captured into one shared memory pool."""
from __future__ import annotations

import gc

import torch

from specdec.graphs.standin import CPUGraph


class CudaGraph:
    def __init__(self, pool) -> None:
        self.graph = torch.cuda.CUDAGraph()
        self.pool = pool

    def capture(self, fn):
        # Warm up on a side stream (lazy init, autotuning, allocator) before capturing.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        # A CUDAGraph of an engine that is now garbage must not be destroyed mid-capture (its
        # reset is not permitted while a stream captures, and invalidates this capture): collect
        # first, and keep the collector off until the capture ends.
        gc.collect()
        gc.disable()
        try:
            with torch.cuda.graph(self.graph, pool=self.pool):
                out = fn()
        finally:
            gc.enable()
        return out

    def replay(self) -> None:
        self.graph.replay()


class GraphFactory:
    """Makes graphs that share one memory pool (CUDA), or CPU stand-ins."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None

    def make(self):
        return CudaGraph(self.pool) if self.device.type == "cuda" else CPUGraph()
