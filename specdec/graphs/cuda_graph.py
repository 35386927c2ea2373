"""Graphs on CUDA: torch.cuda.CUDAGraph captured into one shared memory pool."""
from __future__ import annotations

import contextlib
import gc

import torch

from specdec.graphs.standin import CPUGraph


class CudaGraph:
    def __init__(self, pool, stream: torch.cuda.Stream) -> None:
        self.graph = torch.cuda.CUDAGraph()
        self.pool = pool
        self.stream = stream

    def capture(self, fn):
        # Warm up (lazy init, Triton compiles, allocator) and capture on one side stream.
        # capture_begin directly, not `torch.cuda.graph`: that one synchronizes and empties
        # the allocator's cache before every capture, which dominated engine start-up.
        # The captured GEMMs keep the cuBLAS workspace the warm-up allocated for this stream:
        # anything that clears cuBLAS workspaces (inductor's cudagraph trees do, around their
        # captures) must not run while these graphs are replayed (docs/bench.md, decode).
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            fn()
            self.graph.capture_begin(pool=self.pool)
            try:
                out = fn()
            finally:
                self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.stream)
        return out

    def replay(self) -> None:
        self.graph.replay()


class GraphFactory:
    """Makes graphs that share one memory pool (CUDA), or CPU stand-ins."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        cuda = device.type == "cuda"
        self.pool = torch.cuda.graph_pool_handle() if cuda else None
        self.stream = torch.cuda.Stream(device) if cuda else None
        self.collected = False

    @contextlib.contextmanager
    def capturing(self):
        """Around a batch of captures. A CUDAGraph of an engine that is now garbage must not
        be destroyed mid-capture (its reset is not permitted while a stream captures, and
        invalidates this capture): the collector stays off until the captures end.

        Dead engines are collected once, before this factory's first capture, so that their
        GPU memory is free for this engine's graphs. Not before every capture: a full
        collection walks the whole heap (0.1-0.2 s in a process that imported torch and
        transformers), and graphs are captured lazily, a few per example, so collecting each
        time was most of the graph-capture time of the GPU gate."""
        if self.device.type != "cuda":
            yield
            return
        if not self.collected:
            gc.collect()
            self.collected = True
        gc.disable()
        try:
            yield
        finally:
            gc.enable()

    def make(self):
        return CudaGraph(self.pool, self.stream) if self.device.type == "cuda" else CPUGraph()
