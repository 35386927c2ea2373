"""SGLang's own speculative Triton kernels from its released wheel, run in a worker subprocess
(harness/adapters/foreign/). Every component calls SGLang's code unmodified: on CPU its dispatchers
pick sgl_kernel (absent), so the Triton twins are called directly, with their inputs made
the way SGLang's own callers make them. Module paths moved across releases: each function
is looked up at its known homes, newest first; a release without it lists why in why_not."""
from __future__ import annotations

import importlib
import inspect
import sys
from types import SimpleNamespace

import torch

from harness.adapters import sglang_forms as F
from harness.adapters import sglang_tree_sampler as TS
from harness.adapters import sglang_entry as SE
from harness.adapters import sglang_verify_commit as VC
from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.adapters.stubs import stub_package

C = Component
S, K = "sglang.srt.speculative.", "sglang.kernels.ops.speculative."
# Component function -> "module:attr" homes, newest first (releases checked: see SWEEP).
HOMES = {
    "tree": [K + "spec_tree:sgl_build_tree_kernel_triton",                    # 0.5.23
             S + "eagle_utils:sgl_build_tree_kernel_triton"],                 # 0.5.15-0.5.21
    # topk 1: the whole chain verify batch in one kernel (0.5.23; eagle_worker_common's
    # verify preparation calls it on CUDA with the qlen-only mask).
    "chain_tree": [K + "eagle:build_chain_tree"],                             # 0.5.23
    "verify": [K + "spec_tree:verify_tree_greedy_triton",                     # 0.5.23
               S + "eagle_utils:verify_tree_greedy_triton"],                  # 0.5.15-0.5.21
    "chain": [K + "reject_sampling:chain_speculative_sampling_triton",         # 0.5.16+
              S + "reject_sampling:chain_speculative_sampling_triton"],       # 0.5.14-0.5.15
    "r2t_func": ["sglang.srt.mem_cache.allocation:assign_req_to_token_pool_func",  # 0.5.16+
                 S + "triton_ops.cache_locs:assign_req_to_token_pool_func"],  # 0.5.14-0.5.15
    "r2t_kernel": [S + "spec_utils:assign_req_to_token_pool",                 # 0.5.3-0.5.12
                   S + "eagle_utils:assign_req_to_token_pool"],               # 0.4.6-0.5.1
    # 0.5.14+: page_size 1 or topk 1 go through assign_draft_cache_locs_contiguous, and the
    # paged per-branch layout is torch code inline in prepare_for_draft: that function runs.
    "prepare": [S + "eagle_worker_common:prepare_for_draft",                  # 0.5.16+
                S + "base_spec_worker:EagleDraftWorkerBase.prepare_for_draft"],  # 0.5.14-0.5.15
    "draft_kernel": [S + "spec_utils:assign_draft_cache_locs",                # 0.5.3-0.5.12
                     S + "eagle_utils:assign_draft_cache_locs"],              # 0.4.6-0.5.1
    # Draft extend after verify. Packed (0.4.6-0.5.8; 0.4.6's takes accept_len_cum too);
    # 0.5.14-0.5.19 build it in torch (eagle_info_v2); padded (0.5.23, the v2 worker).
    "extend_packed": [S + "spec_utils:create_extend_after_decode_spec_info",  # 0.5.3-0.5.8
                      S + "eagle_utils:create_extend_after_decode_spec_info",  # 0.4.9
                      S + "eagle_utils:create_extend_spec_info"],             # 0.4.6
    "extend_select": [K + "eagle:prepare_draft_extend_inputs"],               # 0.5.23
    "extend_layout": [K + "eagle:prepare_draft_extend_layout"],               # 0.5.23
    # Every SWEEP release has it (0.4.6's step-major and without page_size: see _draft_kv).
    "draft_kv": [K + "cache_locs:generate_draft_decode_kv_indices",            # 0.5.19-0.5.23
                 S + "triton_ops.cache_locs:generate_draft_decode_kv_indices",  # 0.5.14-0.5.15
                 S + "spec_utils:generate_draft_decode_kv_indices",           # 0.5.3-0.5.8
                 S + "eagle_utils:generate_draft_decode_kv_indices"],         # 0.4.6-0.4.9
}
NO_TRITON = "this release has no Triton {what} (only sgl_kernel's CUDA op, which CPU lacks)"
# Checked in every SWEEP release: no kernel scans sampled rows for the drafter's next token.
NO_NEXT_TOKEN = (
    "SGLang's verify returns accept lengths with the tokens, so nothing scans -1 padded rows: "
    "the next token is verified_id at the accept length (create_extend_after_decode_spec_info, "
    "fill_bonus_tokens, both given accept_lens), and it has no discarded-request mask")
NO_CHAIN_TREE = ("no build_chain_tree before 0.5.23: a topk-1 chain's verify tree goes "
                 "through build_tree_kernel_efficient (law kernel_tree_build's tree_build)")
NO_STEP_SLOTS = (
    "SGLang assigns every draft step's slots before the first step (assign_draft_cache_locs / "
    "prepare_for_draft, law kernel_kv_slots) and advances the draft positions inline "
    "(draft_forward's positions.add_(1)); no per-step slot function")
# Checked in every SWEEP release: the tree sampler has never had a Triton or CPU form (on a
# GPU with nvcc, 0.5.23's JIT one is mapped: sglang_tree_sampler.py).
NO_TREE_SAMPLING = TS.why_absent("cpu", None)


# Recorded findings (docs/findings/): the laws draw around them on these releases unless
# SPECDEC_KNOWN_FINDINGS=include (harness/laws/kernel_chain_acceptance.py, variants()).
KNOWN = tuple({"id": "sglang_0_5_23_chain_top_coin_emits_zero_prob",
               "laws": ("kernel_chain_acceptance",), "variant": variant,
               "input_class": "edge_coins", "versions": ("0.5.23",)}
              for variant in ("classic", "block")) + (
    # kernel_verify_commit draws around it by keeping ndt >= spec_steps + 1 for topk > 1.
    {"id": "sglang_0_5_23_tree_compaction_crashes_below_steps_plus_one",
     "laws": ("kernel_verify_commit",), "input_class": "short_window",
     "versions": ("0.5.16", "0.5.23")},
    # Compiled Triton only (its tl.minimum drops a NaN; the interpreter's keeps it).
    {"id": "sglang_0_5_23_block_verify_masked_row_accepts_zero_prob",
     "laws": ("kernel_chain_acceptance",), "variant": "block", "input_class": "nonfinite_rows",
     "versions": ("0.5.23",), "devices": ("cuda",)},)


def _backfill() -> None:
    """Names older releases import from the torch / Triton they pinned, gone from the ones
    here; none is on a kernel's path: 0.4.6's Triton cache dirs (sglang.srt.utils), 0.4.9's
    AMX probe (cpu_has_amx_support)."""
    import triton.runtime.cache as cache
    from triton import knobs
    for name, attr in (("default_cache_dir", "dir"), ("default_dump_dir", "dump_dir"),
                       ("default_override_dir", "override_dir")):
        if not hasattr(cache, name):
            setattr(cache, name, lambda attr=attr: getattr(knobs.cache, attr))
    if not hasattr(torch._C._cpu, "_is_amx_tile_supported"):
        torch._C._cpu._is_amx_tile_supported = lambda: False


def _find(homes: list[str]):
    """The first home that exists in this release, else None. A missing side package (not
    an sglang module of a home) propagates, for the installer to resolve."""
    for home in homes:
        mod, _, attr = home.partition(":")
        try:
            obj = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and (mod == exc.name or mod.startswith(exc.name + ".")):
                continue
            raise
        for part in attr.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    return None


class _Stop(Exception):
    """Raised by the stub model runner once prepare_for_draft has assigned the slots."""


class _DraftRunner:
    """The draft model runner as far as prepare_for_draft reads it before building the
    forward batch: its KV pool records the prefix-tail moves instead of moving KV."""

    def __init__(self, moves: list) -> None:
        self.token_to_kv_pool = SimpleNamespace(
            move_kv_cache=lambda tgt, src: moves.append((src.tolist(), tgt.tolist())))
        self.model_config = SimpleNamespace(model_is_mrope=False)

    @property
    def spec_algorithm(self):
        raise _Stop


class SglangKernels:
    name = "sglang-kernels"
    DIST = "sglang"
    TARGET = "harness.adapters.sglang_kernels:SglangKernels"
    ENV = {"SGLANG_LOGGING_LEVEL": "ERROR"}
    NEVER_INSTALL = frozenset({"torch", "triton", "torchvision", "torchaudio", "sglang",
                               "sgl_kernel"})
    SUPPORTED = ("0.5.23",)
    # What the CUDA JIT tree sampler builds from beyond the import graph (pack --all-sources).
    JIT_SIDE, JIT_DIRS, JIT_SIDE_DIR = TS.JIT_SIDE, TS.JIT_DIRS, TS.SIDE
    # The first release with speculative kernels (EAGLE's eagle_utils.py, 0.4.1.post4): where
    # `sweep --versions all` starts. SWEEP: the default sweep, a release of each layout.
    FIRST = "0.4.1.post4"
    SWEEP = ("0.4.6.post5", "0.4.9.post6", "0.5.3", "0.5.8", "0.5.14", "0.5.15.post1",
             "0.5.19", "0.5.23")
    # Class-level: the pinned release's; an instance narrows them to its release.
    components = frozenset(Component) - {C.TREE_SAMPLING, C.DRAFT_NEXT_TOKEN,
                                         C.DRAFT_STEP_SLOTS}
    why_not: dict = {C.TREE_SAMPLING: NO_TREE_SAMPLING, C.DRAFT_NEXT_TOKEN: NO_NEXT_TOKEN,
                     C.DRAFT_STEP_SLOTS: NO_STEP_SLOTS}
    accepts = {**DEFAULT_ACCEPTS, "tree_mask_modes": (0, 1), "greedy_rows": True,
               "deterministic_draft": True, "variants": ("classic", "block"),
               "coin_inputs": True}  # eagle_utils' _verify_coins hands the kernel its coins

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        stub_package("torchvision")
        _backfill()
        try:
            f = {key: _find(homes) for key, homes in HOMES.items()}
        except ModuleNotFoundError as exc:
            if exc.name != "sgl_kernel":
                raise
            stub_package("sgl_kernel")
            f = {key: _find(homes) for key, homes in HOMES.items()}
        self._tree, self._verify, self._chain = f["tree"], f["verify"], f["chain"]
        self._chain_tree = f["chain_tree"]
        self._r2t_func, self._r2t_kernel = f["r2t_func"], f["r2t_kernel"]
        self._prepare = f["prepare"]
        kernel = f["draft_kernel"]
        args = getattr(kernel, "arg_names", ())
        # 0.4.6's kernel (before SGLang PR #7163) takes no extend_lens: its layout is step-major.
        self._draft_kernel = kernel if "extend_lens" in args else None
        self._with_copies = "source_cache_loc" in args
        self._draft_kv = f["draft_kv"]
        # Before PR #7163 (0.4.6) the reader takes no page_size and is step-major, as its writer.
        kv_step_major = "page_size" not in getattr(self._draft_kv, "arg_names", ("page_size",))
        self._tree_sampler = _find([TS.HOME]) if device == "cuda" else None
        absent = TS.why_absent(device, self._tree_sampler)
        why = {C.TREE_SAMPLING: absent} if absent else {}
        if self._draft_kv is None:
            why[C.DRAFT_DECODE_KV_INDICES] = "no generate_draft_decode_kv_indices at a known home"
        if self._tree is None:
            why[C.TREE_BUILD] = NO_TRITON.format(what="tree build")
        if self._chain_tree is None:
            why[C.CHAIN_TREE_BUILD] = NO_CHAIN_TREE
        self._commit = VC.find()
        if self._commit is None:
            why[C.VERIFY_COMMIT] = VC.WHY_NOT
        if self._verify is None:
            why[C.GREEDY_TREE_VERIFY] = NO_TRITON.format(what="greedy tree verify")
        if self._chain is None:
            why[C.CHAIN_SAMPLING] = NO_TRITON.format(what="chain speculative sampling")
        if self._r2t_func is None and self._r2t_kernel is None:
            why[C.REQ_TO_TOKEN_WRITE] = "no assign_req_to_token_pool in this release"
        if self._prepare is None and self._draft_kernel is None:
            why[C.DRAFT_CACHE_LOCS] = (
                "this release's assign_draft_cache_locs places branch k, step s at position "
                "seq_len + s*topk + k (step-major; its reader generate_draft_decode_kv_indices "
                "agrees), not the contract's seq_len + k*num_steps + s, and has no "
                "page_size > 1 with topk > 1" if kernel is not None
                else "neither assign_draft_cache_locs nor prepare_for_draft at a known home "
                "(e.g. 0.5.13 assigns them inline in eagle_info_v2)")
        self._find_draft_inputs(f, why)
        self.why_not = why
        self.components = frozenset(Component) - set(why)
        block = self._chain is not None and "block_verification" in inspect.signature(
            self._chain).parameters
        self._entry = SE.find() if self._chain is not None else None
        self.accepts = {**DEFAULT_ACCEPTS, "tree_mask_modes": (0, 1),
                        "greedy_rows": self._verify is not None, "deterministic_draft": True,
                        "variants": ("classic",) + (("block",) if block else ())
                        + (("entry",) if self._entry else ()),
                        # The entry's sampler is the classic one behind its logits pipeline.
                        "ratio_variants": ("classic", "entry"),
                        # 0.4.6 has no per-branch pages: only page 1 is its layout mapped.
                        "page_sizes": (1,) if kv_step_major else None,
                        "draft_extend_layouts": self._extend_layouts, "coin_inputs": True,
                        "known": [k for k in KNOWN if self.version() in k["versions"]
                                  and self._device_kind() in k.get("devices", ("cpu", "cuda"))]}

    def version(self) -> str:
        """The imported package's own version: a checkout (@PATH) has no installed metadata,
        and this environment's may be another copy's."""
        import sglang
        from importlib.metadata import version
        return getattr(sglang, "__version__", None) or version("sglang")

    def _device_kind(self) -> str:
        return str(self.device).partition(":")[0]

    def _dev(self, *ts):
        return [t.to(self.device) if isinstance(t, torch.Tensor) else t for t in ts]

    def tree_build(self, parent_list, *, top_scores_index, seq_lens, topk, spec_steps, ndt, mode):
        pl, sel, sl = self._dev(parent_list, top_scores_index, seq_lens)
        bs = sl.shape[0]
        # As eagle_utils.build_tree_kernel_efficient allocates them: the mask all True (the
        # FULL mask's prefix columns are never written by the kernel), links -1.
        size = (int(sl.sum()) * ndt if mode == 0 else 0) + ndt * ndt * bs
        mask = torch.full((size,), True, dtype=torch.bool, device=self.device)
        ri, rn, rs = torch.full((3, bs, ndt), -1, dtype=torch.long, device=self.device)
        pos = torch.empty(bs * ndt, dtype=torch.long, device=self.device)
        self._tree(pl, sel, sl, mask, pos, ri, rn, rs, topk, spec_steps, ndt, mode)
        return {"mask": mask.cpu(), "positions": pos.cpu(), "retrieve_index": ri.cpu(),
                "next_token": rn.cpu(), "next_sibling": rs.cpu()}

    def chain_tree_build(self, bonus, *, draft_tokens, seq_lens, req_to_token,
                         req_pool_indices, mrope):
        """As eagle_worker_common's verify preparation calls it: the target backend's
        verify-mask buffer, sized for a larger batch than this one (garbage past it), the
        batch's req_pool_indices and the pool's whole req_to_token."""
        bonus, drafts, sl, r2t, rpi = self._dev(bonus, draft_tokens, seq_lens, req_to_token,
                                                req_pool_indices)
        bs, w = drafts.shape[0], drafts.shape[1] + 1
        buf = torch.ones((bs + 2) * w * w, dtype=torch.bool, device=self.device)
        out = self._chain_tree(bonus, drafts, sl, buf, req_pool_indices=rpi,
                               req_to_token=r2t, with_mrope=mrope)
        mask, pos, ri, rn, rs, tokens, loc, rope = out
        cpu = lambda t: None if t is None else t.cpu()  # noqa: E731
        return {"mask": mask[:bs * w * w].cpu(), "positions": pos.cpu(),
                "retrieve_index": ri.cpu(), "next_token": rn.cpu(), "next_sibling": rs.cpu(),
                "tokens": tokens.cpu(), "out_cache_loc": cpu(loc), "mrope_positions": cpu(rope)}

    def verify_commit(self, predict, **kw):
        return VC.verify_commit(self._commit, device=self.device, predict=predict, **kw)

    def _buffers(self, bs: int, ndt: int, width: int):
        """predict / accept_index / accept_token_num as eagle_utils' verify allocates them."""
        return (torch.zeros(bs * ndt, dtype=torch.int32, device=self.device),
                torch.full((bs, width), -1, dtype=torch.int32, device=self.device),
                torch.zeros(bs, dtype=torch.int32, device=self.device))

    def greedy_tree_verify(self, candidates, *, retrieve_index, next_token, next_sibling,
                           target_predict, num_steps):
        cand, ri, rn, rs, tp = self._dev(candidates, retrieve_index, next_token, next_sibling,
                                         target_predict)
        bs, ndt = cand.shape
        pred, acc, num = self._buffers(bs, ndt, num_steps + 1)
        self._verify(pred, acc, num, cand, ri, rn, rs, tp)
        return {"predicts": pred.cpu(), "accept_index": acc.cpu(), "accept_len": num.cpu()}

    def tree_sampling(self, candidates, **kw):
        return TS.tree_sampling(self._tree_sampler, device=self.device, candidates=candidates,
                                **kw)

    def chain_sampling(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant, coins=None, final_coins=None):
        bs, k = draft_ids.shape
        out = torch.full((bs, k + 1), -1, dtype=torch.int64)
        coins, final = F.chain_coins(bs, k, seed, coins, final_coins)
        extra = {"block_verification": True} if variant == "block" else {}
        # SGLang verifies an all-greedy batch with verify_tree_greedy on target argmax, a
        # sampled one with the chain sampler: a mixed batch is split the same way.
        groups = ((greedy.nonzero()[:, 0], True), ((~greedy).nonzero()[:, 0], False))
        if variant == "entry" and not bool(greedy.all()) and SE.filters_bound(self.device):
            # A mixed batch goes to the entry whole, its greedy rows at top-k 1 (one with a
            # tied maximum, where top-k 1 keeps the ties, stays on the greedy verify).
            top2 = target_probs.topk(2, -1).values
            tied = greedy & ((top2[..., 0] == top2[..., 1]) | target_probs.isnan().any(-1)).any(1)
            groups = ((tied.nonzero()[:, 0], True), ((~tied).nonzero()[:, 0], False))
        for rows, is_greedy in groups:
            if len(rows) == 0:
                continue
            d = draft_ids[rows]
            cand = F.chain_candidates(d)
            ri, rn, rs = F.chain_links(len(rows), k + 1, "cpu")
            pred, acc, num = self._buffers(len(rows), k + 1, k + 1)
            if variant == "entry" and not is_greedy:  # greedy rows: sglang_entry's docstring
                q = F.dense_draft_probs(d, None if draft_probs is None else draft_probs[rows],
                                        target_probs.shape[-1])
                pred, num, acc = SE.eagle_sample(
                    self._entry, device=self.device, target_probs=target_probs[rows],
                    seeds=seed + rows, greedy=greedy[rows], variant=variant, dense_q=q,
                    candidates=cand, links=(ri, rn, rs))
            elif is_greedy:
                target = target_probs[rows].argmax(-1)
                self._verify(pred, acc, num, *self._dev(cand, ri, rn, rs, target))
            else:
                q = F.dense_draft_probs(d, None if draft_probs is None else draft_probs[rows],
                                        target_probs.shape[-1])
                self._chain(pred, acc, num, *self._dev(
                    cand, ri, rn, rs, coins[rows], final[rows], target_probs[rows].float(), q),
                    1.0, 1.0, True, **extra)  # thresholds at SGLang's defaults; deterministic
            out[rows] = F.chain_tokens(pred, acc, num, d)
        return out

    def req_to_token_write(self, req_to_token, req_pool_indices, start, end, out_cache_loc):
        r2t, pool, s, e, loc = self._dev(req_to_token.clone(), req_pool_indices, start, end,
                                         out_cache_loc)
        bs = pool.shape[0]
        if self._r2t_func is not None:
            self._r2t_func(pool, r2t, s, e, loc, bs)
        else:  # launched as the releases' callers launch it
            import triton
            self._r2t_kernel[(bs,)](pool, r2t, s, e, loc, r2t.shape[1],
                                    triton.next_power_of_2(bs))
        return r2t.cpu()

    def draft_cache_locs(self, req_to_token, *, req_pool_indices, seq_lens, topk, num_steps,
                         page_size):
        r2t, pool, sl = self._dev(req_to_token.clone(), req_pool_indices, seq_lens)
        if self._prepare is not None:
            return self._prepare_for_draft(r2t, pool=pool, sl=sl, topk=topk, num_steps=num_steps,
                                           page_size=page_size)
        return self._assign_draft_cache_locs(req_to_token, r2t=r2t, pool=pool, sl=sl, topk=topk,
                                             num_steps=num_steps,
                                             page_size=page_size)

    def draft_decode_kv_indices(self, req_to_token, *, req_pool_indices, seq_lens, topk,
                                num_steps, page_size):
        """generate_draft_decode_kv_indices launched as the multi-step draft backends
        (flashinfer, triton) launch it: grid (num_steps, bs, topk), `positions` the draft
        batch's at entry (seq_lens repeated topk times: kv_indptr sums them), kv_indices int32
        [num_steps, topk*sum(seq_lens) + bs*topk*num_steps], kv_indptr int32 zeros (the kernel
        never writes entry 0). 0.5.23's extras at their defaults: no draft window, one token
        block (NUM_STEPS 0), token-granular rows, no v2p translation."""
        import triton
        kernel = self._draft_kv
        paged = "page_size" in kernel.arg_names
        table = req_to_token if paged else _step_major(req_to_token, req_pool_indices,
                                                       seq_lens, topk, num_steps)
        r2t, pool, sl = self._dev(table.clone(), req_pool_indices, seq_lens)
        bs, n, p2 = sl.shape[0], sl.shape[0] * topk, triton.next_power_of_2
        kvi = torch.full((num_steps, topk * int(sl.sum()) + n * num_steps), -1,
                         dtype=torch.int32, device=self.device)
        kvp = torch.zeros((num_steps, n + 1), dtype=torch.int32, device=self.device)
        head = [pool, r2t, sl, kvi, kvp, sl.repeat_interleave(topk)]
        tail = [kvi.shape[1], kvp.shape[1], p2(bs), p2(num_steps), p2(n)]
        # 0.4.9+: row stride (pool_len; 0.5.23 row_stride), strides, uppers, page_size;
        # 0.4.6: num_seqs and topk first, no page_size.
        args = ([r2t.shape[1], *tail, page_size] if paged
                else [bs, topk, r2t.shape[1], *tail])
        kernel[(num_steps, bs, topk)](*head, *args)
        return {"kv_indices": kvi.cpu(), "kv_indptr": kvp.cpu()}

    def _find_draft_inputs(self, f: dict, why: dict) -> None:
        """The draft-extend kernels of this release (HOMES), into `why` where absent."""
        self._extend_packed = f["extend_packed"]
        self._extend_padded = f["extend_select"] and f["extend_layout"] and (
            f["extend_select"], f["extend_layout"])
        self._extend_layouts = tuple(name for name, ok in (
            ("padded", self._extend_padded), ("packed", self._extend_packed)) if ok)
        why[C.DRAFT_NEXT_TOKEN] = NO_NEXT_TOKEN
        why[C.DRAFT_STEP_SLOTS] = NO_STEP_SLOTS
        if not self._extend_layouts:
            why[C.DRAFT_EXTEND_INPUTS] = (
                "this release builds the draft extend inputs in torch (0.5.14-0.5.19: "
                "eagle_worker_v2._draft_extend_for_decode's select_index = arange * "
                "num_draft_tokens + accept_lens - 1, positions in prepare_for_draft_extend), "
                "no kernel")

    def draft_extend_inputs(self, seq_lens, num_drafts, num_accepted, layout):
        """Padded (0.5.23): prepare_draft_extend_inputs' select index (b * width +
        accept_len - 1) and prepare_draft_extend_layout's positions, width = the verify
        batch's num_draft_tokens (one for all requests: SGLang drafts num_steps each).
        Packed (0.4.6-0.5.8): create_extend_after_decode_spec_info on seq_lens after the
        round and accept_lens = accepted + 1; it returns the token at each request's last
        index (new_verified_id), so verified_id holds each token's own index."""
        acc = (num_accepted + 1).to(torch.int32).to(self.device)
        if layout == "padded":
            select, make = self._extend_padded
            width = int(num_drafts[0]) + 1
            predict = torch.zeros(acc.shape[0] * width, dtype=torch.int32, device=self.device)
            _, last, _ = select(acc, predict, width)
            positions = make(seq_lens.to(self.device), width, False)[3][0]
            return {"positions": positions.cpu(), "last_token_indices": last.cpu(),
                    "source_indices": None}
        import triton
        total, bs = int(acc.sum()), acc.shape[0]
        ids = torch.arange(total, dtype=torch.int32, device=self.device)
        after = (seq_lens + num_accepted + 1).to(self.device)
        positions = torch.empty(total, dtype=torch.long, device=self.device)
        last = torch.empty(bs, dtype=torch.int32, device=self.device)
        kernel = self._extend_packed
        if "accept_len_cum" in kernel.arg_names:  # 0.4.6, as prepare_extend_after_decode
            kernel[(bs,)](ids, after, acc, torch.cumsum(acc, 0, dtype=torch.int), positions,
                          last, triton.next_power_of_2(int(num_drafts.max()) + 1))
        else:
            kernel[(bs,)](ids, after, acc, positions, last,
                          triton.next_power_of_2(max(int(num_drafts.max()) + 1, bs)))
        return {"positions": positions.cpu(), "last_token_indices": last.cpu(),
                "source_indices": None}

    def _prepare_for_draft(self, r2t, *, pool, sl, topk, num_steps, page_size):
        """0.5.14+: SGLang's prepare_for_draft on stub batch objects, stopped right after
        it assigns the slots (before it builds the forward batch)."""
        moves: list = []
        batch = SimpleNamespace(
            forward_mode=SimpleNamespace(is_idle=lambda: False), seq_lens=sl,
            seq_lens_cpu=sl.cpu(), req_pool_indices=pool, device=self.device,
            token_to_kv_pool_allocator=SimpleNamespace(page_size=page_size),
            multimodal_inputs=[None] * sl.shape[0], out_cache_loc=None)
        args = [SimpleNamespace(), SimpleNamespace(req_to_token=r2t), batch, None,
                _DraftRunner(moves), topk, num_steps]
        if "self" in inspect.signature(self._prepare).parameters:
            args.insert(0, None)  # 0.5.14-0.5.15: a method that never reads self
        try:
            self._prepare(*args)
        except _Stop:
            pass
        copies = [(a, b) for src, tgt in moves for a, b in zip(src, tgt)]
        return {"out_cache_loc": batch.out_cache_loc.cpu(), "copies": copies}

    def _assign_draft_cache_locs(self, table, *, r2t, pool, sl, topk, num_steps, page_size):
        """0.4.9-0.5.12: the kernel writes the allocator's fresh slots into req_to_token from
        seq_len on (paged with topk > 1: each branch on pages of its own), then gathers the
        per-branch write slots. The harness form reads the slots from `table` instead: the
        kernel gets distinct marker slots, and each marker it returns is mapped to the slot
        `table` holds at the position where the kernel put that marker."""
        import triton
        bs, dev = sl.shape[0], self.device
        paged = page_size > 1 and topk > 1
        last = sl % page_size
        # The caller's sizes (get_last_loc_large_page_size_large_top_k): pages per branch,
        # slots allocated per request (from seq_len to the end of the last branch's pages).
        new_pages = (last + num_steps + page_size - 1) // page_size
        ext = (new_pages * page_size * topk - last if paged
               else torch.full_like(sl, topk * num_steps))
        marker0 = int(r2t.max()) + 1
        loc = torch.arange(marker0, marker0 + int(ext.sum()), device=dev)  # int64, as allocated
        args = [pool, r2t, sl, ext, new_pages, loc]
        src = tgt = None
        if self._with_copies:  # 0.5.6-0.5.12: the prefix-tail KV copies come back as slot lists
            dup = int(last.sum()) * (topk - 1) if paged else 0
            if paged:
                src, tgt = (torch.zeros(dup, dtype=torch.int32, device=dev) for _ in "st")
            args += [src, tgt, torch.cumsum(last, 0) if paged else None, dup]
        iter_upper = num_steps + page_size if self._with_copies else num_steps
        self._draft_kernel[(bs,)](*args, r2t.shape[1], topk, num_steps, page_size,
                                  triton.next_power_of_2(bs), triton.next_power_of_2(iter_upper))
        placed = {int(v): (row, p) for row in pool.tolist()
                  for p, v in enumerate(r2t[row].tolist()) if v >= marker0}

        def slot(v: int) -> int:  # a marker -> table's slot there; a table slot stays
            return int(table[placed[v]]) if v in placed else v

        out = loc[: bs * topk * num_steps]  # the caller's "remove padded slots"
        copies = None  # <= 0.5.5 aliases req_to_token entries instead of copying KV
        if self._with_copies:
            copies = [] if src is None else [(slot(a), slot(b))
                                             for a, b in zip(src.tolist(), tgt.tolist())]
        return {"out_cache_loc": torch.tensor([slot(v) for v in out.tolist()]),
                "copies": copies}


def _step_major(table, pool, seq_lens, topk: int, num_steps: int):
    """0.4.6's reader takes branch k, step s at position seq_len + s*topk + k (where its
    assign_draft_cache_locs put it; page_size 1 only): the contract's slot of (k, s), at
    seq_len + k*num_steps + s, is moved there, a lossless permutation of the draft region."""
    out = table.clone()
    for r, n in zip(pool.tolist(), seq_lens.tolist()):
        for k in range(topk):
            for s in range(num_steps):
                out[r, n + s * topk + k] = table[r, n + k * num_steps + s]
    return out
