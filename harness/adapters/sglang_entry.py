"""SGLang's verify reached through its entry, `eagle_utils.eagle_sample` (the "entry" variant
of harness/adapters/sglang_kernels.py, 0.5.16+), as `run_eagle_verify` calls it, so its logits
pipeline runs in front of the sampler: the requests' logit bias, repeated over each
request's verify rows (`repeat_interleave(..., draft_token_num)`), the temperature softmax
per request, the seeded coins (`_seeded_verify_coins`, from each request's sampling seed and
seq_len; on CPU, where SGLang hashes them with a compiled op, the unseeded torch.rand path),
then the chain sampler (rejection sampling on). An all-greedy batch goes to
`verify_tree_greedy_func`, which dispatches by platform (CUDA's JIT op, sgl_kernel's CPU op
under SGLANG_USE_CPU_ENGINE, NPU, XPU) and on a plain CPU calls nothing, leaving its buffers
unwritten: such batches, and greedy rows where no top-k can be drawn (0.5.16-0.5.22) or whose
maximum is tied, keep the adapter's Triton verify.

How the harness's target distributions p go in:
- logits = T_b * (log p + an offset per row drawn from the request's seed), T_b the
  request's temperature (drawn from its seed, 0.5 to 2), so that a right entry recovers p;
- a token p gives 0 at every position of a request (the chain class "banned_tokens") is
  banned the way a serving request bans it, with a logit bias of -inf, its logit raised
  above the row's maximum first: a bias the entry fails to apply, or applies to another
  request's rows, shows at once;
- in half the batches (by the first request's seed) the requests carry SGLang's relaxed
  penalties as `SamplingBatchInfo.update_penalties` leaves them: `acc_additive_penalties`
  (presence and frequency penalties in [-2, 2] times the counts of a few tokens the request
  "generated") and `acc_scaling_penalties` (a repetition penalty in [1, 2] on those tokens),
  one row per request, which the entry repeats over its verify rows; the logits handed over
  undo them, so a right entry recovers p and a penalty applied to another request's rows
  (or to none, or twice) moves the distribution (kernel_chain_distribution sees it);
- the server's context the entry reads is set as a rejection-sampling EAGLE server sets it:
  `get_spec()` (rejection sampling on, block verification for the "block" variant,
  thresholds 1.0) and a single-rank parallel context, no DP attention.
- on a GPU, top-k and top-p per request (0.5.23, whose renorm names resolve per platform:
  bound to SGLang's Triton renorm, the ROCm resolution; it refuses CPU tensors), handed over as
  harness/adapters/sglang_filters.py says; greedy requests then go through the entry too, at
  top-k 1 beside the sampled ones, as SGLang routes a mixed batch.
Not drawn through it: the grammar mask (applied by the grammar backend's own
compiled bitmask op, xgrammar's, which a pack leaves out)."""
from __future__ import annotations

import importlib
import inspect
from types import SimpleNamespace

import torch

from harness.adapters import sglang_filters as SF
from harness.adapters.seed_draws import seed_uniform
from harness.adapters.stubs import stub_package

HOME = "sglang.srt.speculative.eagle_utils"
ARGS = ("verify_input", "batch", "logits_output", "grammar_mask")


def find():
    """eagle_sample where this release has it with the signature the adapter was taught.
    0.5.16-0.5.22 import sgl_kernel's compiled renorm and tree sampler inside it, whatever
    the flags: where sgl_kernel is absent (a CPU, a pack) it is served by the harness's stub
    (harness/adapters/stubs.py), whose names raise only if called, and with rejection
    sampling and no top-k / top-p none of them is."""
    try:
        mod = importlib.import_module(HOME)
    except ModuleNotFoundError:
        return None
    fn = getattr(mod, "eagle_sample", None)
    if fn is None or tuple(inspect.signature(fn).parameters)[:4] != ARGS:
        return None
    if "from sgl_kernel import" in inspect.getsource(fn):
        stub_package("sgl_kernel")
    return fn


def _server_context(block: bool) -> None:
    """The spec config and parallel context eagle_sample reads, as a single-rank
    rejection-sampling server publishes them."""
    utils = importlib.import_module(HOME)
    spec = SimpleNamespace(speculative_use_rejection_sampling=True,
                           speculative_use_block_verification=block,
                           speculative_accept_threshold_single=1.0,
                           speculative_accept_threshold_acc=1.0)
    utils.get_spec = lambda: spec
    group = SimpleNamespace(world_size=1)
    ctx = importlib.import_module("sglang.srt.runtime_context")
    ctx.get_parallel = lambda: SimpleNamespace(tp_group=group, attn_tp_group=group)
    # 0.5.17-0.5.22's eagle_sample asks the distributed module for its TP group instead.
    importlib.import_module("sglang.srt.distributed").get_tp_group = lambda: group
    importlib.import_module("sglang.srt.layers.dp_attention").is_dp_attention_enabled = (
        lambda: False)


PENALTY_SALT, TOKENS_PENALISED = 0x9E17, 3


def _penalties(seeds: torch.Tensor, vocab: int):
    """(acc_additive_penalties, acc_scaling_penalties), [bs, V] float32 each, or (None, None)
    for a batch without penalties: what SGLang's penalizers accumulate for requests that
    "generated" a few tokens (drawn from each request's seed) with presence and frequency
    penalties in [-2, 2] and a repetition penalty in [1, 2]."""
    if seed_uniform(seeds[:1], PENALTY_SALT).item() < 0.5:
        return None, None
    additive = torch.zeros(len(seeds), vocab)
    scaling = torch.ones(len(seeds), vocab)
    for b, seed in enumerate(seeds.tolist()):
        g = torch.Generator().manual_seed((int(seed) ^ PENALTY_SALT) & 0xFFFFFFFF)
        tokens = torch.randint(vocab, (TOKENS_PENALISED,), generator=g)
        counts = torch.randint(1, 6, (TOKENS_PENALISED,), generator=g).float()
        presence, frequency = (torch.rand(2, generator=g) * 4 - 2).tolist()
        additive[b].index_put_((tokens,), -(presence + frequency * counts), accumulate=True)
        scaling[b, tokens] = 1 + torch.rand(1, generator=g).item()
    return additive, scaling


def filters_bound(device: str) -> bool:
    """Whether top-k / top-p can go through this release's entry (sglang_filters.bind)."""
    return SF.bind(importlib.import_module(HOME), device)


def eagle_sample(fn, *, device, target_probs, seeds, greedy, variant: str, dense_q, candidates,
                 links) -> tuple:
    """A batch's rows through eagle_sample (its sampled rows, and its greedy rows where
    filters_bound(device): those at top-k 1, as SGLang samples a greedy request beside sampled
    ones): returns (predict, num_correct_drafts, accept_index) on the CPU (it returns
    accept_lens, the correct drafts plus the bonus)."""
    _server_context(variant == "block")
    bs, width, vocab = target_probs.shape
    p = target_probs.double()
    # SGLang's sampling params take a greedy request as temperature 1, top-k 1.
    temperature = torch.where(greedy, 1.0, 0.5 + 1.5 * seed_uniform(seeds, 0x7E3)).float()
    offset = (seed_uniform(seeds, 0x0FF) - 0.5) * 8                         # [bs]
    banned = (p == 0).all(1)                                                # [bs, V]
    top_ks = top_ps = None
    if filters_bound(device):
        p, top_ks, top_ps = SF.filters(p, greedy, seeds, banned)
    logits = torch.where(p > 0, p.clamp_min(1e-300).log(), float("-inf")) + offset[:, None, None]
    top = torch.where(banned[:, None, :], float("-inf"), logits).amax(-1, keepdim=True)
    logits = torch.where(banned[:, None, :], top + 1.0, logits)
    logits = logits * temperature.double()[:, None, None]
    additive, scaling = _penalties(seeds, vocab)
    if additive is not None:  # handed over undone: unscaled, then the additive part taken off
        s = scaling.double()[:, None, :]
        logits = torch.where(logits < 0, logits / s, logits * s) - additive.double()[:, None, :]
    logits = logits.float().reshape(bs * width, vocab)
    bias = torch.where(banned, float("-inf"), 0.0).float()
    ri, rn, rs = links
    dev = lambda t: t.to(device)  # noqa: E731
    info = SimpleNamespace(
        acc_additive_penalties=None if additive is None else dev(additive),
        acc_scaling_penalties=None if scaling is None else dev(scaling),
        logit_bias=dev(bias) if bool(banned.any()) else None, is_all_greedy=False,
        temperatures=dev(temperature[:, None]),
        need_top_k_sampling=top_ks is not None and bool((top_ks < vocab).any()),
        need_top_p_sampling=top_ps is not None and bool((top_ps < 1).any()),
        top_ks=None if top_ks is None else dev(top_ks.int()),
        top_ps=None if top_ps is None else dev(top_ps),
        has_watermark_candidates=False,
        # Seeded coins (murmur_hash32) are Triton on CUDA, sgl_kernel's op on CPU: there the
        # unseeded path draws them (torch.rand_like), from the generator seeded here.
        sampling_seed=dev(seeds.long()) if device != "cpu" else None)
    torch.manual_seed(int(seeds[0]))
    seq_lens = 8 + seeds.long() % 64  # what the seeded coins hash with the seed
    batch = SimpleNamespace(device=device, forward_mode=SimpleNamespace(is_idle=lambda: False),
                            seq_lens=dev(seq_lens), sampling_info=info, return_logprob=False,
                            req_pool_indices=dev(torch.arange(bs)))
    verify = SimpleNamespace(draft_token=dev(candidates.reshape(-1)), draft_token_num=width,
                             retrieve_index=dev(ri), retrieve_next_token=dev(rn),
                             retrieve_next_sibling=dev(rs), max_tree_depth=width, tree_topk=1,
                             draft_probs=dev(dense_q), custom_mask=None, positions=None)
    out = SimpleNamespace(next_token_logits=dev(logits))
    predict, accept_lens, accept = fn(verify, batch, out, None)
    return predict.cpu(), accept_lens.cpu() - 1, accept.cpu()
