"""One step of generation: prefill, a plain decode step, or a speculative round
(contract section 2)."""
from __future__ import annotations

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.forward import run_forward
from specdec.host import to_device
from specdec.overlap import PLACEHOLDER, InFlight, RowState, lagging
from specdec.request import Req
from specdec.sampler import batch_sampling, choose_tokens
from specdec.graphs.cuda_graph import GraphFactory
from specdec.graphs.runner import PhaseRunner
from specdec.spec.context import ModelKV, Paging
from specdec.spec.draft import DraftWorker
from specdec.spec.draft_decode_phase import DraftDecodePhase
from specdec.spec.layout import branch_positions, draft_reserve_end
from specdec.spec.phases import (DecodeInputs, DecodePhase, DraftExtendInputs, DraftExtendPhase,
                                 VerifyPhase)
from specdec.spec.round_phase import GreedyRoundInputs, GreedyRoundPhase
from specdec.spec.verify import Verifier


class RoundRunner:
    def __init__(self, engine, cuda_graph: bool, buckets: list[int], batch_invariant: bool) -> None:
        self.e = engine
        self.dev = engine.device
        factory = GraphFactory(engine.device) if cuda_graph else None
        self.state = RowState(engine.max_batch + 1, engine.device)

        def runner(phase):
            r = PhaseRunner(phase, device=engine.device, use_graph=cuda_graph, buckets=buckets,
                            max_bs=engine.max_batch,
                            batch_invariant=batch_invariant, factory=factory)
            group = engine.tp_group
            if group is not None:
                r.tp_rank, r.tp_agree = group.rank, group if engine.tp_check else None
                r.on_capture = group.graphs.add  # ended before the group (tp/captured.py)
            return r

        # The phases get what they use (models with their KV pools, the page table, the
        # kernels, the config), never the engine; `hooks` is how the trace and the phase
        # timer reach them once attached.
        paging, k, hooks = (Paging(engine.req_to_token, engine.page_size), engine.kernels,
                            engine.hooks)
        target = ModelKV(engine.target, engine.target_backend)
        self.fused = None
        if engine.spec is None:
            self.decode_runner = runner(DecodePhase(target, paging, k, hooks))
        else:
            spec, draft = engine.spec, ModelKV(engine.drafter, engine.draft_backend)
            verify = VerifyPhase(target, paging=paging, kernels=k, hooks=hooks, ndt=spec.ndt,
                                 max_context=engine.max_context)
            decode = DraftDecodePhase(draft, paging=paging, kernels=k, hooks=hooks,
                                      state=engine.draft_state, spec=spec,
                                      max_batch=engine.max_batch, vocab_size=engine.cfg.vocab_size)
            extend = DraftExtendPhase(draft, paging=paging, kernels=k, hooks=hooks,
                                      state=engine.draft_state, spec=spec,
                                      target_hidden_size=engine.cfg.hidden_size, dtype=engine.dtype)
            self.verifier = Verifier(target, paging=paging, kernels=k, spec=spec, hooks=hooks)
            # The whole greedy round (top-token drafts: sampled drafting selects rows on the
            # host), then verify, draft decode and extend: each captures a bucket on first use
            # into the shared pool (Engine.capture_graphs: all of them, largest first).
            if cuda_graph and not spec.probabilistic:
                self.fused = runner(GreedyRoundPhase(decode, verify, extend, self.verifier))
            self.verifier.runner = runner(verify)
            self.draft = DraftWorker(draft, state=engine.draft_state, spec=spec, hooks=hooks,
                                     decode_runner=runner(decode),
                                     extend_runner=runner(extend))

    def capture_all(self) -> None:
        """Every runner's graphs at every bucket now (Engine.capture_graphs)."""
        for runner in self.runners:
            if runner.use_graph:
                runner.capture_all()

    @property
    def runners(self) -> list[PhaseRunner]:
        if self.e.spec is None:
            return [self.decode_runner]
        fused = [self.fused] if self.fused is not None else []
        return fused + [self.verifier.runner, self.draft.decode_runner, self.draft.extend_runner]

    def _cache_locs(self, rows: torch.Tensor, start: torch.Tensor, end: torch.Tensor, n: int):
        out = torch.empty(n, dtype=torch.int64, device=self.dev)
        self.e.kernels.assign_extend_cache_locs(rows, self.e.req_to_token, start, end, out)
        return out

    # -- prefill ------------------------------------------------------------------------
    def prefill(self, reqs: list[Req]) -> None:
        """Target over each prompt; its last row gives the first bonus token. Then the draft
        extend over the same positions (EAGLE: tokens rotated left by one). A prefix-cache
        hit starts both at r.cached_len: positions before it are read from shared pages."""
        e = self.e
        lens = [len(r.prefill_tokens) for r in reqs]  # a resumed request: prompt + committed
        starts = [r.cached_len for r in reqs]
        ext = [n - s for n, s in zip(lens, starts)]
        # +1: the pending bonus token's position (a standalone draft writes KV there).
        e.memory.reserve(reqs, [n + 1 for n in lens])
        rows, ends_t, starts_t, ext_t, ids, pos = to_device(
            self.dev, [r.row for r in reqs], lens, starts, ext,
            [t for r, s in zip(reqs, starts) for t in r.prefill_tokens[s:]],
            [p for s, n in zip(starts, lens) for p in range(s, n)])
        loc = self._cache_locs(rows, starts_t, ends_t, sum(ext))
        fb = ForwardBatch(mode=ForwardMode.EXTEND, input_ids=ids, positions=pos, out_cache_loc=loc,
                          req_pool_indices=rows, seq_lens=starts_t, kv_prefix_lens=starts_t,
                          extend_lens=ext_t)
        last = torch.cumsum(ext_t, 0) - 1
        logits, hidden = run_forward(e.target, backend=e.target_backend, fb=fb, logit_rows=last,
                                     recorder=e.recorder)
        e.stats.prefill_tokens += sum(ext)
        e.stats.prefix_hit_tokens += sum(starts)
        # Coins keyed by the position of the token chosen (here: the prefill length).
        bonus = choose_tokens(e.kernels, logits,
                              batch_sampling(reqs, engine_seed=e.seed, positions=lens, n_accept=0,
                                             device=self.dev)).tolist()
        for r, n, b in zip(reqs, lens, bonus):
            r.seq_len, r.output = n, r.output or [b]  # a resumed request keeps its pending bonus
        if e.spec is not None:
            self._draft_extend_prefill(reqs, fb, hidden, starts)

    def _draft_extend_prefill(self, reqs: list[Req], target_fb: ForwardBatch, hidden,
                              starts: list[int]) -> None:
        """Draft rows from each request's reuse length on: EAGLE rows s..n-1 (row p consumes
        h_p and token p+1), a standalone draft s..n (the bonus included)."""
        shifted = self.draft.shifted
        last_row = [len(r.prefill_tokens) - (1 if shifted else 0) for r in reqs]
        dstarts = list(starts)
        if faults.on("prefix_hit_draft_kv_uninitialized"):  # draft trusts the raw tree match
            dstarts = [min(max(s, r.matched_len), m) for r, s, m in zip(reqs, starts, last_row)]
        if shifted and dstarts == starts:
            # Row p consumes (h_p, t_{p+1}): the prompt rotated left, the bonus last.
            (ids,) = to_device(self.dev, [t for r, s in zip(reqs, starts)
                                          for t in r.prefill_tokens[s + 1:] + r.output[-1:]])
            fb = ForwardBatch(mode=ForwardMode.DRAFT_EXTEND, input_ids=ids,
                              positions=target_fb.positions,
                              out_cache_loc=target_fb.out_cache_loc,
                              req_pool_indices=target_fb.req_pool_indices,
                              seq_lens=target_fb.seq_lens, kv_prefix_lens=target_fb.kv_prefix_lens,
                              extend_lens=target_fb.extend_lens, hidden_states=hidden)
        else:
            # Rows ds..last at their own positions (a standalone draft: tokens at p; EAGLE:
            # token p+1 with the target hidden of row p, picked out of the target's rows).
            full = [r.prefill_tokens + r.output[-1:] for r in reqs]
            lens = [m + 1 - d for m, d in zip(last_row, dstarts)]
            rows = target_fb.req_pool_indices
            lens_t, ds_t, ends_t, ids, pos = to_device(
                self.dev, lens, dstarts, [m + 1 for m in last_row],
                [t for f, d, m in zip(full, dstarts, last_row)
                 for t in f[d + int(shifted):m + 1 + int(shifted)]],
                [p for d, m in zip(dstarts, last_row) for p in range(d, m + 1)])
            loc = self._cache_locs(rows, ds_t, ends_t, sum(lens))
            picked = None
            if shifted:  # the target's packed rows of positions ds..n-1
                (pick,) = to_device(self.dev, _target_rows(starts, dstarts, last_row))
                picked = hidden[pick]
            fb = ForwardBatch(mode=ForwardMode.DRAFT_EXTEND, input_ids=ids, positions=pos,
                              out_cache_loc=loc, req_pool_indices=rows,
                              seq_lens=target_fb.seq_lens, kv_prefix_lens=ds_t, extend_lens=lens_t,
                              hidden_states=picked)
        self.draft.extend_prefill(fb, torch.cumsum(fb.extend_lens, 0) - 1)

    def step_ends(self, seq_lens: list[int]) -> list[int]:
        """Positions [0, end) each request must own for its next decode step or speculative
        round (the scheduler checks these against free pages before running one)."""
        spec = self.e.spec
        if spec is None:
            return [n + 1 for n in seq_lens]
        ps, shift = self.e.page_size, 0 if self.draft.shifted else 1
        return [max(n + spec.ndt, draft_reserve_end(n + shift, spec.topk, spec.num_steps, ps),
                    n + shift + spec.ndt) for n in seq_lens]

    # -- what the host knows of a request while a round may be in flight ----------------
    def advance(self) -> int:
        """The most a round can advance a request's committed length."""
        return 1 if self.e.spec is None else self.e.spec.ndt

    def seq_upper(self, r: Req) -> int:
        """r's committed length once its unresolved round (if any) resolves, at most: exact
        in plain decoding, every draft accepted in a speculative round."""
        return r.seq_len + r.unresolved * self.advance()

    def reserve_ends(self, reqs: list[Req]) -> list[int]:
        """Positions [0, end) each request must own for its next round, whatever the round in
        flight accepts: the most over every length it may commit (step_ends is not monotone:
        the draft's branch pages depend on where the prefix falls in its page)."""
        ends = []
        for r in reqs:
            lo = r.seq_len + 1 if r.unresolved else r.seq_len
            ends.append(max(self.step_ends(list(range(lo, self.seq_upper(r) + 1)))))
        return ends

    def _host_inputs(self, reqs: list[Req]):
        """Rows, and per request the host's committed length and pending token, or
        PLACEHOLDER where a round in flight will change them (the device fills those in).
        All three lists are by batch position; the first holds each one's request-pool row."""
        lag = [r.unresolved > 0 for r in reqs]
        seq = [PLACEHOLDER if x else r.seq_len for r, x in zip(reqs, lag)]
        pending = [PLACEHOLDER if x else r.pending_token for r, x in zip(reqs, lag)]
        if faults.on("overlap_stale_seq_lens"):  # vLLM #52179: the host's lagging lengths
            seq = [r.seq_len for r in reqs]
        if faults.on("overlap_placeholder_leak") and self.e.scheduler.inflight is not None:
            pending = [PLACEHOLDER] * len(reqs)  # one flag for the batch, not one per request
        return [r.row for r in reqs], seq, pending

    # -- a step: launch, then resolve ---------------------------------------------------
    def launch(self, reqs: list[Req]) -> InFlight:
        return self.launch_decode(reqs) if self.e.spec is None else self.launch_spec(reqs)

    def decode_step(self, reqs: list[Req]) -> None:
        """One plain decode step, synchronously (benches drive requests of their own)."""
        self.resolve(self.launch_decode(reqs), self.commit)

    def spec_round(self, reqs: list[Req]) -> None:
        """One speculative round, synchronously (benches drive requests of their own)."""
        self.resolve(self.launch_spec(reqs), self.commit)

    def commit(self, r: Req, advance: int, tokens: list[int]) -> bool:
        """Round results into the host's request: tokens, committed length, and the pages
        past what the request still needs given back."""
        r.output.extend(tokens)
        r.seq_len += advance
        # Keep what a round in flight may still write (it starts at the new length).
        keep = self.step_ends([r.seq_len])[0] if r.unresolved else r.seq_len + 1
        if faults.on("overlap_early_free"):
            keep = r.seq_len + 1
        self.e.memory.shrink(r, keep)
        return True

    def resolve(self, flight: InFlight, apply) -> None:
        """Wait for a launched round and hand each request's results to `apply(r, advance,
        tokens)` (False: discarded); statistics count what was applied."""
        applied = []

        def counted(r, advance, tokens):
            if apply(r, advance, tokens):
                applied.append((r, advance))

        e = self.e
        if flight.kind == "decode":
            self.resolve_decode(flight, counted)
        else:
            self.resolve_spec(flight, counted)
            for r, a in applied:  # the per-round record the acceptance laws read
                r.accept_lens.append(a)
            if applied:
                e.stats.rounds += 1
                e.stats.req_rounds += len(applied)
                e.stats.drafted += len(applied) * (e.spec.ndt - 1)
                e.stats.accepted += sum(a for _, a in applied) - len(applied)
        if e.recorder is not None:
            e.recorder.on_resolve([r for r, _ in applied])

    # -- plain decode (spec=None baseline) ------------------------------------------------
    def launch_decode(self, reqs: list[Req]) -> InFlight:
        """Queue one decode step; nothing here waits for the device (the host's lengths are
        exact: a step advances each request by one)."""
        e = self.e
        ends = [self.seq_upper(r) + 1 for r in reqs]
        e.memory.reserve(reqs, ends)
        host = self._host_inputs(reqs)
        rows, hseq, hpend = to_device(self.dev, *host)
        seq, pending = self.state.inputs(rows, hseq, hpend, lagging(host))
        live = DecodeInputs(input_ids=pending, positions=seq, req_pool_indices=rows, seq_lens=seq)
        logits = self.decode_runner.run(live, len(reqs)).logits
        bsamp = batch_sampling(reqs, engine_seed=e.seed, positions=ends, n_accept=0,
                               device=self.dev)
        tokens = choose_tokens(e.kernels, logits, bsamp)
        self.state.commit(rows, seq + 1, tokens)
        for r in reqs:
            r.unresolved += 1
        return InFlight("decode", reqs, [tokens])

    def resolve_decode(self, flight: InFlight, apply) -> None:
        for r, t in zip(flight.reqs, flight.wait()):
            r.unresolved -= 1
            apply(r, 1, [t])

    # -- a speculative round ------------------------------------------------------------
    def launch_spec(self, reqs: list[Req]) -> InFlight:
        """Queue one speculative round. Its committed lengths, pending tokens and positions
        come from the device where a round in flight changes them; the host sizes what it
        must (reservation, the tree mask) for that round's worst case."""
        e, spec = self.e, self.e.spec
        pt = e.phase_timer  # bench phase timing (specdec/phase_timer.py); None: no cost
        if pt is not None:
            pt.begin_round()
        upper = [self.seq_upper(r) for r in reqs]
        e.memory.reserve(reqs, self.reserve_ends(reqs))
        # Sampled requests' coins are keyed by the position of the first token the round
        # decides: seq_len + 1, one candidate per possible accept length where it lags.
        base = [r.seq_len + 1 + r.unresolved for r in reqs]
        spans = [1 + r.unresolved * (spec.ndt - 1) for r in reqs]
        # Every host input of the round in one transfer.
        host = self._host_inputs(reqs)
        rows, hseq, hpend, base_t = to_device(self.dev, *host, base)
        seq, pending = self.state.inputs(rows, hseq, hpend, lagging(host))
        seq_sum = sum(upper)  # sizes the tree mask; an upper bound is fine (read by offsets)
        if e.recorder is not None:
            e.recorder.begin_round(rows, seq, e.req_to_token, [r.rid for r in reqs])
        shift = 0 if self.draft.shifted else 1
        prefix = seq + shift
        branch_pos = branch_positions(prefix, spec.topk)  # where each branch starts drafting
        greedy = all(r.sampling.greedy for r in reqs)  # batch_sampling would return None
        if self.fused is not None and greedy and pt is None and self.fused.can_run(len(reqs)):
            # The whole round in one replay (specdec/spec/round_phase.py).
            res = self.fused.run(GreedyRoundInputs(
                req_pool_indices=rows, seq_lens=seq, kv_prefix_lens=prefix, positions=branch_pos,
                pending=pending, seq_lens_sum=seq_sum), len(reqs))
            accept_lens, accepted = res.accept_lens, res.accepted
            new_seq, last = res.seq_lens, res.pending
        else:
            # Coins of the three streams (specdec/random_streams.py): num_steps for the
            # draft's noise, one per tree node for acceptance, one for the final draw.
            bsamp = None if greedy else batch_sampling(
                reqs, engine_seed=e.seed, positions=base, n_accept=spec.ndt, device=self.dev,
                n_draft=spec.num_steps if spec.probabilistic
                else 0, spans=spans, offsets=seq + 1 - base_t)
            if pt is not None:
                pt.mark("host")
            accept_lens, accepted, last = self._phases(rows, seq=seq, prefix=prefix,
                                                       branch_pos=branch_pos, pending=pending,
                                                       seq_sum=seq_sum, bsamp=bsamp)
            new_seq = seq + accept_lens
        self.state.commit(rows, new_seq, last)
        for r in reqs:
            r.unresolved += 1
        flight = InFlight("spec", reqs, [accept_lens, accepted])
        if pt is not None:
            pt.end_round()
        return flight

    def _phases(self, rows, *, seq, prefix, branch_pos, pending, seq_sum: int, bsamp):
        """A round phase by phase: draft decode, tree, verify and acceptance, draft extend.
        Returns (accept_lens, accepted tokens, each request's new pending token)."""
        e, pt = self.e, self.e.phase_timer
        tree = self.draft.decode(rows, seq, prefix, branch_pos, bsamp)
        if pt is not None:
            pt.mark("draft_decode")
        if e.recorder is not None:
            e.recorder.on_draft(tree)
        built = self.verifier.build_tree(pending, tree, seq, seq_sum)
        res = self.verifier.verify(rows, seq_lens=seq, seq_lens_sum=seq_sum, built=built,
                                   sampling=bsamp, draft_probs=tree.draft_probs)
        if pt is not None:
            pt.mark("accept_compact")
        # Draft extend after decode: ndt rows per request over the compacted accepted path;
        # row accept_lens-1 gives the next round's candidates (DraftExtendPhase). Its inputs
        # are all on the device, so it is queued before the host waits for the round.
        self.draft.extend_after_decode(DraftExtendInputs(
            input_ids=res.predict, hidden=res.hidden, req_pool_indices=rows,
            seq_lens=seq + res.accept_lens, kv_prefix_lens=prefix, accept_lens=res.accept_lens))
        if pt is not None:
            pt.mark("draft_extend")
        return res.accept_lens, res.accepted_tokens, res.pending

    def resolve_spec(self, flight: InFlight, apply) -> int:
        """Host bookkeeping of a launched round once its results are on the host: `apply(r,
        advance, tokens)` for each of its requests."""
        spec, bs = self.e.spec, len(flight.reqs)
        width = spec.num_steps + 1
        host = flight.wait()  # the round's one wait
        accept_lens, flat = host[:bs], host[bs:]
        accepted = [flat[b * width:(b + 1) * width] for b in range(bs)]
        if faults.on("bonus_stride_ndt"):  # the historical bug: stride ndt, not num_steps + 1
            accepted = [(flat[b * spec.ndt:] + [0] * spec.ndt)[:width] for b in range(bs)]
        # Each request's own accept length slices its own tokens (SGLang #28496 used one).
        taken = [accept_lens[0]] * bs if faults.on("unequal_accept_slicing") else accept_lens
        for r, a, n, toks in zip(flight.reqs, accept_lens, taken, accepted):
            r.unresolved -= 1
            apply(r, a, toks[:n])


def _target_rows(starts: list[int], dstarts: list[int], last_row: list[int]) -> list[int]:
    """Indices into the target prefill's packed rows (positions s..n-1, n - 1 = last_row for
    EAGLE) of positions dstart..n-1 per request."""
    out, base = [], 0
    for s, d, m in zip(starts, dstarts, last_row):
        out += range(base + d - s, base + m + 1 - s)
        base += m + 1 - s
    return out
