"""The public engine: `Engine(...).generate(prompts)`, speculative or plain greedy."""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch

from specdec import faults
from specdec.attention.backend import BACKENDS
from specdec.build import (DTYPES, attention_backend, build_drafter, build_target,
                           check_draft_max_position, check_engine_args, check_model_fits)
from specdec import defaults as D
from specdec.config import SpecConfig
from specdec.graphs.runner import DEFAULT_BUCKETS
from specdec.kernel_set import kernel_set
from specdec.loading import resolve_model_config
from specdec.memory.allocator import OutOfSlots
from specdec.memory.manager import MemoryManager
from specdec.memory.req_pool import DraftStatePool
from specdec.model.layers import RotaryEmbedding
from specdec.model.llama import fuse_weights
from specdec.prefix_cache import PrefixCache
from specdec.request import Req
from specdec.rounds import RoundRunner
from specdec.sampling_params import SamplingParams
from specdec.scheduler import RequestOutput, Scheduler
from specdec.spec.context import HookAttribute, Hooks
from specdec.tp.comm import check_path
from specdec.tp.group import TPGroup
from specdec.tp.replicate import check_replies, collect, each_rank, replicated
from specdec.tp.shard import shard_model
from specdec.tp.worker import serve
from specdec.validate import check_prompt, check_prompts, reserve_margin


@dataclass
class Stats:
    rounds: int = 0          # speculative rounds (one per batch step)
    req_rounds: int = 0      # request-rounds: a request taking part in a round
    drafted: int = 0         # draft tokens proposed (ndt - 1 per request-round)
    accepted: int = 0        # draft tokens accepted
    prefill_tokens: int = 0  # tokens run through the target prefill
    prefix_hit_tokens: int = 0  # prefill positions reused from the prefix cache

    def __str__(self) -> str:
        return (f"rounds={self.rounds} drafted={self.drafted} accepted={self.accepted} "
                f"mean_acceptance_length={self.mean_acceptance_length:.3f}")

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens committed per request-round: accepted drafts + the bonus."""
        return (self.accepted + self.req_rounds) / self.req_rounds if self.req_rounds else 0.0


class Engine:
    def __init__(self, model: str = D.MODEL, *, spec: SpecConfig | None = None,
                 draft: str = D.DRAFT, page_size: int = D.PAGE_SIZE, cuda_graph: bool = False,
                 device: str = D.DEVICE, dtype: str = D.DTYPE, seed: int = D.SEED,
                 max_batch: int = D.MAX_BATCH, max_context: int = D.MAX_CONTEXT,
                 num_pages: int | None = None,
                 attention: str | None = None, cuda_graph_bs: list[int] | None = None,
                 batch_invariant: bool = False, draft_max_position: int | None = None,
                 overlap: bool = False, prefix_cache: bool = False,
                 prefix_on_retract: bool = True, tp_size: int = D.TP_SIZE, tp_check: bool = True,
                 tp_all_reduce: str = "auto", _tp_group=None) -> None:
        """draft: 'eagle' (a seeded EAGLE head), 'self' (the target drafts for itself),
        'perturbed[:scale]' (the target with seeded noise: tunable acceptance), a model shape
        name, or a checkpoint directory. draft_max_position: the drafter's own configured
        max_position (an EAGLE config may say 2048); its RoPE table still covers max_context.
        tp_size: ranks the target and drafter are sharded over (specdec/tp/): this process is
        rank 0 and starts the others (or torchrun did: then Engine() on ranks > 0 serves rank
        0 until it closes, and exits). On CUDA rank r runs on GPU (current + r) mod count
        (torchrun: LOCAL_RANK). tp_check: every rank's state and graph decisions are
        compared with rank 0's at each call (specdec/tp/replicate.py). close() (or `with`)
        frees the workers for the next tensor-parallel Engine of this process.
        tp_all_reduce: 'auto' (on CUDA, messages up to the crossover through one peer-memory
        kernel fused with the norm after it, NCCL above; gloo on CPU) or 'nccl' (the process
        group's collectives only) (specdec/tp/comm.py).
        overlap: queue round i+1 before reading round i's results (contract section 10;
        specdec/overlap.py): the same tokens, the host's work hidden behind the GPU's.
        prefix_cache: a radix prefix cache (specdec/prefix_cache) shared by target and draft
        KV; finished requests give it their committed pages, and so do retracted ones when
        prefix_on_retract (a resumed request then hits its own prefix)."""
        init_args = {k: v for k, v in locals().items() if k not in ("self", "_tp_group")}
        check_engine_args(tp_size, device=device, overlap=overlap, page_size=page_size,
                          dtype=dtype, max_batch=max_batch)
        check_path(tp_all_reduce)
        self.tp_all_reduce = tp_all_reduce
        self.overlap = overlap
        self.cfg = resolve_model_config(model)  # a shape name, a ModelConfig or a checkpoint dir
        check_model_fits(self.cfg, spec, max_context, tp_size)
        self.tp_size, self.tp_check, self.tp_group = tp_size, tp_check, _tp_group
        if tp_size > 1 and _tp_group is None:
            self._lead_tp_group(device, init_args)
        if self.tp_group is not None and self.device_is_cuda(device):
            device = f"cuda:{self.tp_group.cuda_index}"  # one GPU per rank
        self.spec, self.page_size, self.seed = spec, page_size, seed
        self.device, self.dtype = torch.device(device), DTYPES[dtype]
        try:
            self._build_parts(model, spec=spec, draft=draft, cuda_graph=cuda_graph,
                              num_pages=num_pages, attention=attention, cuda_graph_bs=cuda_graph_bs,
                              batch_invariant=batch_invariant,
                              draft_max_position=draft_max_position, max_batch=max_batch,
                              max_context=max_context,
                              prefix_cache=prefix_cache, prefix_on_retract=prefix_on_retract)
        except BaseException:
            self._end_failed_group()  # the workers failed alike and have ended
            raise
        if self.tp_group is not None and self.tp_group.rank == 0:
            try:  # a worker that failed to build is named here (TPWorkerError)
                check_replies(collect(self.tp_group, ("ok", None, None)), None)
            except BaseException:
                self._end_failed_group()
                raise

    @staticmethod
    def device_is_cuda(device: str) -> bool:
        return torch.device(device).type == "cuda"

    # -- construction -------------------------------------------------------------------
    def _lead_tp_group(self, device: str, init_args: dict) -> None:
        """Rank 0 starts the workers (or torchrun did) and has each build this same engine; a
        torchrun rank > 0 serves rank 0 here until it closes, then exits."""
        self.tp_group = TPGroup.leader(self.tp_size, torch.device(device).type, self)
        if self.tp_group.rank > 0:
            serve(self.tp_group)
            self.tp_group.shutdown()
            raise SystemExit(0)
        # The workers build the same engine through this factory (nothing under specdec/tp
        # imports the engine).
        factory = functools.partial(type(self), **init_args)
        self.tp_group.send(("build", factory, sorted(faults.enabled())))

    def _end_failed_group(self) -> None:
        if self.tp_group is not None and self.tp_group.rank == 0:
            self.tp_group.alive = False
            self.close()

    def _build_parts(self, model, *, spec, draft, cuda_graph, num_pages, attention, cuda_graph_bs,
                     batch_invariant, draft_max_position, max_batch, max_context, prefix_cache,
                     prefix_on_retract) -> None:
        page_size = self.page_size
        self.max_batch = max_batch
        self.max_context = math.ceil(max_context / page_size) * page_size
        impl = attention or ("triton" if self.device.type == "cuda" else "torch")
        if impl not in BACKENDS:
            raise ValueError(f"attention={impl!r}: expected one of {sorted(BACKENDS)}")
        self.kernels = kernel_set(impl)
        self.hooks = Hooks()  # the trace recorder and the phase timer, attached later
        self.stats = Stats()
        self._build_models(model, spec, draft, draft_max_position)
        pages_per_req = self.max_context // page_size
        num_pages = num_pages or max_batch * pages_per_req + 1
        self.memory = MemoryManager(max_batch, max_context=self.max_context, num_pages=num_pages,
                                    page_size=page_size,
                                    kernels=self.kernels, device=self.device)
        self.prefix_on_retract = bool(prefix_on_retract)
        if prefix_cache:
            shifted = self.drafter is not None and self.drafter.shifted
            self.memory.prefix = PrefixCache(self.memory.allocator, page_size, shifted)
        self._build_pools(impl, num_pages * page_size)
        if cuda_graph and self.device.type != "cuda" and impl == "triton":
            raise ValueError("cuda_graph=True on CPU uses the graph stand-in, which replays torch "
                             "ops only: use attention='torch' (the CPU default) there")
        buckets = DEFAULT_BUCKETS if cuda_graph_bs is None else list(cuda_graph_bs)
        if cuda_graph_bs is not None and (not buckets or min(buckets) < 1):
            raise ValueError(f"cuda_graph_bs={cuda_graph_bs}: need a non-empty list of sizes >= 1")
        self.cuda_graph, self.batch_invariant = cuda_graph, batch_invariant
        self.rounds = RoundRunner(self, cuda_graph, buckets, batch_invariant)
        self.scheduler = Scheduler(self)
        self._next_rid = 0

    def _build_models(self, model, spec, draft, draft_max_position) -> None:
        """The target and (speculative) the drafter: built full, then this rank's shard."""
        self.target = build_target(model, self.cfg, self.device, self.dtype, self.seed)
        check_draft_max_position(draft_max_position)
        self.drafter = (build_drafter(draft, target=self.target, cfg=self.cfg, device=self.device,
                                      dtype=self.dtype,
                                      seed=self.seed, max_position=draft_max_position)
                        if spec is not None else None)
        if self.drafter is not None and self.drafter is not self.target:
            self._cover_context(self.drafter)
        if self.tp_group is not None:  # each rank keeps its shard of the full models
            comm = self.tp_group.comm.for_engine(self.tp_all_reduce, self.device)
            shard_model(self.target, comm)
            if self.drafter is not None and self.drafter is not self.target:
                shard_model(self.drafter, comm)
        for m in (self.target, self.drafter):
            if m is not None:
                fuse_weights(m)  # one GEMM for q/k/v and for gate/up
                m.requires_grad_(False)  # inference only: no forward, captured or not, records autograd
        self.draft_kind = draft if spec is not None else None

    def _build_pools(self, impl: str, slots: int) -> None:
        """A KV pool per model over the same slots (one page allocator, one req_to_token), and
        the drafter's state carried between rounds."""
        def backend(cfg, layers=None):
            return attention_backend(impl, cfg=cfg, slots=slots, req_to_token=self.req_to_token,
                                     page_size=self.page_size,
                                     tp_size=self.tp_size, dtype=self.dtype, device=self.device,
                                     layers=layers)
        self.target_backend = backend(self.cfg)
        if self.spec is not None:
            dcfg = self.drafter.cfg
            self.draft_backend = backend(dcfg, layers=len(self.drafter.layers))
            self.draft_state = DraftStatePool(self.max_batch, hidden_size=dcfg.hidden_size,
                                              topk=self.spec.topk,
                                              dtype=self.dtype, device=self.device,
                                              vocab_size=(self.cfg.vocab_size
                                                          if self.spec.probabilistic else 0))

    def _cover_context(self, drafter) -> None:
        """The drafter's RoPE table must cover every position the engine runs, whatever its
        own config says (vLLM #48894 sized it by the draft's max_position: 2048 rows)."""
        own = drafter.cfg.max_position
        rows = own if faults.on("draft_rope_table_short") else max(own, self.max_context)
        if drafter.rope.cos.shape[0] != rows:
            table = RotaryEmbedding.for_config(dataclasses.replace(drafter.cfg, max_position=rows))
            drafter.rope = table.to(self.device)

    # The harness's trace recorder (specdec/trace.py) and the bench's phase timer
    # (specdec/phase_timer.py), kept in the hooks that the round's phases read.
    recorder = HookAttribute()
    phase_timer = HookAttribute()

    @property
    def req_to_token(self) -> torch.Tensor:
        return self.memory.req_to_token

    # -- generation ---------------------------------------------------------------------
    @replicated(validate="_generate_inputs")
    @torch.inference_mode()
    def generate(self, prompts: list[list[int]], *, max_new_tokens: int = 16,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int | None = None,
                 sampling: SamplingParams | list[SamplingParams] | None = None) -> list[list[int]]:
        """Continue each prompt by `max_new_tokens` tokens: greedy at temperature 0, else
        sampled. `sampling` (one for all, or one per prompt) overrides the keyword knobs; a
        per-request seed is `seed + i` for prompt i when `seed` is given."""
        params = self._generate_inputs(prompts, max_new_tokens=max_new_tokens,
                                       temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                       sampling=sampling)
        # The batch goes through add/step like any other requests (others may be running:
        # they advance too). The recorder's on_finish sees each request as it finishes.
        reqs = [self._submit(p, max_new_tokens, sp) for p, sp in zip(prompts, params)]
        sched = self.scheduler
        try:
            while any(r.rid in sched.live for r in reqs):
                sched.step()
            sched.drain()  # return with nothing in flight: every page of the batch is free
        finally:
            for r in reqs:
                if r.rid in sched.live:  # an exception mid-run: free what it holds
                    sched.abort(r.rid)
                sched.finished.pop(r.rid, None)  # returned here, not kept for output()
        return [r.visible_output() for r in reqs]

    def _generate_inputs(self, prompts, *, max_new_tokens: int = 16, temperature: float = 0.0,
                         top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                         sampling=None) -> list[SamplingParams]:
        """generate()'s checks (run first on rank 0 alone when tensor parallel)."""
        check_prompts(prompts, vocab_size=self.cfg.vocab_size, max_batch=self.max_batch,
                      max_new_tokens=max_new_tokens,
                      max_context=self.max_context, margin=reserve_margin(self.spec,
                                                                          self.page_size,
                                                                          self.overlap))
        params = self._sampling_params(len(prompts), temperature=temperature, top_k=top_k,
                                       top_p=top_p, seed=seed, sampling=sampling)
        self._check_fits(prompts, max_new_tokens)
        return params

    # -- continuous batching ------------------------------------------------------------
    @replicated(validate="_request_inputs")
    def add_request(self, prompt: list[int], max_new_tokens: int = 16,
                    sampling: SamplingParams | None = None) -> int:
        """Queue one request; it joins the running batch at a later step(). Returns its id.
        Refuses (OutOfSlots) a request whose worst case cannot fit the KV pool even alone."""
        sampling = self._request_inputs(prompt, max_new_tokens, sampling)
        return self._submit(prompt, max_new_tokens, sampling).rid

    def _request_inputs(self, prompt, max_new_tokens: int = 16,
                        sampling: SamplingParams | None = None) -> SamplingParams:
        """add_request()'s checks (run first on rank 0 alone when tensor parallel)."""
        check_prompt(prompt, vocab_size=self.cfg.vocab_size, max_new_tokens=max_new_tokens,
                     max_context=self.max_context,
                     margin=reserve_margin(self.spec, self.page_size, self.overlap))
        sampling = SamplingParams() if sampling is None else sampling
        if not isinstance(sampling, SamplingParams):
            raise TypeError(f"sampling={sampling!r}: expected a SamplingParams or None")
        sampling.check_vocab(self.cfg.vocab_size)
        worst = self._worst_pages(prompt, max_new_tokens)
        pool = self.memory.allocator.num_pages - 1  # page 0 is reserved
        if worst > pool:
            raise OutOfSlots(f"a prompt of {len(prompt)} tokens with max_new_tokens="
                             f"{max_new_tokens} needs {worst} pages in the worst case; the pool "
                             f"has {pool} pages of {self.page_size} tokens: raise num_pages")
        return sampling

    def _submit(self, prompt, max_new_tokens: int, sampling: SamplingParams) -> Req:
        # Engine-wide unique ids: the id is the allocator's page owner and a sampling seed key.
        req = Req(self._next_rid, list(map(int, prompt)), max_new_tokens, sampling)
        self._next_rid += 1
        self.scheduler.add(req)
        return req

    @replicated
    @torch.inference_mode()
    def step(self) -> list[RequestOutput]:
        """Admit what fits, prefill it, run one round; returns the requests finished now
        (overlap: launch round i+1, then resolve round i; those whose finishing round
        resolved)."""
        return self.scheduler.step()

    @replicated(validate="_abort_input")
    def abort(self, rid: int) -> RequestOutput:
        """Drop a waiting or running request (Scheduler.abort: an unknown or already finished
        id raises ValueError; under overlap a request in the round in flight keeps its pages
        until that round resolves)."""
        return self.scheduler.abort(rid)

    def _abort_input(self, rid: int) -> None:
        if rid not in self.scheduler.live:
            self.scheduler.abort(rid)  # raises the scheduler's own error, changes nothing

    def has_unfinished(self) -> bool:
        """Live requests, or (overlap) a round in flight or pages awaiting its resolve."""
        sched = self.scheduler
        return bool(sched.live) or sched.inflight is not None or bool(sched.deferred)

    def output(self, rid: int) -> RequestOutput:
        """A request's tokens so far (final once finish_reason is set)."""
        return self.scheduler.output(rid)

    def live_requests(self) -> list[Req]:
        """Requests that own pages now (running, and under overlap the finished or aborted
        ones whose release waits for the round in flight): what check_accounting is given."""
        return self.scheduler.holding()

    def _sampling_params(self, n, *, temperature, top_k, top_p, seed, sampling):
        if sampling is None:
            params = [SamplingParams(temperature, top_k, top_p,
                                     None if seed is None else seed + i) for i in range(n)]
        elif isinstance(sampling, SamplingParams):
            params = [sampling] * n
        else:
            params = list(sampling)
            if len(params) != n:
                raise ValueError(f"{len(params)} SamplingParams for {n} prompts: give one, or "
                                 "one per prompt")
        for sp in params:
            sp.check_vocab(self.cfg.vocab_size)
        return params

    def _check_fits(self, prompts, max_new_tokens: int) -> None:
        """Refuse up front a batch whose worst case cannot fit in the KV pool, rather than run
        out of pages half way."""
        worst = sum(self._worst_pages(p, max_new_tokens) for p in prompts)
        free = self.memory.available  # free pages and unreferenced prefix-cache pages
        if worst > free:
            raise OutOfSlots(f"need {worst} pages in the worst case for {len(prompts)} prompts, "
                             f"{free} free: use fewer or shorter prompts, or more num_pages")

    def _worst_pages(self, prompt, max_new_tokens: int) -> int:
        margin = reserve_margin(self.spec, self.page_size, self.overlap)
        return -(-(len(prompt) + max_new_tokens + margin) // self.page_size)

    @property
    def prefix_cache(self):
        """The PrefixCache, or None when the engine runs without one."""
        return self.memory.prefix

    @replicated
    def flush_prefix_cache(self) -> int:
        """Drop every prefix-cache node that no running request uses and free its pages;
        nodes running requests use stay (flushing never takes pages from a request). Safe
        while requests run. Returns the number of pages freed (0 without a prefix cache)."""
        return self.memory.prefix.flush() if self.memory.prefix is not None else 0

    def check_accounting(self, live: list[Req] | None = None) -> None:
        """No leaked page, no page with two owners, page 0 never owned; every prefix-tree
        page is held by the tree with a reference count equal to the number of `live`
        requests using it. `live`: the requests that own pages (default: the running ones;
        waiting requests own none)."""
        self.memory.check(self.live_requests() if live is None else list(live))

    def capture_graphs(self) -> None:
        """Capture every phase's graph at every bucket now, largest first, on every rank.
        Graphs are otherwise captured on first use (contract section 8); a benchmark calls
        this so that no capture falls inside a timed call. A no-op without cuda_graph."""
        self.tp_each(_capture_graphs)

    # -- tensor parallelism -----------------------------------------------------------------
    def tp_each(self, fn, *args) -> list:
        """fn(engine, *args) on every rank (a module-level function): results in rank order."""
        return each_rank(self, fn, *args)

    def close(self) -> None:
        """Free the workers of a tensor-parallel engine (kept for this process's next one);
        a no-op with tp_size 1 and on worker ranks."""
        group, self.tp_group = self.tp_group, None
        if group is None or group.rank > 0:
            self.tp_group = group
            return
        if group.alive and group.failed is None:
            try:
                group.send(("drop",))
                check_replies(group.replies(("ok", None, None)), None)
            except Exception:  # noqa: BLE001  a failed worker: the group is torn down below
                group.alive = False
        group.release()
        if not group.alive:
            group.shutdown()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _capture_graphs(engine: Engine) -> None:
    engine.rounds.capture_all()
