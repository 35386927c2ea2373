"""vLLM's own rejection samplers from its released wheel, run in a worker subprocess
(harness/adapters/foreign/). Variants, each where the release has it (the worker reports the
release's own `accepts["variants"]`):

- "classic": V1's `vllm.v1.sample.rejection_sampler.rejection_sample` (every release).
- "entry": V1 through its public entry, `RejectionSampler.forward`, with the entry's own
  bonus sampling and logits processing (allowed ids, bad words, penalties;
  harness/adapters/vllm_entry.py).
- "mrv2": Model Runner V2's probabilistic sampler, accept iff p(x) > u q(x), recovered from
  max(0, p - q) (0.19 `rejection_sampler.probabilistic_rejection_sample`, 0.21
  `probabilistic_rejection_sampler_utils`, 0.23+ `rejection_sampler_utils.rejection_sample`).
- "mrv2-block": the same with `use_block_verification=True` (0.25+).
- "mrv2-strict": MRV2's strict sampler (0.13-0.19): the target's own Gumbel sample (vLLM's
  `gumbel_sample`) is compared with the draft.

Mapped conventions (docs/adapters.md): per-request (ragged) drafts flattened with
num_draft_tokens / cu_num_draft_tokens (V1) or cu_num_logits (MRV2); target probabilities
passed as logits log(p) where the release takes logits (V1 0.17+, all MRV2), draft
probabilities as log(q) to MRV2; greedy rows get vLLM's greedy temperature, sampled rows
temperature 1 (p is already the post-temperature distribution) and their own seed, seed + b
or the law's row_seeds (V1: a torch.Generator per sampled request; MRV2: the seed of the
request's state slot, a permutation drawn from the seed); V1's rejection_sample takes the
bonus token from outside: the adapter draws it (seeded per request) from p at the bonus
position for sampled rows and takes the argmax for greedy rows (the entry and MRV2 sample it
themselves); outputs past the
emitted tokens become -1 (V1 already pads with -1, MRV2 leaves them undefined)."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os

import torch
import triton
import triton.language as tl

from harness.adapters import vllm_draft_step, vllm_entry
from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.adapters.seed_draws import seed_uniform
from harness.adapters.stubs import stub_package
from harness.base.known import drawn_around
from harness.references.draft_inputs import NEXT_ID, VERIFY_ID

MRV2 = "vllm.v1.worker.gpu.spec_decode"
# The leading arguments the adapter passes positionally ("target_*": probs or logits).
V1_ARGS = ("draft_token_ids", "num_draft_tokens", "max_spec_len", "cu_num_draft_tokens",
           "draft_probs", "target_*", "bonus_token_ids", "sampling_metadata")
# MRV2's probabilistic sampler takes these by name (0.18 has no expanded_* mappings).
MRV2_ARGS = ("target_logits", "draft_logits", "draft_sampled", "cu_num_logits", "pos",
             "idx_mapping", "expanded_idx_mapping", "expanded_local_pos", "temperature", "seed",
             "num_speculative_steps")


def _check_names(fn, known) -> None:
    """A clear error where a release's function needs an argument the adapter does not make."""
    params = inspect.signature(fn).parameters
    missing = [n for n, p in params.items() if p.default is p.empty and n not in known]
    if missing:
        raise TypeError(f"{fn.__module__}.{fn.__name__}{inspect.signature(fn)}: the adapter "
                        f"has no {missing}; teach it this release's signature")


def _tokens(out):
    """The sampled ids of a Sampler or RejectionSampler output: SamplerOutput's
    sampled_token_ids, or the tensor itself (0.8's RejectionSampler.forward returns it)."""
    return getattr(out, "sampled_token_ids", out)


def _check_args(fn, expected) -> None:
    """A clear error where a release's sampler no longer takes what the adapter passes."""
    names = list(inspect.signature(fn).parameters)
    if len(names) < len(expected) or any(
            n != e and not (e.endswith("*") and n.startswith(e[:-1]))
            for n, e in zip(names, expected)):
        raise TypeError(f"{fn.__module__}.{fn.__name__}{inspect.signature(fn)}: the adapter "
                        f"passes {expected}; teach it this release's signature")


def _optional(module: str, *names: str):
    """`module`'s attributes, or None where this release lacks the module or names; a missing
    side package still raises, so the installer resolves it."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("vllm."):
            return None
        raise
    found = [getattr(mod, n, None) for n in names]
    return None if None in found else found


@triton.jit
def _log1p(x):
    u = 1.0 + x  # log(u) * x / (u - 1) cancels u's rounding (Goldberg 1991)
    return tl.where(u == 1.0, x, tl.log(u) * (x / tl.where(u == 1.0, 1.0, u - 1.0)))


# MRV2's drafter-prefill kernel, newest home first: (module, name) per release range.
MRV2_PREPARE = ((f"{MRV2}.target_dependent_ar.speculator", "_prepare_prefill_inputs_kernel"),
                (f"{MRV2}.autoregressive.speculator", "_prepare_prefill_inputs_kernel"),
                (f"{MRV2}.eagle.speculator", "_prepare_eagle_inputs_kernel"),
                (f"{MRV2}.eagle", "_prepare_eagle_inputs_kernel"))


def _kernel_from_source(module: str, name: str):
    """The Triton kernel `name`, compiled from `module`'s own file without running the
    module: MRV2's speculator modules import the model loader and with it packages no
    kernel uses and the locks leave out (einops at 0.33; openai, llguidance at 0.13). The
    kernel's body reads only tl, and Triton reads its source from the file (the node keeps
    its line numbers). The file is found under MRV2's package without importing the packages
    between (0.13's `spec_decode.eagle` is eagle.py itself, which imports the loader). None
    where this release lacks the file or the kernel."""
    try:  # spec_decode/__init__ is light: init_speculator, torch and config
        package = importlib.util.find_spec(MRV2)
    except ModuleNotFoundError:  # before 0.13: no vllm.v1.worker.gpu
        return None
    if package is None:
        return None
    base = os.path.join(package.submodule_search_locations[0],
                        *module.removeprefix(MRV2 + ".").split("."))
    origin = next((f for f in (base + ".py", os.path.join(base, "__init__.py"))
                   if os.path.isfile(f)), None)
    if origin is None:
        return None
    with open(origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), origin)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name),
                None)
    if node is None:
        return None
    scope = {"triton": triton, "tl": tl}
    exec(compile(ast.Module([node], type_ignores=[]), origin, "exec"), scope)
    return scope[name]


def _find_mrv2_prepare():
    """0.33 _prepare_prefill_inputs_kernel (target_dependent_ar; 0.25-0.29 autoregressive),
    0.13-0.21 _prepare_eagle_inputs_kernel; None before 0.13. The releases rename the
    drafter's buffers (eagle_* -> draft_*), so the adapter passes arguments by name."""
    for module, name in MRV2_PREPARE:
        found = _kernel_from_source(module, name)
        if found:
            return found
    return None


def _interpreter_log1p() -> None:
    """MRV2 (0.25+) calls `libdevice.log1p`, which Triton's interpreter has no body for;
    give it one (accurate for tiny x, where Gumbel tails live). vLLM's code is untouched."""
    import triton.language.extra.libdevice as libdevice
    libdevice.log1p = _log1p


def _draft_rows(draft_ids: torch.Tensor, n: list[int]) -> list[list[int]]:
    """Each request's drafts as a list (spec_token_ids, SpecDecodeMetadata's rows)."""
    return [row[:m] for row, m in zip(draft_ids.tolist(), n)]


def _bonus(p: torch.Tensor, greedy: torch.Tensor, seeds: torch.Tensor) -> torch.Tensor:
    """The bonus token V1's caller samples before rejection_sample, for each request from
    its bonus row p [bs, V]: the argmax for greedy rows and fully masked ones (an all -inf
    row's argmax is token 0), else drawn from p with a coin that is a function of the
    request's own seed alone, so it follows the request anywhere."""
    coin = seed_uniform(seeds, 0x5EED)
    masked = p.isnan().any(-1)
    cdf = torch.nan_to_num(p.double(), nan=0.0).cumsum(-1)
    drawn = torch.searchsorted(cdf, (coin * cdf[:, -1])[:, None], right=True)[:, 0]
    drawn = torch.minimum(drawn, (p > 0).long().cumsum(-1).argmax(-1))  # a last nonzero token
    top = torch.nan_to_num(p, nan=-1.0).argmax(-1)
    return torch.where(greedy | masked, top, drawn).long()


def _no_pinned_memory_without_accelerator() -> None:
    """With no GPU visible vLLM picks its UnspecifiedPlatform, which claims pinned memory;
    torch cannot pin without an accelerator, so the entry's penalties (make_tensor_with_pad)
    would fail where vLLM's own CPU platform says False. Its CPU platform is no way out: its
    greedy sampling calls a compiled CPU op (torch.ops._C.greedy_argmax)."""
    import sys
    from vllm.platforms import current_platform
    if torch.cuda.is_available() or not current_platform.is_pin_memory_available():
        return
    type(current_platform).is_pin_memory_available = classmethod(lambda cls: False)
    # 0.24-0.31 read it once, at import, into module constants (torch_utils.PIN_MEMORY, and
    # the penalties op's copy of it): those say False too.
    importlib.util.find_spec("vllm.v1.sample.ops.penalties") and importlib.import_module(
        "vllm.v1.sample.ops.penalties")
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm") and getattr(module, "PIN_MEMORY", None) is True:
            module.PIN_MEMORY = False


# Recorded findings (docs/findings/<id>.py): the law, variant and input class they break, and
# the releases they were reproduced on; the laws draw around them there (--with-known: not).
MIN_TOKENS_BONUS = "vllm_0_33_min_tokens_bonus_masked_after_drafts"
KNOWN = ({"id": "vllm_0_33_block_verify_masked_row_accepts_zero_prob",
          "laws": ("kernel_chain_acceptance",), "variant": "mrv2-block",
          "input_class": "nonfinite_rows", "versions": ("0.25.0", "0.29.0", "0.33.0")},
         # The law draws around it by checking no step after a request's first one past
         # max_model_len (harness/laws/kernel_draft_step_slots.py).
         # Drawn around in the entry's min-tokens requests (vllm_entry._min_tokens).
         {"id": MIN_TOKENS_BONUS, "laws": ("kernel_chain_acceptance", "kernel_chain_seeded",
                                           "kernel_chain_distribution"),
          "variant": None, "input_class": None,
          "versions": ("0.17.0", "0.18.0", "0.19.0", "0.25.0", "0.29.0", "0.33.0")},
         {"id": "vllm_0_33_draft_step_after_max_len_writes_first_block",
          "laws": ("kernel_draft_step_slots",), "input_class": "model_end",
          "versions": ("0.18.0", "0.19.0", "0.25.0", "0.29.0", "0.33.0")})


class VllmKernels:
    name = "vllm-kernels"
    DIST = "vllm"
    TARGET = "harness.adapters.vllm_kernels:VllmKernels"
    # VLLM_USE_FLASHINFER_SAMPLER=0: on CUDA the entry's Sampler probes FlashInfer's
    # top-k/top-p sampler (a package a pack leaves out); no request here sets top-k/top-p.
    ENV = {"VLLM_LOGGING_LEVEL": "ERROR", "VLLM_CONFIGURE_LOGGING": "0",
           "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    NEVER_INSTALL = frozenset({"torch", "triton", "torchvision", "torchaudio", "vllm"})
    SUPPORTED = ("0.33.0",)
    # The first release with V1's speculative decoding (v1/sample/rejection_sampler.py,
    # 0.8.0, before its Triton kernels): where `sweep --versions all` starts. SWEEP: the
    # default sweep, a release of each layout.
    FIRST = "0.8.0"
    SWEEP = ("0.9.0", "0.11.0", "0.13.0", "0.17.0", "0.19.0", "0.21.0", "0.25.0", "0.29.0",
             "0.33.0")
    components = frozenset({Component.CHAIN_SAMPLING, Component.DRAFT_EXTEND_INPUTS,
                            Component.DRAFT_NEXT_TOKEN, Component.DRAFT_STEP_SLOTS})
    why_not = {
        Component.TREE_BUILD: "vLLM builds no draft tree on device: its tree speculation "
        "(0.11-0.19) took a static token tree from the config (speculative_token_tree), "
        "its attention bias built in Python; 0.21+ has none",
        Component.CHAIN_TREE_BUILD: "vLLM builds no verify tree: a chain's verify batch is "
        "the drafts appended to each request's tokens by the model runner",
        Component.VERIFY_COMMIT: "vLLM verifies chains only: an accepted path already is "
        "each request's front, its KV stays where the verify batch wrote it, and no function "
        "compacts a tree path or commits it",
        Component.GREEDY_TREE_VERIFY: "vLLM has no tree verification kernel: its rejection "
        "samplers take chains (cu_num_draft_tokens / cu_num_logits)",
        Component.TREE_SAMPLING: "vLLM has no tree speculative sampler: its rejection samplers "
        "(v1/sample/rejection_sampler.py, MRV2's v1/worker/gpu) walk chains "
        "(cu_num_draft_tokens) and never try siblings; 0.33.0 has no draft tree at all "
        "(speculative_token_tree is gone)",
        Component.REQ_TO_TOKEN_WRITE: "vLLM keeps block tables (one entry per KV block), not a "
        "per-token req_to_token table; its kernels read slot mappings out of block tables",
        Component.DRAFT_CACHE_LOCS: "vLLM's EAGLE slot-mapping kernel (v1/spec_decode/utils.py "
        "eagle_step_slot_mapping_metadata_kernel) maps one chain step (topk 1) through a "
        "block table and advances seq_lens; the form's topk > 1 layout and page copies have "
        "no counterpart (that step is DRAFT_STEP_SLOTS)",
        Component.DRAFT_DECODE_KV_INDICES: "vLLM has no draft-decode KV index kernel (checked "
        "0.33.0: nothing in v1/spec_decode or v1/attention builds per-branch index lists): its "
        "draft steps attend through the request's block table with seq_lens advanced one per "
        "step (eagle_step_update_slot_mapping_and_metadata), a chain (topk 1) of no branches",
    }
    # The CI pin's (0.33.0); an instance reports its own release's variants.
    accepts = {**DEFAULT_ACCEPTS, "ragged_drafts": True, "greedy_rows": True,
               "deterministic_draft": True,
               "variants": ("classic", "entry", "mrv2", "mrv2-block"),
               # MRV2's probabilistic sampler is the same min(1, p/q) rule as V1's.
               "ratio_variants": ("classic", "entry", "mrv2"),
               # Seeds per request (a generator each, or a seed slot): a row's draws
               # follow it wherever the batch places it.
               "row_seeds": True,
               # "entry": penalties on CPU only (on CUDA vLLM's repetition penalty is a
               # compiled op, vllm._C, which a pack leaves out).
               "entry_penalties": True,
               # "padded-mrv2": MRV2's drafter-prefill kernel, the padded layout again.
               "draft_extend_layouts": ("padded", "padded-mrv2")}

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.accepts = {**self.accepts, "entry_penalties": device == "cpu"}
        if os.environ.get("TRITON_INTERPRET") == "1":
            _interpreter_log1p()
        # On a machine with NVIDIA GPUs (NVML sees them even when CUDA_VISIBLE_DEVICES hides
        # them) vLLM's CUDA platform module imports its compiled op library (0.33:
        # vllm._C_stable_libtorch, 92 MB), which a pack leaves out and which cannot load
        # without a driver; no kernel under test calls it. A loadable one is left alone.
        stub_package("vllm._C_stable_libtorch")
        _no_pinned_memory_without_accelerator()
        from vllm.v1.sample import metadata, rejection_sampler
        if not hasattr(rejection_sampler, "rejection_sample"):
            raise TypeError(f"vllm {self.version()}: vllm.v1.sample.rejection_sampler has no "
                            "rejection_sample (V1's sampler before its Triton kernels is "
                            "torch code inside RejectionSampler); teach the adapter this "
                            "release's form")
        self._v1, self._meta = rejection_sampler, metadata.SamplingMetadata
        self._greedy_temp = float(getattr(rejection_sampler.GREEDY_TEMPERATURE, "value",
                                          rejection_sampler.GREEDY_TEMPERATURE))
        _check_args(rejection_sampler.rejection_sample, V1_ARGS)
        self._v1_logits = "target_logits" in inspect.signature(
            rejection_sampler.rejection_sample).parameters
        prob = (_optional(f"{MRV2}.rejection_sampler_utils", "rejection_sample")
                or _optional(f"{MRV2}.probabilistic_rejection_sampler_utils",
                             "probabilistic_rejection_sample")
                or _optional(f"{MRV2}.rejection_sampler", "probabilistic_rejection_sample"))
        self._mrv2 = prob and prob[0]
        if self._mrv2:
            _check_names(self._mrv2, MRV2_ARGS)
        strict = (_optional(f"{MRV2}.rejection_sampler", "strict_rejection_sample")
                  or _optional(f"{MRV2}.rejection_sample", "rejection_sample"))
        gumbel = _optional("vllm.v1.worker.gpu.sample.gumbel", "gumbel_sample")
        self._strict = strict and gumbel and (strict[0], gumbel[0])
        params = inspect.signature(self._mrv2).parameters if self._mrv2 else {}
        self._find_entry(rejection_sampler)
        self.accepts = {**self.accepts, "variants": tuple(
            v for v, ok in (("classic", True), ("entry", self._entry_form), ("mrv2", self._mrv2),
                            ("mrv2-block", "use_block_verification" in params),
                            ("mrv2-strict", self._strict)) if ok)}
        self._mrv2_needs_q = self._mrv2 and params["draft_logits"].annotation in (
            torch.Tensor, "torch.Tensor")  # 0.19: no path for drafts without logits
        self._find_draft_input_kernels()
        self.accepts["known"] = [k for k in KNOWN if self.version() in k["versions"]]

    def _find_entry(self, rejection_sampler) -> None:
        """V1's public entry (RejectionSampler.forward), its Sampler (the bonus; a batch
        without drafts), SpecDecodeMetadata and the logits-processor holder."""
        from vllm.v1.sample.sampler import Sampler
        self._entry_form = vllm_entry.entry_signature(rejection_sampler.RejectionSampler)
        spec = _optional("vllm.v1.spec_decode.metadata", "SpecDecodeMetadata")
        # The logits-processor holder: LogitsProcessors (0.10.1+), LogitsProcessorManager
        # (0.9.2-0.10.0: the same two lists, argmax_invariant and non_argmax_invariant).
        procs = (_optional("vllm.v1.sample.logits_processor", "LogitsProcessors")
                 or _optional("vllm.v1.sample.logits_processor", "LogitsProcessorManager"))
        self._logits_procs = procs and procs[0]
        self._min_tokens = vllm_entry.takes_min_tokens(self._logits_procs)
        if not (self._entry_form and spec):
            self._entry_form = None
            return
        self._spec_meta = spec[0]
        self._sampler = Sampler()
        init = inspect.signature(rejection_sampler.RejectionSampler.__init__).parameters
        self._rejection_sampler = (rejection_sampler.RejectionSampler(self._sampler)
                                   if "sampler" in init else
                                   rejection_sampler.RejectionSampler())

    def version(self) -> str:
        import vllm
        return vllm.__version__

    def chain_sampling(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant, row_seeds=None):
        if variant not in self.accepts["variants"]:
            raise ValueError(f"vllm {self.version()} has no variant {variant!r}; it has "
                             f"{self.accepts['variants']}")
        bs, k = draft_ids.shape
        # request b's own seed (its generator / seed slot)
        seeds = seed + torch.arange(bs) if row_seeds is None else row_seeds.long()
        kw = dict(num_drafts=num_drafts, draft_probs=draft_probs, target_probs=target_probs,
                  greedy=greedy, seeds=seeds)
        if variant == "classic":
            out = self._classic(draft_ids, **kw)
        elif variant == "entry":
            out = self._entry(draft_ids, seed=seed, **kw)
        else:
            out = self._model_runner_v2(draft_ids, variant=variant, seed=seed, **kw)
        return torch.nn.functional.pad(out.long().cpu(), (0, k + 1 - out.shape[1]), value=-1)

    def _flat(self, t, num_drafts):
        """Request b's first num_drafts[b] rows of t, back to back (vLLM's flat drafts)."""
        return t[torch.arange(t.shape[1])[None, :] < num_drafts[:, None]]

    def _flat_q(self, draft_probs, num_drafts):
        """The flat draft rows on the device, or None for a deterministic drafter."""
        return (None if draft_probs is None
                else self._flat(draft_probs, num_drafts).float().contiguous().to(self.device))

    def _v1_metadata(self, greedy, seeds, **known):
        """SamplingMetadata as V1's InputBatch makes it: greedy rows at vLLM's greedy
        temperature, a generator per seeded (sampled) request."""
        dev = self.device
        temp = torch.where(greedy, self._greedy_temp, 1.0).float()
        gens = {b: torch.Generator(dev).manual_seed(int(seeds[b]))
                for b in range(len(greedy)) if not greedy[b]}
        return vllm_entry.sampling_metadata(
            self._meta, logits_procs_cls=self._logits_procs, temperature=temp, greedy=greedy, generators=gens,
            device=dev, **known)

    def _classic(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seeds):
        """V1's rejection_sample, as RejectionSampler.forward calls it: flat drafts, the
        request's target rows up to its drafts, the bonus sampled beforehand (here from p,
        by a coin of request b's own seed: _bonus)."""
        n = num_drafts.tolist()
        bs, dev = len(n), self.device
        p = self._flat(target_probs, num_drafts).float()
        tgt = p
        if self._v1_logits:  # raw logits, as the model returns them: log p + a row's offset
            used = vllm_entry.positions(target_probs, num_drafts - 1)
            tgt = vllm_entry.as_logits(p) + vllm_entry.row_offsets(seeds, used)
        q = self._flat_q(draft_probs, num_drafts)
        bonus = _bonus(target_probs[torch.arange(bs), num_drafts], greedy, seeds)
        meta = self._v1_metadata(greedy, seeds, proc=vllm_entry.Processing(seeds, None, {}, None),
                                 draft_rows=_draft_rows(draft_ids, n),
                                 vocab=target_probs.shape[2])
        cu = torch.tensor(n, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        return self._v1.rejection_sample(
            self._flat(draft_ids, num_drafts).to(torch.int32).to(dev), n, max(n), cu.to(dev),
            q, tgt.contiguous().to(dev), bonus[:, None].to(dev), meta)

    def _entry(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seeds, seed):
        """V1 through RejectionSampler.forward (harness/adapters/vllm_entry.py): the entry
        samples the bonus, applies the requests' allowed ids, bad words and penalties; a
        batch without drafts goes to the plain Sampler, as the runner sends it."""
        n = num_drafts.tolist()
        dev = self.device
        rows = _draft_rows(draft_ids, n)
        # Penalties where the entry samples the bonus itself (its Sampler counts the drafts
        # in the bonus row's history, as the logits handed over assume); an older entry's
        # caller sampled the bonus without them.
        penalties = self.accepts["entry_penalties"] and self._entry_form == "logits"
        bonus_known = bool(drawn_around(self.accepts, finding=MIN_TOKENS_BONUS))
        proc = vllm_entry.processing(target_probs, num_drafts=num_drafts, row_seeds=seeds,
                                     seed=seed, penalties=penalties,
                                     min_tokens=self._min_tokens, whole_rows=bonus_known)
        logits = vllm_entry.logits_for(target_probs, draft_ids, num_drafts, proc).to(dev)
        meta = self._v1_metadata(greedy, seeds, proc=proc, draft_rows=rows,
                                 vocab=target_probs.shape[2])
        q = self._flat_q(draft_probs, num_drafts)
        if sum(n) == 0:
            return _tokens(self._sampler(logits, meta))
        spec = vllm_entry.spec_metadata(self._spec_meta, rows, dev)
        if self._entry_form == "logits":
            return _tokens(self._rejection_sampler(spec, q, logits, meta))
        bonus = _tokens(self._sampler(logits[spec.bonus_logits_indices.long()], meta))
        return _tokens(self._rejection_sampler(spec, q, logits[spec.target_logits_indices.long()],
                                               bonus.view(-1, 1), meta))

    def _model_runner_v2(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy,
                         seeds, variant, seed):
        """MRV2, as its RejectionSampler calls it: one logits row per draft plus the bonus
        row per request, draft_sampled holding each row's input token (the drafts after the
        request's first row). Temperature, seed and draft logits live per request state
        (max_num_reqs slots, [slot, step, V] for the draft logits), reached through
        idx_mapping / expanded_idx_mapping: request b sits in a slot drawn from `seed` (a
        permutation, never the identity by construction), and the free slots hold values
        that change the answer if read (temperature 0, a one-hot draft, seed -1)."""
        n = num_drafts.tolist()
        bs, k, vocab, dev = len(n), draft_ids.shape[1], target_probs.shape[2], self.device
        slots = bs + 2
        state = torch.randperm(slots, generator=torch.Generator().manual_seed(seed))[:bs]
        used = vllm_entry.positions(target_probs, num_drafts)  # each request's n + 1 rows
        req, local = used.nonzero().unbind(1)
        logits = (vllm_entry.as_logits(target_probs[used])
                  + vllm_entry.row_offsets(seeds, used)).contiguous()
        # each row's input token: 0 at the request's first row, then its drafts
        draft_sampled = torch.cat([torch.zeros(bs, 1, dtype=torch.int64), draft_ids], 1)[used]
        cu = torch.cat([torch.zeros(1, dtype=torch.int32), (torch.tensor(n) + 1).cumsum(0)
                        .int()])
        pos = (local + 16).long()  # positions past a notional 16-token prompt
        temp = torch.zeros(slots).index_copy_(0, state, torch.where(greedy, 0.0, 1.0).float())
        slot_seeds = torch.full((slots,), -1, dtype=torch.int64).index_copy_(0, state,
                                                                             seeds.long())
        expanded = state[req].int()
        d = lambda t: t.to(dev)  # noqa: E731
        if variant == "mrv2-strict":
            strict, gumbel = self._strict
            gp = inspect.signature(gumbel).parameters
            if "idx_mapping" in gp or "expanded_idx_mapping" in gp:
                sample = gumbel(d(logits), d(expanded), d(temp), d(slot_seeds), d(pos),
                                apply_temperature=False)
            else:  # 0.13: per-row temperature and seed
                sample = gumbel(d(logits), d(temp[expanded.long()]),
                                d(slot_seeds[expanded.long()]), d(pos), apply_temperature=False)
            sampled, num = strict(sample.view(-1), d(draft_sampled.int()), d(cu), k)
        else:
            q = draft_probs
            if q is None and self._mrv2_needs_q:  # 0.19: a one-hot draft distribution
                q = torch.zeros_like(target_probs[:, :k]).scatter_(2, draft_ids[..., None], 1.0)
            params = inspect.signature(self._mrv2).parameters
            # 0.18: draft logits per batch row, [num_reqs, steps, V]; 0.19+: per request
            # state slot, reached through expanded_idx_mapping.
            per_row = "expanded_idx_mapping" not in params
            q_logits = None
            if q is not None:  # free slots: a one-hot draft on token 0
                rows = bs if per_row else slots
                per_slot = torch.zeros(rows, k, vocab)
                per_slot[:, :, 0] = 1.0
                per_slot[torch.arange(bs) if per_row else state] = q.float()
                # raw drafter logits: log q + an offset per (row, step), so that a
                # normalisation read from another row shows
                keys = seeds.long() if per_row else slot_seeds
                offsets = vllm_entry.row_offsets(
                    keys ^ 0xD4AF7, torch.ones(rows, k, dtype=torch.bool)).view(rows, k)
                q_logits = d((vllm_entry.as_logits(per_slot) + offsets[..., None]).contiguous())
            named = {"target_logits": d(logits), "draft_logits": q_logits,
                     "draft_sampled": d(draft_sampled.int()), "cu_num_logits": d(cu),
                     "pos": d(pos), "idx_mapping": d(state.int()),
                     "expanded_idx_mapping": d(expanded), "expanded_local_pos": d(local.int()),
                     "temperature": d(temp), "seed": d(slot_seeds), "num_speculative_steps": k}
            if variant == "mrv2-block":
                named["use_block_verification"] = True
            sampled, num = self._mrv2(**{n: v for n, v in named.items() if n in params})
        sampled, num = sampled.cpu(), num.cpu().long()
        keep = torch.arange(sampled.shape[1])[None, :] < num[:, None]
        return torch.where(keep, sampled.long(), -1)

    # The EAGLE drafter's inputs after verify (V1, vllm/v1/spec_decode/utils.py).
    def _find_draft_input_kernels(self) -> None:
        """0.13+: the padded-batch kernels (eagle_prepare_inputs_padded_kernel,
        eagle_prepare_next_token_padded_kernel); 0.9: the packed gather
        (prepare_eagle_input_kernel); 0.11 does both in torch (eagle.py). Model Runner V2
        (0.13+) has its own padded kernel ("padded-mrv2", _find_mrv2_prepare)."""
        utils = "vllm.v1.spec_decode.utils"
        padded = _optional(utils, "eagle_prepare_inputs_padded_kernel")
        nxt = _optional(utils, "eagle_prepare_next_token_padded_kernel")
        packed = _optional(utils, "prepare_eagle_input_kernel")
        self._padded, self._next = padded and padded[0], nxt and nxt[0]
        self._packed = packed and packed[0]
        self._mrv2_prepare = _find_mrv2_prepare()
        why = dict(self.why_not)
        if not (self._padded or self._packed or self._mrv2_prepare):
            why[Component.DRAFT_EXTEND_INPUTS] = (
                "this release has no draft-input kernel: EagleProposer.prepare_inputs builds "
                "the token indices in torch (v1/spec_decode/eagle.py)")
        if not self._next:
            why[Component.DRAFT_NEXT_TOKEN] = (
                "no eagle_prepare_next_token_padded_kernel before 0.13: the next token ids "
                "are picked on the host (gpu_model_runner, sampled_token_ids lists)")
        self._draft_step = vllm_draft_step.find()
        if not self._draft_step:
            why[Component.DRAFT_STEP_SLOTS] = vllm_draft_step.WHY_NOT
        self.why_not = why
        self.components = frozenset(self.components) - set(why)
        self.accepts = {**self.accepts, "draft_extend_layouts": tuple(
            name for name, ok in (("padded", self._padded), ("packed", self._packed),
                                  ("padded-mrv2", self._mrv2_prepare)) if ok)}

    def draft_extend_inputs(self, seq_lens, num_drafts, num_accepted, layout):
        """Padded (0.13+): the kernel's token_indices_to_sample from cu_num_draft_tokens
        (inclusive), valid_sampled_tokens_count (accepted + 1) and query_start_loc, as
        prepare_inputs_padded calls it; positions stay the target's (no kernel). Packed
        (0.9): token_indices from cu_target_query_lens and cu_num_tokens (prepare_inputs)."""
        if layout not in self.accepts["draft_extend_layouts"]:  # e.g. MRV2's before 0.13
            raise ValueError(f"vllm {self.version()} has no draft-input layout {layout!r}; "
                             f"it has {self.accepts['draft_extend_layouts']}")
        if layout == "padded-mrv2":
            return self._mrv2_extend(seq_lens, num_drafts, num_accepted)
        i32 = lambda x: x.to(torch.int32).to(self.device)  # noqa: E731
        bs = num_drafts.shape[0]
        zero = torch.zeros(1, dtype=torch.int64)
        cu_query = torch.cat([zero, (num_drafts + 1).cumsum(0)])
        if layout == "padded":
            out = torch.empty(bs, dtype=torch.int32, device=self.device)
            extra = ([torch.empty(bs, dtype=torch.int32, device=self.device)]
                     if "num_rejected_tokens_gpu_ptr" in self._padded.arg_names else [])
            self._padded[(bs,)](i32(num_drafts.cumsum(0)), i32(num_accepted + 1), i32(cu_query),
                                out, *extra, bs)
            return {"positions": None, "last_token_indices": out.cpu(), "source_indices": None,
                    "num_rejected": extra[0].cpu() if extra else None}
        cu_tokens = torch.cat([zero, (num_accepted + 1).cumsum(0)])
        out = torch.empty(int(cu_tokens[-1]), dtype=torch.int32, device=self.device)
        self._packed[(bs,)](out, i32(cu_query), i32(cu_tokens), BLOCK_SIZE=1024)
        return {"positions": None, "last_token_indices": None, "source_indices": out.cpu()}

    def _mrv2_extend(self, seq_lens, num_drafts, num_accepted):
        """MRV2, as its speculator's prepare_eagle_inputs / prepare_prefill_inputs call it
        after the round: the target's batch (query_start_loc, positions, input ids, seq_lens
        after the round), num_sampled = accepted + 1 and num_rejected = drafts - accepted
        (get_num_sampled_and_rejected), last_sampled / next_prefill_tokens per request state
        through idx_mapping. Every output is returned: the drafter's input ids (the
        target's shifted by one, the sampled token last), positions, query_start_loc,
        seq_lens and what the kernel pads past the batch for CUDA graphs."""
        bs, total = num_drafts.shape[0], int((num_drafts + 1).sum())
        slots = bs + 2  # max_num_reqs: the kernel pads the slots past num_reqs
        dev, i32 = self.device, torch.int32
        idx = lambda x, t=i32: x.to(t).contiguous().to(dev)  # noqa: E731
        zero = torch.zeros(1, dtype=torch.int64)
        verify_pos = torch.cat([s + torch.arange(n + 1) for s, n in
                                zip(seq_lens.tolist(), num_drafts.tolist())])
        # Request b's state sits in slot bs + 1 - b (never the identity), so a lookup by
        # batch index shows; the free slots' tokens are -5.
        state = bs + 1 - torch.arange(bs)
        last_sampled = torch.full((slots,), -5, dtype=torch.int64)
        last_sampled[state] = NEXT_ID + torch.arange(bs)
        args = {  # outputs get sentinels, so entries the kernel leaves stay visible
            "last_token_indices": torch.full((slots,), -7, dtype=torch.int64, device=dev),
            "draft_current_step": torch.full((1,), 9, dtype=torch.int64, device=dev),
            "draft_input_ids": torch.full((total,), -7, dtype=i32, device=dev),
            "draft_positions": torch.full((total,), -7, dtype=torch.int64, device=dev),
            "draft_query_start_loc": torch.full((slots + 1,), -7, dtype=i32, device=dev),
            "draft_seq_lens": torch.full((slots,), -7, dtype=i32, device=dev),
            "target_input_ids": idx(torch.arange(total) + VERIFY_ID),
            "target_positions": idx(verify_pos, torch.int64),
            "idx_mapping": idx(state),
            "last_sampled": idx(last_sampled, torch.int64),
            "next_prefill_tokens": idx(torch.full((slots,), -6)),
            "num_sampled": idx(num_accepted + 1), "num_rejected": idx(num_drafts - num_accepted),
            "query_start_loc": idx(torch.cat([zero, (num_drafts + 1).cumsum(0)])),
            "seq_lens": idx(seq_lens + num_drafts + 1), "max_num_reqs": slots}
        kernel = self._mrv2_prepare
        names = [n for n in kernel.arg_names if n != "BLOCK_SIZE"]
        canon = [n.removesuffix("_ptr").replace("eagle_current_draft_step", "draft_current_step")
                 .replace("eagle_", "draft_") for n in names]
        if set(canon) - set(args):
            raise TypeError(f"{kernel.fn.__name__}{tuple(names)}: the adapter has no "
                            f"{sorted(set(canon) - set(args))}; teach it this release's kernel")
        if "idx_mapping" not in canon:
            # 0.13-0.14: no request-state indirection; the caller (prepare_eagle_inputs)
            # hands last_sampled and next_prefill_tokens per batch row, [num_reqs].
            args.update(last_sampled=idx(NEXT_ID + torch.arange(bs), torch.int64),
                        next_prefill_tokens=idx(torch.full((bs,), -6)))
        kernel[(bs,)](*[args[c] for c in canon], BLOCK_SIZE=1024)
        out = {k: v.cpu() for k, v in args.items() if isinstance(v, torch.Tensor)}
        # Only what this release's kernel writes: 0.13-0.21's writes no seq_lens,
        # query_start_loc or draft step, and pads nothing past the batch (no max_num_reqs).
        has = set(canon)
        got = {"positions": out["draft_positions"],
               "last_token_indices": out["last_token_indices"][:bs],
               "source_indices": None, "input_ids": out["draft_input_ids"]}
        pad = {"last_token_indices": out["last_token_indices"][bs:]}
        for key, name, start in (("query_start_loc", "draft_query_start_loc", bs + 1),
                                 ("seq_lens", "draft_seq_lens", bs)):
            if name in has:
                got[key], pad[key] = out[name][:start], out[name][start:]
        if "draft_current_step" in has:
            pad["draft_step"] = out["draft_current_step"]
        if "max_num_reqs" in has:
            got["graph_padding"] = pad
        return got

    def draft_next_token(self, sampled, discard, backup, vocab_size):
        """As prepare_next_token_ids_padded calls it: int32 sampled rows, a bool mask."""
        bs, width = sampled.shape
        rows = sampled.to(torch.int32).contiguous().to(self.device)
        nxt = torch.empty(bs, dtype=torch.int32, device=self.device)
        count = torch.empty_like(nxt)
        self._next[(bs,)](rows, discard.bool().to(self.device),
                          backup.to(torch.int32).to(self.device), nxt, count, vocab_size,
                          width, bs, rows.stride(0),
                          BLOCK_SIZE_TOKENS=triton.next_power_of_2(width))
        return {"next_token": nxt.cpu(), "valid_count": count.cpu()}

    def draft_step_slots(self, positions, block_table, seq_lens, **kw):
        return vllm_draft_step.draft_step_slots(self._draft_step, device=self.device,
                                                positions=positions, block_table=block_table,
                                                seq_lens=seq_lens, **kw)
