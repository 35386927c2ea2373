"""Law kernel_tree_build, over any kernel adapter with TREE_BUILD: the verify tree an engine's
kernel builds from a draft's parent list and selection is the one harness/references/tree.py
derives from docs/contract.md sections 5-6, in every mask mode the kernel offers:

- positions: node t of request b at seq_len_b + depth(t) (the root at seq_len_b);
- the attention mask, flat in the mode's layout: FULL (each row: seq_len_b prefix columns,
  all True, then the row of the tree mask), QLEN_ONLY ([bs, ndt, ndt]), bit-packed (bit j of
  row t = column j); row t holds exactly t, its ancestors and the root;
- retrieve links: retrieve_index[b, t] = b*ndt + t; next_token[p] = p's smallest child,
  next_sibling[c] = the next larger child of c's parent, -1 where none.

A chain tree builder (CHAIN_TREE_BUILD: topk 1, every draft step kept, the qlen-only mask;
SGLang's `build_chain_tree`, which its verify prepares with when topk is 1) is held to the
same tree, and to what it makes beside it: the verify tokens (the bonus, then the drafts),
out_cache_loc[b*w + t] = req_to_token[req_pool_indices[b], seq_len_b + t] (the request's
own row, req_pool_indices a permutation into a larger pool), and the M-RoPE positions (3
rows, each the positions) where asked.

Drawn: batch size, topk, depth, ndt up to every candidate, ragged seq_lens, each mode, each
example in one of the tree input classes (kernel_inputs.TREE_CLASSES: chain, single_step,
all_candidates, batch_one, one_token_prefix, plain)."""
from __future__ import annotations

import random

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.references import tree as T
from harness.strategies.kernel_inputs import (KernelCase, kernel_cases, request_pool,
                                              tree_class_knobs, tree_inputs)

NAME = "kernel_tree_build"
NEEDS = frozenset({Component.TREE_BUILD, Component.CHAIN_TREE_BUILD})
CHAIN = Component.CHAIN_TREE_BUILD.value


@st.composite
def _knobs(draw, kernels) -> dict:
    have = sorted(c.value for c in NEEDS & set(kernels.components))
    component = draw(st.sampled_from(have))
    k = draw(tree_class_knobs(kernels.accepts))
    if component == CHAIN:  # one candidate a step, every step kept, the qlen-only mask
        k.update(topk=1, ndt=k["spec_steps"] + 1, mode=1, orphans=False,
                 mrope=draw(st.booleans()))
    return {"component": component, **k}


def cases(kernels):
    return kernel_cases(NAME, kernels, _knobs(kernels))


def expected(case: KernelCase) -> dict:
    k = case.knobs
    parent_list, sel, seq_lens = tree_inputs(case)
    trees = [T.build_tree(pl, s, k["topk"], k["spec_steps"], k["ndt"])
             for pl, s in zip(parent_list, sel)]
    masks = [t["mask"] for t in trees]
    mask = {0: lambda: T.full_mask_flat(masks, seq_lens, k["ndt"]),
            1: lambda: T.qlen_mask_flat(masks), 2: lambda: T.packed_mask_rows(masks)}[k["mode"]]()
    return {"mask": mask,
            "positions": [s + d for t, s in zip(trees, seq_lens) for d in t["depth"]],
            "retrieve_index": [[b * k["ndt"] + t for t in range(k["ndt"])]
                               for b in range(k["bs"])],
            "next_token": [t["next_token"] for t in trees],
            "next_sibling": [t["next_sibling"] for t in trees]}


def _as_ints(name: str, value, mode: int, ndt: int) -> list:
    v = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    if name == "mask" and mode == 2:  # bit rows: the ndt low bits, as unsigned
        return [int(x) & ((1 << ndt) - 1) for x in v.reshape(-1).tolist()]
    if name == "mask":
        return [bool(x) for x in v.reshape(-1)]
    return v.to(torch.int64).reshape(-1 if name == "positions" else v.shape).tolist()


def _chain_inputs(case: KernelCase) -> dict:
    """The bonus and draft tokens, and the request-to-token pool the chain builder reads:
    each request's row a random one of a larger pool, its slots distinct."""
    k = case.knobs
    rng = random.Random(case.seed ^ 0x5EED)
    bs, w = k["bs"], k["ndt"]
    seq = k["seq_lens"][:bs]
    r2t, rpi = request_pool(rng, bs, max(seq) + w)
    return {"bonus": [rng.randrange(32000) for _ in range(bs)],
            "drafts": [[rng.randrange(32000) for _ in range(w - 1)] for _ in range(bs)],
            "req_to_token": r2t, "req_pool_indices": rpi}


def _check_chain(case: KernelCase, got: dict, x: dict, seq_lens: list) -> None:
    k, w = case.knobs, case.knobs["ndt"]
    want = {"tokens": [t for b, d in zip(x["bonus"], x["drafts"]) for t in [b] + d],
            "out_cache_loc": [x["req_to_token"][r][s + t]
                              for r, s in zip(x["req_pool_indices"], seq_lens)
                              for t in range(w)]}
    positions = [s + t for s in seq_lens for t in range(w)]
    if k.get("mrope"):
        want["mrope_positions"] = positions * 3
    for name, ref in want.items():
        have = got.get(name)
        if have is not None:
            have = torch.as_tensor(have).to(torch.int64).reshape(-1).tolist()
        if have != ref:
            raise OracleFailure(NAME, f"chain_{name}", f"{name} {have}, reference {ref}; "
                                f"bonus {x['bonus']}, drafts {x['drafts']}, seq_lens "
                                f"{seq_lens}, req_pool_indices {x['req_pool_indices']}")


def check(kernels, case: KernelCase) -> dict:
    k = case.knobs
    if k.get("component") == CHAIN:
        return _check_built(kernels, case)
    parent_list, sel, seq_lens = tree_inputs(case)
    pl = (torch.tensor(parent_list, dtype=torch.int64) if k["spec_steps"] > 1
          else torch.empty(k["bs"], 0, dtype=torch.int64))
    sel = torch.tensor(sel, dtype=torch.int64).reshape(k["bs"], -1)
    got = kernels.tree_build(pl, top_scores_index=sel,
                             seq_lens=torch.tensor(seq_lens, dtype=torch.int64), topk=k["topk"],
                             spec_steps=k["spec_steps"], ndt=k["ndt"], mode=k["mode"])
    _compare(case, got, parent_list, sel)
    return {"nodes": k["bs"] * k["ndt"]}


def _check_built(kernels, case: KernelCase) -> dict:
    k = case.knobs
    parent_list, sel, seq_lens = tree_inputs(case)
    x = _chain_inputs(case)
    i64 = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    got = kernels.chain_tree_build(
        i64(x["bonus"]), draft_tokens=i64(x["drafts"]).reshape(k["bs"], k["ndt"] - 1),
        seq_lens=i64(seq_lens), req_to_token=torch.tensor(x["req_to_token"], dtype=torch.int32),
        req_pool_indices=i64(x["req_pool_indices"]), mrope=k["mrope"])
    _compare(case, got, parent_list, sel)
    _check_chain(case, got, x, seq_lens)
    return {"nodes": k["bs"] * k["ndt"]}


def _compare(case: KernelCase, got: dict, parent_list, sel) -> None:
    k = case.knobs
    want = expected(case)
    for name in ("positions", "mask", "retrieve_index", "next_token", "next_sibling"):
        g, w = _as_ints(name, got[name], k["mode"], k["ndt"]), want[name]
        if g != w:
            flat_g = g if name in ("mask", "positions") else [x for r in g for x in r]
            flat_w = w if name in ("mask", "positions") else [x for r in w for x in r]
            first = next((i for i, (a, b) in enumerate(zip(flat_g, flat_w)) if a != b),
                         min(len(flat_g), len(flat_w)))
            raise OracleFailure(NAME, name, f"{name} differs first at flat entry {first}: "
                                f"kernel {flat_g[first:first + 8]}, reference "
                                f"{flat_w[first:first + 8]} (lengths {len(flat_g)} vs "
                                f"{len(flat_w)}); parent_list {parent_list}, "
                                f"top_scores_index {sel}")


LAW = Law(
    name=NAME, rank=600, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="a kernel's verify tree (positions, mask in every mode, retrieve links) is the "
            "reference's for every parent list and selection a draft makes",
    controls=("tests/test_kernel_law_controls.py::test_tree_positions_off_by_one_is_rejected",
              "tests/test_kernel_law_controls.py::test_tree_links_in_descending_order_are_rejected",
              "tests/test_kernel_controls_chain_tree.py::test_slots_of_the_batch_row_are_rejected",
              "tests/test_kernel_controls_chain_tree.py::test_mask_without_the_diagonal_is_rejected",
              "tests/test_kernel_input_classes.py::test_a_mistake_of_the_class_is_caught_in_it"))
