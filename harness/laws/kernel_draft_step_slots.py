"""Law kernel_draft_step_slots, over any kernel adapter with DRAFT_STEP_SLOTS: each EAGLE
autoregressive draft step writes its token's KV where the request's own paged layout puts
that token's position, and nowhere else (harness/references/draft_step.py).

A request whose last verified token is at position q0 (seq_len q0 + 1) feeds draft step s
the token at position q = q0 + s, steps chained as the drafter chains them (each step's
positions and seq_lens are the next step's inputs, in the engine's own buffers):
- q < max_model_len: the slot is block_table[b, q // B] * B + q % B (the request's own
  block table, whatever physical blocks it holds: shared prefix blocks included), the
  position q and the seq_len q + 1;
- q >= max_model_len (the drafter keeps such requests in the batch, their drafts
  discarded): the step writes no KV, the padding slot -1, at this step and every later one
  (a later step's q is larger still), whatever position it hands RoPE, which must lie in
  [0, max_model_len), and a seq_len in [1, max_model_len];
- every row past the batch (CUDA-graph padding) gets the padding slot.

Drawn (input classes, counted as corners): a position crossing onto a new block, a request
that reaches the model's length with steps left after it, graph padding, batch size one,
requests sharing their first (prefix-cached) blocks; block sizes 1 to 256 and not only
powers of two, block tables as the caller passes them (every row max_model_len / B wide,
physical blocks a permutation of a pool)."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.base.known import drawn_around
from harness.laws.declaration import Law
from harness.references.draft_step import PAD_SLOT, draft_steps
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_draft_step_slots"
NEEDS = frozenset({Component.DRAFT_STEP_SLOTS})
CLASSES = ("plain", "block_boundary", "model_end", "graph_padding", "batch_one",
           "shared_prefix")
BLOCK_SIZES = (1, 2, 3, 4, 5, 8, 16, 32, 64, 128, 256)

# The request reaches max_model_len at its first draft step with two steps after it: a
# step past the end must write no KV, and so must the steps that follow it.
EXAMPLES = ({"seed": 7, "knobs": {"input_class": "model_end", "bs": 2, "block_size": 4,
                                  "max_model_len": 16, "steps": 3, "padding": 0}},)


@st.composite
def _knobs(draw, kernels) -> dict:
    cls = draw(st.sampled_from(CLASSES))
    return {"input_class": cls, "bs": 1 if cls == "batch_one" else draw(st.integers(2, 6)),
            "block_size": draw(st.sampled_from(BLOCK_SIZES)),
            "max_model_len": draw(st.integers(2, 2048)), "steps": draw(st.integers(1, 5)),
            "padding": draw(st.integers(1, 5)) if cls == "graph_padding" else 0}


def cases(kernels):
    return kernel_cases(NAME, kernels, _knobs(kernels))


def batch(case: KernelCase) -> dict:
    """Each request's last verified position q0 and its block table row, as the drafter's
    caller holds them: blocks up to the last position the steps can reach are allocated
    (physical ids from a shuffled pool, shared prefix blocks in that class), the rest of
    the row stale ids of the pool."""
    k, rng = case.knobs, case.rng()
    B, M, steps, bs = k["block_size"], k["max_model_len"], k["steps"], k["bs"]
    width = -(-M // B)
    start = [rng.randrange(M) for _ in range(bs)]
    cls = k["input_class"]
    if cls == "block_boundary" and B > 1:
        for b in rng.sample(range(bs), max(1, bs // 2)):
            start[b] = rng.randrange(B - 1, M, B) if M > B - 1 else start[b]
    if cls == "model_end":  # one request crosses the end with steps left, one is already at it
        start[0] = max(0, M - 1 - rng.randrange(max(1, steps - 1)))
        if bs > 1:
            start[1] = M - 1
    pool = list(range(bs * width + 8))
    rng.shuffle(pool)
    shared = pool[:rng.randint(1, width)] if cls == "shared_prefix" else []
    fresh = iter(pool[len(shared):])
    table = []
    for q in start:
        used = min(M - 1, q + steps) // B + 1
        row = shared[:used] + [next(fresh) for _ in range(used - len(shared[:used]))]
        table.append(row + [rng.choice(pool) for _ in range(width - used)])
    return {"start": start, "block_table": table}


def check(kernels, case: KernelCase) -> dict:
    k = case.knobs
    b = batch(case)
    bs, M = k["bs"], k["max_model_len"]
    got = kernels.draft_step_slots(
        torch.tensor(b["start"], dtype=torch.int64),
        torch.tensor(b["block_table"], dtype=torch.int32),
        torch.tensor([q + 1 for q in b["start"]], dtype=torch.int32),
        block_size=k["block_size"], max_model_len=M, padded_bs=bs + k["padding"],
        steps=k["steps"])
    where = (f"start positions {b['start']}, block size {k['block_size']}, max_model_len {M}, "
             f"graph padding {k['padding']}; block table {b['block_table']}")
    # A recorded finding of this release (accepts["known"]) is the steps after a request's
    # first one past max_model_len: drawn around by checking none of them.
    known = bool(drawn_around(kernels.accepts, law=NAME))
    for s, want in enumerate(draft_steps(b["start"], b["block_table"], k["block_size"], M,
                                         k["steps"]), start=1):
        if known and s > 1 and any(q > M for q in want["positions"]):
            break
        slots = torch.as_tensor(got["slot_mapping"][s - 1]).tolist()
        pos = torch.as_tensor(got["positions"][s - 1]).tolist()
        lens = torch.as_tensor(got["seq_lens"][s - 1]).tolist()
        for r in range(bs):
            q, past = want["positions"][r], want["past_end"][r]
            if slots[r] != want["slots"][r]:
                what = "writes KV past the model's length" if past else "a wrong slot"
                raise OracleFailure(NAME, "past_end_slot" if past else "slot",
                                    f"step {s}, request {r} at position {q}: slot "
                                    f"{slots[r]}, expected {want['slots'][r]} ({what}); {where}")
            if not past and (pos[r], lens[r]) != (q, q + 1):
                raise OracleFailure(NAME, "position", f"step {s}, request {r}: position "
                                    f"{pos[r]}, seq_len {lens[r]}, expected {q}, {q + 1}; "
                                    f"{where}")
            if past and not (0 <= pos[r] < M and 1 <= lens[r] <= M):
                raise OracleFailure(NAME, "past_end_position", f"step {s}, request {r} past "
                                    f"the end (position {q}): position {pos[r]}, seq_len "
                                    f"{lens[r]}, expected within [0, {M}) and [1, {M}]; "
                                    f"{where}")
        pad = slots[bs:bs + k["padding"]]
        if len(pad) != k["padding"] or any(v != PAD_SLOT for v in pad):
            raise OracleFailure(NAME, "padding", f"step {s}: slots past the batch (CUDA-graph "
                                f"padding) {pad}, expected {k['padding']} x {PAD_SLOT}; {where}")
    return {"steps": k["steps"] * bs}


LAW = Law(
    name=NAME, rank=660, check=check, cases=cases, needs=NEEDS, door="kernels",
    examples=EXAMPLES,
    summary="each chained draft step writes its token's KV at its true position's slot in "
            "the request's own block table, and none at or past max_model_len (the padding "
            "slot, then and at every later step) nor in CUDA-graph padding rows",
    controls=tuple(f"tests/test_kernel_controls_draft_step_slots.py::{t}" for t in (
        "test_block_of_the_previous_position_is_rejected",
        "test_unwritten_graph_padding_is_rejected",
        "test_stepping_from_the_clamped_position_is_rejected")))
