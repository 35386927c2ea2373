"""Kernel property: tree speculative sampling never leaves the vocabulary.

Whatever the target rows hold (dense, zeros, NaN, one-hot at the last id, top-k masked) and
whatever the final coin (0, 1 - 2^-24, 1), every token written is in [0, vocab) and
accept_index is a -1 padded tree path. Vocabularies include sizes that are not multiples of
the kernel's 1024 block (vLLM GHSA-8wr5-jm2h-8r4f drew the padded id when probs were NaN).

Observables: the kernel's output tokens and accept_index. Strategy: sampling_bounds_cases
and EXAMPLES, here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import pairwise

import numpy as np
import torch
from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.strategies.tiers import fixed_strategy

NAME = "sampling_vocab"  # the law whose checks this module raises (OracleFailure)

SENTINEL = -7
BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))
KINDS = ("dense", "zeros", "nan", "onehot_last", "topk")
BIG_VOCABS = (100, 8193, 10000, 151936)  # none a multiple of the block


@dataclass(frozen=True, kw_only=True)
class SamplingBoundsCase:
    vocab: int
    bs: int
    steps: int
    extra: int          # ndt = steps + 1 + extra
    kinds: tuple        # one row kind per request
    coin: float         # the final-draw coin
    seed: int

    def to_dict(self) -> dict:
        return asdict(self)


def sampling_bounds_cases():
    """Small vocabularies drawn (the CPU interpreter walks every block); the big ones are
    explicit examples."""
    return st.builds(
        lambda vocab, bs, steps, extra, kinds, coin, seed: SamplingBoundsCase(
            vocab=vocab, bs=bs, steps=steps, extra=extra, kinds=tuple(kinds[:bs]), coin=coin,
            seed=seed),
        st.sampled_from([2, 7, 100, 1000, 1024, 2049]), st.integers(1, 3), st.integers(1, 3),
        st.integers(0, 3), st.lists(st.sampled_from(KINDS), min_size=3, max_size=3),
        st.sampled_from([0.0, 0.5, BELOW_ONE, 1.0]), st.integers(0, 2**31 - 1))


EXAMPLES = (
    SamplingBoundsCase(vocab=100, bs=2, steps=2, extra=1, kinds=("nan", "zeros"), coin=0.5, seed=0),
    SamplingBoundsCase(vocab=8193, bs=1, steps=2, extra=0, kinds=("nan",), coin=0.5, seed=1),
    SamplingBoundsCase(vocab=10000, bs=1, steps=1, extra=1, kinds=("zeros",), coin=1.0, seed=2),
    SamplingBoundsCase(vocab=151936, bs=1, steps=1, extra=0, kinds=("nan",), coin=BELOW_ONE,
                       seed=3),
)


def _target_rows(kind: str, ndt: int, vocab: int, gen) -> torch.Tensor:
    if kind == "zeros":
        return torch.zeros(ndt, vocab)
    if kind == "nan":
        return torch.full((ndt, vocab), float("nan"))
    if kind == "onehot_last":
        t = torch.zeros(ndt, vocab)
        t[:, -1] = 1.0
        return t
    logits = torch.randn(ndt, vocab, generator=gen) * 3
    if kind == "topk":  # keep 3 tokens, the rest exactly zero after softmax
        cut = logits.topk(min(3, vocab), -1).values[:, -1:]
        logits = logits.masked_fill(logits < cut, float("-inf"))
    return logits.softmax(-1)


def _random_tree(ndt: int, steps: int, gen):
    """Parents and next/sibling links of a random tree of depth <= steps."""
    parent, depth = [-1], [0]
    for i in range(1, ndt):
        ok = [j for j in range(i) if depth[j] < steps]
        j = ok[int(torch.randint(len(ok), (1,), generator=gen))]
        parent.append(j), depth.append(depth[j] + 1)
    nxt, sib = [-1] * ndt, [-1] * ndt
    for i in range(ndt - 1, 0, -1):
        sib[i], nxt[parent[i]] = nxt[parent[i]], i
    return parent, nxt, sib


def prop_sampling_vocab(case: SamplingBoundsCase, device: str) -> None:
    """Both implementations (Triton, torch reference) stay inside the vocabulary."""
    from kernels.sampling import (tree_speculative_sampling_target_only as kernel,
                                  tree_speculative_sampling_target_only_ref as ref)
    bs, steps, vocab = case.bs, case.steps, case.vocab
    ndt = steps + 1 + case.extra
    gen = torch.Generator().manual_seed(case.seed)
    target = torch.stack([_target_rows(case.kinds[b], ndt, vocab, gen) for b in range(bs)])
    links = [_random_tree(ndt, steps, gen) for _ in range(bs)]
    ins = [torch.randint(vocab, (bs, ndt), generator=gen), torch.arange(bs * ndt).view(bs, ndt),
           torch.tensor([nx for _, nx, _ in links]), torch.tensor([sb for _, _, sb in links]),
           torch.rand(bs, ndt, generator=gen), torch.full((bs,), case.coin), target,
           torch.zeros_like(target)]
    ins = [t.to(device) for t in ins]
    for fn in (kernel, ref):
        name = fn.__name__
        predicts = torch.full((bs * ndt,), SENTINEL, dtype=torch.int32, device=device)
        accept_index = torch.full((bs, steps + 1), -1, dtype=torch.int32, device=device)
        accept_num = torch.full((bs,), SENTINEL, dtype=torch.int32, device=device)
        fn(predicts, accept_index, accept_num, *ins[:7], ins[7].clone())
        predicts, paths = predicts.cpu(), accept_index.cpu().tolist()
        for b in range(bs):
            n = int(accept_num[b])
            path = paths[b]
            nodes = [x - b * ndt for x in path[:n + 1]] if 0 <= n <= steps else []
            if (not nodes or path[n + 1:] != [-1] * (steps - n) or nodes[0] != 0
                    or not all(0 < x < ndt for x in nodes[1:])
                    or not all(links[b][0][c] == p for p, c in pairwise(nodes))):
                raise OracleFailure(NAME, "accept_path", f"{name} request {b}: accept_num {n}, "
                                    f"accept_index {path} is not a tree path from the root")
            for x in path[:n + 1]:  # the accepted drafts and the final (recovered) token
                if not 0 <= int(predicts[x]) < vocab:
                    raise OracleFailure(NAME, "token_in_vocab", (
                        f"{name} request {b} ({case.kinds[b]} target rows): token "
                        f"{int(predicts[x])} outside the vocabulary [0, {vocab})"))


LAW = Law(
    name="sampling_vocab", rank=140, prop=prop_sampling_vocab, config=SamplingBoundsCase,
    summary="tree speculative sampling never leaves the vocabulary, and accepts along a path",
    strategy=fixed_strategy(sampling_bounds_cases), examples=tuple(EXAMPLES),
    controls=("cases/recovered_token_out_of_vocab",))
