"""Negative controls of the tree-sampling laws (kernel_tree_acceptance,
kernel_tree_distribution): specdec's own tree sampler behind the kernel-adapter door, made
wrong the way a real kernel goes wrong, must be rejected by the law named, and the unwrapped
adapter passes the same draws.

Not a control: siblings tried in another order. With deterministic drafts distinct among
siblings, child x is accepted with probability p(x) whatever the order (SGLang's coin falls
in x's slice of the cumulative mass), so the order is not observable in the outputs."""
from __future__ import annotations

import kernels._triton_env  # noqa: F401,I001  (before triton)

import faultpoints
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


class RecoveredFromP(SpecdecKernels):
    """After every child of the last accepted node was rejected, the token is drawn from p
    there, not from the residual (p without the tried children's tokens)."""

    def tree_sampling(self, candidates, retrieve_index, next_token, next_sibling, target_probs,
                      seed, num_steps):
        out = super().tree_sampling(candidates, retrieve_index=retrieve_index,
                                    next_token=next_token, next_sibling=next_sibling,
                                    target_probs=target_probs, seed=seed, num_steps=num_steps)
        gen = torch.Generator().manual_seed(seed + 1)
        tokens, ndt = out["tokens"].clone(), candidates.shape[1]
        for b in range(candidates.shape[0]):
            n = int(out["accept_len"][b])
            u = int(out["accept_index"][b, n]) - b * ndt
            if n < num_steps and int(next_token[b, u]) != -1:
                tokens[b, n] = int(torch.multinomial(target_probs[b, u], 1, generator=gen))
        return {**out, "tokens": tokens}


class RejectsCertain(SpecdecKernels):
    """A child accepted when the coin passes twice its cumulative p: children that carry all
    of p are all rejected half the time."""
    threshold_acc = 2.0


class AcceptsWithoutCoin(SpecdecKernels):
    """Every child with p > 0 taken by the single-token shortcut, its coin never drawn."""
    threshold_single = 0.0


class TargetRowsOneNodeOff(SpecdecKernels):
    """Node t's children judged by p_{t+1}: the target row base one node off."""

    def tree_sampling(self, candidates, retrieve_index, next_token, next_sibling, target_probs,
                      seed, num_steps):
        return super().tree_sampling(candidates, retrieve_index=retrieve_index,
                                     next_token=next_token, next_sibling=next_sibling,
                                     target_probs=target_probs.roll(-1, 1), seed=seed,
                                     num_steps=num_steps)


# The distribution law takes seconds an example on CPU: its controls run one case, a root
# with two children of p = 1/4 each over four tokens, beside the unwrapped kernels passing it.
UNIFORM = [0.25] * 4
DISTRIBUTION_CASE = KernelCase(
    law="kernel_tree_distribution", engine="specdec-kernels", seed=3,
    knobs={"bs": 1, "topk": 2, "spec_steps": 1, "ndt": 3, "vocab": 4, "zeros": 0.0,
           "cover": 0.0, "follow": 1.0, "rows_n": 200,
           "rows": [{"parents": [-1, 0, 0], "cand": [0, 1, 2], "p": [UNIFORM] * 3}]})


def _caught(law: str, cls, checks: tuple) -> None:
    if law == "kernel_tree_distribution":
        with pytest.raises(OracleFailure) as info:
            KERNEL_LAWS[law].check(cls(DEVICE), DISTRIBUTION_CASE)
        exc = info.value
    else:
        exc = failure(law, cls(DEVICE))
    assert exc is not None, f"{law} passed {cls.__name__}: {cls.__doc__}"
    assert exc.check in checks, str(exc)


@pytest.mark.parametrize("law, check", [("kernel_tree_acceptance", "recovered_support"),
                                        ("kernel_tree_distribution", "chi_square")])
def test_recovered_token_from_p_is_rejected(law, check):
    _caught(law, RecoveredFromP, (check,))


def test_rejecting_certain_children_is_rejected():
    _caught("kernel_tree_acceptance", RejectsCertain, ("rejects_certain",))


def test_target_rows_one_node_off_are_rejected():
    _caught("kernel_tree_acceptance", TargetRowsOneNodeOff, ("accepts_zero_prob", "support"))


def test_accepting_without_a_coin_is_rejected():
    _caught("kernel_tree_distribution", AcceptsWithoutCoin, ("chi_square",))


def test_unwrapped_kernels_pass_the_same_draws():
    assert failure("kernel_tree_acceptance", SpecdecKernels(DEVICE), 30) is None


def test_unwrapped_kernels_pass_the_distribution_case():
    KERNEL_LAWS["kernel_tree_distribution"].check(SpecdecKernels(DEVICE), DISTRIBUTION_CASE)


def test_zero_coin_accepting_a_zero_probability_child_is_rejected():
    """The law's explicit example (the root's coin exactly 0.0 before a child of p = 0)
    catches the `coin <= cdf` comparison (fault coin_le_cdf_accepts_zero_prob, SGLang
    #35798); without the fault the same example passes."""
    law = KERNEL_LAWS["kernel_tree_acceptance"]
    case = KernelCase(law=law.name, engine="specdec-kernels", seed=law.examples[0]["seed"],
                      knobs=law.examples[0]["knobs"])
    law.check(SpecdecKernels(DEVICE), case)
    with faultpoints.active("coin_le_cdf_accepts_zero_prob"), \
            pytest.raises(OracleFailure) as info:
        law.check(SpecdecKernels(DEVICE), case)
    assert info.value.check == "accepts_zero_prob", str(info.value)
