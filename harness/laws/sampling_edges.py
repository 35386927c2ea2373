"""Kernel property: edge coins never emit a token of filtered probability 0.

Contract section 12: coins lie in [0, 1) and every comparison against them is strict, so
a token of filtered probability 0 is never emitted, not even by coin 0.0 (SGLang #35798:
`coin <= cdf` let coin 0 select a leading token of probability 0) nor by the largest
float32 below 1. Checked on the three samplers of the engine: the tree target-only kernel
(greedy-like drafts, and drafts of probability 0), the chain kernel (drafts sampled from q,
and drafts of probability 0) and one-token sampling (a root-only tree, through
specdec.sampler.sample_tokens, the engine's own wrapper).

Rows are exact distributions: their non-zero entries are multiples of 2^-12 summing to 1
exactly, in any order, in fp32. Rounded rows (fp32 softmax outputs) have a further edge:
when the siblings of a tree node cover a row's whole support and their fp32 sum rounds to
1 - 2^-24, the coin 1 - 2^-24 rejects them all and the residual is empty; the fallback is
then the last token the target supports
(tests/kernels/test_sampling_edges.py::test_support_sum_rounding_edge).

Observables: the samplers' output tokens. Strategy: sampling_edges_cases and EXAMPLES, here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import pairwise
from types import SimpleNamespace

import numpy as np
import torch
from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.laws.sampling_bounds import _random_tree
from harness.laws.declaration import Law
from harness.strategies.tiers import fixed_strategy

NAME = "sampling_edges"  # the law whose checks this module raises (OracleFailure)

SENTINEL = -7
BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))  # 1 - 2^-24
UNITS = 4096  # row entries are multiples of 1 / UNITS
KERNELS = ("tree", "chain", "one_token", "draft")
ZEROS = ("front", "back", "interleaved", "single")
DRAFTS = ("likely", "zero")


@dataclass(frozen=True, kw_only=True)
class SamplingEdgesCase:
    kernel: str        # "tree" (target only), "chain", "one_token" (root-only tree),
                       # "draft" (the drafter's inverse-CDF draw)
    vocab: int
    bs: int
    steps: int         # draft depth (tree and chain; one_token ignores it)
    zeros: str         # where each target row's zeros lie: ZEROS
    drafts: str        # "likely": the row's most probable tokens (tree), sampled from q
                       # (chain); "zero": tokens of target probability 0
    coin: float        # every acceptance coin (the draft's noise coin)
    final_coin: float  # the final (bonus / recovery) coin
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


_COINS = st.one_of(st.sampled_from([0.0, BELOW_ONE, 0.5]),
                   st.floats(0.0, BELOW_ONE, width=32))


def sampling_edges_cases():
    """Small vocabularies, zero patterns, edge coins (0, 1 - 2^-24, 0.5) and random ones."""
    return st.builds(
        SamplingEdgesCase, kernel=st.sampled_from(KERNELS),
        vocab=st.sampled_from([2, 3, 5, 8, 17, 100]), bs=st.integers(1, 3),
        steps=st.integers(1, 3), zeros=st.sampled_from(ZEROS), drafts=st.sampled_from(DRAFTS),
        coin=_COINS, final_coin=_COINS, seed=st.integers(0, 2**31 - 1))


EXAMPLES = (  # coin 0.0 with a leading token of probability 0, on each sampler
    SamplingEdgesCase(kernel="one_token", vocab=5, bs=2, steps=1, zeros="front", drafts="likely",
                      coin=0.0, final_coin=0.0, seed=0),
    SamplingEdgesCase(kernel="tree", vocab=8, bs=2, steps=2, zeros="front", drafts="zero", coin=0.0,
                      final_coin=0.0, seed=1),
    SamplingEdgesCase(kernel="chain", vocab=8, bs=2, steps=3, zeros="front", drafts="zero",
                      coin=0.0, final_coin=0.0, seed=2),
    SamplingEdgesCase(kernel="draft", vocab=5, bs=2, steps=1, zeros="front", drafts="likely",
                      coin=0.0, final_coin=0.0, seed=5),
    SamplingEdgesCase(kernel="tree", vocab=5, bs=1, steps=2, zeros="interleaved", drafts="likely",
                      coin=BELOW_ONE, final_coin=0.0, seed=3),
    SamplingEdgesCase(kernel="chain", vocab=17, bs=2, steps=2, zeros="single", drafts="likely",
                      coin=BELOW_ONE, final_coin=BELOW_ONE, seed=4),
)


def _exact_row(support: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """A distribution over the True entries of `support`: multiples of 1/UNITS, sum 1."""
    row = np.zeros(support.shape[0], dtype=np.float32)
    idx = np.flatnonzero(support)
    cuts = np.sort(gen.choice(np.arange(1, UNITS), idx.size - 1, replace=False))
    row[idx] = np.diff(np.concatenate([[0], cuts, [UNITS]])) / np.float32(UNITS)
    return row


def _target_row(zeros: str, vocab: int, gen: np.random.Generator) -> np.ndarray:
    support = np.ones(vocab, dtype=bool)
    k = int(gen.integers(1, vocab))  # 1 .. vocab-1 zeros
    if zeros == "front":
        support[:k] = False
    elif zeros == "back":
        support[vocab - k:] = False
    elif zeros == "interleaved":
        support[int(gen.integers(0, 2))::2] = False  # vocab >= 2: both parities occur
    else:  # single: one token of probability 1, never the first
        support[:] = False
        support[int(gen.integers(1, vocab))] = True
    return _exact_row(support, gen)


def _likely_first(row: np.ndarray) -> list[int]:
    return sorted(range(row.shape[0]), key=lambda t: (-row[t], t))


def _pick(pool: list[int], i: int) -> int:
    return pool[i % len(pool)]


def _run(fn, outs, ins):
    outs = [o.clone() for o in outs]
    fn(*outs, *ins)
    return [o.cpu() for o in outs]


def _fail(name, b, what):
    raise OracleFailure(NAME, NAME, f"{name} request {b}: {what}")


def _check_token(name, *, b, tok, row, vocab, what):
    if not 0 <= tok < vocab:
        _fail(name, b, f"{what} {tok} outside the vocabulary [0, {vocab})")
    if not row[tok] > 0:
        _fail(name, b, f"{what} {tok} has probability {float(row[tok])} in the row it was drawn "
                       f"from (positive at {np.flatnonzero(row > 0).tolist()})")


def _tree(case, device, gen):
    from kernels.sampling import (tree_speculative_sampling_target_only as kernel,
                                  tree_speculative_sampling_target_only_ref as ref)
    bs, steps, vocab = case.bs, case.steps, case.vocab
    ndt = steps + 1 + int(gen.integers(0, 3))
    target = np.stack([np.stack([_target_row(case.zeros, vocab, gen) for _ in range(ndt)])
                       for _ in range(bs)])
    tgen = torch.Generator().manual_seed(int(gen.integers(2**31)))
    links = [_random_tree(ndt, steps, tgen) for _ in range(bs)]
    cand = np.zeros((bs, ndt), dtype=np.int64)
    for b, (parent, _, _) in enumerate(links):
        for a in range(ndt):
            kids = [c for c in range(1, ndt) if parent[c] == a]
            pool = (_likely_first(target[b, a]) if case.drafts == "likely"
                    else np.flatnonzero(target[b, a] == 0).tolist())
            for i, c in enumerate(kids):
                cand[b, c] = _pick(pool, i)
    ins = [torch.from_numpy(cand), torch.arange(bs * ndt).view(bs, ndt),
           torch.tensor([nx for _, nx, _ in links]), torch.tensor([sb for _, _, sb in links]),
           torch.full((bs, ndt), case.coin), torch.full((bs,), case.final_coin),
           torch.from_numpy(target), torch.zeros(bs, ndt, vocab)]
    ins = [t.to(device) for t in ins]
    outs = [torch.full((bs * ndt,), SENTINEL, dtype=torch.int32, device=device),
            torch.full((bs, steps + 1), -1, dtype=torch.int32, device=device),
            torch.full((bs,), SENTINEL, dtype=torch.int32, device=device)]
    for fn in (kernel, ref):
        draft = ins[7].clone()
        predicts, accept_index, accept_num = _run(fn, outs, ins[:7] + [draft])
        draft = draft.cpu().numpy()
        for b in range(bs):
            n = int(accept_num[b])
            nodes = [x - b * ndt for x in accept_index[b, :n + 1].tolist()]
            if not (0 <= n <= steps and nodes[0] == 0 and all(0 < x < ndt for x in nodes[1:])
                    and all(links[b][0][c] == a for a, c in pairwise(nodes))):
                _fail(fn.__name__, b, f"accept_index {accept_index[b].tolist()} (n = {n}) is "
                                      f"not a tree path")
            for a, c in pairwise(nodes):  # an accepted draft: the target row of its parent
                _check_token(fn.__name__, b=b, tok=int(predicts[b * ndt + a]), row=target[b, a],
                             vocab=vocab,
                             what=f"accepted draft (node {c})")
            last = nodes[-1]
            r = target[b, last] - (draft[b, last] if n != steps else 0)
            _check_token(fn.__name__, b=b, tok=int(predicts[b * ndt + last]), row=np.maximum(r, 0),
                         vocab=vocab,
                         what=f"final token (node {last}, {n} accepted)")


def _chain(case, device, gen):
    from kernels.chain_sampling import (chain_speculative_sampling as kernel,
                                        chain_speculative_sampling_ref as ref)
    bs, vocab, ndt = case.bs, case.vocab, case.steps + 1
    target = np.stack([np.stack([_target_row(case.zeros, vocab, gen) for _ in range(ndt)])
                       for _ in range(bs)])
    # q: dense (every token > 0), so p != q and a rejection always leaves a residual.
    draft = np.stack([np.stack([_exact_row(np.ones(vocab, bool), gen) for _ in range(ndt)])
                      for _ in range(bs)])
    cand = np.zeros((bs, ndt), dtype=np.int64)
    for b in range(bs):
        for j in range(ndt - 1):
            if case.drafts == "likely":
                cand[b, j + 1] = gen.choice(vocab, p=draft[b, j].astype(np.float64))
            else:
                cand[b, j + 1] = gen.choice(np.flatnonzero(target[b, j] == 0))
    ins = [torch.from_numpy(cand), torch.full((bs, ndt), case.coin),
           torch.full((bs,), case.final_coin), torch.from_numpy(target), torch.from_numpy(draft)]
    ins = [t.to(device) for t in ins]
    outs = [torch.full((bs * ndt,), SENTINEL, dtype=torch.int32, device=device),
            torch.full((bs, ndt), SENTINEL, dtype=torch.int32, device=device),
            torch.full((bs,), SENTINEL, dtype=torch.int32, device=device)]
    for fn in (kernel, ref):
        predicts, accept_index, accept_num = _run(fn, outs, ins)
        for b in range(bs):
            n = int(accept_num[b])
            if not 0 <= n < ndt or accept_index[b].tolist() != [
                    b * ndt + i if i <= n else -1 for i in range(ndt)]:
                _fail(fn.__name__, b, f"accept_index {accept_index[b].tolist()} (n = {n})")
            for i in range(n):
                _check_token(fn.__name__, b=b, tok=int(predicts[b * ndt + i]), row=target[b, i],
                             vocab=vocab,
                             what=f"accepted draft {i + 1}")
            r = target[b, n] - (draft[b, n] if n < ndt - 1 else 0)
            _check_token(fn.__name__, b=b, tok=int(predicts[b * ndt + n]), row=np.maximum(r, 0),
                         vocab=vocab,
                         what=f"final token ({n} accepted)")


def _one_token(case, device, gen):
    from kernels.sampling import (tree_speculative_sampling_target_only as kernel,
                                  tree_speculative_sampling_target_only_ref as ref)
    from specdec.sampler import sample_tokens
    probs = np.stack([_target_row(case.zeros, case.vocab, gen) for _ in range(case.bs)])
    coins = torch.full((case.bs,), case.final_coin, device=device)
    for fn in (kernel, ref):
        tokens = sample_tokens(SimpleNamespace(tree_speculative_sampling_target_only=fn),
                               torch.from_numpy(probs).to(device), coins).cpu()
        for b in range(case.bs):
            _check_token(fn.__name__, b=b, tok=int(tokens[b]), row=probs[b], vocab=case.vocab,
                         what="sampled token")


def _draft_noise(case, device, gen):
    """The drafter's draw: the first token whose cumulative mass exceeds the coin (rows are
    exact, so the CDF is exact in float64 and the expected token is unambiguous)."""
    from specdec.sampler import draw_from
    probs = np.stack([_target_row(case.zeros, case.vocab, gen) for _ in range(case.bs)])
    tokens = draw_from(torch.from_numpy(probs).to(device),
                       torch.full((case.bs,), case.coin, device=device)).cpu()
    for b in range(case.bs):
        tok = int(tokens[b])
        _check_token("draw_from", b=b, tok=tok, row=probs[b], vocab=case.vocab, what="draft token")
        cdf = np.cumsum(probs[b].astype(np.float64))
        want = int(np.flatnonzero(cdf > case.coin)[0])
        if tok != want:
            _fail("draw_from", b, f"coin {case.coin} drew {tok}, the inverse CDF gives {want} "
                                  f"(cdf {cdf[max(0, want - 1):want + 2].tolist()} around it)")


def prop_sampling_edges(case: SamplingEdgesCase, device: str) -> None:
    """Law: every token a sampler emits (accepted drafts and the final bonus / recovery
    token) has filtered probability > 0 in the row it was drawn from, and is < vocab; for
    every coin in [0, 1), 0.0 and 1 - 2^-24 included, and rows with zeros anywhere.

    The row of an accepted draft is the target row of its parent node; of the final token,
    relu(target - draft) of the last accepted node after a rejection (the tree kernel's
    draft row after its in-place updates, the chain kernel's q), or the target row alone at
    full depth; of a one-token draw or a draft's noise draw, its probability row (and the
    draft's draw is the first token whose CDF exceeds the coin). Triton and reference both."""
    gen = np.random.default_rng(case.seed)
    {"tree": _tree, "chain": _chain, "one_token": _one_token,
     "draft": _draft_noise}[case.kernel](case, device, gen)


LAW = Law(
    name="sampling_edges", rank=150, prop=prop_sampling_edges, config=SamplingEdgesCase,
    summary="edge coins never emit a token of filtered probability 0 (every sampler, the "
            "draft's noise included)",
    strategy=fixed_strategy(sampling_edges_cases), examples=tuple(EXAMPLES),
    controls=("tests/kernels/test_sampling_edges.py::test_fault_is_caught",
              "cases/coin_le_cdf_accepts_zero_prob"))
