"""Law kernel_chain_seeded, over any kernel adapter with CHAIN_SAMPLING: a seeded request's
sampled tokens are a function of its own inputs and seed.

- Run again: the same batch with the same seed gives the same tokens, row for row.
- Other neighbours (where the adapter takes a seed per request, accepts["row_seeds"]: vLLM's
  generator per request, its request-state seed slots): a request moved to another batch
  position, among other requests (other rows, greedy or sampled, another batch size), with
  its own seed, gives the same tokens. Engines that draw a batch's coins from one stream
  (SGLang, specdec) are held to the first rule only.

Each example is drawn in the chain input classes (harness/strategies/chain_inputs.py), runs
every variant the adapter has and checks every row; the moved row is a sampled one where the
batch has any."""
from __future__ import annotations

import dataclasses

import torch

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.laws.kernel_chain_acceptance import variants
from harness.strategies.chain_inputs import chain_batch, chain_knobs
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_chain_seeded"
NEEDS = frozenset({Component.CHAIN_SAMPLING})


def cases(kernels):
    return kernel_cases(NAME, kernels, chain_knobs(kernels.accepts))


def _run(kernels, variant: str, batch: dict, seed: int, row_seeds=None) -> list:
    extra = {} if row_seeds is None else {"row_seeds": row_seeds}
    return kernels.chain_sampling(
        batch["draft_ids"], num_drafts=batch["num_drafts"], draft_probs=batch["draft_probs"],
        target_probs=batch["target_probs"], greedy=batch["greedy"], seed=seed,
        variant=variant, **extra).tolist()


def _rows(batch: dict, order: list) -> dict:
    """The batch of `order`'s rows, each (source batch, row index)."""
    def pick(name):
        if batch[0][name] is None:
            return None
        return torch.stack([src[name][i] for src, i in
                            ((batch[s], i) for s, i in order)])
    return {name: pick(name) for name in batch[0]}


def check(kernels, case: KernelCase) -> dict:
    moved = 0
    # The batch and its neighbours are drawn once; every variant runs on the same ones.
    batch = chain_batch(case)
    other = chain_batch(dataclasses.replace(case, seed=case.seed ^ 0x5A5A5A))
    for variant in variants(kernels, case, NAME):
        try:
            moved += _check(kernels, case, variant, batch, other)
        except OracleFailure as exc:
            raise OracleFailure(NAME, exc.check, f"variant {variant}: {exc.detail}") from None
    return {"moved": moved}


def _check(kernels, case: KernelCase, variant: str, batch: dict, other: dict) -> int:
    bs = batch["draft_ids"].shape[0]
    rng = case.rng()
    per_row = kernels.accepts.get("row_seeds", False)
    seeds = torch.tensor([rng.randrange(2**31) for _ in range(bs)]) if per_row else None
    first = _run(kernels, variant, batch, case.seed, seeds)
    again = _run(kernels, variant, batch, case.seed, seeds)
    if first != again:
        raise OracleFailure(NAME, "rerun", f"the same batch and seed gave {first}, then "
                            f"{again}")
    if not per_row:
        return 0
    # Neighbours: `other`, a batch of the same shape from another seed, some of its rows.
    sampled = [b for b in range(bs) if not bool(batch["greedy"][b])]
    moved = rng.choice(sampled or list(range(bs)))
    neighbours = [(1, i) for i in range(bs) if rng.random() < 0.7]
    at = rng.randint(0, len(neighbours))
    order = neighbours[:at] + [(0, moved)] + neighbours[at:]
    their_seeds = [int(seeds[moved]) if s == 0 else rng.randrange(2**31) for s, _ in order]
    out = _run(kernels, variant, _rows([batch, other], order), case.seed + 1,
               torch.tensor(their_seeds))
    if out[at] != first[moved]:
        raise OracleFailure(NAME, "neighbours", f"row {moved} (seed {int(seeds[moved])}) gave "
                            f"{first[moved]} in its batch of {bs} and {out[at]} at position "
                            f"{at} of a batch of {len(order)} with other neighbours")
    return 1


LAW = Law(
    name=NAME, rank=641, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="chain speculative sampling, seeded: the same batch and seed give the same "
            "tokens; with a seed per request, a request gives the same tokens at another "
            "batch position beside other neighbours",
    controls=("tests/test_kernel_chain_seeded.py::test_a_row_seeded_by_its_position_is_caught",
              "tests/test_kernel_chain_seeded.py::test_an_unseeded_draw_is_caught"))
