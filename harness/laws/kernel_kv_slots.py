"""Law kernel_kv_slots, over any kernel adapter with REQ_TO_TOKEN_WRITE or DRAFT_CACHE_LOCS:
the KV slots an engine's kernels write and read are where docs/contract.md section 4 puts
them (harness/references/layout.py):

- req_to_token write: row req_pool_indices[b], columns start[b] .. end[b]-1 take the next
  end[b]-start[b] entries of out_cache_loc, requests packed in batch order; every other entry
  of req_to_token is unchanged (empty ranges write nothing);
- draft cache locations: entry [b, k, s] of out_cache_loc is the slot req_to_token holds at
  position(k, s) of request b's branch k, step s (branches back to back when page_size is 1
  or topk 1, else each branch on pages of its own, its first page a copy of the prefix's
  partial page); where the kernel also returns the prefix-tail copies, they are exactly the
  reference's (source slot, target slot) pairs.

Drawn in one input class per example (CLASSES: page_aligned, page_plus_one, batch_one,
empty_ranges, chain, plain): pool rows and lengths, ragged and empty ranges, pool indices in any order, page sizes
1 to 16 (or those the adapter accepts), topk, steps, sequence lengths anywhere, all on page
boundaries or all one past one, req_to_token a permutation of slots (so a wrong position is
a wrong slot)."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.references import layout as L
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_kv_slots"
NEEDS = frozenset({Component.REQ_TO_TOKEN_WRITE, Component.DRAFT_CACHE_LOCS})
PAGE_SIZES = (1, 2, 4, 8, 16)
LENGTHS = ("any", "page_aligned", "page_plus_one")
# The input classes as the callers make them (docs/adapters.md), each drawn on purpose and
# counted as a corner: page_aligned / page_plus_one (every draft starts on a page boundary or
# one past it), batch_one, empty_ranges (a request that extends by nothing, among others),
# chain (topk 1: one branch, no prefix-tail copy).
CLASSES = ("plain", "page_aligned", "page_plus_one", "batch_one", "empty_ranges", "chain")


def applicable(components) -> bool:
    """Either half serves: a kernel adapter with one of the two components runs that half."""
    return bool(NEEDS & set(components))


@st.composite
def _knobs(draw, kernels) -> dict:
    have = sorted(c.value for c in NEEDS & set(kernels.components))
    pages = kernels.accepts.get("page_sizes") or PAGE_SIZES
    cls = draw(st.sampled_from(CLASSES))
    write = Component.REQ_TO_TOKEN_WRITE.value
    component = draw(st.sampled_from(have if cls != "empty_ranges" or write not in have
                                     else [write]))
    k = {"component": component, "pool_rows": draw(st.integers(1, 6)),
         "bs": 1 if cls == "batch_one" else draw(st.integers(1, 4)),
         "page_size": draw(st.sampled_from(pages)),
         "topk": 1 if cls == "chain" else draw(st.integers(1, 4)),
         "num_steps": draw(st.integers(1, 5)), "max_len": draw(st.integers(1, 40)),
         # Where lengths fall on pages: anywhere, or every request exactly on a page
         # boundary (no partial page, nothing to copy) or one past it (a 1-slot tail).
         "lengths": cls if cls in LENGTHS else draw(st.sampled_from(LENGTHS)),
         "input_class": cls}
    if cls in ("page_aligned", "page_plus_one") and max(pages) > 1:
        k["page_size"] = draw(st.sampled_from([p for p in pages if p > 1]))
    return k


def cases(kernels):
    return kernel_cases(NAME, kernels, _knobs(kernels))


def _pool(rng, rows: int, width: int) -> list[list[int]]:
    """req_to_token: distinct slots everywhere (a permutation of rows*width slots, from 1)."""
    slots = list(range(1, rows * width + 1))
    rng.shuffle(slots)
    return [slots[r * width:(r + 1) * width] for r in range(rows)]


def _write(kernels, case: KernelCase) -> int:
    k, rng = case.knobs, case.rng()
    bs = min(k["bs"], k["pool_rows"])
    width = k["max_len"]
    pool = _pool(rng, k["pool_rows"], width)
    rows = rng.sample(range(k["pool_rows"]), bs)
    spans = [sorted(rng.choices(range(width + 1), k=2)) for _ in range(bs)]
    if k.get("input_class") == "empty_ranges":  # one request extends by nothing
        at = rng.randrange(width + 1)
        spans[rng.randrange(bs)] = [at, at]
    total = sum(e - s for s, e in spans)
    loc = [rng.randrange(10**6, 2 * 10**6) for _ in range(total)]
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    got = kernels.req_to_token_write(torch.tensor(pool, dtype=torch.int32), t(rows),
                                     t([s for s, _ in spans]), t([e for _, e in spans]), t(loc))
    got = torch.as_tensor(got).to(torch.int64).tolist()
    want, at = [list(r) for r in pool], 0
    for r, (s, e) in zip(rows, spans):
        want[r][s:e] = loc[at:at + e - s]
        at += e - s
    if got != want:
        r, c = next((r, c) for r in range(len(want)) for c in range(width)
                    if got[r][c] != want[r][c])
        raise OracleFailure(NAME, "req_to_token", f"req_to_token[{r}][{c}] = {got[r][c]}, "
                            f"reference {want[r][c]}; pool rows {rows}, ranges {spans}")
    return total


def _seq_len(rng, where: str, max_len: int, page: int) -> int:
    if where == "any":
        return rng.randint(1, max_len)
    pages = rng.randint(1, max(1, max_len // page))
    return pages * page + (where == "page_plus_one")


def _draft(kernels, case: KernelCase) -> int:
    k, rng = case.knobs, case.rng()
    bs, topk, steps, page = min(k["bs"], k["pool_rows"]), k["topk"], k["num_steps"], k["page_size"]
    seq_lens = [_seq_len(rng, k.get("lengths", "any"), k["max_len"], page) for _ in range(bs)]
    # Each request's row must hold every branch's pages: base + topk * npb * page.
    need = max(L.branch_geometry(s, steps, page)[1] + topk * L.branch_geometry(s, steps, page)[2]
               * page for s in seq_lens)
    width = max(need, max(seq_lens) + topk * steps)
    pool = _pool(rng, k["pool_rows"], width)
    rows = rng.sample(range(k["pool_rows"]), bs)
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    got = kernels.draft_cache_locs(torch.tensor(pool, dtype=torch.int32), req_pool_indices=t(rows),
                                   seq_lens=t(seq_lens),
                                   topk=topk, num_steps=steps, page_size=page)
    out = torch.as_tensor(got["out_cache_loc"]).to(torch.int64).tolist()
    want = [x for r, s in zip(rows, seq_lens)
            for x in L.draft_out_cache_loc(pool[r], s, topk, steps, page)]
    where = f"seq_lens {seq_lens}, pool rows {rows}, topk {topk}, steps {steps}, page {page}"
    if out != want:
        i = next((i for i, (a, b) in enumerate(zip(out, want)) if a != b), min(len(out), len(want)))
        b, rest = divmod(i, topk * steps)
        raise OracleFailure(NAME, "draft_out_cache_loc", f"entry {i} (request {b}, branch "
                            f"{rest // steps}, step {rest % steps}): {out[i:i + 4]}, reference "
                            f"{want[i:i + 4]} (lengths {len(out)} vs {len(want)}); {where}")
    if got.get("copies") is not None:
        have = sorted((int(a), int(b)) for a, b in got["copies"])
        pairs = sorted((pool[r][src], pool[r][dst]) for r, s in zip(rows, seq_lens)
                       for dst, src in L.prefix_tail_copies(s, topk, steps, page))
        if have != pairs:
            raise OracleFailure(NAME, "prefix_tail_copies", f"(source, target) copies {have}, "
                                f"reference {pairs}; {where}")
    return len(out)


def check(kernels, case: KernelCase) -> dict:
    run = _write if case.knobs["component"] == Component.REQ_TO_TOKEN_WRITE.value else _draft
    return {"slots": run(kernels, case)}


LAW = Law(
    name=NAME, rank=620, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="req_to_token writes and draft cache locations (with the prefix-tail copies) are "
            "the slots of the reference layout, for every page size, topk and ragged batch",
    controls=("tests/test_kernel_law_controls.py::test_draft_slot_off_by_one_is_rejected",
              "tests/test_kernel_law_controls.py::test_req_to_token_write_dropping_a_slot_is_rejected",
              "tests/test_kernel_input_classes.py::test_a_mistake_of_the_class_is_caught_in_it"))
