"""Independent reference for positions and slots (contract sections 3 and 4).

Plain Python: ints, lists and loops, re-derived from docs/contract.md. Nothing here
imports or calls `specdec` or `kernels`: a reference that calls the code under test checks
nothing. Every function states its law in its docstring.

Worked example of section 4 (page 4, topk 2, steps 3, seq_len 6):

>>> draft_slot_positions(6, 2, 3, 4)
[[6, 7, 8], [14, 15, 16]]
>>> prefix_tail_copies(6, 2, 3, 4)
[(12, 4), (13, 5)]

Worked example of section 3 (EAGLE, prompt of 7 tokens, ndt 4, num_steps 3):

>>> draft_prefill_positions(7, shifted=True)
[0, 1, 2, 3, 4, 5, 6]
>>> draft_positions(7, 3, shifted=True)
[7, 8]
>>> draft_extend_positions(7, 4, shifted=True)
[7, 8, 9, 10]
"""
from __future__ import annotations


# -- positions (section 3) -------------------------------------------------------------------
def draft_prefill_positions(prompt_len: int, shifted: bool = True) -> list[int]:
    """Positions of the draft extend that follows prefill.

    EAGLE (shifted): the draft row at position p consumes (target hidden h_p, token t_{p+1}),
    so it runs over the prompt rotated left by one at the target's positions 0..L-1.
    Standalone draft (not shifted): its row p consumes t_p, so it covers the prompt and the
    pending bonus token at their own positions 0..L.
    """
    return list(range(prompt_len if shifted else prompt_len + 1))


def draft_positions(prefix_len: int, num_steps: int, shifted: bool = True) -> list[int]:
    """RoPE position of draft decode forward i, for i = 0 .. num_steps-2 (one per forward; every
    branch of that forward shares it).

    Law: forward i feeds the depth-(i+1) candidates at `prefix_len + i`; the increment happens
    AFTER the forward (positions `prefix_len + 1 + i` are SGLang #25015's off-by-one).
    `prefix_len` is the draft KV committed before the round:
    - EAGLE head (shifted=True): prefix_len = seq_len (the draft lags the target by one, draft
      position = target position - 1), so forward i runs at seq_len + i;
    - standalone draft (shifted=False): the caller passes prefix_len = seq_len + 1 (it also holds
      the pending bonus at position seq_len), so forward i runs at seq_len + 1 + i.
    The formula in terms of prefix_len is the same for both; `shifted` says which caller rule
    produced prefix_len. Example (EAGLE, prompt of 7): draft decode at [7] then [8].
    """
    if not shifted and prefix_len < 1:
        raise ValueError("a standalone draft's prefix_len is seq_len + 1 >= 1")
    return [prefix_len + i for i in range(num_steps - 1)]


def draft_extend_positions(seq_len_old: int, ndt: int, shifted: bool = True) -> list[int]:
    """Positions of the ndt draft-extend rows after a decode round (section 2 step 8).

    EAGLE: `seq_len_old .. seq_len_old + ndt - 1` (row j consumes accepted token j+1 with the
    target hidden at seq_len_old + j). Standalone: one later, `seq_len_old + 1 + j`, since its
    row at p consumes t_p and the old bonus at seq_len_old already has draft KV.
    Example (EAGLE, prompt of 7, ndt 4): [7, 8, 9, 10].
    """
    start = seq_len_old if shifted else seq_len_old + 1
    return [start + j for j in range(ndt)]


def verify_positions(seq_len: int, depths: list[int]) -> list[int]:
    """Target verify: node t sits at seq_len + depth(t); the root (depth 0) at seq_len."""
    return [seq_len + d for d in depths]


# -- slots (section 4) -----------------------------------------------------------------------
def branch_geometry(prefix_len: int, num_steps: int, page_size: int) -> tuple[int, int, int]:
    """(last, base, npb): `last` tokens of the prefix sit in its partial last page, which
    starts at `base`; each branch owns `npb = ceil((last + num_steps) / page_size)` pages."""
    last = prefix_len % page_size
    base = prefix_len - last
    npb = (last + num_steps + page_size - 1) // page_size
    return last, base, npb


def draft_slot_positions(prefix_len: int, topk: int, num_steps: int,
                         page_size: int) -> list[list[int]]:
    """POSITIONS (not slots) of branch k, step s as `[k][s]`.

    page_size == 1 or topk == 1: `prefix_len + k*num_steps + s` (branches back to back).
    Otherwise (per-branch pages): branch k owns positions
    `[base + k*npb*page_size, base + (k+1)*npb*page_size)` and its step s sits at
    `base + k*npb*page_size + last + s`; branch 0's first page is the request's partial page.
    """
    if page_size == 1 or topk == 1:
        return [[prefix_len + k * num_steps + s for s in range(num_steps)] for k in range(topk)]
    last, base, npb = branch_geometry(prefix_len, num_steps, page_size)
    out = []
    for k in range(topk):
        start = base + k * npb * page_size
        out.append([start + last + s for s in range(num_steps)])
    return out


def prefix_tail_copies(prefix_len: int, topk: int, num_steps: int,
                       page_size: int) -> list[tuple[int, int]]:
    """(target_position, source_position) of the prefix-tail copies, ordered by branch k then j.

    Only with page_size > 1 and topk > 1: for every branch k >= 1 the first `last` positions of
    its first page hold a copy of the prefix tail, positions `base .. prefix_len-1`, because a
    page-granular reader sees that page whole. Branch 0 needs none (it IS the partial page).
    """
    if page_size == 1 or topk == 1:
        return []
    last, base, npb = branch_geometry(prefix_len, num_steps, page_size)
    pairs = []
    for k in range(1, topk):
        for j in range(last):
            pairs.append((base + k * npb * page_size + j, base + j))
    return pairs


def draft_out_cache_loc(req_to_token_row, prefix_len: int, topk: int, num_steps: int,
                        page_size: int) -> list[int]:
    """The draft decode's write slots of one request, flat `[topk*num_steps]` in layout
    `[topk, num_steps]`: entry k*num_steps + s is `req_to_token_row[position(k, s)]`."""
    row = _as_list(req_to_token_row)
    flat = []
    for branch in draft_slot_positions(prefix_len, topk, num_steps, page_size):
        for p in branch:
            flat.append(int(row[p]))
    return flat


def per_step_rows(flat_loc, bs: int, topk: int, num_steps: int) -> list[list[int]]:
    """`[bs*topk*num_steps]` in layout `[bs, topk, num_steps]` -> num_steps lists; list s holds
    draft forward s's write targets in that forward's row order b*topk + k."""
    flat = _as_list(flat_loc)
    if len(flat) != bs * topk * num_steps:
        raise ValueError(f"len {len(flat)} != bs*topk*num_steps = {bs * topk * num_steps}")
    rows = []
    for s in range(num_steps):
        row = []
        for b in range(bs):
            for k in range(topk):
                row.append(int(flat[(b * topk + k) * num_steps + s]))
        rows.append(row)
    return rows


# -- draft decode KV reads (sections 2 and 4) -----------------------------------------------
def draft_branch_reads(req_to_token_row, *, prefix_len: int, topk: int, num_steps: int,
                       page_size: int, branch: int, step: int) -> list[tuple[int, ...]]:
    """The KV slots branch `branch` attends to in draft decode step `step`, in order, each
    entry the tuple of slots that serve: the prefix (positions 0 .. prefix_len-1 of the row),
    then the branch's draft slots of steps 0..step (`draft_out_cache_loc`: the forward that
    writes step s reads itself and its ancestors, depths 1..s+1, all in its own branch).

    With page_size > 1 and topk > 1, a branch k >= 1 holds a copy of the prefix tail in its
    first page (`prefix_tail_copies`); a page-granular reader sees the copy, a token-granular
    one the original: both hold the same KV, so either slot serves there.
    Example (section 4's: page 4, topk 2, steps 3, prefix 6; row = slots 100..123): branch 1,
    step 1 reads (100,) .. (103,), (104, 112), (105, 113), (114,), (115,).
    """
    row = _as_list(req_to_token_row)
    entries = [(int(row[p]),) for p in range(prefix_len)]
    last = branch_geometry(prefix_len, num_steps, page_size)[0]
    copies = prefix_tail_copies(prefix_len, topk, num_steps, page_size)
    for target, source in copies[(branch - 1) * last:branch * last] if branch else []:
        entries[source] = (int(row[source]), int(row[target]))
    drafts = draft_out_cache_loc(row, prefix_len, topk, num_steps, page_size)
    entries += [(s,) for s in drafts[branch * num_steps:branch * num_steps + step + 1]]
    return entries


def draft_decode_kv_reads(req_to_token, *, req_pool_indices, prefix_lens, topk: int,
                          num_steps: int, page_size: int) -> list[tuple[list[int], list]]:
    """Per draft decode step i = 0 .. num_steps-1: (kv_indptr, entries) of the batch.

    Rows r = b*topk + k, request-major; row r's `prefix_len_b + i + 1` entries
    (`draft_branch_reads`) start at kv_indptr[r], so kv_indptr[r] =
    sum over earlier rows of their lengths and kv_indptr[0] = 0. The forwards of a round are
    i <= num_steps-2 (section 2); step num_steps-1 reads every draft slot of the branch."""
    rows, lens = _as_list(req_pool_indices), _as_list(prefix_lens)
    out = []
    for i in range(num_steps):
        ptr, entries = [0], []
        for r, n in zip(rows, lens):
            for k in range(topk):
                reads = draft_branch_reads(req_to_token[int(r)], prefix_len=int(n), topk=topk,
                                           num_steps=num_steps,
                                           page_size=page_size, branch=k, step=i)
                entries += reads
                ptr.append(ptr[-1] + len(reads))
        out.append((ptr, entries))
    return out


def _as_list(x) -> list:
    """Accept a list or a tensor (torch only to convert)."""
    return x.tolist() if hasattr(x, "tolist") else list(x)
