"""vLLM V1's rejection sampler reached through its public entry, `RejectionSampler.forward`,
as `GPUModelRunner` calls it (the "entry" variant of harness/adapters/vllm_kernels.py): the
flat logits of every request's drafts and bonus position, `SpecDecodeMetadata` as
`_calc_spec_decode_metadata` builds it, and `SamplingMetadata` carrying what the entry's own
logits processing reads. So the entry's logic runs too: its bonus sampling (vLLM's `Sampler`,
per-request generators), `apply_logits_processors` (allowed ids, bad words, penalties, each
indexed per draft row through `repeat_indices`) and `apply_sampling_constraints`.

How the harness's target distributions p go in:
- a token p gives 0 at every position of a request (a banned token, the chain input class
  "banned_tokens") is expressed the way a serving request bans it: through its allowed-ids
  mask (`allowed_token_ids_mask`, True = masked) or as a one-token bad word, by the row's seed
  parity; its logit is set above the row's maximum, so a mask the entry fails to apply
  shows at once;
- every other logit is log p (-inf at a zero) plus an offset per row drawn from the
  request's seed: raw logits, which no softmax normalised;
- penalties (CPU: on CUDA vLLM's repetition penalty is a compiled op a pack leaves out): in
  two batches of three (by the batch's seed), nine requests in ten (by their seed) get
  presence, frequency and repetition penalties, output tokens and a prompt drawn from their
  seed (the other batches take the entry's no-penalties path), and the logits handed over
  are log p with the penalties' effect undone at each position (its history: the outputs,
  then the drafts before it), so that a correct entry recovers p. Penalties are exact here
  up to a few ulps, far below the gaps between the drawn distributions' levels.
- min tokens: where the release's spec-decode logits processors hold vLLM's own
  `MinTokensLogitsProcessor` (0.11+; `build_logitsprocs` keeps only it when speculation is
  on), half the requests (by their seed) that have a token of target probability 0 at their
  first j positions (j >= 1) ask for min_tokens = len(outputs) + j with that token as their
  stop token, and its logit is raised above the row's maximum at those positions: the entry
  must mask it there (at the drafts through `apply_with_spec_decode`, at the bonus through
  the Sampler). The processor is given the requests as the input batch gives them
  (`update_state` with a `BatchUpdate` of added requests).
A batch in which no request drafted goes to the plain `Sampler`, as the runner sends it."""
from __future__ import annotations

import dataclasses
import inspect
import random

import torch

from harness.adapters.seed_draws import seed_uniform


def entry_signature(sampler_cls) -> str | None:
    """"logits" (0.2x+: the entry samples the bonus itself), "bonus" (the caller passes
    bonus_token_ids), None for an entry the adapter has not been taught."""
    names = list(inspect.signature(sampler_cls.forward).parameters)[1:]
    if names == ["metadata", "draft_probs", "logits", "sampling_metadata"]:
        return "logits"
    if names == ["metadata", "draft_probs", "target_logits", "bonus_token_ids",
                 "sampling_metadata"]:
        return "bonus"
    return None


def spec_metadata(cls, draft_rows: list[list[int]], device) -> object:
    """SpecDecodeMetadata for a batch whose logits hold each request's drafts then its bonus
    position back to back, as GPUModelRunner._calc_spec_decode_metadata builds it."""
    n = torch.tensor([len(r) for r in draft_rows], dtype=torch.int64)
    cu_sampled = (n + 1).cumsum(0)
    req = torch.repeat_interleave(torch.arange(len(n)), n + 1)
    local = torch.arange(int(cu_sampled[-1])) - (cu_sampled - (n + 1))[req]
    target_idx = (local < n[req]).nonzero().flatten()  # every row but each bonus row
    i32 = lambda t: t.to(torch.int32).to(device)  # noqa: E731
    known = {"draft_token_ids": i32(torch.tensor(sum(draft_rows, []), dtype=torch.int64)),
             "num_draft_tokens": n.tolist(), "cu_num_draft_tokens": i32(n.cumsum(0)),
             "cu_num_sampled_tokens": i32(cu_sampled), "target_logits_indices": i32(target_idx),
             "bonus_logits_indices": i32(cu_sampled - 1),
             "logits_indices": i32(torch.arange(int(cu_sampled[-1])))}
    return cls(**{f.name: known[f.name] for f in dataclasses.fields(cls) if f.init})


@dataclasses.dataclass
class Processing:
    """What one batch's requests ask of the entry's logits processing."""
    row_seeds: torch.Tensor               # [bs]: each request's own seed
    allowed_mask: torch.Tensor | None     # [bs, V] bool, True = masked (vLLM's sense)
    bad_words: dict                       # request -> [[token], ...]
    penalties: dict | None                # presence/frequency/repetition [bs], prompt, outputs
    min_tokens: dict = dataclasses.field(default_factory=dict)  # b -> (min_tokens, stop, j)

    def outputs(self, b: int) -> list[int]:
        return self.penalties["outputs"][b] if self.penalties else []


def positions(target_probs, num_drafts) -> torch.Tensor:
    """[bs, K+1] bool: the positions request b uses, its drafts' and its bonus."""
    return torch.arange(target_probs.shape[1])[None, :] <= num_drafts[:, None]


def banned_tokens(target_probs, num_drafts) -> torch.Tensor:
    """[bs, V] bool: the tokens p gives 0 at every position request b uses."""
    return ((target_probs == 0) | ~positions(target_probs, num_drafts)[..., None]).all(1)


def processing(target_probs, *, num_drafts, row_seeds, seed: int, penalties: bool,
               min_tokens: bool = False, whole_rows: bool = False) -> Processing:
    bs, _, vocab = target_probs.shape
    banned = banned_tokens(target_probs, num_drafts)
    by_mask = (row_seeds % 2 == 0)[:, None]
    allowed = banned & by_mask
    bad_words = {int(b): [[int(t)] for t in banned[b].nonzero().flatten()]
                 for b in (banned & ~by_mask).any(1).nonzero().flatten()}
    pen = None
    rngs = [random.Random(int(s) ^ 0x9E4A17) for s in row_seeds]
    # A third of the batches (by the batch's seed) have no penalties at all: the entry's
    # no-penalties fast path (allowed ids and bad words alone); in the others nine
    # requests in ten (by their own seed) ask for them.
    batch = penalties and random.Random(seed ^ 0x9E4A17).random() < 2 / 3
    asks = [batch and r.random() < 0.9 for r in rngs]
    if any(asks):
        # Levels large beside the drawn distributions' gaps (log 9/8 and up), so that a
        # penalty the entry misapplies moves the argmax.
        pick = lambda r, a, levels: r.choice(levels) if a else levels[0]  # noqa: E731
        pen = {"presence": torch.tensor([pick(r, a, [0.0, 1.0, 3.0])
                                         for r, a in zip(rngs, asks)]),
               "frequency": torch.tensor([pick(r, a, [0.0, 0.5, 2.0])
                                          for r, a in zip(rngs, asks)]),
               "repetition": torch.tensor([pick(r, a, [1.0, 1.5, 3.0])
                                           for r, a in zip(rngs, asks)]),
               "outputs": [[r.randrange(vocab) for _ in range(r.randint(0, 2))] for r in rngs],
               "prompts": [[r.randrange(vocab) for _ in range(r.randint(1, 2))] for r in rngs]}
    proc = Processing(row_seeds, allowed if allowed.any() else None, bad_words, pen)
    if min_tokens:
        proc.min_tokens = _min_tokens(target_probs, num_drafts, proc, whole_rows)
    return proc


def _min_tokens(target_probs, num_drafts, proc: Processing, whole_rows: bool) -> dict:
    """b -> (min_tokens, stop token, j) for half the requests (by seed) with a token of
    target probability 0 at their first j >= 1 positions; `whole_rows`: only j past the
    bonus position (draws around the recorded finding that the bonus stays masked once the
    accepted drafts reach min_tokens)."""
    out = {}
    for b, s in enumerate(proc.row_seeds.tolist()):
        rng = random.Random(int(s) ^ 0x3147)
        if rng.random() >= 0.5:
            continue
        zero = target_probs[b, :int(num_drafts[b]) + 1] == 0  # [positions, V]
        runs = (zero.long().cumprod(0)).sum(0)                # each token's leading zero run
        used = int(num_drafts[b]) + 1
        tokens = (runs >= (used if whole_rows else 1)).nonzero().flatten().tolist()
        if tokens:
            stop = rng.choice(tokens)
            j = used if whole_rows else rng.randint(1, int(runs[stop]))
            out[b] = (len(proc.outputs(b)) + j, stop, j)
    return out


def takes_min_tokens(holder_cls) -> bool:
    """Whether min tokens go through vLLM's own processor here: the LogitsProcessors holder
    (0.10.1+), MinTokensLogitsProcessor and a BatchUpdate with a batch size."""
    if holder_cls is None or holder_cls.__name__ != "LogitsProcessors":
        return False
    try:
        from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor  # noqa
        from vllm.v1.sample.logits_processor.interface import BatchUpdate
    except ImportError:
        return False
    return "batch_size" in {f.name for f in dataclasses.fields(BatchUpdate)}


def min_tokens_processor(device, proc: Processing):
    """vLLM's MinTokensLogitsProcessor holding the batch's min-tokens requests, as the input
    batch hands them over (update_state with the added requests), or None."""
    from types import SimpleNamespace

    from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor
    from vllm.v1.sample.logits_processor.interface import BatchUpdate
    processor = MinTokensLogitsProcessor(None, device, False)
    added = [(b, SimpleNamespace(min_tokens=m, all_stop_token_ids={stop},
                                 structured_outputs=None), [], proc.outputs(b))
             for b, (m, stop, _) in proc.min_tokens.items()]
    processor.update_state(BatchUpdate(batch_size=len(proc.row_seeds), removed=[],
                                       added=added, moved=[]))
    return processor


def row_offsets(seeds: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
    """[used.sum(), 1] float32 offsets in [-4, 4) for the rows `used` ([bs, W] bool) marks,
    each a function of its request's seed and its position: raw logits are log p plus an
    unknown constant per row, and an engine must not read a normalisation from a neighbour."""
    req, pos = used.nonzero().unbind(1)
    return ((seed_uniform(seeds.long()[req] * 64 + pos, 0x0FF5E7) - 0.5) * 8).float()[:, None]


def as_logits(p: torch.Tensor) -> torch.Tensor:
    """log p, a fully masked (NaN) row as the logits that made it: all -inf, which is what a
    caller's mask hands the sampler (the softmax then makes the NaN)."""
    return torch.where(p.isnan(), float("-inf"), p.float().log())


def logits_for(target_probs, draft_ids, num_drafts, proc: Processing) -> torch.Tensor:
    """[sum(n + 1), V] float32: request b's positions 0..n_b back to back, log p with banned
    tokens raised above the row's maximum and the penalties' effect undone."""
    used = positions(target_probs, num_drafts)
    logits = as_logits(target_probs[used]) + row_offsets(proc.row_seeds, used)
    request = used.nonzero()[:, 0]
    if proc.penalties:
        rows = []
        for r, (b, i) in enumerate(used.nonzero().tolist()):
            history = proc.penalties["outputs"][b] + draft_ids[b, :i].tolist()
            rows.append(_undo_penalties(logits[r], history=history,
                                        prompt=proc.penalties["prompts"][b],
                                        **{k: float(proc.penalties[k][b]) for k in
                                           ("presence", "frequency", "repetition")}))
        logits = torch.stack(rows)
    banned = banned_tokens(target_probs, num_drafts)[request]
    position = used.nonzero()[:, 1]
    for b, (_, stop, j) in proc.min_tokens.items():  # masked by min tokens before j
        banned[(request == b) & (position < j), stop] = True
    top = torch.where(banned, float("-inf"), logits).max(-1, keepdim=True).values + 1.0
    return torch.where(banned, top, logits)


def _undo_penalties(logit, *, history, prompt, presence, frequency, repetition):
    """The logits that vLLM's apply_penalties (presence and frequency subtracted after the
    repetition penalty, which divides positive logits and multiplies the rest) turns into
    `logit`."""
    vocab = logit.numel()
    count = torch.bincount(torch.tensor(history, dtype=torch.int64), minlength=vocab)[:vocab]
    seen = count > 0
    pre = logit + frequency * count.float() + presence * seen.float()
    in_prompt = torch.zeros(vocab, dtype=torch.bool)
    in_prompt[torch.tensor(prompt, dtype=torch.int64)] = True
    rep = torch.where(seen | in_prompt, repetition, 1.0)
    return torch.where(pre > 0, pre * rep, pre / rep)


def sampling_metadata(meta_cls, *, logits_procs_cls, temperature, greedy, generators,
                      proc: Processing, draft_rows, vocab, device):
    bs = len(draft_rows)
    all_greedy, all_random = bool(greedy.all()), not bool(greedy.any())
    pen = proc.penalties
    zeros = torch.zeros(bs, device=device)
    prompts = None
    if pen:
        width = max(len(p) for p in pen["prompts"])
        prompts = torch.tensor([p + [vocab] * (width - len(p)) for p in pen["prompts"]],
                               dtype=torch.int64, device=device)  # padded with V, as vLLM
    known = {"temperature": None if all_greedy else temperature.to(device),
             "all_greedy": all_greedy, "all_random": all_random, "top_p": None, "top_k": None,
             "generators": generators, "max_num_logprobs": None, "no_penalties": pen is None,
             "prompt_token_ids": prompts,
             "presence_penalties": pen["presence"].to(device) if pen else zeros,
             "frequency_penalties": pen["frequency"].to(device) if pen else zeros,
             "repetition_penalties": pen["repetition"].to(device) if pen else zeros + 1.0,
             "output_token_ids": [list(o) for o in pen["outputs"]] if pen else [[]] * bs,
             "allowed_token_ids_mask": (None if proc.allowed_mask is None
                                        else proc.allowed_mask.to(device)),
             "bad_words_token_ids": proc.bad_words, "spec_token_ids": draft_rows,
             "logitsprocs": (None if not logits_procs_cls else
                             logits_procs_cls([min_tokens_processor(device, proc)])
                             if proc.min_tokens else logits_procs_cls()),
             "min_tokens": {}, "logit_bias": [None] * bs}
    fields = [f for f in dataclasses.fields(meta_cls) if f.init]
    return meta_cls(**{f.name: known.get(f.name) for f in fields
                       if f.name in known or (f.default is dataclasses.MISSING
                                              and f.default_factory is dataclasses.MISSING)})
