"""Law lossless_greedy (oracle 4): speculative greedy decoding emits exactly the tokens plain
greedy decoding of the same prompts emits (a first divergence is allowed only at a tie,
oracle 6, which ends that comparison), and a tree (topk > 1) emits what a chain (topk 1) does,
for every greedy request of a batch, whatever else shares it: batches may mix greedy and
sampled requests, the sampled ones at odd rows, last, or all but one (RunConfig.samples).

Observables: each request's output tokens; the plain greedy reference and its top-2 logit
margins (harness/strategies/runs.py greedy_baseline, harness/references/dense.py); the
engine's accounting after the run. Reference: harness/references/ties.py. Strategy:
harness/strategies/configs.py run_configs."""
from __future__ import annotations

from harness.base.failure import OracleFailure
from harness.references.ties import compare_greedy
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import build_engine, greedy_reference_outputs, run
from harness.strategies.runs import default_device
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "lossless_greedy"  # the law whose checks this module raises (OracleFailure)


def check_lossless(outputs: list[list[int]], references: list[list[int]],
                   margins: list[list[float]], dtype, ids: list[int] | None = None) -> list[str]:
    """Lossless greedy: speculative output equals the non-speculative greedy output token for
    token; a first divergence is allowed only at a tie (oracle 6), which ends that comparison.
    `ids`: the batch rows of the lists' entries (default 0, 1, ...), for the messages.
    Returns the benign ties it saw."""
    ties = []
    for b, out, ref, m in zip(ids or range(len(outputs)), outputs, references, margins):
        ok, what = compare_greedy(out, ref, m, dtype)
        if not ok:
            raise OracleFailure(NAME, NAME, f"request {b}: {what}")
        if what != "identical":
            ties.append(f"request {b}: {what}")
    return ties


def prop_lossless_greedy(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 4: speculative greedy output == plain greedy output, and topk > 1 == topk 1,
    for each greedy request of the batch (the sampled requests it may share the batch with
    are not judged here)."""
    device = device or default_device()
    eng = build_engine(cfg, device)
    out = [o.tokens for o in run(cfg, eng)]
    greedy = [b for b in range(cfg.batch_size) if not cfg.samples(b)]
    ref, margins = greedy_reference_outputs(cfg, device, eng)
    pick = lambda xs: [xs[b] for b in greedy]  # noqa: E731
    check_lossless(pick(out), pick(ref), pick(margins), eng.dtype, ids=greedy)
    eng.check_accounting()
    if cfg.topk > 1:
        chain = build_engine(cfg, device, topk=1, ndt=cfg.num_steps + 1)
        check_lossless(pick(out), pick([o.tokens for o in run(cfg, chain)]), pick(margins),
                       eng.dtype, ids=greedy)


# Found by `harness check` on the GPU: a tree smaller than its depth (ndt < num_steps + 1),
# one per slice (an entry runs the examples its axes cover).
FOUND = tuple(RunConfig(topk=2, num_steps=2, ndt=2, page_size=p, draft=d, batch_size=1,
                        max_prompt_len=1, max_new_tokens=2, seed=0)
              for d in ("eagle", "self", "perturbed") for p in (1, 4, 64))

LAW = Law(
    name="lossless_greedy", rank=50, prop=prop_lossless_greedy, config=RunConfig,
    summary="speculative greedy == plain greedy, tree == chain, ties aside (oracle 4)",
    strategy=engine_runs(sampled="mixed", prefix=(False, True)),
    slices=grid(2, draft=("eagle", "self", "perturbed"), page_size=(1, 4, 64)), examples=FOUND,
    controls=("tests/test_oracles_not_vacuous.py::test_lossless_oracle",
              "tests/test_strategy_reach.py::"
              "test_seam_control_missed_by_unbiased_models_caught_by_biased",
              "cases/unequal_accept_slicing"))
