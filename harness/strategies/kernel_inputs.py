"""What the kernel laws draw: each component's whole input contract as the engines define
it (SGLang's EAGLE draft layout for trees, vLLM's ragged batches for chains), corners
included, held as plain JSON lists so that a failure replays from one printed line.

Draft-tree inputs follow SGLang's `organize_draft_results` (docs/contract.md section 5):
step 0 proposes `topk` candidates (global ids 0..topk-1); step i >= 1 proposes topk*topk, ids
`topk + (i-1)*topk^2 + k*topk + c`, the children of step i-1's k-th kept candidate;
`parent_list[b] = [-1, 0..topk-1, then the ids kept at steps 1..spec_steps-2]`, and
`top_scores_index[b]` the ndt-1 selected ids, ascending. A real draft keeps a child only
with its parent (scores are cumulative), so the selection is closed under parents; an
adapter that accepts "orphan_nodes" is also drawn selections that are not."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from hypothesis import strategies as st


@dataclass(frozen=True, kw_only=True)
class KernelCase:
    """One example of a kernel law: its knobs and the seed of its data (the data itself is
    re-made from them, so the printed case is the whole replay)."""
    law: str
    engine: str
    seed: int
    knobs: dict

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "KernelCase":
        return cls(**d)

    @property
    def corners(self) -> tuple:
        """The input class this example was drawn in on purpose (chain_inputs.py), for
        `harness check`'s corner counts; none for a plain one."""
        cls = self.knobs.get("input_class", "plain")
        return () if cls == "plain" else (cls,)

    @property
    def axes(self) -> tuple:
        return tuple(sorted((k, v) for k, v in self.knobs.items() if not isinstance(v, list)))

    def rng(self) -> random.Random:
        return random.Random(self.seed)


def num_candidates(topk: int, spec_steps: int) -> int:
    return topk + (spec_steps - 1) * topk * topk


def draft_tree(rng: random.Random, topk: int, spec_steps: int, ndt: int,
               orphans: bool) -> tuple[list[int], list[int]]:
    """(parent_list row, top_scores_index row) of one request; ndt-1 <= num_candidates."""
    kept = [list(range(topk))]
    for i in range(1, spec_steps - 1):
        base = topk + (i - 1) * topk * topk
        kept.append(sorted(rng.sample(range(base, base + topk * topk), topk)))
    parent_list = [-1] + [g for step in kept for g in step] if spec_steps > 1 else []
    parent_of = {}
    for i in range(1, spec_steps):
        base = topk + (i - 1) * topk * topk
        for g in range(base, base + topk * topk):
            parent_of[g] = parent_list[g // topk]
    total = num_candidates(topk, spec_steps)
    if orphans:
        chosen = set(rng.sample(range(total), ndt - 1))
    else:
        chosen, frontier = set(), list(range(topk))
        while len(chosen) < ndt - 1 and frontier:
            g = frontier.pop(rng.randrange(len(frontier)))
            chosen.add(g)
            frontier += [c for c, p in parent_of.items() if p == g and c not in chosen]
    return parent_list, sorted(chosen)


@st.composite
def tree_knobs(draw, accepts: dict, max_bs: int = 4) -> dict:
    topk = draw(st.integers(1, 4))
    spec_steps = draw(st.integers(1, 5))
    # Every candidate is reachable by a parent-closed selection (choosing a kept parent
    # opens its children), so ndt - 1 may go up to all candidates.
    cap = 1 + num_candidates(topk, spec_steps)
    ndt = draw(st.integers(2, max(2, min(cap, 12))))
    return {"bs": draw(st.integers(1, max_bs)), "topk": topk, "spec_steps": spec_steps,
            "ndt": ndt, "orphans": draw(st.booleans()) if accepts.get("orphan_nodes") else False,
            "seq_lens": draw(st.lists(st.integers(1, 40), min_size=max_bs, max_size=max_bs)),
            "mode": draw(st.sampled_from(accepts["tree_mask_modes"]))}


# The tree shapes the engines' callers make, each drawn on purpose by the tree laws and counted
# as a corner (docs/adapters.md, "Input classes of the slot, tree and draft laws"):
# chain: `--speculative-eagle-topk 1` (SGLang's default EAGLE shape), every step kept;
# single_step: `--speculative-num-steps 1`, only the root's children;
# all_candidates: `--speculative-num-draft-tokens` at its maximum, every candidate kept;
# batch_one: one running request; one_token_prefix: a request whose prefix is one token.
TREE_CLASSES = ("plain", "chain", "single_step", "all_candidates", "batch_one",
                "one_token_prefix")
# (topk, spec_steps) whose candidates all fit under tree_knobs' cap of 12 tree nodes.
FULL_TREES = tuple((t, s) for t in range(1, 5) for s in range(1, 6)
                   if num_candidates(t, s) <= 11)


@st.composite
def tree_class_knobs(draw, accepts: dict, max_bs: int = 4) -> dict:
    """tree_knobs drawn in one of TREE_CLASSES (its name in the knob `input_class`)."""
    cls = draw(st.sampled_from(TREE_CLASSES))
    k = draw(tree_knobs(accepts, max_bs=1 if cls == "batch_one" else max_bs))
    if cls == "chain":
        k.update(topk=1, ndt=k["spec_steps"] + 1)
    elif cls == "single_step":
        k.update(spec_steps=1, ndt=draw(st.integers(2, 1 + k["topk"])))
    elif cls == "all_candidates":
        topk, steps = draw(st.sampled_from(FULL_TREES))
        k.update(topk=topk, spec_steps=steps, ndt=1 + num_candidates(topk, steps))
    elif cls == "one_token_prefix":
        seq = list(k["seq_lens"])
        seq[draw(st.integers(0, k["bs"] - 1))] = 1
        k["seq_lens"] = seq
    return {**k, "input_class": cls}


def tree_inputs(case: KernelCase) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """parent_list rows, top_scores_index rows and seq_lens of the case's batch."""
    k, rng = case.knobs, case.rng()
    rows = [draft_tree(rng, k["topk"], k["spec_steps"], k["ndt"], k["orphans"])
            for _ in range(k["bs"])]
    return [r[0] for r in rows], [r[1] for r in rows], k["seq_lens"][:k["bs"]]


def kernel_cases(law: str, kernels, knobs):
    """KernelCases of `law` on `kernels`: the drawn knobs and a seed for the data."""
    return st.builds(lambda k, seed: KernelCase(law=law, engine=kernels.engine, seed=seed,
                                                knobs=k),
                     knobs, st.integers(0, 2**31 - 1))


def request_pool(rng: random.Random, bs: int, min_width: int) -> tuple[list, list]:
    """A req_to_token pool as a server holds one: a few more rows than the batch, each at
    least `min_width` wide, every slot distinct (never slot 0, the padding slot), and the
    batch's req_pool_indices a permutation into it. Returns (req_to_token rows, indices)."""
    rows, width = bs + rng.randint(0, 3), min_width + rng.randint(0, 4)
    slots = rng.sample(range(1, 8 * rows * width), rows * width)
    return [slots[r * width:(r + 1) * width] for r in range(rows)], rng.sample(range(rows), bs)
