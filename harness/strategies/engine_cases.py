"""What the black-box laws draw for an adapter: an `EngineCase` (the engine's settings, a
Spec from the adapter's own knob space, a seed that makes the prompts, lengths, stops and
sampling seeds, the batch size within what the adapter batches, and sampling knobs). A case
is plain JSON, so a failure replays from one line (`python -m harness repro`)."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from hypothesis import strategies as st

from harness.adapters.protocol import Request, Spec
from harness.adapters.registry import adapter_class, get_adapter
from harness.base.known import include_known
from harness.strategies.configs import TEMPERATURES, TOP_KS, TOP_PS
from harness.strategies.engine_runs import CaseDraws

# Prompt and output lengths per tier: CPU CI draws small runs, a GPU the larger ones.
SIZES = {"cpu": (12, 12), "gpu": (40, 32)}


@dataclass(frozen=True, kw_only=True)
class EngineCase:
    engine: str
    settings: dict
    spec: dict
    seed: int
    batch_size: int = 1
    max_prompt_len: int = 12
    max_new_tokens: int = 12
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    n: int = 0                       # samples (the distribution law)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EngineCase":
        return cls(**d)

    @property
    def spec_obj(self) -> Spec:
        return Spec(**{**self.spec, "extra": tuple(tuple(kv) for kv in self.spec["extra"])})

    @property
    def axes(self) -> tuple:
        s = self.spec_obj
        return (s.drafter, s.draft_length, s.topk, s.extra, self.temperature > 0,
                tuple(sorted(self.settings.items())))

    def adapter(self, device: str):
        return get_adapter(self.engine, device, self.settings)


def known_hits(adapter, law: str, case: EngineCase) -> list[str]:
    """The recorded findings (adapter.known) that this case of `law` would hit."""
    known = [k for k in getattr(adapter, "known", ()) if law in k.laws]
    if not known:
        return []
    draws = CaseDraws(adapter, case, requests_for(case, adapter.vocab_size))
    return [k.id for k in known if k.matches(adapter, case, draws)]


def tier_of(device: str) -> str:
    return "gpu" if device.startswith("cuda") else "cpu"


def _knobs(sampled: bool, settings: dict, cuts_in_float32: bool):
    """(temperature, top_k, top_p). With `cuts_in_float32`, settings in a reduced-precision
    dtype draw no top-k / top-p cut (see engine_sampled_distribution)."""
    if not sampled:
        return st.just((0.0, 0, 1.0))
    if cuts_in_float32 and settings.get("dtype", "float32") != "float32":
        return st.tuples(st.sampled_from(TEMPERATURES), st.just(0), st.just(1.0))
    return st.tuples(st.sampled_from(TEMPERATURES), st.sampled_from(TOP_KS),
                     st.sampled_from(TOP_PS))


def engine_cases(engine: str, *, device: str, law: str, spec_fixed: dict | None = None,
                 sampled: bool = False, batched: bool = True, n: int = 0,
                 cuts_in_float32: bool = False):
    """Cases of `law` for `engine` on `device`: settings from the adapter class's space, a
    spec from the built adapter's knob space (with `spec_fixed` fields fixed), batch sizes up
    to its max_batch (1 unless `batched`), greedy or (sampled) drawn temperature x top-k x
    top-p (`cuts_in_float32`: the cuts in float32 settings only); around the adapter's
    recorded findings unless include_known()."""
    prompt, new = SIZES[tier_of(device)]
    cls = adapter_class(engine)

    def with_adapter(settings: dict):
        adapter = get_adapter(engine, device, settings)
        top = adapter.max_batch if batched else 1
        knobs = _knobs(sampled, settings, cuts_in_float32)
        cases = st.builds(
            lambda spec, knob, **kw: EngineCase(engine=engine, settings=settings,
                                                spec=spec.to_dict(),
                                                temperature=knob[0], top_k=knob[1],
                                                top_p=knob[2], n=n, **kw),
            adapter.spec_space(**(spec_fixed or {})), knobs,
            seed=st.integers(0, 2**31 - 1), batch_size=st.integers(1, top),
            max_prompt_len=st.integers(1, prompt), max_new_tokens=st.integers(1, new))
        if include_known() or not getattr(adapter, "known", ()):
            return cases
        return cases.filter(lambda c: not known_hits(adapter, law, c))
    return cls.settings_space(device).flatmap(with_adapter)


def requests_for(case: EngineCase, vocab: int) -> list[Request]:
    """The case's batch: ragged prompts and max_new_tokens from its seed; request i samples
    with seed case.seed + i (greedy when temperature is 0); no stops."""
    rng = random.Random(case.seed)
    out = []
    for i in range(case.batch_size):
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, case.max_prompt_len))]
        sampled = case.temperature > 0
        out.append(Request(tuple(prompt), rng.randint(1, case.max_new_tokens),
                           temperature=case.temperature, top_k=case.top_k if sampled else 0,
                           top_p=case.top_p if sampled else 1.0,
                           seed=case.seed + i if sampled else None))
    return out
