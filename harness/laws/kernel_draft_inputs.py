"""Law kernel_draft_inputs, over any kernel adapter with DRAFT_EXTEND_INPUTS or
DRAFT_NEXT_TOKEN: after a verify round, the EAGLE drafter's next forward takes what the
round verified, where the contract puts it (harness/references/draft_inputs.py):

- draft extend inputs: request b's v = num_accepted[b] + 1 verified tokens (its pending
  token and accepted drafts) at positions seq_lens[b] + i, laid out "padded" (the verify
  batch's own layout, rejected drafts left in place) or "packed" (back to back); a layout
  named "<layout>-<kernel>" is that layout made by another of the engine's kernels (vLLM's
  "padded-mrv2": Model Runner V2's beside V1's), held to the same contract;
  last_token_indices[b] = the flat index of its last verified token (where the next draft
  token is sampled); packed source_indices = the verify-batch index of each token. Every
  output the kernel makes is checked; padded entries past v are padding (not checked).
  Where the kernel makes them: the drafter's input ids (the verified tokens shifted by one,
  the request's next token at its last index), num_rejected = drafts - accepted, the
  drafter's query_start_loc and seq_lens (the verify batch's own, rejected drafts included,
  in the padded layout), and the entries a kernel pads past the batch for CUDA graphs
  (last_token_indices and seq_lens 0, query_start_loc the total, the draft step 0).
- draft next token: a kept request continues from its row's last emitted token (the
  accepted drafts, then the bonus or recovered token, then -1), valid_count = the emitted
  tokens; a row that emitted none, or a discarded request, takes its backup token (a
  discarded request's valid_count is 0, whatever its row holds).

Drawn in one input class per example (CLASSES: none_accepted, all_accepted, no_drafts,
batch_one, discarded, plain): batch size 1 to 5, per-request draft counts (ragged where the
adapter takes it; 0 drafts included), accepted counts 0, all and in between, sequence
lengths from 1, every layout the adapter takes; sampled rows empty, partial and full, tokens
up to vocab - 1, discarded requests with garbage rows."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.references import draft_inputs as R
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_draft_inputs"
NEEDS = frozenset({Component.DRAFT_EXTEND_INPUTS, Component.DRAFT_NEXT_TOKEN})


# The input classes as the callers make them (docs/adapters.md), each drawn on purpose and
# counted as a corner: none_accepted (every draft rejected: the drafter restarts from the
# bonus alone), all_accepted (drafts at their maximum, all kept), no_drafts (requests that
# drafted nothing: an n-gram miss, a prefill chunk), batch_one, discarded (requests the
# scheduler dropped mid-round, their rows garbage).
CLASSES = ("plain", "none_accepted", "all_accepted", "no_drafts", "batch_one", "discarded")


@st.composite
def _knobs(draw, kernels) -> dict:
    have = sorted(c.value for c in NEEDS & set(kernels.components))
    cls = draw(st.sampled_from(CLASSES))
    accept = {"none_accepted": "none", "all_accepted": "all"}.get(cls)
    nxt = Component.DRAFT_NEXT_TOKEN.value
    return {"component": draw(st.sampled_from([nxt] if cls == "discarded" and nxt in have
                                              else have)),
            "bs": 1 if cls == "batch_one" else draw(st.integers(1, 5)),
            "layout": draw(st.sampled_from(kernels.accepts.get("draft_extend_layouts",
                                                               ("padded",)))),
            "max_drafts": 0 if cls == "no_drafts" else draw(st.integers(
                1 if accept else 0, 6)),
            "ragged": (bool(kernels.accepts.get("ragged_drafts")) and cls != "all_accepted"
                       and draw(st.booleans())),
            # Accepted counts: none, all, or drawn per request.
            "accept": accept or draw(st.sampled_from(["none", "all", "mixed"])),
            "max_len": draw(st.integers(1, 60)), "vocab": draw(st.integers(2, 50)),
            "discard": (draw(st.sampled_from([0.3, 1.0])) if cls == "discarded"
                        else draw(st.sampled_from([0.0, 0.3, 1.0]))),
            "input_class": cls}


def cases(kernels):
    return kernel_cases(NAME, kernels, _knobs(kernels))


def _round(case: KernelCase):
    """seq_lens, num_drafts, num_accepted of the case's batch."""
    k, rng = case.knobs, case.rng()
    bs, top = k["bs"], k["max_drafts"]
    drafts = [rng.randint(0, top) if k["ragged"] else top for _ in range(bs)]
    pick = {"none": lambda n: 0, "all": lambda n: n, "mixed": lambda n: rng.randint(0, n)}
    accepted = [pick[k["accept"]](n) for n in drafts]
    return [rng.randint(1, k["max_len"]) for _ in range(bs)], drafts, accepted


def _list(x) -> list[int] | None:
    return None if x is None else torch.as_tensor(x).to(torch.int64).reshape(-1).tolist()


def _extend(kernels, case: KernelCase) -> int:
    seq, drafts, accepted = _round(case)
    layout = case.knobs["layout"]
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    got = kernels.draft_extend_inputs(t(seq), t(drafts), t(accepted), layout)
    # "<layout>-<kernel>": another kernel of the same layout, so the same reference.
    want = R.draft_extend(seq, drafts, accepted, layout.split("-")[0])
    where = (f"seq_lens {seq}, num_drafts {drafts}, num_accepted {accepted}, layout {layout}")
    outs = {key: _list(got.get(key)) for key in ("positions", "last_token_indices",
                                                  "source_indices")}
    if all(v is None for v in outs.values()):
        raise OracleFailure(NAME, "no_outputs", f"the kernel returned no output; {where}")
    if outs["last_token_indices"] is not None and \
            outs["last_token_indices"] != want["last_token_indices"]:
        raise OracleFailure(NAME, "last_token_indices", f"last_token_indices "
                            f"{outs['last_token_indices']}, reference "
                            f"{want['last_token_indices']}; {where}")
    for key in ("num_rejected", "seq_lens", "query_start_loc"):
        have = _list(got.get(key))
        if have is not None and have != want[key]:
            raise OracleFailure(NAME, key, f"{key} {have}, reference {want[key]}; {where}")
    pad = got.get("graph_padding") or {}
    for key, value in (("last_token_indices", 0), ("seq_lens", 0),
                       ("query_start_loc", want["total"]), ("draft_step", 0)):
        have = _list(pad.get(key))
        if have is not None and any(v != value for v in have):
            raise OracleFailure(NAME, f"padding_{key}", f"{key} past the batch (CUDA-graph "
                                f"padding) {have}, expected {value} each; {where}")
    outs["input_ids"] = _list(got.get("input_ids"))
    for key in ("positions", "source_indices", "input_ids"):
        have, ref = outs[key], want[key]
        if have is None or ref is None:
            continue
        if len(have) < want["total"]:
            raise OracleFailure(NAME, key, f"{len(have)} entries, reference {want['total']}; "
                                f"{where}")
        bad = [(i, have[i], v) for i, v in sorted(ref.items()) if have[i] != v]
        if bad:
            raise OracleFailure(NAME, key, f"(index, got, reference) {bad[:4]} of {key} "
                                f"{have}; {where}")
    return sum(accepted) + len(accepted)


def _sampled(case: KernelCase):
    """-1 padded rows of width max_drafts + 1, discard flags, backup tokens."""
    k, rng = case.knobs, case.rng()
    width, vocab = k["max_drafts"] + 1, k["vocab"]
    rows, discard = [], []
    for _ in range(k["bs"]):
        n = rng.choice([0, width, rng.randint(0, width)])
        rows.append([rng.randrange(vocab) for _ in range(n)] + [-1] * (width - n))
        discard.append(rng.random() < k["discard"])
    return rows, discard, [rng.randrange(vocab) for _ in range(k["bs"])]


def _next(kernels, case: KernelCase) -> int:
    rows, discard, backup = _sampled(case)
    got = kernels.draft_next_token(torch.tensor(rows, dtype=torch.int64), torch.tensor(discard),
                                   torch.tensor(backup, dtype=torch.int64), case.knobs["vocab"])
    want = R.next_token(rows, discard, backup)
    where = f"sampled {rows}, discard {discard}, backup {backup}, vocab {case.knobs['vocab']}"
    for key in ("next_token", "valid_count"):
        if _list(got[key]) != want[key]:
            raise OracleFailure(NAME, key, f"{key} {_list(got[key])}, reference {want[key]}; "
                                f"{where}")
    return len(rows)


def check(kernels, case: KernelCase) -> dict:
    run = _extend if case.knobs["component"] == Component.DRAFT_EXTEND_INPUTS.value else _next
    return {"requests": run(kernels, case)}


LAW = Law(
    name=NAME, rank=650, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="the drafter's inputs after verify (positions, last-token and source indices in "
            "the padded or packed layout; the next token with discarded requests) are the "
            "reference's, for ragged, empty and full acceptance",
    controls=tuple(f"tests/test_kernel_controls_draft_inputs.py::{t}" for t in (
        "test_positions_off_by_one_are_rejected",
        "test_last_index_of_previous_request_is_rejected",
        "test_next_token_ignoring_discard_is_rejected")) + (
        "tests/test_kernel_input_classes.py::test_a_mistake_of_the_class_is_caught_in_it",))
