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

import torch

from kernels.tree import tree_column_offsets
from specdec.attention.metadata import request_page_table
from specdec.graphs.runner import SEQ_LEN_FILL, InputSpec
from specdec.graphs.standin import kernel_node
from specdec.spec.draft import DraftTree
from specdec.spec.phases import Phase


class GreedyRoundPhase(Phase):
    def __init__(self, engine, draft, verify, extend, verifier) -> None:
        super().__init__(engine)
        self.draft, self.verify, self.extend, self.verifier = draft, verify, extend, verifier
        # The draft decode's inputs (the round's rows, lengths, prefixes, branch positions)
        # and the pending bonus token: everything else derives on the device.
        self.inputs = {**draft.inputs, "pending": InputSpec(1)}

    @property
    def e_backend(self):
        return self.e.draft_backend

    def extra_static(self, size, static):
        return self.verify.extra_static(size, static)  # the full-context tree mask

    def load_extra(self, live, bs, size, static_views):
        self.live_sum = live["seq_lens_sum"]  # the trace's mask length (after_replay)
        return self.verify.load_extra(live, bs, size, static_views)  # True where it is read

    def prepare(self, v, size):
        return self.draft.prepare(v, size)

    def capture_metadata(self, v, size):
        # The round's rows and their pages do not change within it: every forward's metadata
        # (the draft steps', the verify's, the extend's) reads one request page table.
        v["req_page_table"] = request_page_table(self.e.req_to_token, v["req_pool_indices"],
                                                 self.e.page_size)
        return {"draft": self.draft.capture_metadata(v, size)}  # verify's, extend's: forward

    def replay_metadata(self, v, size, md) -> None:
        self.draft.replay_metadata(v, size, md["draft"])

    def forward(self, v, size, md, bs=None):
        spec, dev = self.e.spec, self.e.device
        ndt, steps = spec.ndt, spec.num_steps
        rows, seq = v["req_pool_indices"], v["seq_lens"]
        real = rows > 0  # row 0: the reserved row of padded lanes
        draft = self.draft.forward(v, size, None if md is None else md["draft"], bs)

        # The tree, into the verify's static mask (True where read: load_extra). Padded
        # lanes keep all-True blocks, as the separate verify pads them.
        mask = v["custom_mask"]
        positions = torch.empty(size * ndt, dtype=torch.int64, device=dev)
        links = [torch.empty(size, ndt, dtype=torch.int64, device=dev) for _ in range(3)]
        kernel_node(self.e.kernels.build_tree_in_place, mask, positions, *links,
                    draft["parent_list"], draft["top_scores_index"], seq, spec.topk, steps, ndt)
        if size > 1:  # a bucket of one lane has no padded lane (a round runs bs >= 1)
            cols = tree_column_offsets(seq, ndt).reshape(size, -1)
            mask[cols] = mask[cols] | ~real[:, None]
        lane = real[:, None].expand(size, ndt).reshape(-1)
        tokens = torch.cat([v["pending"][:, None], draft["draft_tokens"]], 1).reshape(-1)
        built = (mask, positions, *links, tokens)
        # Captured: every forward reads the round's request page table (capture_metadata).
        shared = {"req_page_table": v["req_page_table"]} if "req_page_table" in v else {}
        vv = {"input_ids": torch.where(lane, tokens, 0), "positions": torch.where(lane, positions, 0),
              "req_pool_indices": rows, "seq_lens": seq, "custom_mask": mask, **shared}
        vv.update(self.verify.prepare(vv, size))
        vmd = None  # eager: each forward builds its own metadata
        if md is not None:  # capture: this batch's metadata, kept for after_replay
            vmd = md["verify"] = self.verify.capture_metadata(vv, size)
        verified = self.verify.forward(vv, size, vmd, bs)
        res = self.verifier.accept(rows, seq, built, verified["logits"], verified["hidden"])
        new_seq = seq + res.accept_lens

        # Draft extend over the accepted path; padded lanes as its own runner pads them.
        xv = {"input_ids": torch.where(lane, res.predict, 0),
              "hidden": torch.where(lane[:, None], res.hidden, 0),
              "req_pool_indices": rows,
              "seq_lens": torch.where(real, new_seq, SEQ_LEN_FILL),
              "kv_prefix_lens": v["kv_prefix_lens"],  # padded lanes: SEQ_LEN_FILL already
              "accept_lens": torch.where(real, res.accept_lens, 0), **shared}
        xv.update(self.extend.prepare(xv, size))
        xmd = None
        if md is not None:
            xmd = md["extend"] = self.extend.capture_metadata(xv, size)
        extended = self.extend.forward(xv, size, xmd, bs)
        return {"draft": draft, "built": built, "verify_views": vv, "verify": verified,
                "extend_views": xv, "extend": extended, "accept_lens": res.accept_lens,
                "accepted": res.accepted_tokens, "accept_index": res.accept_index,
                # what the round commits to the device row state (rounds.py: RowState.commit)
                "seq_lens": new_seq, "pending": res.pending}

    def after_replay(self, v, size, bs, md, outs) -> None:
        """The trace the separate phases leave, in their order (specdec/trace.py)."""
        rec = self.e.recorder
        if rec is None:
            return
        ndt, width = self.e.spec.ndt, self.e.spec.num_steps + 1
        d = outs["draft"]
        self.draft.after_replay(v, size, bs, md["draft"], d)
        n = bs * self.draft.topk * self.draft.steps
        rec.on_draft(DraftTree(d["parent_list"][:bs], d["top_scores_index"][:bs],
                               d["draft_tokens"][:bs], d["out_cache_loc"][:n]))
        self.verify.after_replay(outs["verify_views"], size, bs, md["verify"], outs["verify"])
        mask, positions, r_index, r_next, r_sib, tokens = outs["built"]
        used = ndt * self.live_sum + bs * ndt * ndt  # what build_tree would have allocated
        built = (mask[:used], positions[:bs * ndt], r_index[:bs], r_next[:bs], r_sib[:bs],
                 tokens[:bs * ndt])
        rec.on_verify(built, outs["verify"]["logits"][:bs * ndt], outs["accept_index"][:bs],
                      outs["accept_lens"][:bs], outs["accepted"][:bs * width])
        self.extend.after_replay(outs["extend_views"], size, bs, md["extend"], outs["extend"])

    def slice_outputs(self, outs, bs):
        width = self.e.spec.num_steps + 1
        return {"accept_lens": outs["accept_lens"][:bs], "accepted": outs["accepted"][:bs * width],
                "seq_lens": outs["seq_lens"][:bs], "pending": outs["pending"][:bs]}
