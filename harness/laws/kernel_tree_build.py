"""Law kernel_tree_build, over any kernel adapter with TREE_BUILD: the verify tree an engine's
kernel builds from a draft's parent list and selection is the one harness/references/tree.py
derives from docs/contract.md sections 5-6, in every mask mode the kernel offers:

- positions: node t of request b at seq_len_b + depth(t) (the root at seq_len_b);
- the attention mask, flat in the mode's layout: FULL (each row: seq_len_b prefix columns,
  all True, then the row of the tree mask), QLEN_ONLY ([bs, ndt, ndt]), bit-packed (bit j of
  row t = column j); row t holds exactly t, its ancestors and the root;
- retrieve links: retrieve_index[b, t] = b*ndt + t; next_token[p] = p's smallest child,
  next_sibling[c] = the next larger child of c's parent, -1 where none.

Drawn: batch size, topk, depth, ndt up to every candidate, ragged seq_lens, each mode."""
from __future__ import annotations

import torch

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.references import tree as T
from harness.strategies.kernel_inputs import KernelCase, kernel_cases, tree_inputs, tree_knobs

NAME = "kernel_tree_build"
NEEDS = frozenset({Component.TREE_BUILD})


def cases(kernels):
    return kernel_cases(NAME, kernels, tree_knobs(kernels.accepts))


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


def check(kernels, case: KernelCase) -> dict:
    k = case.knobs
    parent_list, sel, seq_lens = tree_inputs(case)
    pl = (torch.tensor(parent_list, dtype=torch.int64) if k["spec_steps"] > 1
          else torch.empty(k["bs"], 0, dtype=torch.int64))
    sel = torch.tensor(sel, dtype=torch.int64).reshape(k["bs"], -1)
    got = kernels.tree_build(pl, top_scores_index=sel,
                             seq_lens=torch.tensor(seq_lens, dtype=torch.int64), topk=k["topk"],
                             spec_steps=k["spec_steps"], ndt=k["ndt"], mode=k["mode"])
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
    return {"nodes": k["bs"] * k["ndt"]}


LAW = Law(
    name=NAME, rank=600, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="a kernel's verify tree (positions, mask in every mode, retrieve links) is the "
            "reference's for every parent list and selection a draft makes",
    controls=("tests/test_kernel_law_controls.py::test_tree_positions_off_by_one_is_rejected",
              "tests/test_kernel_law_controls.py::test_tree_links_in_descending_order_are_rejected"))
