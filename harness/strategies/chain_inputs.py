"""What the chain-sampling laws draw (CHAIN_SAMPLING): a ragged batch of draft chains with
their target and draft distributions, as vLLM's rejection sampler and SGLang's chain
sampler take them. Corners: zero probabilities in p and q (tokens outside the support),
ties, a draft whose proposal is deterministic (q one-hot), greedy and sampled rows in one
batch, rows with no drafts at all, drafts the target cannot produce. Every distribution is
float32 and normalised here, so the law and the kernel read the same numbers.

Each example is also drawn in one input class on purpose (INPUT_CLASSES; "plain" is none),
the inputs a serving engine's own sampler metadata makes, which a random draw meets rarely:
- single_token: every target row keeps one token (top-k 1, a tiny top-p, a one-token
  grammar state, allowed ids of one);
- masked_drafts: every sampled row's drafts have target probability exactly 0 (a grammar,
  allowed-ids or bad-words mask on the target that the drafter did not see); the drafter's
  own q still proposed them;
- banned_tokens: every row has tokens of target probability 0 at all its positions, its
  drafts among them (a request's allowed ids, its one-token bad words: what a request bans
  for its whole length, which an adapter may hand over through the engine's own request
  metadata rather than as zeros);
- nonfinite_rows: fully masked rows (NaN after the softmax over all -inf): the target's at
  one position of some requests, and some of their draft rows;
- repeated_drafts: a drafter in a repetition loop: every row drafts one token again and
  again (a greedy row its target's first choice), greedy and sampled rows, at least two
  drafts: what penalties count draft by draft (presence, frequency, repetition);
- full_drafts: every row drafts the most tokens drawn (K = 4), none ragged;
- batch_one: a batch of one request;
- mixed_greedy: greedy and sampled rows in one batch, both kinds present (where the
  adapter routes both);
- no_drafts: every row drafted nothing (where the adapter takes ragged drafts);
- edge_coins: the uniform coins at their ends, where the caller hands the kernel its coins
  (accepts["coin_inputs"]: SGLang's _verify_coins, specdec's engine): exactly 0.0 at drafts
  of target probability 0 (accept iff u < p/q rejects them; u <= p/q does not), and the
  largest float32 below 1.0 (1 - 2^-24) at the others and at the final draw (a running sum
  compared with u times the row's mass may end below it: the search must not walk past V).
`harness check` counts each class as a corner."""
from __future__ import annotations

import random

import torch
from hypothesis import strategies as st

from harness.strategies.kernel_inputs import KernelCase


INPUT_CLASSES = ("plain", "single_token", "masked_drafts", "banned_tokens", "nonfinite_rows",
                 "repeated_drafts", "full_drafts", "batch_one", "mixed_greedy", "no_drafts",
                 "edge_coins")
MAX_K = 4
TOP_COIN = 1.0 - 2.0 ** -24  # the largest float32 below 1.0


def input_classes(accepts: dict) -> tuple:
    """The classes an adapter's contract admits (mixed_greedy needs greedy rows, no_drafts
    ragged drafts)."""
    return tuple(c for c in INPUT_CLASSES
                 if not (c == "mixed_greedy" and not accepts.get("greedy_rows"))
                 and not (c == "no_drafts" and not accepts.get("ragged_drafts"))
                 and not (c == "edge_coins" and not accepts.get("coin_inputs")))


@st.composite
def chain_knobs(draw, accepts: dict, max_bs: int = 6) -> dict:
    variant = draw(st.sampled_from(accepts.get("variants", ("classic",))))
    knobs = {"variant": variant,
             "ratio_rule": variant in accepts.get("ratio_variants", ("classic",)),
             "bs": draw(st.integers(1, max_bs)), "k": draw(st.integers(1, MAX_K)),
             "vocab": draw(st.integers(2, 8)),
             "ragged": draw(st.booleans()) if accepts.get("ragged_drafts") else False,
             "greedy": (draw(st.sampled_from(["none", "some", "all"]))
                        if accepts.get("greedy_rows") else "none"),
             "deterministic": (draw(st.booleans()) if accepts.get("deterministic_draft")
                               else False),
             "zeros": draw(st.sampled_from([0.0, 0.3, 0.6])),
             "close": draw(st.sampled_from([0.0, 0.5, 1.0])),
             "input_class": draw(st.sampled_from(input_classes(accepts)))}
    # The class's own shape, set here so that every example of it exercises it.
    cls = knobs["input_class"]
    if cls == "full_drafts":
        knobs.update(k=MAX_K, ragged=False)
    elif cls == "batch_one":
        knobs.update(bs=1)
    elif cls == "mixed_greedy":
        knobs.update(bs=max(2, knobs["bs"]), greedy="some")
    elif cls in ("masked_drafts", "edge_coins"):
        knobs.update(greedy="none")  # a greedy row takes the argmax: no draft is masked for it
    elif cls == "no_drafts":
        knobs.update(ragged=True)
    elif cls == "repeated_drafts":
        knobs.update(k=max(2, knobs["k"]), ragged=False,
                     greedy="some" if accepts.get("greedy_rows") else "none")
    return knobs


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
    cls = k.get("input_class", "plain")
    greedy = torch.tensor([{"none": False, "all": True}.get(k["greedy"], rng.random() < 0.5)
                           for _ in range(bs)])
    if cls == "mixed_greedy":  # both kinds, whatever the coins said
        greedy[0], greedy[-1] = True, False
    num = torch.tensor([0 if cls == "no_drafts" else rng.randint(0, K) if k["ragged"] else K
                        for _ in range(bs)])
    target = torch.stack([torch.stack([distribution(rng, V, k["zeros"], bool(greedy[b]))
                                       for _ in range(K + 1)]) for b in range(bs)])
    if cls == "single_token":
        target = torch.nn.functional.one_hot(
            torch.tensor([[rng.randrange(V) for _ in range(K + 1)] for _ in range(bs)]),
            V).float()
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
            if cls == "masked_drafts":
                _mask(target[b, i], int(ids[b, i]), rng)
    if cls == "banned_tokens":
        for b in range(bs):
            _ban(target[b], ids[b, :int(num[b])].tolist(), rng, bool(greedy[b]))
    if cls == "nonfinite_rows":
        _nonfinite(target, draft, num, rng)
    if cls == "repeated_drafts":
        for b in range(bs):
            t = int(target[b, 0].argmax()) if bool(greedy[b]) else int(ids[b, 0])
            ids[b] = t
            loop = torch.nn.functional.one_hot(torch.tensor(t), V).float()
            draft[b] = (draft[b] + loop) / 2  # the drafter's q keeps t likely
    batch = {"draft_ids": ids, "num_drafts": num, "target_probs": target, "greedy": greedy,
             "draft_probs": None if k["deterministic"] else draft}
    if cls == "edge_coins":
        batch.update(_edge_coins(target, ids, rng))
    return batch


def _edge_coins(target: torch.Tensor, ids: torch.Tensor, rng: random.Random) -> dict:
    """coins [bs, K+1] (the coin read when draft i is tried is coins[b, i]) and final_coins
    [bs]: at each draft, either 0.0 with the draft masked to p = 0 in `target` (in place), or
    TOP_COIN; the final draw TOP_COIN or 0.0."""
    bs, K = ids.shape
    coins = torch.full((bs, K + 1), TOP_COIN)
    for b in range(bs):
        for i in range(K):
            if rng.random() < 0.5:
                coins[b, i] = 0.0
                _mask(target[b, i], int(ids[b, i]), rng)
    final = torch.tensor([TOP_COIN if rng.random() < 0.75 else 0.0 for _ in range(bs)])
    return {"coins": coins, "final_coins": final}


def _mask(p: torch.Tensor, token: int, rng: random.Random) -> None:
    """p (in place) with `token` masked to exactly 0, renormalised; were it p's only token,
    the mass moves to another (a mask never empties a row)."""
    p[token] = 0.0
    if float(p.sum()) == 0.0:
        p[rng.choice([t for t in range(p.numel()) if t != token])] = 1.0
    p /= p.sum()


def _ban(rows: torch.Tensor, drafts: list[int], rng: random.Random, greedy: bool) -> None:
    """rows [K+1, V] (in place) with a banned set at probability 0 in every row: the last
    draft (the position a per-draft loop's bound reaches last) and another, when there are
    any, and a random token or two; at least one token stays allowed, and a greedy row keeps
    a unique maximum."""
    vocab = rows.shape[1]
    banned = {drafts[-1], rng.choice(drafts)} if drafts else set()
    banned |= {rng.randrange(vocab) for _ in range(rng.randint(1, 2))}
    if len(banned) >= vocab:
        banned.discard(next(iter(banned)))
    allowed = [t for t in range(vocab) if t not in banned]
    for p in rows:
        p[sorted(banned)] = 0.0
        if float(p.sum()) == 0.0:
            p[rng.choice(allowed)] = 1.0
        if greedy and int((p == p.max()).sum()) > 1:
            p[int(p.argmax())] += float(p.max())
        p /= p.sum()


def _nonfinite(target: torch.Tensor, draft: torch.Tensor, num: torch.Tensor,
               rng: random.Random) -> None:
    """Fully masked rows, as a softmax over all -inf leaves them (NaN): the target's at one
    position of some requests (a draft, recovered or bonus position), and some draft rows
    (the drafter's own mask emptied a row after it proposed)."""
    bs = target.shape[0]
    rows = [b for b in range(bs) if rng.random() < 0.5] or [rng.randrange(bs)]
    for b in rows:
        target[b, rng.randint(0, int(num[b]))] = float("nan")
        if int(num[b]) and rng.random() < 0.5:
            draft[b, rng.randrange(int(num[b]))] = float("nan")


def explicit_batch(lists: dict) -> dict:
    dtypes = {"draft_ids": torch.int64, "num_drafts": torch.int64, "greedy": torch.bool}
    return {name: None if v is None else torch.tensor(v, dtype=dtypes.get(name, torch.float32))
            for name, v in lists.items()}
