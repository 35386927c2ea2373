"""What the chain-sampling laws draw (CHAIN_SAMPLING): a ragged batch of draft chains with
their target and draft distributions, as vLLM's rejection sampler and SGLang's chain
sampler take them. Corners: zero probabilities in p and q (tokens outside the support),
ties, a draft whose proposal is deterministic (q one-hot), greedy and sampled rows in one
batch, rows with no drafts at all, drafts the target cannot produce. Every distribution is
float32 and normalised here, so the law and the kernel read the same numbers."""
from __future__ import annotations

import random

import torch
from hypothesis import strategies as st

from harness.strategies.kernel_inputs import KernelCase


@st.composite
def chain_knobs(draw, accepts: dict, max_bs: int = 6) -> dict:
    variant = draw(st.sampled_from(accepts.get("variants", ("classic",))))
    return {"variant": variant,
            "ratio_rule": variant in accepts.get("ratio_variants", ("classic",)),
            "bs": draw(st.integers(1, max_bs)), "k": draw(st.integers(1, 4)),
            "vocab": draw(st.integers(2, 8)),
            "ragged": draw(st.booleans()) if accepts.get("ragged_drafts") else False,
            "greedy": (draw(st.sampled_from(["none", "some", "all"]))
                       if accepts.get("greedy_rows") else "none"),
            "deterministic": (draw(st.booleans()) if accepts.get("deterministic_draft")
                              else False),
            "zeros": draw(st.sampled_from([0.0, 0.3, 0.6])),
            "close": draw(st.sampled_from([0.0, 0.5, 1.0]))}


def distribution(rng: random.Random, vocab: int, zeros: float, unique_max: bool = False):
    """A float32 distribution over vocab with some exact zeros (never all) and, unless
    unique_max, possible ties (weights drawn from a few levels)."""
    while True:
        w = [0.0 if rng.random() < zeros else float(rng.choice([1, 1, 2, 3, 5, 8]))
             for _ in range(vocab)]
        if unique_max and w.count(max(w)) > 1:
            w[w.index(max(w))] += 1.0
        if sum(w) > 0:
            break
    t = torch.tensor(w, dtype=torch.float32)
    return t / t.sum()


def chain_batch(case: KernelCase) -> dict:
    """The tensors of one case: draft_ids [bs, K], num_drafts [bs], draft_probs [bs, K, V] or
    None, target_probs [bs, K+1, V], greedy [bs]. `close` mixes q towards p (acceptances).
    An explicit example (a law's EXAMPLES) carries its tensors as lists under "batch"."""
    k, rng = case.knobs, case.rng()
    if "batch" in k:
        return explicit_batch(k["batch"])
    bs, K, V = k["bs"], k["k"], k["vocab"]
    greedy = torch.tensor([{"none": False, "all": True}.get(k["greedy"], rng.random() < 0.5)
                           for _ in range(bs)])
    num = torch.tensor([rng.randint(0, K) if k["ragged"] else K for _ in range(bs)])
    target = torch.stack([torch.stack([distribution(rng, V, k["zeros"], bool(greedy[b]))
                                       for _ in range(K + 1)]) for b in range(bs)])
    draft = torch.zeros(bs, K, V)
    ids = torch.zeros(bs, K, dtype=torch.int64)
    for b in range(bs):
        for i in range(K):
            q = distribution(rng, V, k["zeros"])
            if rng.random() < k["close"]:
                q = target[b, i].clone()
            draft[b, i] = q
            if k["deterministic"] or bool(greedy[b]):
                # A deterministic drafter proposes any token, often the target's favourite.
                ids[b, i] = (int(target[b, i].argmax()) if rng.random() < 0.5
                             else rng.randrange(V))
            else:
                ids[b, i] = int(torch.multinomial(q, 1, generator=torch.Generator().manual_seed(
                    rng.randrange(2**31))))
    return {"draft_ids": ids, "num_drafts": num, "target_probs": target, "greedy": greedy,
            "draft_probs": None if k["deterministic"] else draft}


def explicit_batch(lists: dict) -> dict:
    dtypes = {"draft_ids": torch.int64, "num_drafts": torch.int64, "greedy": torch.bool}
    return {name: None if v is None else torch.tensor(v, dtype=dtypes.get(name, torch.float32))
            for name, v in lists.items()}
