"""Hugging Face transformers' assisted generation as an adapter (the worked example of
docs/adapters.md): `model.generate(..., assistant_model=...)` and
`model.generate(..., prompt_lookup_num_tokens=...)`.

Models: a tiny Llama target built from a `LlamaConfig` with seeded weights (no downloads);
drafters "other" (a smaller seeded Llama), "self" (a copy of the target: same weights, its own
module so that hooks tell the two apart), "perturbed:S" (the target's weights plus seeded
Gaussian noise of standard deviation S) and "prompt_lookup" (n-gram lookup in the context).

Knobs (Spec): draft_length -> `num_assistant_tokens` (assistant) or
`prompt_lookup_num_tokens`; None leaves the assistant's own value (20, or whatever an earlier
"heuristic" call left there: transformers documents that it persists); extra
`schedule` -> `num_assistant_tokens_schedule`, `confidence` ->
`assistant_confidence_threshold` (0 switches it off), `ngram` -> `max_matching_ngram_size`.
The knobs are set on the assistant's generation_config, where transformers reads them.

Observables:
- ACCEPT_LENGTHS: a forward pre-hook on the target counts its forwards; each is one round,
  whose first input position and input length give the drafts it verified and the tokens it
  committed (the next round starts after them).
- TARGET_LOGITS: `output_logits=True, return_dict_in_generate=True` (the target's raw logits
  at each emitted position) and a plain forward of the target for any sequence.
- SELF_DRAFT, PLAIN_GREEDY (generate without an assistant), SEEDED (`torch.manual_seed`
  before each request; transformers draws from torch's global generator). Not
  PREFIX_STABLE_SAMPLING: that one stream is consumed in call order, and the assistant stops
  drafting at a stop id, so adding a stop id changes the draws before it.
- Not BATCHING: whether assisted generation accepts a left-padded batch of two is probed at
  build time and reported (transformers 5.24 refuses: "assisted generate is only supported
  for batch_size = 1"); where it would accept one, a batch still shares one max_new_tokens,
  one stop set and one random stream, so requests run one per call either way.
Settings drawn about the engine: dtype, and `pad_token_id` (None: the tiny model has none,
like most decoder-only checkpoints; 0: a pad id that prompts may contain, like checkpoints
whose pad is <unk> = 0). The adapter always passes an all-ones attention_mask.
Finish reasons: transformers returns none; the adapter says "stop" when the last token is a
stop id and "length" otherwise (the finish law then checks the length).
"""
from __future__ import annotations

import copy

import torch
from hypothesis import strategies as st

from harness.adapters.protocol import Completion, Known, Observable, Request, Round, Spec

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TARGET = dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2)
OTHER = dict(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=2, num_key_value_heads=1)
# Drafter noise 0.002 accepts about 70% of drafts, 0.01 about 20%, "other" none.
# Weights of standard deviation 0.1 give logits spread like specdec's tiny model (0.02, the
# Llama default, makes a near-uniform model that repeats two tokens).
INIT_STD = 0.1
DRAFTERS = ("other", "self", "perturbed:0.002", "perturbed:0.01", "prompt_lookup")


def _pad_in_context(adapter, case, draws) -> bool:
    """The pad id occurs in a prompt or in its greedy continuation (which self-drafting
    reproduces): the assistant's context will then hold it."""
    pad = adapter.settings["pad_token_id"]
    if pad is None or case.spec["drafter"] == "prompt_lookup":
        return False
    reqs = draws.requests
    if any(pad in r.prompt for r in reqs):
        return True
    return any(pad in c.tokens for c in adapter.generate(reqs, None))


def _heuristic_default_length(adapter, case, draws) -> bool:
    spec = case.spec_obj
    return (case.temperature > 0 and spec.drafter != "prompt_lookup"
            and spec.draft_length is None and spec.get("schedule") == "heuristic")


def _stop_ends_prompt_before_empty_draft(adapter, case, draws) -> bool:
    """engine_finish draws the prompt's last token as a stop id of a request whose first
    round can draft nothing: max_new_tokens 1 leaves the assistant no room, and prompt lookup
    drafts nothing without a match. (The stops are those engine_finish draws for the case.)"""
    lookup = case.spec["drafter"] == "prompt_lookup"
    reqs = draws.requests
    if not lookup and all(r.max_new_tokens > 1 for r in reqs):
        return False
    stops = draws.stops
    return any(r.prompt[-1] in s and (lookup or r.max_new_tokens == 1)
               for r, s in zip(reqs, stops))


# Recorded findings (docs/findings/): the laws draw around their cases, on the transformers
# versions each was reproduced on, until upstream fixes them; each has a strict xfail
# regression test (tests/test_findings_transformers.py) that flips then. On other versions
# the adapter leaves them out of `known`, so the laws draw those cases again.
KNOWN = (
    Known("transformers_assistant_masks_pad_ids", ("engine_self_draft",),
          "docs/findings/transformers_assistant_masks_pad_ids.py", _pad_in_context,
          frozenset({"5.24.0"})),
    Known("transformers_heuristic_schedule_persists", ("engine_seeded_determinism",),
          "docs/findings/transformers_heuristic_schedule_persists.py",
          _heuristic_default_length, frozenset({"5.17.0", "5.24.0"})),
    Known("transformers_prompt_ending_in_stop_id_emits_nothing", ("engine_finish",),
          "docs/findings/transformers_prompt_ending_in_stop_id_emits_nothing.py",
          _stop_ends_prompt_before_empty_draft, frozenset({"5.17.0"})),
)


def known_on(version: str) -> tuple[Known, ...]:
    """The recorded findings reproduced on transformers `version`."""
    return tuple(k for k in KNOWN if k.holds_on(version))


def _quiet() -> None:
    import transformers
    transformers.logging.set_verbosity_error()


def tiny_llama(shape: dict, seed: int, device: str, dtype: torch.dtype):
    """A seeded LlamaForCausalLM: no special tokens (nothing stops it unless asked)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**shape, max_position_embeddings=512, initializer_range=INIT_STD,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None,
                      tie_word_embeddings=False)
    # The weights are drawn on the CPU from the CPU generator alone: torch.manual_seed would
    # also reseed every CUDA generator (fork_rng(devices=[]) restores the CPU one only), and a
    # drafter built lazily inside a seeded call would then move that call's sampling stream.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = None
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def perturbed(target, scale: float, seed: int):
    """The target plus seeded N(0, scale^2) noise on every weight (noise drawn in fp32)."""
    out = copy.deepcopy(target)
    gen = torch.Generator().manual_seed(seed)
    for p in out.parameters():
        noise = torch.randn(p.shape, generator=gen) * scale
        p.add_(noise.to(device=p.device, dtype=p.dtype))
    return out


class RoundCounter:
    """A forward pre-hook on the target: (first input position, input length) per forward."""

    def __init__(self, model) -> None:
        self.calls: list[tuple[int, int]] = []
        self.handle = model.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        pos = kwargs.get("position_ids")
        if pos is None:
            pos = kwargs.get("cache_position")
        if pos is not None:
            start = int(pos.reshape(-1)[0])
        else:  # older layouts: the cache's length is the first new position
            cache = kwargs.get("past_key_values", kwargs.get("cache"))
            start = int(cache.get_seq_length()) if cache is not None else 0
        self.calls.append((start, int(ids.shape[1])))

    def rounds(self, prompt_len: int, total_len: int) -> list[Round]:
        """Round r verifies the committed tokens not yet in the cache plus its drafts; the
        next round's first position (its pending token's) says how many it committed."""
        out = []
        for r, (start, n) in enumerate(self.calls):
            committed = prompt_len if r == 0 else start + 1
            drafted = n - (committed - start)
            end = self.calls[r + 1][0] + 1 if r + 1 < len(self.calls) else total_len
            out.append(Round(committed - prompt_len, drafted, end - committed - 1))
        return out

    def remove(self) -> None:
        self.handle.remove()


class TransformersAdapter:
    name = "transformers"

    def __init__(self, device: str = "cpu", dtype: str = "float32", model_seed: int = 0,
                 pad_token_id: int | None = None) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype={dtype!r}: expected one of {sorted(DTYPES)}")
        if dtype == "bfloat16" and not device.startswith("cuda"):
            raise ValueError("dtype='bfloat16' is drawn on CUDA only (CPU runs fp32)")
        _quiet()
        import transformers
        self.known = known_on(transformers.__version__)
        self.device, self.dtype = device, DTYPES[dtype]
        if pad_token_id is not None and not 0 <= pad_token_id < TARGET["vocab_size"]:
            raise ValueError(f"pad_token_id={pad_token_id}: expected None or a token id in "
                             f"[0, {TARGET['vocab_size']})")
        self.settings = {"dtype": dtype, "model_seed": model_seed, "pad_token_id": pad_token_id}
        self.target = tiny_llama(TARGET, model_seed, device, self.dtype)
        self.vocab_size = TARGET["vocab_size"]
        self._drafters: dict[tuple[str, str], object] = {}
        self.why_not = {
            Observable.WHITE_BOX: "specdec's trace and KV pools only",
            Observable.PREFIX_STABLE_SAMPLING: "draws come from torch's one global stream in "
            "call order, and the assistant stops drafting at a stop id, so a stop id shifts "
            "the draws before it"}
        self.observables = frozenset({Observable.ACCEPT_LENGTHS, Observable.TARGET_LOGITS,
                                      Observable.SELF_DRAFT, Observable.PLAIN_GREEDY,
                                      Observable.SEEDED})
        # One request per generate() call: a transformers batch shares one max_new_tokens,
        # one stop set and one random stream, where the harness's requests each have their own.
        self.max_batch = 1
        refusal = self._probe_batching()
        self.why_not[Observable.BATCHING] = (
            f"assisted generation refuses a batch: {refusal}" if refusal is not None else
            "assisted generation accepts a left-padded batch in this version, but a batch "
            "shares one max_new_tokens, stop set and random stream: requests run one by one")

    @classmethod
    def build(cls, device: str, **settings) -> "TransformersAdapter":
        return cls(device, **settings)

    @classmethod
    def settings_space(cls, device: str):
        dtypes = ("float32", "bfloat16") if device.startswith("cuda") else ("float32",)
        return st.fixed_dictionaries({"dtype": st.sampled_from(dtypes), "model_seed": st.just(0),
                                      "pad_token_id": st.sampled_from((None, 0))})

    def version(self) -> str:
        import transformers
        return f"transformers {transformers.__version__}"

    def spec_space(self, **fixed):
        drafter = st.sampled_from(DRAFTERS)
        spec = st.builds(
            Spec, drafter=drafter, draft_length=st.sampled_from((None, 1, 2, 3, 5, 8)),
            topk=st.none(),
            extra=st.tuples(st.tuples(st.just("schedule"),
                                      st.sampled_from(("constant", "heuristic"))),
                            st.tuples(st.just("confidence"), st.sampled_from((0.0, 0.4, 0.9))),
                            st.tuples(st.just("ngram"), st.integers(1, 3))))
        if fixed:
            return spec.map(lambda s: Spec(**{**s.to_dict(), **fixed}))
        return spec

    # -- models -------------------------------------------------------------------------
    def drafter(self, name: str, schedule: str = "constant"):
        """The assistant model `name`, one per schedule: transformers writes the heuristic
        schedule's num_assistant_tokens back to the assistant (documented), so only heuristic
        calls share that state, and a constant-schedule call replays from its case alone."""
        if (name, schedule) not in self._drafters:
            seed = self.settings["model_seed"]
            if name == "other":
                model = tiny_llama(OTHER, seed + 1, self.device, self.dtype)
            elif name == "self":
                model = copy.deepcopy(self.target)
            elif name.startswith("perturbed:"):
                model = perturbed(self.target, float(name.split(":", 1)[1]), seed + 3)
            else:
                raise ValueError(f"drafter={name!r}: expected one of {DRAFTERS} or "
                                 "'perturbed:<scale>'")
            self._drafters[(name, schedule)] = model
        return self._drafters[(name, schedule)]

    def _probe_batching(self) -> str | None:
        ids = torch.tensor([[0, 1, 2], [3, 4, 5]], device=self.device)
        try:
            self.target.generate(ids, attention_mask=torch.ones_like(ids),
                                 assistant_model=self.drafter("other"), max_new_tokens=2,
                                 do_sample=False, pad_token_id=0)  # padding: a pad id
        except ValueError as exc:
            return str(exc)
        return None

    # -- generation ---------------------------------------------------------------------
    def generate(self, requests: list[Request], spec: Spec | None) -> list[Completion]:
        if len(requests) > self.max_batch:
            raise ValueError(f"{len(requests)} requests: this adapter runs at most "
                             f"{self.max_batch} at once ({self.why_not.get(Observable.BATCHING)})")
        return [self._one(r, spec) for r in requests]

    def _spec_kwargs(self, spec: Spec) -> dict:
        if spec.topk not in (None, 1):
            raise ValueError(f"topk={spec.topk}: assisted generation drafts chains")
        if spec.drafter == "prompt_lookup":
            return {"prompt_lookup_num_tokens": spec.draft_length or 10,
                    "max_matching_ngram_size": spec.get("ngram", 2)}
        schedule = spec.get("schedule", "constant")
        assistant = self.drafter(spec.drafter, schedule)
        cfg = assistant.generation_config
        if spec.draft_length is not None:
            cfg.num_assistant_tokens = spec.draft_length
        cfg.num_assistant_tokens_schedule = schedule
        cfg.assistant_confidence_threshold = spec.get("confidence", 0.4)
        return {"assistant_model": assistant}

    @torch.inference_mode()
    def _one(self, req: Request, spec: Spec | None) -> Completion:
        ids = torch.tensor([req.prompt], device=self.device)
        kw = dict(max_new_tokens=req.max_new_tokens, do_sample=not req.greedy,
                  output_logits=True, return_dict_in_generate=True,
                  pad_token_id=self.settings["pad_token_id"],
                  eos_token_id=list(req.stop_token_ids) or None,
                  attention_mask=torch.ones_like(ids))
        counter = None
        if spec is not None:
            kw.update(self._spec_kwargs(spec))  # may build the drafter: before the seed
            counter = RoundCounter(self.target)
        if not req.greedy:
            kw.update(temperature=float(req.temperature), top_k=req.top_k, top_p=float(req.top_p))
            torch.manual_seed(req.seed)
        try:
            out = self.target.generate(ids, **kw)
        finally:
            if counter is not None:
                counter.remove()
        tokens = out.sequences[0, len(req.prompt):].tolist()
        logits = torch.stack([x[0] for x in out.logits]).float().cpu() if out.logits else None
        reason = "stop" if tokens and tokens[-1] in req.stop_token_ids else "length"
        rounds = counter.rounds(len(req.prompt), len(req.prompt) + len(tokens)) if counter else None
        return Completion(tokens, reason, rounds, logits)

    @torch.inference_mode()
    def target_logits(self, tokens: list[int]) -> torch.Tensor:
        ids = torch.tensor([list(tokens)], device=self.device)
        return self.target(input_ids=ids).logits[0].float().cpu()

