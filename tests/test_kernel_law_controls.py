"""Negative controls of the kernel laws: specdec's own kernels behind the kernel-adapter
door, each with one component made wrong the way a real kernel goes wrong, must be rejected
by that component's law (and the unwrapped adapter passes the same draws)."""
from __future__ import annotations

import kernels._triton_env  # noqa: F401,I001  (before triton)

import pytest
import torch

from harness.adapters.specdec_kernels import SpecdecKernels
from harness.base.failure import OracleFailure
from harness.runners.kernel_suite import KERNEL_LAWS, first_failure
from harness.strategies.kernel_inputs import KernelCase
from harness.strategies.runs import default_device

FOUND = 60  # examples a control may take to be caught
DEVICE = default_device()  # compiled Triton on a GPU, the interpreter on CPU


def failure(law: str, kernels, examples: int = FOUND) -> OracleFailure | None:
    return first_failure(law, kernels, examples)


class PositionsOffByOne(SpecdecKernels):
    def tree_build(self, parent_list, **kw):
        out = super().tree_build(parent_list, **kw)
        return {**out, "positions": out["positions"] + 1}


class LinksDescending(SpecdecKernels):
    """Children linked largest first (a reversed sibling scan)."""

    def tree_build(self, parent_list, **kw):
        out = super().tree_build(parent_list, **kw)
        nxt, sib = out["next_token"].clone(), out["next_sibling"].clone()
        for b in range(nxt.shape[0]):
            for p in range(nxt.shape[1]):
                kids, c = [], int(out["next_token"][b, p])
                while c != -1:
                    kids.append(c)
                    c = int(out["next_sibling"][b, c])
                if kids:
                    kids.reverse()
                    nxt[b, p] = kids[0]
                    for a, z in zip(kids, kids[1:] + [-1]):
                        sib[b, a] = z
        return {**out, "next_token": nxt, "next_sibling": sib}


class VerifyOneShort(SpecdecKernels):
    def greedy_tree_verify(self, candidates, *, num_steps, **kw):
        out = super().greedy_tree_verify(candidates, num_steps=max(0, num_steps - 1), **kw)
        acc = torch.full((out["accept_index"].shape[0], num_steps + 1), -1, dtype=torch.int32)
        acc[:, :out["accept_index"].shape[1]] = out["accept_index"]
        return {**out, "accept_index": acc}


class DraftSlotOffByOne(SpecdecKernels):
    def draft_cache_locs(self, req_to_token, *, seq_lens, **kw):
        return super().draft_cache_locs(req_to_token, seq_lens=seq_lens + 1, **kw)


class WriteDropsASlot(SpecdecKernels):
    """Each non-empty range written one slot short (an exclusive end taken as inclusive)."""

    def req_to_token_write(self, req_to_token, pool, start, end, loc):
        short = torch.where(end > start, end - 1, end)
        keep, at = [], 0
        for s, e, e2 in zip(start.tolist(), end.tolist(), short.tolist()):
            keep += loc[at:at + e2 - s].tolist()
            at += e - s
        return super().req_to_token_write(req_to_token, pool, start, short,
                                          torch.tensor(keep, dtype=torch.int64))


class RecoveredFromP(SpecdecKernels):
    """After a rejection the token is drawn from p_n itself, not norm(max(0, p_n - q_n))."""

    def chain_sampling(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant):
        out = super().chain_sampling(draft_ids, num_drafts=num_drafts, draft_probs=draft_probs,
                                     target_probs=target_probs, greedy=greedy, seed=seed,
                                     variant=variant)
        gen = torch.Generator().manual_seed(seed + 1)
        for b in range(out.shape[0]):
            n = int((out[b] != -1).sum()) - 1
            if not bool(greedy[b]) and n < int(num_drafts[b]):
                out[b, n] = int(torch.multinomial(target_probs[b, n], 1, generator=gen))
        return out


class Biased(SpecdecKernels):
    """Acceptance with probability min(1, 2p/q): accepts the draft too often."""
    threshold_acc = 0.5


class RejectsCertain(SpecdecKernels):
    """Acceptance with probability min(1, p/(2q)): rejects drafts that p >= q makes certain."""
    threshold_acc = 2.0


CONTROLS = [
    ("kernel_tree_build", PositionsOffByOne, "positions"),
    ("kernel_tree_build", LinksDescending, "next_token"),
    ("kernel_greedy_verify", VerifyOneShort, ("accept_len", "accept_index")),
    ("kernel_kv_slots", DraftSlotOffByOne, "draft_out_cache_loc"),
    ("kernel_kv_slots", WriteDropsASlot, "req_to_token"),
    ("kernel_chain_acceptance", RecoveredFromP, "recovered_support"),
    ("kernel_chain_distribution", RecoveredFromP, "chi_square"),
    ("kernel_chain_distribution", Biased, "chi_square"),
    ("kernel_chain_acceptance", RejectsCertain, "rejects_certain"),
]


# The distribution law takes seconds an example on CPU: its controls run one drawn-looking
# case (a q far from p, so recovered tokens and acceptances matter), beside the unwrapped
# kernels passing it.
DISTRIBUTION_CASE = KernelCase(law="kernel_chain_distribution", engine="specdec-kernels",
                               seed=3, knobs={"rows": 200, "k": 1, "vocab": 4, "zeros": 0.0,
                                              "close": 0.0, "deterministic": False,
                                              "variant": "classic"})


def _caught(law: str, cls, check) -> None:
    if law == "kernel_chain_distribution":
        with pytest.raises(OracleFailure) as info:
            KERNEL_LAWS[law].check(cls(DEVICE), DISTRIBUTION_CASE)
        exc = info.value
    else:
        exc = failure(law, cls(DEVICE))
    assert exc is not None, f"{law} passed {cls.__name__}: {cls.__doc__}"
    assert exc.check in ((check,) if isinstance(check, str) else check), str(exc)


def test_tree_positions_off_by_one_is_rejected():
    _caught(*CONTROLS[0])


def test_tree_links_in_descending_order_are_rejected():
    _caught(*CONTROLS[1])


def test_verify_one_depth_short_is_rejected():
    _caught(*CONTROLS[2])


def test_draft_slot_off_by_one_is_rejected():
    _caught(*CONTROLS[3])


def test_req_to_token_write_dropping_a_slot_is_rejected():
    _caught(*CONTROLS[4])


@pytest.mark.parametrize("law", ["kernel_chain_acceptance", "kernel_chain_distribution"])
def test_recovered_token_from_p_is_rejected(law):
    _caught(law, RecoveredFromP, "recovered_support" if law.endswith("acceptance")
            else "chi_square")


def test_acceptance_biased_to_the_draft_is_rejected():
    _caught(*CONTROLS[7])


def test_rejecting_certain_drafts_is_rejected():
    _caught(*CONTROLS[8])


@pytest.mark.parametrize("law", ["kernel_tree_build", "kernel_greedy_verify", "kernel_kv_slots",
                                 "kernel_chain_acceptance"])
def test_unwrapped_kernels_pass_the_same_draws(law):
    assert failure(law, SpecdecKernels(DEVICE), 30) is None


def test_unwrapped_kernels_pass_the_distribution_case():
    KERNEL_LAWS["kernel_chain_distribution"].check(SpecdecKernels(DEVICE), DISTRIBUTION_CASE)
