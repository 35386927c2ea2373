"""Law kernel_draft_kv_indices, over any kernel adapter with DRAFT_DECODE_KV_INDICES: the KV
each draft decode step attends to is the request's prefix and the branch's own draft slots,
in section 4's layout (docs/contract.md sections 2 and 4; harness/references/layout.py):

- kv_indptr of step i: row r = b*topk + k holds seq_len_b + i + 1 entries, rows request-major
  and back to back from kv_indptr[i, 0] = 0 (so kv_indptr[i, r] = topk * sum of the earlier
  requests' seq_lens + b*topk*(i+1) + k*(seq_len_b + i + 1));
- kv_indices of step i, row r: req_to_token[pool_b, 0 .. seq_len_b-1] (the committed draft
  prefix, in position order), then branch k's draft slots of steps 0..i (the slots of
  draft_out_cache_loc, read from req_to_token: never another branch's, never a step ahead).
  With page_size > 1 and topk > 1, a prefix-tail entry of a branch k >= 1 may name either the
  tail's own slot or its copy in the branch's first page (the same KV; kernel_kv_slots
  checks the copies).

Steps i = 0 .. num_steps-1 are checked: the round's forwards are i <= num_steps-2, and the
last step (every draft slot of the branch) is what SGLang's kernel also fills.

Drawn in one input class per example (CLASSES: seq_len_one, page_aligned, batch_one, chain,
single_step, plain): batch sizes 1-4 over a larger pool (rows in any order), ragged
seq_lens (1, page aligned, anything up to 40, unequal within a batch), topk 1-4, steps 1-5, the page sizes
the adapter accepts; req_to_token a permutation of whole pages (a page's slots consecutive,
as a paged allocator gives them, so a page-granular reader is exact), so a wrong position is
a wrong slot."""
from __future__ import annotations

from bisect import bisect_right

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.references import layout as L
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_draft_kv_indices"
NEEDS = frozenset({Component.DRAFT_DECODE_KV_INDICES})
PAGE_SIZES = (1, 2, 4, 8, 16)
CONTROL = "tests/test_kernel_controls_draft_kv_indices.py"


# The input classes as the callers make them (docs/adapters.md), each drawn on purpose and
# counted as a corner: seq_len_one (a one-token prefix: nothing before the root),
# page_aligned (every prefix ends on a page: no tail to copy), batch_one, chain (topk 1),
# single_step (`--speculative-num-steps 1`: the one step reads the root's slot only).
CLASSES = ("plain", "seq_len_one", "page_aligned", "batch_one", "chain", "single_step")


@st.composite
def _knobs(draw, kernels) -> dict:
    pages = kernels.accepts.get("page_sizes") or PAGE_SIZES
    cls = draw(st.sampled_from(CLASSES))
    page = draw(st.sampled_from([p for p in pages if p > 1] or pages)
                if cls == "page_aligned" else st.sampled_from(pages))
    bs = 1 if cls == "batch_one" else draw(st.integers(1, 4))
    # Lengths of 1 and whole pages are the corners of the prefix tail (last = 1 or 0).
    aligned = st.integers(1, max(1, 40 // page)).map(lambda m: m * page)
    length = (aligned if cls == "page_aligned" else
              st.one_of(st.just(1), st.integers(1, 40), aligned))
    seq_lens = draw(st.lists(length, min_size=bs, max_size=bs))
    if cls == "seq_len_one":
        seq_lens[draw(st.integers(0, bs - 1))] = 1
    return {"bs": bs, "pool_rows": bs + draw(st.integers(0, 2)), "page_size": page,
            "topk": 1 if cls == "chain" else draw(st.integers(1, 4)),
            "num_steps": 1 if cls == "single_step" else draw(st.integers(1, 5)),
            "seq_lens": seq_lens, "input_class": cls}


def cases(kernels):
    return kernel_cases(NAME, kernels, _knobs(kernels))


def inputs(case: KernelCase) -> tuple[list[list[int]], list[int]]:
    """(req_to_token rows, pool rows of the batch): every row wide enough for every branch's
    pages, its positions mapped page by page onto shuffled physical pages (page 0, slot 0,
    reserved)."""
    k, rng = case.knobs, case.rng()
    page, topk, steps = k["page_size"], k["topk"], k["num_steps"]
    need = max(max(base + topk * npb * page, s + topk * steps) for s in k["seq_lens"]
               for _, base, npb in [L.branch_geometry(s, steps, page)])
    pages_per_row = -(-need // page)
    phys = list(range(1, k["pool_rows"] * pages_per_row + 1))
    rng.shuffle(phys)
    table = [[phys[r * pages_per_row + p // page] * page + p % page
              for p in range(pages_per_row * page)] for r in range(k["pool_rows"])]
    return table, rng.sample(range(k["pool_rows"]), k["bs"])


def _where(ptr: list[int], j: int, topk: int, seq_lens: list[int]) -> str:
    """Flat entry j of a step -> which request, branch and position of its list."""
    r = bisect_right(ptr, j) - 1
    b, branch = divmod(r, topk)
    off = j - ptr[r]
    what = (f"prefix position {off}" if off < seq_lens[b]
            else f"draft step {off - seq_lens[b]}")
    return f"request {b}, branch {branch}, {what}"


def _rows(value, n: int) -> list[list[int]]:
    rows = list(value) if isinstance(value, (list, tuple)) else list(torch.as_tensor(value))
    return [torch.as_tensor(x).to(torch.int64).reshape(-1).tolist() for x in rows[:n]]


def check(kernels, case: KernelCase) -> dict:
    k = case.knobs
    topk, steps, page, lens = k["topk"], k["num_steps"], k["page_size"], k["seq_lens"]
    table, pool = inputs(case)
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    got = kernels.draft_decode_kv_indices(torch.tensor(table, dtype=torch.int32),
                                          req_pool_indices=t(pool),
                                          seq_lens=t(lens), topk=topk, num_steps=steps,
                                          page_size=page)
    ptrs, idx = _rows(got["kv_indptr"], steps), _rows(got["kv_indices"], steps)
    where = f"seq_lens {lens}, pool rows {pool}, topk {topk}, steps {steps}, page {page}"
    if len(ptrs) != steps or len(idx) != steps:
        raise OracleFailure(NAME, "steps", f"{len(ptrs)} kv_indptr and {len(idx)} kv_indices "
                            f"rows for {steps} steps; {where}")
    total = 0
    for i, (want_ptr, entries) in enumerate(L.draft_decode_kv_reads(table, req_pool_indices=pool,
                                                                    prefix_lens=lens, topk=topk,
                                                                    num_steps=steps,
                                                                    page_size=page)):
        if ptrs[i][:len(want_ptr)] != want_ptr or len(ptrs[i]) < len(want_ptr):
            r = next((r for r, (a, b) in enumerate(zip(ptrs[i], want_ptr)) if a != b),
                     min(len(ptrs[i]), len(want_ptr)))
            raise OracleFailure(NAME, "kv_indptr", f"step {i}: kv_indptr[{r}] = "
                                f"{ptrs[i][r:r + 4]}, reference {want_ptr[r:r + 4]}; {where}")
        row = idx[i][:len(entries)]
        bad = next((j for j, (g, ok) in enumerate(zip(row, entries)) if g not in ok),
                   len(row) if len(row) < len(entries) else None)
        if bad is not None:
            raise OracleFailure(NAME, "kv_indices", f"step {i}, entry {bad} ("
                                f"{_where(want_ptr, bad, topk, lens)}): {row[bad:bad + 4]}, "
                                f"reference {[e[0] for e in entries[bad:bad + 4]]} (of "
                                f"{len(row)} vs {len(entries)} entries); {where}")
        total += len(entries)
    return {"indices": total}


LAW = Law(
    name=NAME, rank=625, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="each draft decode step's KV indices are the request's prefix then the branch's "
            "own draft slots up to that step (indptr request-major), for every page size, "
            "topk and ragged batch",
    controls=(f"{CONTROL}::test_draft_part_missing_the_newest_slot_is_rejected",
              f"{CONTROL}::test_prefix_read_one_short_is_rejected",
              "tests/test_kernel_input_classes.py::test_a_mistake_of_the_class_is_caught_in_it"))
