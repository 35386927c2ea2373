"""A whole greedy speculative round as one captured phase: draft decode, the tree, target
verify, greedy acceptance with the accepted path's compaction, and the draft extend.

Why: at small batches a round is bound by the host, which launches each phase's graph and
the eager work between them (tree building, acceptance, the copies of one phase's outputs
into the next one's static inputs): about 90 launches a round against 20 for a plain decode
step (bench/results/e2e-host-profile-h100-2026-11-25.txt). Captured together, a round is
one graph replay. The phases are the same objects the separate graphs run (phases.py,
draft_decode_phase.py), composed: every padded lane gets exactly the inputs their own
runners pad with, so the two paths agree bit for bit (the eager_vs_graph law compares them
with the eager phases).

Only greedy, top-token rounds are captured whole: sampled acceptance selects its rows on the
host (verify.py), and phase timing needs the phases apart. RoundRunner picks this phase when
a graph of the batch's bucket exists, and the separate phases otherwise. The attention
metadata must derive on the device (it does for both backends): only the draft's is
refreshed at replay, since the verify and extend batches exist only inside the graph.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from kernels.tree import tree_column_offsets
from specdec.attention.metadata import request_page_table
from specdec.graphs.runner import SEQ_LEN_FILL, InputSpec
from specdec.graphs.standin import kernel_node
from specdec.spec.draft_decode_phase import (DraftDecodeInputs, DraftDecodeOutputs,
                                             DraftDecodePhase, DraftDecodePrepared, DraftTree)
from specdec.spec.phases import (DraftExtendInputs, DraftExtendOutputs, DraftExtendPhase,
                                 DraftExtendPrepared, Phase, VerifyInputs, VerifyOutputs,
                                 VerifyPhase, WriteSlots)
from specdec.spec.verify import BuiltTree, Verifier, VerifyResult


@dataclass(frozen=True)
class GreedyRoundInputs:
    """The draft decode's inputs (the round's rows, lengths, prefixes, branch positions) and
    the pending bonus token: everything else derives on the device."""

    req_pool_indices: torch.Tensor  # [bs] request rows (padding: reserved row 0)
    seq_lens: torch.Tensor          # [bs] committed target length
    kv_prefix_lens: torch.Tensor    # [bs] the draft prefix
    positions: torch.Tensor         # [bs*topk] each branch's first position
    pending: torch.Tensor           # [bs] the bonus token: the tree's root
    seq_lens_sum: int               # host sum of the live seq_lens (an upper bound)
    custom_mask: torch.Tensor | None = None  # the verify's static tree mask (load_extra)
    padded_seq_lens_sum: int = 0    # seq_lens_sum over the padded batch (load_extra)

    def draft_inputs(self, req_page_table: torch.Tensor | None = None) -> DraftDecodeInputs:
        return DraftDecodeInputs(self.req_pool_indices, self.seq_lens, self.kv_prefix_lens,
                                 self.positions, req_page_table=req_page_table)


@dataclass(frozen=True)
class RoundMetadata:
    """The captured round's metadata: the request page table that every forward of the round
    reads, and the draft's per-forward metadata (the only metadata replay refreshes)."""

    req_page_table: torch.Tensor
    draft: list


@dataclass(frozen=True)
class GreedyRoundOutputs:
    """Every phase's inputs and outputs inside the round (the trace re-reads them after a
    replay), and what the round commits."""

    draft: DraftDecodeOutputs
    tree: BuiltTree
    verify_inputs: VerifyInputs
    verify_slots: WriteSlots
    verify_metadata: object | None   # captured only
    verify: VerifyOutputs
    accepted: VerifyResult
    extend_inputs: DraftExtendInputs
    extend_prepared: DraftExtendPrepared
    extend_metadata: object | None   # captured only
    extend: DraftExtendOutputs
    seq_lens: torch.Tensor           # [bs] committed length after the round


@dataclass(frozen=True)
class RoundResult:
    """A round's results for the live batch: views of the graph's outputs, which the round
    copies before the next replay."""

    accept_lens: torch.Tensor  # [bs] accepted drafts + 1
    accepted: torch.Tensor     # [bs*(num_steps+1)] the accepted tokens, stride num_steps + 1
    seq_lens: torch.Tensor     # [bs] committed length (what RowState.commit writes)
    pending: torch.Tensor      # [bs] the next round's bonus token


class GreedyRoundPhase(Phase):
    input_type = GreedyRoundInputs

    def __init__(self, draft: DraftDecodePhase, verify: VerifyPhase, extend: DraftExtendPhase,
                 verifier: Verifier) -> None:
        # Its own metadata is the draft's; the rest comes from the phases it composes.
        super().__init__(draft.kv, draft.paging, draft.kernels, draft.hooks)
        self.draft, self.verify, self.extend, self.verifier = draft, verify, extend, verifier
        self.inputs = {**draft.inputs, "pending": InputSpec(1)}

    def extra_static(self, size, static):
        # the full-context tree mask (and the draft's, which has none but under a fault)
        return {**self.draft.extra_static(size, static), **self.verify.extra_static(size, static)}

    def load_extra(self, live, bs, size, static):
        return self.verify.load_extra(live, bs, size, static)  # True where it is read

    def prepare(self, x: GreedyRoundInputs, size) -> DraftDecodePrepared:
        return self.draft.prepare(x.draft_inputs(), size)

    def capture_metadata(self, x: GreedyRoundInputs, prep, size) -> RoundMetadata:
        # The round's rows and their pages do not change within it: every forward's metadata
        # (the draft steps', the verify's, the extend's) reads one request page table.
        table = request_page_table(self.paging.req_to_token, x.req_pool_indices,
                                   self.paging.page_size)
        return RoundMetadata(table, self.draft.capture_metadata(x.draft_inputs(table), prep,
                                                                size))

    def replay_metadata(self, x: GreedyRoundInputs, prep, size, md: RoundMetadata) -> None:
        self.draft.replay_metadata(x.draft_inputs(md.req_page_table), prep, size, md.draft)

    def forward(self, x: GreedyRoundInputs, prep: DraftDecodePrepared, size, md,
                bs=None) -> GreedyRoundOutputs:
        ndt, steps, topk, dev = self.verify.ndt, self.draft.steps, self.draft.topk, self.device
        rows, seq = x.req_pool_indices, x.seq_lens
        real = rows > 0  # row 0: the reserved row of padded lanes
        # Captured: every forward reads the round's request page table (capture_metadata).
        table = None if md is None else md.req_page_table
        draft = self.draft.forward(x.draft_inputs(table), prep, size,
                                   None if md is None else md.draft, bs)

        # The tree, into the verify's static mask (True where read: load_extra). Padded
        # lanes keep all-True blocks, as the separate verify pads them.
        mask = x.custom_mask
        positions = torch.empty(size * ndt, dtype=torch.int64, device=dev)
        links = [torch.empty(size, ndt, dtype=torch.int64, device=dev) for _ in range(3)]
        kernel_node(self.kernels.build_tree_in_place, mask, positions, *links,
                    draft.parent_list, draft.top_scores_index, seq, topk, steps, ndt)
        if size > 1:  # a bucket of one lane has no padded lane (a round runs bs >= 1)
            cols = tree_column_offsets(seq, ndt).reshape(size, -1)
            mask[cols] = mask[cols] | ~real[:, None]
        lane = real[:, None].expand(size, ndt).reshape(-1)
        tokens = torch.cat([x.pending[:, None], draft.draft_tokens], 1).reshape(-1)
        tree = BuiltTree(mask, positions, *links, tokens)
        vx = VerifyInputs(torch.where(lane, tokens, 0), torch.where(lane, positions, 0), rows,
                          seq, mask, x.seq_lens_sum, x.padded_seq_lens_sum, table)
        vprep = self.verify.prepare(vx, size)
        vmd = None if md is None else self.verify.capture_metadata(vx, vprep, size)
        verified = self.verify.forward(vx, vprep, size, vmd, bs)
        res = self.verifier.accept(rows, seq_lens=seq, built=tree, logits=verified.logits,
                                   hidden=verified.hidden)
        new_seq = seq + res.accept_lens

        # Draft extend over the accepted path; padded lanes as its own runner pads them
        # (kv_prefix_lens: SEQ_LEN_FILL already).
        xx = DraftExtendInputs(torch.where(lane, res.predict, 0),
                               torch.where(lane[:, None], res.hidden, 0), rows,
                               torch.where(real, new_seq, SEQ_LEN_FILL), x.kv_prefix_lens,
                               torch.where(real, res.accept_lens, 0), table)
        xprep = self.extend.prepare(xx, size)
        xmd = None if md is None else self.extend.capture_metadata(xx, xprep, size)
        extended = self.extend.forward(xx, xprep, size, xmd, bs)
        return GreedyRoundOutputs(draft, tree, vx, vprep, vmd, verified, res, xx, xprep, xmd,
                                  extended, new_seq)

    def after_replay(self, x: GreedyRoundInputs, *, prep, size, bs, md: RoundMetadata,
                     out: GreedyRoundOutputs) -> None:
        """The trace the separate phases leave, in their order (specdec/trace.py)."""
        rec = self.hooks.recorder
        if rec is None:
            return
        ndt, width = self.verify.ndt, self.draft.steps + 1
        d = out.draft
        self.draft.after_replay(x.draft_inputs(md.req_page_table), prep=prep, size=size, bs=bs,
                                md=md.draft, out=d)
        n = bs * self.draft.topk * self.draft.steps
        rec.on_draft(DraftTree(d.parent_list[:bs], d.top_scores_index[:bs],
                               d.draft_tokens[:bs], d.out_cache_loc[:n]))
        # The verify's metadata sees this replay's padded sum (load_extra), not the capture's.
        vx = dataclasses.replace(out.verify_inputs, padded_seq_lens_sum=x.padded_seq_lens_sum)
        self.verify.after_replay(vx, prep=out.verify_slots, size=size, bs=bs,
                                 md=out.verify_metadata, out=out.verify)
        t, acc = out.tree, out.accepted
        used = ndt * x.seq_lens_sum + bs * ndt * ndt  # what build_tree would have allocated
        built = (t.tree_mask[:used], t.positions[:bs * ndt], t.retrieve_index[:bs],
                 t.retrieve_next_token[:bs], t.retrieve_next_sibling[:bs],
                 t.draft_tokens[:bs * ndt])
        rec.on_verify(built, out.verify.logits[:bs * ndt], acc.accept_index[:bs],
                      acc.accept_lens[:bs], acc.accepted_tokens[:bs * width])
        self.extend.after_replay(out.extend_inputs, prep=out.extend_prepared, size=size, bs=bs,
                                 md=out.extend_metadata, out=out.extend)

    def slice_outputs(self, out: GreedyRoundOutputs, bs) -> RoundResult:
        width = self.draft.steps + 1
        acc = out.accepted
        return RoundResult(acc.accept_lens[:bs], acc.accepted_tokens[:bs * width],
                           out.seq_lens[:bs], acc.pending[:bs])
