"""The acceptance laws' observables and negative controls: per-round accept lengths as the
engine reports them, a path that drafts differently (a fault on the eager multi-step draft
alone) rejected by acceptance_path_invariant, and draft-side faults of the first zoo pushing
the trained pair below acceptance_floor. The laws themselves
run as suite entries (tests/test_properties.py)."""
from __future__ import annotations

import pytest

from harness.laws.acceptance_floor import (ALPHA, Z, FloorConfig, lower_bound,
                                           prop_acceptance_floor)
from harness.laws.acceptance_path_invariant import PathPair, prop_acceptance_path_invariant
from harness.base.failure import OracleFailure
from harness.strategies.runs import default_device, make_prompts
from harness.strategies.trained_pair import Measured
from specdec import Engine, SpecConfig, faults

DEVICE = default_device()
DTYPE = "bfloat16" if DEVICE == "cuda" else "float32"  # the baselines: cpu-fp32, cuda-bf16


def _served(overlap: bool):
    eng = Engine(model="tiny", spec=SpecConfig(topk=2, num_steps=3, num_draft_tokens=5),
                 draft="perturbed:0.05", max_batch=4,
                 max_context=96, overlap=overlap)
    rids = [eng.add_request(p, 12) for p in make_prompts(4, 4, eng.cfg.vocab_size, 16, 4)]
    while eng.has_unfinished():
        eng.step()
    return eng, [eng.output(r) for r in rids]


def test_accept_lens_are_the_rounds_of_each_request():
    """Each request's accept lengths: one per resolved round, each in 1..num_steps+1, summing
    to its committed tokens after the prefill's; together, the engine's statistics; and the
    same under overlap scheduling (a finished request's extra round is not counted)."""
    eng, outs = _served(False)
    for o in outs:
        assert all(1 <= a <= 4 for a in o.accept_lens)
        assert sum(o.accept_lens) + 1 >= len(o.tokens) > sum(o.accept_lens[:-1]) + 1
    lens = [a for o in outs for a in o.accept_lens]
    assert len(lens) == eng.stats.req_rounds
    assert sum(lens) / len(lens) == pytest.approx(eng.stats.mean_acceptance_length)
    assert len(set(lens)) > 1  # the perturbed drafter accepts some, not all: a real signal
    _, outs_overlap = _served(True)
    assert [o.accept_lens for o in outs_overlap] == [o.accept_lens for o in outs]


def test_floor_bound_is_one_sided_z_over_the_rounds():
    m = Measured([1, 2, 3, 4] * 25, [])
    base = {"mean": 3.0, "std": 1.0, "rounds": 400}
    assert Z == pytest.approx(3.0902, abs=1e-3) and ALPHA == 1e-3
    assert lower_bound(m, base, paired=True) == pytest.approx(3.0 - Z * m.std / 10)
    assert lower_bound(m, base, paired=False) == pytest.approx(
        3.0 - Z * (m.std ** 2 / 100 + 1 / 400) ** 0.5)


_UNSLICED = PathPair(topk=2, num_steps=3, ndt=4, page_size=1, draft="perturbed", batch_size=3,
                     max_prompt_len=12, max_new_tokens=10, seed=5, b_cuda_graph=True)


def test_path_invariant_holds_without_the_fault():
    prop_acceptance_path_invariant(_UNSLICED, DEVICE)


def test_path_invariant_rejects_a_path_that_drafts_differently():
    """Negative control: draft_per_step_loc_unsliced breaks the eager multi-step draft only
    (the graph path bakes its slots at capture): A (eager) and B (graphs) accept differently
    at a round no tie explains."""
    with faults.active("draft_per_step_loc_unsliced"):
        with pytest.raises(OracleFailure, match="acceptance_path_invariant"):
            prop_acceptance_path_invariant(_UNSLICED, DEVICE)


# (fault, configuration along the path that exposes it). The trained EAGLE head barely uses
# its own draft KV and positions (its signal is the target's hidden state), so SGLang #25015's
# off-by-one moves its accept length by ~0.01; the standalone drafter loses ~0.2, which the
# GPU tier's sample resolves and the CPU tier's (about 110 rounds) does not. On a CPU the
# controls run 4 of the baseline's prompts (the unpaired bound: a wider margin).
_FEW = dict(prompts=4, max_new_tokens=32) if DEVICE == "cpu" else {}
_BUCKETS = (1, 2, 4) if DEVICE == "cpu" else (1, 2, 4, 8, 16, 32)  # the batch replays
_FLOOR_CONTROLS = [
    ("draft_extend_width_steps_plus_one",  # SGLang #27545: the captured draft extend, trees
     FloorConfig(drafter="eagle", topk=4, num_steps=4, ndt=8, cuda_graph=True, graph_bs=_BUCKETS,
                 dtype=DTYPE, **_FEW)),
    ("stale_draft_kv_after_accept",  # vLLM #14649
     FloorConfig(drafter="standalone", topk=1, num_steps=3, ndt=4, dtype=DTYPE, **_FEW)),
]
if DEVICE == "cuda":
    _FLOOR_CONTROLS.append(("draft_positions_early_increment",  # SGLang #25015
                            FloorConfig(drafter="standalone", topk=1, num_steps=3, ndt=4,
                                        dtype=DTYPE)))


@pytest.mark.parametrize("fault,cfg", _FLOOR_CONTROLS, ids=[f for f, _ in _FLOOR_CONTROLS])
def test_floor_rejects_a_draft_side_fault(fault, cfg):
    """Negative control: a first-zoo draft-side fault leaves the tokens right (verification
    corrects them) and drops the trained pair's accept length below the floor; the same
    configuration and path pass without it."""
    prop_acceptance_floor(cfg, DEVICE)
    with faults.active(fault):
        with pytest.raises(OracleFailure, match="acceptance_floor"):
            prop_acceptance_floor(cfg, DEVICE)


def test_tie_gaps_find_the_closest_choice():
    """The tie excuse's re-derivation: a chain's gap is its rows' top-2 margin; a tree's
    includes the cut between the topk-th and next cumulative score (divided by its depth);
    the target's is the top-2 margin on the accepted path."""
    import torch

    from harness.references.acceptance_ties import draft_choice_gap, target_path_gap
    row = torch.tensor([5.0, 3.0, 1.0, 0.0])
    assert draft_choice_gap(row, [row[None]], 1, 3) == pytest.approx(2.0)
    close = torch.tensor([5.0, 4.9995, 1.0, 0.0])  # a draft tie at depth 2
    assert draft_choice_gap(row, [close[None]], 1, 3) == pytest.approx(5e-4, abs=1e-6)
    # topk 2, two branches drafting the same row: candidates (0 then 1) and (1 then 0) have
    # equal cumulative scores and the cut between the 2nd and 3rd of them is an exact tie
    same = torch.stack([row, row])
    assert draft_choice_gap(row, [same], 2, 4) == pytest.approx(0.0, abs=1e-12)
    # rows far apart: the closest cut is organize's, the 3rd best node (0 then 1, log-score
    # about -3.07) against the 4th (1, about -4.02), over depth 2
    far = torch.stack([torch.tensor([9.0, 6.0, 0.0, -3.0]), torch.tensor([0.0, -3.0, -9.0, -12.0])])
    step0 = torch.tensor([9.0, 5.0, 0.0, -4.0])
    lp0, lpb = torch.log_softmax(step0.double(), -1), torch.log_softmax(far[0].double(), -1)
    want = float((lp0[0] + lpb[1]) - lp0[1]) / 2
    assert draft_choice_gap(step0, [far], 2, 4) == pytest.approx(want) and want > 0.4
    verify = torch.tensor([[1.0, 0.5, 0.0], [2.0, 1.99, 0.0]])
    assert target_path_gap(verify, [0]) == pytest.approx(0.5)
    assert target_path_gap(verify, [0, 1]) == pytest.approx(0.01, abs=1e-6)


def test_only_the_cuts_on_the_greedy_path_decide_an_accept_length():
    """accept_decision_gap looks at the cuts that put the target's greedy continuation in the
    tree or kept its first missing node out; a near-tie off that path excuses nothing, one
    on it does, and a tree that is not the recorded one is refused (None)."""
    import torch

    from harness.references.acceptance_ties import accept_decision_gap, draft_choice_gap
    step0 = torch.tensor([0.0, 0.0, 5.0, 0.0, 0.0, 0.0])   # depth 1: token 2, margin 5
    row0 = torch.tensor([0.0, 0.0, 0.0, 2.0, 0.0, 0.0])    # depth 2: token 3, margin 2
    row1 = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0001, 1.0])  # depth 3: 4 and 5 near-tied
    rows, inputs = [row0[None], row1[None]], [torch.tensor([2]), torch.tensor([3])]
    assert draft_choice_gap(step0, rows, 1, 4) < 1e-3  # every cut: the depth-3 near-tie
    # rejected at depth 2 (the target wants 1, not 3): depth 3 decides nothing; the gap is
    # how far 1 was from being the draft's choice at depth 2
    assert accept_decision_gap(step0, decode_rows=rows, decode_inputs=inputs, topk=1, ndt=4,
                               committed=[2, 1]) == pytest.approx(2.0)
    # accepted through depth 3: its near-tie decided the accept length
    assert accept_decision_gap(step0, decode_rows=rows, decode_inputs=inputs, topk=1, ndt=4,
                               committed=[2, 3, 4, 0]) < 1e-3
    assert accept_decision_gap(step0, decode_rows=rows, decode_inputs=[torch.tensor([2]),
                                                                       torch.tensor([5])], topk=1,
                                                                       ndt=4,
                               committed=[2, 1]) is None
    # topk 2: tokens 4 and 3 near-tied for branch 0's second child, off the accepted path
    # (0 then 2); the closest cut on it is organize's: (0, 2) against the 4th best node
    step0 = torch.tensor([5.0, 4.0, 0.0, 0.0, 0.0, 0.0])
    tree = torch.stack([torch.tensor([0.0, 0.0, 3.0, 1.0, 1.00001, 0.0]),
                        torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 3.0])])
    assert draft_choice_gap(step0, [tree], 2, 4) < 1e-4
    lp0, lpa = torch.log_softmax(step0.double(), -1), torch.log_softmax(tree.double(), -1)
    fourth = sorted([lp0[0], lp0[1], lp0[0] + lpa[0, 2], lp0[0] + lpa[0, 4],
                     lp0[1] + lpa[1, 5], lp0[1] + lpa[1, 0]], reverse=True)[3]
    want = float(lp0[0] + lpa[0, 2] - fourth) / 2
    got = accept_decision_gap(step0, decode_rows=[tree], decode_inputs=[torch.tensor([0, 1])],
                              topk=2, ndt=4, committed=[0, 2, 1])
    assert got == pytest.approx(want) and want > 0.4
