"""Runner hygiene, in the style of PyTorch's graph tests: documented misuse really corrupts
(so checks built on it are not vacuous), and the runner itself avoids that misuse."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from harness.strategies.runs import default_device, make_prompts
from specdec import Engine, SpecConfig
from specdec.graphs.cuda_graph import GraphFactory
from specdec.graphs.standin import CPUGraph, GraphCaptureError
from specdec.spec.phases import DecodeInputs
from specdec.trace import TraceRecorder

DEVICE = torch.device(default_device())


def _captured_double():
    x = torch.arange(4, dtype=torch.float32, device=DEVICE)
    graph = GraphFactory(DEVICE).make()
    out = graph.capture(lambda: x * 2)
    return x, graph, out


def test_rebinding_a_static_input_is_not_seen_by_replay():
    x, graph, out = _captured_double()
    x_new = torch.full_like(x, 10.0)  # rebinding: a new tensor the graph never saw
    graph.replay()
    assert not torch.equal(out, x_new * 2)
    x.copy_(x_new)  # copying into the static input is what replay sees
    graph.replay()
    assert torch.equal(out, x_new * 2)


def test_output_kept_across_replay_is_overwritten():
    x, graph, out = _captured_double()
    graph.replay()
    kept = out  # the graph's own buffer
    first = out.clone()
    x.add_(1)
    graph.replay()
    assert not torch.equal(kept, first)  # the next replay overwrote it


def _graph_engine(**kw):
    return Engine(model="tiny", spec=SpecConfig(topk=4, num_steps=3, num_draft_tokens=8),
                  draft="self", page_size=4,
                  device=str(DEVICE), cuda_graph=True, cuda_graph_bs=[2, 4, 8], max_batch=8, **kw)


def test_runner_outputs_survive_the_next_replay():
    """PhaseRunner.run hands out copies: a second replay does not change the first's outputs."""
    eng = Engine(model="tiny", spec=None, device=str(DEVICE), cuda_graph=True, cuda_graph_bs=[4],
                 max_batch=4)
    runner = eng.rounds.decode_runner

    def live(tokens):
        z = torch.zeros(len(tokens), dtype=torch.int64, device=DEVICE)  # reserved row / slot 0
        return DecodeInputs(torch.tensor(tokens, device=DEVICE), z, z, z + 1)

    first = runner.run(live([5, 6, 7]), 3).logits
    assert runner.last_ran_graph
    snapshot = first.clone()
    runner.run(live([9, 10, 11]), 3)
    assert torch.equal(first, snapshot)
    assert not torch.equal(runner.outputs[4].logits[:3], snapshot)  # the static buffer moved on


def test_positions_unchanged_across_draft_replay():
    """The draft's static positions (of the whole greedy round, the graph these greedy
    batches replay) are never advanced by a replay."""
    eng = _graph_engine()
    runner = eng.rounds.fused
    eng.generate(make_prompts(2, 3, 320, 8), max_new_tokens=6)
    before = runner.static["positions"].clone()
    eng.generate(make_prompts(2, 3, 320, 8), max_new_tokens=6)  # replays copy live rows in, then must restore
    after = runner.static["positions"]
    size = 4
    live = make_prompts(2, 3, 320, 8)
    assert len(live) < size
    # Padded lanes (positions 0) and the buffer's shape are as the last load left them.
    assert torch.equal(before[3 * 4:size * 4], after[3 * 4:size * 4])
    assert torch.all(after[3 * 4:size * 4] == 0)


def test_padded_lanes_write_only_slot_zero():
    eng = _graph_engine()
    eng.recorder = TraceRecorder(4, keep_kv_slots=False)
    eng.generate(make_prompts(3, 3, 320, 8), max_new_tokens=8)  # bs 3 replays the size-4 graphs
    graph_forwards = [f for r in eng.recorder.rounds for f in r.forwards if f.graph]
    assert graph_forwards
    for f in graph_forwards:
        rows_per_req = f.write_loc.numel() // f.req_pool_indices.numel()
        real = (f.req_pool_indices.numel() - f.num_padded) * rows_per_req
        assert f.num_padded > 0
        assert torch.all(f.write_loc[real:] == 0), f.mode
        assert torch.all(f.write_loc[:real] != 0) or f.mode == "draft_extend", f.mode


def test_host_sync_inside_capture_raises_on_cpu_standin():
    x = torch.arange(3.0)
    with pytest.raises(GraphCaptureError, match="host synchronisation"):
        CPUGraph().capture(lambda: x.sum().item())
    with pytest.raises(GraphCaptureError, match="repeat_interleave"):
        CPUGraph().capture(lambda: torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 1])))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="real CUDA graph capture needs CUDA")
def test_capture_failure_in_subprocess():
    """A host sync inside a real capture fails the capture (in a subprocess: a failed capture
    can leave the CUDA context unusable)."""
    code = textwrap.dedent("""
        import torch
        from specdec.graphs.cuda_graph import GraphFactory
        x = torch.arange(4.0, device="cuda")
        GraphFactory(torch.device("cuda")).make().capture(lambda: x.sum().item())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "capture" in proc.stderr.lower() or "not permitted" in proc.stderr.lower()


@pytest.mark.skipif(DEVICE.type == "cuda", reason="the CPU stand-in's refusal")
def test_capture_under_inference_mode_refused_on_cpu_standin():
    x = torch.arange(4, dtype=torch.float32)
    with torch.inference_mode(), pytest.raises(GraphCaptureError, match="inference_mode"):
        CPUGraph().capture(lambda: x * 2)


def test_graphs_captured_on_first_use_give_the_same_tokens():
    """A phase captures a batch size when a batch first needs it (contract section 8): a
    greedy batch of 3 captures the whole round's bucket 4 (and what the batch shrinks to),
    no other phase's graphs, and its tokens are those of an engine that captured every graph
    before its first step."""
    prompts = make_prompts(seed=7, batch_size=3, vocab_size=320)

    def engine():
        return Engine(model="tiny", spec=SpecConfig(topk=2, num_steps=3, num_draft_tokens=6),
                      device=str(DEVICE), max_batch=4,
                      cuda_graph=True, cuda_graph_bs=[1, 2, 4], max_context=64)

    lazy, eager = engine(), engine()
    runners = lazy.rounds.runners
    assert not any(r.graphs for r in runners)
    eager.capture_graphs()
    assert all(sorted(r.graphs) == [1, 2, 4] for r in eager.rounds.runners)
    assert lazy.generate(prompts, max_new_tokens=12) == eager.generate(prompts, max_new_tokens=12)
    assert 4 in lazy.rounds.fused.graphs  # and the smaller sizes the shrinking batch needed
    assert not any(r.graphs for r in runners[1:])  # verify, draft decode and extend: unused
