"""Hypothesis strategies over the engine's configuration space. They draw configurations and
a seed, never tensors; infeasible combinations are excluded by construction (flatmap)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from hypothesis import strategies as st

from harness.strategies.vocab_seams import seam_corner, seam_models
from specdec.config import max_draft_tokens


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One engine run: everything needed to replay it exactly."""

    topk: int
    num_steps: int
    ndt: int
    page_size: int
    draft: str
    batch_size: int
    max_prompt_len: int
    max_new_tokens: int
    seed: int
    dtype: str = "float32"
    model: str = "tiny"
    cuda_graph: bool = False
    graph_bs: tuple = (1, 2, 3, 4, 6, 8)  # captured sizes: the rest pad up or fall back
    draft_sampling: str = "greedy"  # "probabilistic": sampled chains draft from q
    temperature: float = 0.0        # > 0: the requests sampled_rows names sample (seed =
    #                                 run seed + i); the others stay greedy
    top_k: int = 0
    top_p: float = 1.0
    ragged: bool = False            # max_new_tokens drawn per request: the batch shrinks
    stop_at: int = -1               # >= 0: a stop token taken from the unstopped reference
                                    # continuation, up to STOP_PAST_CAP tokens past the cap
    min_prompt_len: int = 1
    draft_max_position: int = 0     # > 0: the drafter's own configured max_position
    tp_size: int = 1                # ranks the target and drafter are sharded over
    tp_all_reduce: str = "auto"     # Engine(tp_all_reduce=): "auto" (the peer kernel on CUDA
    #                                 up to the crossover) or "nccl" (specdec/tp/comm.py)
    overlap: bool = False           # overlap scheduling (contract section 10)
    prefix_cache: bool = False      # radix prefix cache on, shared-prefix prompts in waves
    pool_slack: int = -1            # prefix_cache, >= 0: pool = one worst case + this percent
    seams: int = 0                  # > 0: prompts and stop ids hold the ids where a vocabulary
    #                                 sharded over this many ranks changes hands (vocab_seams.py)
    sampled_rows: str = "all"       # which requests sample when temperature > 0 (SAMPLED_ROWS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "graph_bs", tuple(self.graph_bs))  # JSON gives a list
        if self.sampled_rows not in SAMPLED_ROWS:
            raise ValueError(f"sampled_rows={self.sampled_rows!r}: expected one of "
                             f"{list(SAMPLED_ROWS)}")

    def to_dict(self) -> dict:
        return asdict(self)

    def samples(self, i: int) -> bool:
        """Whether request i of the batch samples: a batch's sampled requests need not be
        all of it, nor a prefix of it (a step that indexes the sampled subset by batch row,
        or the batch by subset position, is wrong only then)."""
        if self.temperature <= 0:
            return False
        n = self.batch_size
        return {"all": True, "odd": i % 2 == 1, "last": i == n - 1,
                "all_but_one": i != self.seed % n}[self.sampled_rows]

    @property
    def corners(self) -> tuple:
        """The corners this run reaches that `harness check` counts: a model biased toward
        the vocabulary's seams ("seam_ids"); a batch mixing greedy and sampled requests whose
        sampled rows are not a prefix of it ("mixed_rows"); inputs at the seams ("seam_inputs")."""
        out = seam_corner(self.model)
        mixed = [self.samples(i) for i in range(self.batch_size)]
        if any(mixed) and not all(mixed):
            out += ("mixed_rows",)
        return out + (("seam_inputs",) if self.seams else ())

    @property
    def axes(self) -> tuple:
        """The coarse configuration this run covers (for coverage counts)."""
        return (self.topk, self.num_steps, self.page_size, self.draft, self.cuda_graph,
                self.temperature > 0, self.draft_sampling, self.overlap, self.prefix_cache,
                self.sampled_rows if self.temperature > 0 else "none",
                bool(seam_corner(self.model)))


def shape_fields(shape: tuple) -> dict:
    """A drawn (topk, num_steps, ndt) as the configs' keywords (the wide configs take no
    positional fields)."""
    topk, num_steps, ndt = shape
    return dict(topk=topk, num_steps=num_steps, ndt=ndt)


def spec_shapes():
    """(topk, num_steps, ndt) with ndt feasible: steps+1 for chains, <= the tree's size else."""
    def with_ndt(ts):
        topk, steps = ts
        if topk == 1:
            return st.just((1, steps, steps + 1))
        top = min(max_draft_tokens(topk, steps), 32)
        return st.integers(2, top).map(lambda n: (topk, steps, n))
    return st.tuples(st.integers(1, 4), st.integers(1, 5)).flatmap(with_ndt)


GRAPH_BUCKETS = ((1, 2, 3, 4, 6, 8), (4, 8), (8,))  # fine to coarse: batches shrink in a bucket
DRAFTS = ("eagle", "self", "perturbed", "perturbed:0.1")
# Temperatures below 0.3 and above 1.5, top-k of 1, small and the vocabulary, top-p cuts
# inside the head and inside the tail (oracle 7, docs/contract.md).
TEMPERATURES = (0.2, 0.7, 1.0, 1.8)
TOP_KS = (0, 1, 5)
TOP_PS = (1.0, 0.3, 0.95)
# Which requests of a sampled batch sample (RunConfig.samples): all of them, or mixes whose
# sampled rows are not a prefix of the batch (odd rows, the last alone, all but one).
SAMPLED_ROWS = ("all", "odd", "last", "all_but_one")
MIXED_ROWS = SAMPLED_ROWS[1:]  # laws that judge the greedy requests: never all sampled


# The finish law draws stop tokens from this far past max_new_tokens too: a token whose first
# occurrence lies past the cap must never end (or appear in) the output, although a round's
# accepted drafts can reach it.
STOP_PAST_CAP = 8


def run_configs(drafts=DRAFTS, *, page_sizes=(1, 2, 4, 16, 64), max_batch: int = 10,
                dtypes=("float32",), graphs=(False, True), graph_bs=GRAPH_BUCKETS,
                max_prompt_len: int = 40, max_new_tokens: int = 24, sampled: bool | str = False,
                stops: bool = False, prefix=(False,), model: str = "tiny"):
    """Batch sizes reach past the largest captured size, so padding and eager fallback both
    occur in ordinary runs; ragged lengths and stop tokens make batches shrink inside a
    captured bucket. `sampled`: requests may sample (drawn temperature, top-k, top-p, with
    greedy or probabilistic drafting), all of the batch or a mix of sampled and greedy
    requests (SAMPLED_ROWS; "mixed": never all of it, MIXED_ROWS); `stops`: a stop token may
    be drawn. `prefix`: the prefix-cache axis (shared-prefix prompts in waves, a pool from
    tight to ample). The model: `model`, or it with a logit bias toward its vocabulary's
    seams (vocab_seams.seam_models)."""
    sampling = (st.tuples(st.sampled_from((0.0,) + TEMPERATURES), st.sampled_from(TOP_KS),
                          st.sampled_from(TOP_PS), st.sampled_from(("greedy", "probabilistic")),
                          st.sampled_from(MIXED_ROWS if sampled == "mixed" else SAMPLED_ROWS))
                if sampled else st.just((0.0, 0, 1.0, "greedy", "all")))

    def build(shape, samp, **kw):
        t, k, p, ds, rows = samp
        return RunConfig(**shape_fields(shape), temperature=t, top_k=k if t else 0,
                         top_p=p if t else 1.0,
                         draft_sampling=ds, sampled_rows=rows if t else "all", **kw)
    return st.builds(
        build,
        spec_shapes(),
        sampling,
        model=seam_models(model),
        page_size=st.sampled_from(page_sizes),
        draft=st.sampled_from(drafts),
        batch_size=st.integers(1, max_batch),
        max_prompt_len=st.integers(1, max_prompt_len),
        max_new_tokens=st.integers(1, max_new_tokens),
        seed=st.integers(0, 2**31 - 1),
        dtype=st.sampled_from(dtypes),
        cuda_graph=st.sampled_from(graphs),
        graph_bs=st.sampled_from(tuple(graph_bs)),
        ragged=st.booleans(),
        stop_at=(st.integers(-1, max_new_tokens + STOP_PAST_CAP - 1) if stops
                 else st.just(-1)),
        overlap=st.booleans(),
        prefix_cache=st.sampled_from(prefix),
        pool_slack=st.sampled_from((-1, 0, 30, 100)) if True in prefix else st.just(-1),
    )


def long_context_configs(max_batch: int = 3, context: tuple = (150, 300), graphs=(False, True),
                         draft_positions=(64, 96), dtypes=("float32",)):
    """Prompts past every RoPE table length the drafter and target carry: the tiny-long
    model's llama3 scaling starts at position 128, the drafter's own config says 64 or 96."""
    lo, hi = context
    return st.builds(
        lambda shape, n, **kw: RunConfig(**shape_fields(shape), max_prompt_len=n,
                                         min_prompt_len=n - 20, model="tiny-long", **kw),
        spec_shapes(), st.integers(lo, hi),
        page_size=st.sampled_from((1, 4, 16)),
        draft=st.sampled_from(("eagle", "perturbed")),
        batch_size=st.integers(1, max_batch),
        max_new_tokens=st.integers(4, 16),
        seed=st.integers(0, 2**31 - 1),
        dtype=st.sampled_from(dtypes),
        cuda_graph=st.sampled_from(graphs),
        graph_bs=st.just((1, 2, 4)),
        ragged=st.booleans(),
        draft_max_position=st.sampled_from(draft_positions),
        overlap=st.booleans(),
    )


TP_MODELS = ("tiny", "tiny-odd")  # 320 ids split evenly over 2 ranks; 321 unevenly
# The all-reduce paths, the peer kernel twice as often (on CPU both are gloo's).
TP_ALL_REDUCE = ("auto", "auto", "nccl")


def tp_configs(tp_sizes=(2,), *, max_batch: int = 4, max_prompt_len: int = 12,
               max_new_tokens: int = 8, graphs=(False, True), dtypes=("float32",),
               models=TP_MODELS):
    """Tensor-parallel runs composed with the rest: greedy and sampled (same seeds) with
    greedy or probabilistic drafting, chains and trees, all drafts, page sizes 1 to 64, graphs
    on and off with buckets that pad (idle lanes) and fall back, overlap on and off, the
    prefix cache on and off; both all-reduce paths (tp_all_reduce: on CUDA the peer-memory
    kernel fused with the norms, or NCCL); an even and an odd vocabulary, and mostly inputs
    that hold the vocabulary's seams (prompts and stop ids at every shard's first and last
    id, 0, V - 1), the model often biased to emit them too (vocab_seams.seam_models).

    Sampled runs are float32 only. The law wants them identical to tp 1, token for token,
    which holds where the two runs' probabilities agree to far below a coin's resolution: the
    all-reduce sums a row-parallel product in another order than one GPU does, which moves a
    float32 probability by ~1e-7 (a coin lands in between about once in 10^7 tokens) but a
    bf16 one by ~1e-2 (seen on 2 H200s within 24 tokens). Greedy runs take every dtype: their
    reduced-precision ties are excused by the tie-aware comparison."""
    return st.tuples(run_configs(page_sizes=(1, 4, 64), max_batch=max_batch, dtypes=dtypes,
                                 graphs=graphs, graph_bs=((2, 4), (1, 2, 3, 4), (4,)),
                                 max_prompt_len=max_prompt_len, max_new_tokens=max_new_tokens,
                                 sampled=True, prefix=(False, True)),
                     st.sampled_from(tp_sizes),
                     st.sampled_from(models).flatmap(
                         seam_models),
                     st.sampled_from((True, True, False)),
                     st.sampled_from(TP_ALL_REDUCE)).map(
        lambda c: RunConfig(**{**c[0].to_dict(), "tp_size": c[1], "model": c[2],
                               "seams": c[1] if c[3] else 0, "tp_all_reduce": c[4],
                               "dtype": "float32" if c[0].temperature > 0 else c[0].dtype}))
