"""The graphs that captured a TP group's collectives end before the group
(specdec/tp/captured.py): destroyed when every rank is healthy, kept for good before an
abort. On one GPU, with graphs of plain kernels; the NCCL endings are tests/test_tp_exit.py."""
from __future__ import annotations

import sys

import pytest
import torch

from specdec.graphs.cuda_graph import GraphFactory
from specdec.graphs.standin import CPUGraph
from specdec.tp.captured import CapturedGraphs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def _graph():
    factory = GraphFactory(torch.device("cuda"))
    x = torch.ones(4, device="cuda")
    g = factory.make()
    with factory.capturing():
        g.capture(lambda: x * 2)
    return g


def test_destroy_resets_every_graph_and_forgets_them():
    graphs = CapturedGraphs()
    g = _graph()
    graphs.add([g, CPUGraph()])  # stand-ins hold no collective: not tracked
    assert len(list(graphs._graphs)) == 1
    graphs.destroy(torch.cuda.current_device())
    assert not list(graphs._graphs)
    with pytest.raises(RuntimeError):
        g.replay()  # reset: nothing left to replay


def test_keep_outlives_every_python_reference():
    graphs = CapturedGraphs()
    g = _graph()
    graphs.add([g])
    before = sys.getrefcount(g)
    graphs.keep()
    assert sys.getrefcount(g) == before + 2  # the list's reference and the leaked one
    graphs._kept.clear()
    assert sys.getrefcount(g) == before + 1  # the leaked one stays: never destroyed
