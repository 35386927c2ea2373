"""specdec's own Engine as an adapter: the white-box one.

Black-box, it is driven like any engine: requests through add_request / step (continuous
batching, per-request max_new_tokens, stops and seeds), plain greedy with `spec=None`.
Spec: drafter "eagle" / "self" / "perturbed" / "perturbed:0.1", draft_length = num_steps,
topk = topk, extra `ndt` (verify-tree size, root included; chains: num_steps + 1) and
`draft_sampling` ("greedy" or "probabilistic", chains only). Settings drawn about the engine
itself: dtype, page_size, cuda_graph, overlap.

Observables: all of them. ACCEPT_LENGTHS from a trace that keeps only the rounds (who took
part, the tree's depth, accept_lens); TARGET_LOGITS from the dense reference over the
engine's target (harness/references); WHITE_BOX is the trace and KV that the RunConfig laws
(structure, kv_content, eager_vs_graph, prefix, overlap, TP...) read: those laws keep every
check they have and run from their own RunConfig strategies.
"""
from __future__ import annotations

import functools

import torch
from hypothesis import strategies as st

from harness.adapters.protocol import Completion, Observable, Request, Round, Spec
from harness.base.liveness import Progress
from harness.references.dense import reference_prefill
from specdec import Engine, SpecConfig
from specdec.config import max_draft_tokens
from specdec.engine import DTYPES
from specdec.sampling_params import SamplingParams
from specdec.trace import TraceRecorder
from specdec.defaults import PAGE_SIZE

DRAFTERS = ("eagle", "self", "perturbed", "perturbed:0.1")
MAX_BATCH = 8
MAX_CONTEXT = 256  # the laws draw prompt + output well inside it


class RoundsOnly(TraceRecorder):
    """The rounds of a trace (requests, tree, accept lengths), not every forward's tensors;
    each round remembers which request held each row when it began."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.page_size, keep_kv_slots=False)
        self.engine, self.owners = engine, []

    def on_forward(self, fb, logits, hidden, graph: bool) -> None:
        pass

    def on_finish(self, engine, reqs) -> None:
        pass

    def begin_round(self, req_pool_indices, seq_lens, req_to_token, rids=None) -> None:
        super().begin_round(req_pool_indices, seq_lens, req_to_token, rids)
        self.owners.append({r.row: r.rid for r in self.engine.scheduler.running})

    def rounds_of(self, rid: int, prompt_len: int, ndt: int) -> list[Round]:
        """The request's rounds; a round starts with the pending bonus at position seq_len,
        so the request then had seq_len + 1 - prompt_len output tokens."""
        out = []
        for rnd, owner in zip(self.rounds, self.owners):
            if rnd.accept_lens is None:
                continue
            rows = rnd.req_pool_indices.tolist()
            depth = rnd.tree[1].view(len(rows), ndt) - rnd.seq_lens.view(-1, 1)
            for b, row in enumerate(rows):
                if owner.get(row) == rid:
                    out.append(Round(int(rnd.seq_lens[b]) + 1 - prompt_len, int(depth[b].max()),
                                     int(rnd.accept_lens[b]) - 1))
        return out


class SpecdecAdapter:
    name = "specdec"
    observables = frozenset(Observable)
    max_batch = MAX_BATCH
    why_not: dict = {}

    def __init__(self, device: str = "cpu", dtype: str = "float32", page_size: int = PAGE_SIZE,
                 cuda_graph: bool = False, overlap: bool = False) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype={dtype!r}: expected one of {sorted(DTYPES)}")
        self.device, self.dtype = device, DTYPES[dtype]
        self.settings = {"dtype": dtype, "page_size": page_size, "cuda_graph": cuda_graph,
                         "overlap": overlap}
        self.plain = self._engine(None)
        self.vocab_size = self.plain.cfg.vocab_size

    @classmethod
    def build(cls, device: str, **settings) -> "SpecdecAdapter":
        return cls(device, **settings)

    @classmethod
    def settings_space(cls, device: str):
        dtypes = (("float32", "bfloat16", "float16") if device.startswith("cuda")
                  else ("float32",))
        return st.fixed_dictionaries({
            "dtype": st.sampled_from(dtypes), "page_size": st.sampled_from((1, 4, 16)),
            "cuda_graph": st.booleans(), "overlap": st.booleans()})

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return f"specdec {version('specdec')}"
        except PackageNotFoundError:  # run from a checkout that is not installed
            return "specdec (uninstalled checkout)"

    def spec_space(self, **fixed):
        def with_ndt(shape):
            topk, steps = shape
            ndts = (st.just(steps + 1) if topk == 1
                    else st.integers(2, min(max_draft_tokens(topk, steps), 16)))
            return st.tuples(st.just(topk), st.just(steps), ndts,
                             st.sampled_from(("greedy", "probabilistic") if topk == 1
                                             else ("greedy",)))
        width = st.just(fixed["topk"]) if "topk" in fixed else st.integers(1, 3)
        shapes = st.tuples(width, st.integers(1, 4)).flatmap(with_ndt)
        drafter = st.just(fixed["drafter"]) if "drafter" in fixed else st.sampled_from(DRAFTERS)
        return st.builds(lambda d, s: Spec(d, s[1], s[0], (("ndt", s[2]),
                                                           ("draft_sampling", s[3]))),
                         drafter, shapes)

    # -- engines ------------------------------------------------------------------------
    @functools.lru_cache(maxsize=32)
    def _engine(self, spec: Spec | None) -> Engine:
        conf = None
        if spec is not None:
            steps, topk = spec.draft_length or 3, spec.topk or 1
            conf = SpecConfig(topk=topk, num_steps=steps,
                              num_draft_tokens=spec.get("ndt", steps + 1),
                              draft_sampling=spec.get("draft_sampling", "greedy"))
        s = self.settings
        return Engine(model="tiny", spec=conf, draft=spec.drafter if spec else "eagle",
                      page_size=s["page_size"], device=self.device, dtype=s["dtype"],
                      max_batch=MAX_BATCH, max_context=MAX_CONTEXT, cuda_graph=s["cuda_graph"],
                      cuda_graph_bs=[1, 2, 4], overlap=s["overlap"])

    # -- generation ---------------------------------------------------------------------
    def generate(self, requests: list[Request], spec: Spec | None) -> list[Completion]:
        if len(requests) > self.max_batch:
            raise ValueError(f"{len(requests)} requests: at most {self.max_batch} at once")
        if spec is not None and spec.drafter == "default":
            spec = Spec("eagle", spec.draft_length, spec.topk, spec.extra)
        eng = self._engine(spec)
        recorder = RoundsOnly(eng) if spec is not None else None
        eng.recorder = recorder
        try:
            progress = Progress(eng)  # a stalled engine fails (law liveness), never hangs
            rids = [progress.add(eng.add_request(list(r.prompt), r.max_new_tokens, SamplingParams(
                r.temperature, r.top_k if r.temperature else 0,
                r.top_p if r.temperature else 1.0, r.seed, r.stop_token_ids)))
                for r in requests]
            progress.run_to_end()
            outs = [eng.output(rid) for rid in rids]
        finally:
            eng.recorder = None
        ndt = eng.spec.ndt if spec is not None else 0
        return [Completion(list(o.tokens), o.finish_reason,
                           recorder.rounds_of(rid, len(r.prompt), ndt) if recorder else None)
                for rid, r, o in zip(rids, requests, outs)]

    @torch.inference_mode()
    def target_logits(self, tokens: list[int]) -> torch.Tensor:
        return reference_prefill(self.plain.target, list(tokens), self.plain.device)[0].float().cpu()
