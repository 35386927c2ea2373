"""Law request_invariance: a seeded request is a function of its own inputs.

A request's tokens and finish reason depend only on its prompt, its sampling parameters and
seed, and the engine's configuration (model, drafter, speculative shape, page size, dtype,
engine seed, context width). They do not depend on which requests share its batch, their
order or its own position in it, when it arrived, whether it was retracted and resumed,
synchronous or overlap scheduling, or whether its rounds replayed a CUDA graph. For a sampled
request the reference is the random streams' keying (contract section 12): every draw is keyed
by (request seed, stream, position), so the request run alone draws the coins it draws in any
batch, and must emit the same tokens; a greedy request must too, and so must one beside a mix
of greedy and sampled companions.

Every example exercises the family. Every request of a drawn batch runs alone, one after
another on an engine of its own (synchronous, eager, a roomy pool), and the batch runs on
another: the subject at a drawn position among one to five companions (greedy and sampled,
other seeds, lengths and stops; each of them is compared too), arriving at a drawn step
while earlier requests' rounds are in flight, under overlap or synchronous scheduling, eager
or graph-replayed, drafting greedily or probabilistically (sampled chains), and, when pressure
is drawn, with a KV pool too small for the batch and the subject the newest arrival, which the
scheduler retracts first (specdec/scheduler.py) and resumes later. Both engines pad every
phase to one batch width (batch-invariant eager, one captured bucket) over one context width,
so a row's arithmetic does not depend on the other rows; arithmetic that does change with the
width (another graph bucket) or the sharding (the TP size) may move a sampled token at a CDF
boundary, and is left to eager_vs_graph and tp_equals_single, which compare it with ties.

Observables: each request's tokens and finish reason (Engine.output), the scheduler's
retraction count (to report whether pressure retracted the subject). Strategy:
invariance_configs, here."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.base.liveness import Progress
from harness.laws.declaration import Law, grid
from harness.strategies.runs import default_device
from specdec import Engine, SpecConfig
from specdec.sampling_params import SamplingParams
from specdec.validate import reserve_margin

NAME = "request_invariance"
TEMPERATURES = (0.7, 1.0, 1.6)
# (topk, num_steps, ndt): chains (probabilistic drafting is for chains) and trees
SPEC_SHAPES = ((1, 1, 2), (1, 3, 4), (1, 4, 5), (2, 2, 4), (2, 3, 6))


@dataclass(frozen=True, kw_only=True)
class InvarianceConfig:
    topk: int
    num_steps: int
    ndt: int
    page_size: int
    draft: str
    draft_sampling: str       # "probabilistic": sampled chains draft from the draft's q
    seed: int                 # the engine seed and every drawn prompt, length and stop
    subject_sampled: bool
    temperature: float        # the sampled requests' (each its own seed)
    top_k: int
    top_p: float
    companions: int           # requests beside the subject
    position: int             # the subject's place in the batch: companions before it
    arrival: int              # the step the subject is queued at
    overlap: bool
    cuda_graph: bool
    pressure: bool            # a pool too small for the batch: the subject is retracted
    max_prompt_len: int = 10
    max_new_tokens: int = 10
    model: str = "tiny"
    dtype: str = "float32"

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def spec(self) -> SpecConfig:
        return SpecConfig(topk=self.topk, num_steps=self.num_steps, num_draft_tokens=self.ndt,
                          draft_sampling=self.draft_sampling)

    @property
    def width(self) -> int:
        """The one batch width every phase of both engines is padded to."""
        return self.companions + 1

    @property
    def context(self) -> int:
        """One context width for both engines (it sets the attention's reduction order)."""
        margin = reserve_margin(self.spec, self.page_size, True)
        return self.max_prompt_len + self.max_new_tokens + margin

    @property
    def corners(self) -> tuple:
        """What `harness check` counts of the families each example exercises."""
        out = ["sampled subject" if self.subject_sampled else "greedy subject"]
        out += ["overlap"] * self.overlap + ["retraction"] * self.pressure
        out += ["probabilistic drafting"] * (self.draft_sampling == "probabilistic")
        out += ["subject not first"] * (self.position > 0) + ["late arrival"] * (self.arrival > 0)
        return tuple(out)


@st.composite
def invariance_configs(draw, on_gpu: bool = False, overlap: bool | None = None,
                       pressure: bool | None = None):
    topk, steps, ndt = draw(st.sampled_from(SPEC_SHAPES))
    companions = draw(st.integers(1, 5))
    pressure = draw(st.booleans()) if pressure is None else pressure
    # Sampled requests and drafting are where the batch can leak into a request's coins:
    # drawn more often than not (greedy subjects and companions still come).
    sampled = draw(st.sampled_from((True, True, True, False)))
    probabilistic = topk == 1 and draw(st.sampled_from((True, True, False)))
    return InvarianceConfig(
        topk=topk, num_steps=steps, ndt=ndt, page_size=draw(st.sampled_from((1, 4))),
        # Mostly a perturbed target: it accepts some drafts and not others, so the rows of
        # one step have different accept lengths (the seeded EAGLE head accepts almost none,
        # the target itself all).
        draft=draw(st.sampled_from(("perturbed:0.02", "perturbed:0.05", "perturbed:0.05",
                                    "eagle", "self"))),
        draft_sampling="probabilistic" if probabilistic else "greedy",
        seed=draw(st.integers(0, 2**31 - 1)), subject_sampled=sampled,
        temperature=draw(st.sampled_from(TEMPERATURES)),
        top_k=draw(st.sampled_from((0, 0, 5))), top_p=draw(st.sampled_from((1.0, 1.0, 0.9))),
        companions=companions,
        # Under pressure the subject arrives last: the newest request is retracted first.
        position=companions if pressure else draw(st.integers(0, companions)),
        arrival=draw(st.integers(1, 4)) if pressure else draw(st.integers(0, 4)),
        overlap=draw(st.booleans()) if overlap is None else overlap,
        cuda_graph=draw(st.booleans()), pressure=pressure,
        max_prompt_len=16 if on_gpu else 10, max_new_tokens=16 if on_gpu else 10,
        dtype=draw(st.sampled_from(("float32", "bfloat16"))) if on_gpu else "float32")


@dataclass(frozen=True)
class Request:
    prompt: list
    max_new: int
    params: SamplingParams
    arrival: int


def requests(cfg: InvarianceConfig, vocab: int) -> tuple[Request, list[Request]]:
    """The subject and its companions, the subject at cfg.position of the list. A companion
    before it arrives at a step up to the subject's, one after it at the subject's step or
    up to two later: one step then holds requests lagging the device by different depths
    (overlap). Roughly half the companions sample."""
    rng = random.Random(cfg.seed)

    def make(i: int, sampled: bool, arrival: int) -> Request:
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, cfg.max_prompt_len))]
        stops = (rng.randrange(vocab),) if rng.random() < 0.3 else ()
        params = (SamplingParams(cfg.temperature, cfg.top_k, cfg.top_p, cfg.seed + i, stops)
                  if sampled else SamplingParams(0.0, 0, 1.0, None, stops))
        # Under pressure every request runs to the cap: short ones would finish before the
        # batch outgrows the pool, and nothing would be retracted.
        new = cfg.max_new_tokens if cfg.pressure else rng.randint(1, cfg.max_new_tokens)
        return Request(prompt, new, params, arrival)

    subject = make(0, cfg.subject_sampled, cfg.arrival)
    before = [make(1 + i, rng.random() < 0.5, rng.randint(0, cfg.arrival))
              for i in range(cfg.position)]
    after = [make(1 + cfg.position + i, rng.random() < 0.5, cfg.arrival + rng.randint(0, 2))
             for i in range(cfg.companions - cfg.position)]
    return subject, before + [subject] + after


def pool_pages(cfg: InvarianceConfig, reqs: list[Request]) -> int:
    """Under pressure: the largest request's worst case and a page (the reserved page 0
    besides): each request fits alone, two running side by side outgrow it as they decode,
    and the newest, the subject, is retracted (on CPU 25 of 31 drawn pressure examples
    retracted; short requests admitted one at a time need none)."""
    margin = reserve_margin(cfg.spec, cfg.page_size, cfg.overlap)
    return 2 + max(-(-(len(r.prompt) + r.max_new + margin) // cfg.page_size) for r in reqs)


def _engine(cfg: InvarianceConfig, device: str, *, batch: bool,
            reqs: list[Request] | None = None) -> Engine:
    """Alone: synchronous, eager, a roomy pool. In a batch: the drawn schedule and, under
    pressure, a tight pool (pool_pages). Both pad every phase to cfg.width."""
    pages = pool_pages(cfg, reqs) if batch and cfg.pressure else None
    return Engine(model=cfg.model, spec=cfg.spec, draft=cfg.draft, page_size=cfg.page_size,
                  device=device, dtype=cfg.dtype, seed=cfg.seed % 1000, max_batch=cfg.width,
                  max_context=cfg.context, cuda_graph=batch and cfg.cuda_graph,
                  cuda_graph_bs=[cfg.width], batch_invariant=True,
                  overlap=batch and cfg.overlap, num_pages=pages)


def serve(eng: Engine, reqs: list[Request]) -> list:
    """Each request queued at its arrival step; the outputs in the order given."""
    progress, rids, step = Progress(eng), {}, 0
    while step <= max(r.arrival for r in reqs) or eng.has_unfinished():
        for i, r in enumerate(reqs):
            if r.arrival == step:
                rids[i] = progress.add(eng.add_request(r.prompt, r.max_new, r.params))
        progress.step()
        step += 1
    return [eng.output(rids[i]) for i in range(len(reqs))]


def prop_request_invariance(cfg: InvarianceConfig, device: str | None = None) -> dict:
    """The law above for one drawn example: every request of the drawn batch (the subject at
    its drawn place and arrival, and each companion) against the same request run alone, one
    after another, on an engine of its own."""
    device = device or default_device()
    alone_eng = _engine(cfg, device, batch=False)
    _, batch = requests(cfg, alone_eng.cfg.vocab_size)
    alone = [serve(alone_eng, [Request(r.prompt, r.max_new, r.params, 0)])[0] for r in batch]
    batch_eng = _engine(cfg, device, batch=True, reqs=batch)
    got = serve(batch_eng, batch)
    for i, (r, a, b) in enumerate(zip(batch, alone, got)):
        if (b.tokens, b.finish_reason) == (a.tokens, a.finish_reason):
            continue
        first = next((j for j, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y),
                     min(len(a.tokens), len(b.tokens)))
        kind = "greedy" if r.params.greedy else f"sampled (seed {r.params.seed})"
        raise OracleFailure(NAME, NAME, (
            f"request {i} of {cfg.width}, {kind}, arriving at step {r.arrival}"
            f"{' (the subject)' if i == cfg.position else ''}: alone {a.tokens} "
            f"({a.finish_reason}), in the batch {b.tokens} ({b.finish_reason}); first "
            f"difference at output index {first}; overlap={cfg.overlap} "
            f"cuda_graph={cfg.cuda_graph} pressure={cfg.pressure} (retractions "
            f"{batch_eng.scheduler.retractions}) draft_sampling={cfg.draft_sampling}"))
    return {"retractions": batch_eng.scheduler.retractions}


LAW = Law(
    name=NAME, rank=120, prop=prop_request_invariance, config=InvarianceConfig,
    summary="a seeded request's tokens depend only on its own inputs and the engine's "
            "configuration: not on its batch, arrival, retraction or schedule (section 12)",
    strategy=lambda on_gpu, fixed: invariance_configs(on_gpu, fixed.get("overlap"),
                                                      fixed.get("pressure")),
    slices=grid(2, overlap=(False, True), pressure=(False, True)),
    controls=("tests/test_request_invariance.py::test_planted_family_is_caught",))
