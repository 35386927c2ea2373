"""A stateful Hypothesis machine over the request lifecycle (continuous batching).

Rules add requests (greedy, some with a stop token), step the engine, abort a live request,
and offer bad requests that must be refused without side effects. With the prefix cache
(drawn), rules also submit a prompt sharing a prefix with an earlier one (identical, cut at or
next to a page boundary, extended) and flush the tree while requests run; the small pool makes
the tree evict. The pool is drawn small
(harness/strategies/lifecycle_config.py) so retraction and re-prefill happen in ordinary runs.
Checked after every rule: allocator accounting, and the scheduler's order (first come, first
served; retraction takes the newest arrival and puts it back at the front of the queue): the
waiting queue is in arrival order and every running request arrived before every waiting
one, so no request is overtaken by a later one; and at most max_batch requests hold request
rows (running, or holding pages until the round in flight resolves). After every step: the committed KV of the
running requests equals a dense reference prefill (oracle 3), every round and forward of
the step has the structure oracle 1 wants (positions, slots, tree, acceptance, compaction,
padded lanes on reserved slot 0: harness/laws/structure.py), and every finished request's
output equals its independent greedy output (plain decoding, alone; ties as oracle 6), cut
at its stop token. Churn is what the structure law's own runs lack: batches shrink (finish,
abort, retraction) and grow again (admission) across coarse graph buckets, so a padded lane
replays over rows an earlier, larger batch wrote. The engine runs with CUDA graphs (or the CPU stand-in) or eagerly, as
drawn, so a graph/eager mismatch shows up as a wrong output. Teardown drains the engine so
every request added is checked.

References: harness/references/dense.py (KV), harness/references/ties.py (outputs).
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from hypothesis import HealthCheck, event, seed, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, rule,
                                 run_state_machine_as_test)

from harness.laws.kv_content import check_live_kv
from harness.laws.structure import SpecShape, check_recent_structure
from harness.strategies.lifecycle_config import (Expected, LifecycleConfig, build_lifecycle_engine,
                                      expected, lifecycle_configs, reference_output)
from harness.base import stop
from harness.base.failure import OracleFailure
from harness.strategies.runs import default_device
from specdec.memory.allocator import OutOfSlots
from specdec.sampling_params import SamplingParams
from specdec.trace import TraceRecorder
from harness.laws.declaration import Law, Slice
from harness.strategies.tiers import fixed_strategy

NAME = "lifecycle"  # the law whose checks this module raises (OracleFailure)

DRAIN_LIMIT = 400  # steps; a live request that never finishes is a failure (a stuck scheduler)


def check_admission_order(scheduler) -> None:
    """First come, first served (request ids grow with arrival): the waiting queue is in
    arrival order, and no running request arrived after a waiting one (admission never skips
    the head; retraction returns the newest running request to the front)."""
    waiting = [r.rid for r in scheduler.waiting]
    if waiting != sorted(waiting):
        raise OracleFailure(NAME, "lifecycle_order",
                            f"waiting queue out of arrival order: {waiting}")
    running = [r.rid for r in scheduler.running]
    if waiting and running and max(running) > waiting[0]:
        raise OracleFailure(NAME, "lifecycle_order", f"request {max(running)} runs while request "
                                               f"{waiting[0]}, which arrived earlier, waits")


def check_batch_bound(scheduler, max_batch: int) -> None:
    """Continuous batching holds at most max_batch requests at once: running, or holding
    pages until the round in flight resolves (each owns a request row)."""
    holding = [r.rid for r in scheduler.holding()]
    if len(holding) > max_batch:
        raise OracleFailure(NAME, "lifecycle_batch", f"{len(holding)} requests hold rows "
                                               f"{sorted(holding)}; max_batch is {max_batch}")


class LifecycleMachine(RuleBasedStateMachine):
    device = default_device()

    def __init__(self) -> None:
        super().__init__()
        self.engine = None
        self.expect: dict[int, Expected] = {}   # live rid -> expected output
        self.gone: list[int] = []               # finished or aborted rids
        self.prompts: list[list[int]] = []      # every prompt added (prefix sources)

    @initialize(cfg=lifecycle_configs())
    def build(self, cfg: LifecycleConfig) -> None:
        self.cfg = cfg
        self.engine = build_lifecycle_engine(cfg, self.device)
        self.engine.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=True)
        spec = cfg.spec
        self.shape = SpecShape(spec.topk, spec.num_steps, spec.ndt, cfg.page_size,
                               self.engine.drafter.shifted)
        self.rounds_checked = 0

    # -- rules --------------------------------------------------------------------------
    @rule(data=st.data())
    def add(self, data) -> None:
        for _ in range(data.draw(st.integers(1, 3), label="count")):  # bursts fill the pool
            self._add(data)

    def _add(self, data) -> None:
        cfg = self.cfg
        # Lengths skewed to the drawn maxima: a few such requests outgrow the pool.
        n = data.draw(st.integers(1, cfg.max_prompt_len) | st.integers(
            -(-cfg.max_prompt_len // 2), cfg.max_prompt_len), label="prompt_len")
        new = data.draw(st.integers(1, cfg.max_new_tokens) | st.integers(
            -(-cfg.max_new_tokens // 2), cfg.max_new_tokens), label="max_new_tokens")
        rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="prompt_seed"))
        prompt = [rng.randrange(self.engine.cfg.vocab_size) for _ in range(n)]
        self._submit(data, prompt, new)

    def _submit(self, data, prompt: list[int], new: int) -> None:
        cfg = self.cfg
        self.prompts.append(prompt)
        ref = reference_output(cfg.model, prompt=prompt, max_new_tokens=new, device=self.device,
                               dtype=cfg.dtype, seed=cfg.seed)
        # A stop token taken from the reference output, so that it is actually reached.
        at = data.draw(st.none() | st.integers(0, new - 1), label="stop_at")
        stop = () if at is None else (ref[0][at],)
        rid = self.engine.add_request(prompt, new, SamplingParams(stop_token_ids=stop))
        self.expect[rid] = expected(ref, stop)

    @rule(data=st.data())
    def add_shared(self, data) -> None:
        """A prompt sharing a prefix with an earlier one: identical, cut at a page boundary or
        one token either side of it, then a fresh tail (none, or a few tokens)."""
        if not self.cfg.prefix_cache or not self.prompts:
            return
        src = data.draw(st.sampled_from(self.prompts), label="shared_with")
        ps = self.cfg.page_size
        cut = data.draw(st.sampled_from([len(src)] + [k * ps + d for k in range(1, 4)
                                                      for d in (-1, 0, 1)]), label="cut")
        rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="tail_seed"))
        tail = [rng.randrange(self.engine.cfg.vocab_size)
                for _ in range(data.draw(st.integers(0, 3), label="tail"))]
        prompt = (src[:max(cut, 1)] + tail)[:self.cfg.max_prompt_len]
        new = data.draw(st.integers(1, self.cfg.max_new_tokens), label="max_new_tokens")
        self._submit(data, prompt, new)

    @rule()
    def flush(self) -> None:
        """Flushing the prefix tree, running requests or not, frees only unused pages."""
        if self.engine.prefix_cache is None:
            return
        self.engine.flush_prefix_cache()
        if self.engine.scheduler.running:
            event("flush while running")

    @rule(n=st.integers(1, 4))
    def step(self, n: int) -> None:
        for _ in range(n):  # several: requests grow past the pool between adds
            self._step()

    @rule(data=st.data())
    def abort(self, data) -> None:
        # No precondition: a filtered rule choice makes Hypothesis discard examples.
        if not self.expect:
            return
        if any(r.rid in self.expect for r in self.engine.scheduler.running):
            event("abort while running")
        rid = data.draw(st.sampled_from(sorted(self.expect)), label="abort_rid")
        out = self.engine.abort(rid)
        assert out.finish_reason == self.engine.output(rid).finish_reason == "abort"
        del self.expect[rid]
        self.gone.append(rid)
        self._refused(lambda: self.engine.abort(rid), ValueError, "already finished or aborted")

    @rule(data=st.data())
    def abort_gone(self, data) -> None:
        if not self.gone:
            return
        rid = data.draw(st.sampled_from(self.gone), label="gone_rid")
        self._refused(lambda: self.engine.abort(rid), ValueError, "already finished or aborted")

    @rule(kind=st.sampled_from(["empty", "vocab", "zero_new", "context", "pool"]))
    def add_refused(self, kind: str) -> None:
        """Bad requests are refused up front and leave the engine as it was."""
        e, v = self.engine, self.engine.cfg.vocab_size
        too_long = e.max_context  # past the context whatever max_new_tokens is
        # Fits the context, not the pool (the context is drawn at twice the largest request).
        big = 2 * (self.cfg.max_prompt_len + self.cfg.max_new_tokens) - 1
        cases = {"empty": ([], 1, ValueError, "is empty"),
                 "vocab": ([1, v], 1, ValueError, "outside the vocabulary"),
                 "zero_new": ([1], 0, ValueError, "max_new_tokens=0"),
                 "context": ([1] * too_long, 1, ValueError, "more than max_context"),
                 "pool": ([1] * big, 1, OutOfSlots, "pages in the worst case")}
        prompt, new, exc, match = cases[kind]
        if kind == "pool" and e._worst_pages(prompt, new) <= e.memory.allocator.num_pages - 1:
            return  # this pool is large enough for it
        self._refused(lambda: e.add_request(prompt, new), exc, match)

    # -- invariants ---------------------------------------------------------------------
    @invariant()
    def accounting(self) -> None:
        if self.engine is None:
            return
        self.engine.check_accounting()  # the running requests own exactly what they hold
        for r in self.engine.scheduler.waiting:
            assert not r.pages and r.row == -1, f"waiting request {r.rid} holds memory"
        assert set(self.engine.scheduler.live) == set(self.expect)
        check_admission_order(self.engine.scheduler)
        check_batch_bound(self.engine.scheduler, self.cfg.max_batch)

    def teardown(self) -> None:
        if self.engine is None:
            return
        for _ in range(DRAIN_LIMIT):
            if not self.engine.has_unfinished():
                break
            self._step()
            self.accounting()
        if self.engine.has_unfinished():
            raise OracleFailure(NAME, "lifecycle_progress",
                                f"requests {sorted(self.expect)} did not "
                                f"finish within {DRAIN_LIMIT} steps")
        self.engine.check_accounting([])  # everything released (the tree unreferenced)
        self.engine.flush_prefix_cache()
        alloc = self.engine.memory.allocator
        assert alloc.num_free == alloc.num_pages - 1, "pages held after the last request and a flush"

    # -- helpers ------------------------------------------------------------------------
    def _step(self) -> None:
        e = self.engine
        retracted = e.scheduler.retractions
        stop.check()  # a red gate ends the machine here (harness/base/stop.py)
        for out in e.step():
            event(f"finished: {out.finish_reason}")
            want = self.expect.pop(out.rid)
            want.check(out.rid, out.tokens, e.dtype)
            self.gone.append(out.rid)
        if e.scheduler.retractions > retracted:
            event("retraction")
        if any(r.cached_len for r in e.scheduler.running):
            event("prefix hit")
        check_live_kv(e, e.scheduler.running)
        self._check_structure()

    def _check_structure(self) -> None:
        padded = sum(any(f.num_padded for f in rnd.forwards) for rnd in self.engine.recorder.rounds)
        self.rounds_checked = check_recent_structure(self.engine.recorder, self.shape,
                                                     self.rounds_checked)
        if padded:
            event("padded replay")

    def _refused(self, call, exc, match: str) -> None:
        before = (len(self.engine.scheduler.waiting), self.engine.memory.allocator.num_free)
        try:
            call()
        except exc as err:
            assert match in str(err), f"refused with an unclear message: {err}"
        else:
            raise AssertionError(f"expected {exc.__name__} ({match})")
        after = (len(self.engine.scheduler.waiting), self.engine.memory.allocator.num_free)
        assert before == after, "a refused call changed the engine"


@dataclass(frozen=True)
class LifecycleRun:
    """`examples` runs of the machine, its Hypothesis draws seeded by `seed` (what `python -m
    harness check` and `repro` hand the machine: the machine draws its own rules)."""

    seed: int
    examples: int = 8

    def to_dict(self) -> dict:
        return asdict(self)


def lifecycle_runs():
    return st.builds(LifecycleRun, st.integers(0, 2**31 - 1))


def prop_lifecycle(case: LifecycleRun, device: str | None = None) -> None:
    """Law: the machine's invariants and checks (the module docstring) hold over
    `case.examples` drawn runs of up to 20 rules on `device`."""
    machine = seed(case.seed)(  # run_state_machine_as_test honours a factory's @seed
        type("LifecycleOn", (LifecycleMachine,), {"device": device or default_device()}))
    run_state_machine_as_test(machine, settings=settings(
        max_examples=case.examples, stateful_step_count=20, database=None, deadline=None,
        suppress_health_check=list(HealthCheck), print_blob=False, phases=LAW.phases))


LAW = Law(
    name="lifecycle", rank=180, prop=prop_lifecycle, config=LifecycleRun,
    summary="the stateful machine over add / step / abort / refuse (continuous batching): "
            "order, batch bound, outputs, structure and live KV after every step",
    # The machine draws its own rules: a case seeds a few of its runs. pytest also runs the
    # machine directly (tests/test_lifecycle.py, 40 runs or more).
    # shrink=False holds for the machine's own runs too (their settings take LAW.phases):
    # every rule runs the dense references, so shrinking a failing run of 20 rules took over
    # 4 minutes on CPU (a planted scheduler mistake, bench/mutation) and the gate timed out
    # instead of naming the law; the unshrunk run of at most 20 rules is printed as found.
    strategy=fixed_strategy(lifecycle_runs), slices=(Slice(fraction=10),), shrink=False,
    nested=True,
    controls=("tests/test_lifecycle.py::test_admission_order_sees_a_retraction_sent_to_the_back",
              "tests/test_lifecycle.py::test_batch_bound_holds_and_sees_one_request_too_many",
              "tests/test_lifecycle.py::test_structure_after_each_step_sees_stale_padded_rows"))
