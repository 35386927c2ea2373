"""Negative controls of the zoo-v2 laws: each law rejects a planted mistake that no bug-zoo
fault names (a law that never fails proves nothing), and passes without it."""
from __future__ import annotations

import pytest
import torch

import specdec.random_streams as streams
import specdec.sampler as sampler
from harness.laws.distribution import DistConfig, prop_sampled_distribution
from harness.laws.finish import check_finish, prop_finish
from harness.laws.long_context import prop_long_context
from harness.base.failure import OracleFailure
from harness.laws.structure import prop_structure
from harness.laws.random_streams import StreamConfig, prop_random_streams
from harness.strategies.runs import default_device
from harness.strategies.configs import RunConfig
from harness.runners.suite import gpus_needed, runnable
from harness.laws.tp_equals_single import prop_tp_equals_single
from specdec.engine import Engine
from specdec.graphs import runner as graph_runner
from specdec.graphs.standin import CPUGraph
from specdec.request import Req
from specdec.scheduler import RequestOutput

DEVICE = default_device()


def _fails(law: str, fn, *args, **kwargs):
    with pytest.raises(OracleFailure) as info:
        fn(*args, **kwargs)
    assert info.value.check == law, info.value


# -- finish -------------------------------------------------------------------------------
FINISH = RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="self", batch_size=4,
                   max_prompt_len=12, max_new_tokens=12, seed=5, stop_at=9, ragged=True)


def test_finish_law_rejects_bad_outputs():
    out = lambda toks, why: RequestOutput(0, [1], toks, why)  # noqa: E731
    check_finish([out([1, 2, 9], "stop")], max_new=[5], stops=[(9,)], references=[[1, 2, 9, 4, 5]],
                 margins=None)
    for toks, why in (([1, 2, 9, 4], "length"),   # past the stop
                      ([1, 2, 9], "length"),      # wrong reason
                      ([1, 2, 3, 4, 5, 6], "length"),  # past the cap
                      ([1, 2], "length")):        # too short for "length"
        _fails("finish", check_finish, [out(toks, why)], max_new=[5], stops=[(9,)])


def test_finish_law_rejects_a_stop_reason_from_past_the_cap():
    """A stop token whose first occurrence lies past the cap (reached by a round's accepted
    drafts) must not make the reason "stop", nor appear in the output."""
    out = lambda toks, why: RequestOutput(0, [1], toks, why)  # noqa: E731
    ref = [[1, 2, 3, 9, 5]]
    check_finish([out([1, 2, 3], "length")], max_new=[3], stops=[(9,)], references=ref,
                 margins=None)
    _fails("finish", check_finish, [out([1, 2, 3], "stop")], max_new=[3], stops=[(9,)],
           references=ref)
    _fails("finish", check_finish, [out([1, 2, 3, 9], "stop")], max_new=[3], stops=[(9,)],
           references=ref)


def test_finish_law_rejects_uncut_outputs(monkeypatch):
    prop_finish(FINISH, DEVICE)
    monkeypatch.setattr(Req, "visible_output", lambda self: list(self.output))
    _fails("finish", prop_finish, FINISH, DEVICE)


# -- structure under churn -------------------------------------------------------------------
@pytest.mark.parametrize("overlap", [False, True])
def test_churn_law_rejects_padded_rows_left_stale(monkeypatch, overlap):
    """A batch of 4 (bucket 4), then 1 (bucket 2), then 3 (bucket 4, one padded row): a
    high-water mark that forgets the rows the batch of 4 wrote leaves that row stale."""
    from harness.laws.structure_under_churn import prop_structure_under_churn
    from harness.strategies.churn import ChurnConfig
    cfg = ChurnConfig(topk=1, num_steps=1, ndt=2, page_size=1, draft="eagle", max_batch=4,
                      graph_bs=(2, 4), sizes=(4, 1, 3), overlap=overlap, seed=20)
    prop_structure_under_churn(cfg, DEVICE)
    right = graph_runner.pad_inputs

    def forgetful(specs, *, live, bs, size, out=None, dirty=None):
        views = right(specs, live=live, bs=bs, size=size, out=out, dirty=dirty)
        if dirty is not None:
            for name in specs:
                dirty[name] = bs * specs[name].per_req  # the rows past this batch: forgotten
        return views
    monkeypatch.setattr(graph_runner, "pad_inputs", forgetful)
    with pytest.raises(OracleFailure) as info:
        prop_structure_under_churn(cfg, DEVICE)
    assert info.value.check.startswith("padding"), info.value


# -- the sampling distribution, probabilistic drafting and graphs included -------------------
@pytest.mark.parametrize("graph", [False, True])
def test_distribution_rejects_biased_probabilistic_rule(graph):
    cfg = DistConfig(draft="perturbed", shape="chain", draft_sampling="probabilistic",
                     temperature=1.0, top_k=0, top_p=1.0, cuda_graph=graph, seed=31)
    prop_sampled_distribution(cfg, DEVICE)
    from specdec.spec.verify import Verifier
    saved = Verifier.threshold_acc
    Verifier.threshold_acc = 0.3  # accepts a draft when coin * q * 0.3 < p
    try:
        _fails("sampled_distribution", prop_sampled_distribution, cfg, DEVICE)
    finally:
        Verifier.threshold_acc = saved


def test_distribution_rejects_a_wrong_temperature_rule(monkeypatch):
    cfg = DistConfig(draft="eagle", shape="tree", draft_sampling="greedy", temperature=1.8, top_k=0,
                     top_p=1.0, cuda_graph=False, seed=32)
    prop_sampled_distribution(cfg, DEVICE)
    right = sampler.filtered_probs
    monkeypatch.setattr(sampler, "filtered_probs",  # T applied twice: support unchanged
                        lambda x, *, temperature, **k: right(x, temperature=temperature ** 2,
                                                             **k))
    _fails("sampled_distribution", prop_sampled_distribution, cfg, DEVICE)


def test_distribution_rejects_unseeded_requests_sharing_a_seed(monkeypatch):
    """Requests naming no seed: the engine must derive a different one for each."""
    cfg = DistConfig(draft="eagle", shape="chain", draft_sampling="greedy", temperature=1.0,
                     top_k=0, top_p=1.0, cuda_graph=False, seed=33, seeded=False)
    prop_sampled_distribution(cfg, DEVICE)
    monkeypatch.setattr(sampler, "request_seed",  # the engine seed alone, not the request id
                        lambda req, engine_seed: streams.mix_seed(engine_seed, 0))
    _fails("sampled_distribution", prop_sampled_distribution, cfg, DEVICE)


# -- random streams --------------------------------------------------------------------------
def test_streams_law_rejects_a_shared_stream(monkeypatch):
    cfg = StreamConfig(3, 4, 5, 9)
    prop_random_streams(cfg, DEVICE)
    right = streams.stream_coins
    monkeypatch.setattr(sampler, "stream_coins",  # the final draw keyed like acceptance
                        lambda s, *a: right(streams.ACCEPT if s == streams.FINAL else s, *a))
    _fails("random_streams", prop_random_streams, cfg, DEVICE)


def test_streams_law_rejects_batch_keyed_coins(monkeypatch):
    cfg = StreamConfig(3, 2, 3, 10, n=512)
    right = sampler.batch_sampling

    def by_index(reqs, *, positions, **k):  # keyed by place in batch, not position
        return right(reqs, positions=list(range(len(reqs))), **k)
    import harness.laws.random_streams as law
    monkeypatch.setattr(law, "batch_sampling", by_index)
    _fails("random_streams", prop_random_streams, cfg, DEVICE)


@pytest.mark.parametrize("ignored", ["engine seed", "request id"])
def test_streams_law_rejects_unseeded_keys_missing_a_part(monkeypatch, ignored):
    """A request naming no seed: its streams must be keyed by the engine seed and its id."""
    cfg = StreamConfig(3, 2, 3, 11, n=512)
    prop_random_streams(cfg, DEVICE)
    right = streams.request_seed

    def partial(req, engine_seed):
        if req.sampling.seed is not None:
            return right(req, engine_seed)
        return streams.mix_seed(*((1, req.rid) if ignored == "engine seed" else (engine_seed, 1)))
    monkeypatch.setattr(sampler, "request_seed", partial)
    _fails("random_streams", prop_random_streams, cfg, DEVICE)


# -- graph buckets: state a larger batch leaves behind ----------------------------------------
def test_standin_keeps_what_replays_leave_in_graph_memory():
    """A buffer allocated inside capture and only partly written holds the previous replay's
    rows, as GPU graph memory does."""
    n, vals = torch.zeros((), dtype=torch.int64), torch.zeros(8)

    def body():
        out = torch.empty(8)
        keep = torch.arange(8) < n
        return out.copy_(torch.where(keep, vals, out))
    g = CPUGraph()
    out = g.capture(body)
    n.fill_(8), vals.copy_(torch.arange(1.0, 9.0))
    g.replay()
    n.fill_(3), vals.fill_(100.0)
    g.replay()
    assert out.tolist() == [100.0] * 3 + [4.0, 5.0, 6.0, 7.0, 8.0]


def test_structure_rejects_stale_rows_in_a_shrinking_bucket(monkeypatch):
    cfg = RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", batch_size=7,
                    max_prompt_len=12, max_new_tokens=12, seed=5, cuda_graph=True, graph_bs=(8,),
                    ragged=True)
    prop_structure(cfg, DEVICE)
    right = graph_runner.pad_inputs

    def no_refill(specs, *, live, bs, size, out=None, dirty=None):  # rows past bs left stale
        return right(specs, live=live, bs=bs, size=size, out=out,
                     dirty=None if out is None else {})
    monkeypatch.setattr(graph_runner, "pad_inputs", no_refill)
    with pytest.raises(OracleFailure):
        prop_structure(cfg, DEVICE)


# -- long context ------------------------------------------------------------------------------
LONG = RunConfig(topk=1, num_steps=3, ndt=4, page_size=4, draft="eagle", batch_size=2,
                 max_prompt_len=200, max_new_tokens=12, seed=7, model="tiny-long",
                 min_prompt_len=160,
                 draft_max_position=64)


def test_long_context_rejects_a_table_padded_past_its_length(monkeypatch):
    prop_long_context(LONG, DEVICE)
    right = Engine._cover_context

    def zero_padded(self, drafter):  # the rows past the draft's own length are zeros
        own = drafter.rope.cos.shape[0]
        right(self, drafter)
        drafter.rope.cos[own:] = 1.0
        drafter.rope.sin[own:] = 0.0
    monkeypatch.setattr(Engine, "_cover_context", zero_padded)
    _fails("kv_content", prop_long_context, LONG, DEVICE)


def test_long_context_crosses_the_tables():
    """The drawn space really passes both limits (scaling boundary 128, drafter 64 / 96)."""
    from hypothesis import given, settings

    from harness.strategies.configs import long_context_configs

    @settings(max_examples=20, database=None)
    @given(cfg=long_context_configs())
    def law(cfg):
        assert cfg.min_prompt_len > max(128, cfg.draft_max_position)
    law()


# -- tensor parallelism: tp N equals tp 1 ------------------------------------------------------
TP = RunConfig(topk=1, num_steps=3, ndt=4, page_size=4, draft="eagle", batch_size=3,
               max_prompt_len=10, max_new_tokens=6, seed=11, cuda_graph=True, graph_bs=(2, 4),
               tp_size=2)


def _on_tp_gpus(test):
    """Marked multi_gpu where TP takes two GPUs (CUDA): the gate hands it out first, in a
    group of its own (harness/gate/xdist_gpu.py). On a CPU it runs over gloo, unmarked."""
    return pytest.mark.multi_gpu(test) if gpus_needed(TP, DEVICE) > 1 else test


@_on_tp_gpus
def test_tp_law_rejects_misordered_vocab_gather(monkeypatch):
    """The vocab gather concatenating the shards in reverse rank order on rank 0 (a mistake
    no bug-zoo fault names): rank 0's tokens leave the workers' and tp 1's."""
    if not runnable(TP, DEVICE):
        pytest.skip("tp_size=2 needs 2 GPUs on CUDA")
    prop_tp_equals_single(TP, DEVICE)
    from specdec.tp.comm import TPComm
    gather = TPComm.gather_last
    monkeypatch.setattr(TPComm, "gather_last",
                        lambda self, x, vocab: gather(self, x, vocab).roll(x.shape[-1], dims=-1))
    _fails("tp_equals_single", prop_tp_equals_single, TP, DEVICE)


# -- overlap_equals_sync -----------------------------------------------------------------------
def test_overlap_law_rejects_a_wrong_coin_candidate(monkeypatch):
    """Overlap picks a sampled request's coins among candidates on the device: picking the
    next one (a position off by one) changes only the overlap run."""
    from harness.laws.overlap_equals_sync import prop_overlap_equals_sync
    cfg = RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="perturbed", batch_size=3,
                    max_prompt_len=8, max_new_tokens=8, seed=11, temperature=1.0)
    prop_overlap_equals_sync(cfg, DEVICE)
    import specdec.rounds as rounds
    real = rounds.batch_sampling

    def off_by_one(reqs, *, offsets=None, **kw):
        return real(reqs, offsets=None if offsets is None else offsets + 1, **kw)
    monkeypatch.setattr(rounds, "batch_sampling", off_by_one)
    _fails("overlap_equals_sync", prop_overlap_equals_sync, cfg, DEVICE)


# -- prefix_transparent ---------------------------------------------------------------------
PREFIX = RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="self", batch_size=6,
                   max_prompt_len=12, max_new_tokens=8, seed=3, prefix_cache=True)


def test_prefix_law_rejects_uncounted_references(monkeypatch):
    """A tree whose locks count nothing: pages in use look unreferenced (and evictable)."""
    from harness.laws.prefix_transparent import prop_prefix_transparent
    from specdec.prefix_cache.tree import RadixTree
    prop_prefix_transparent(PREFIX, DEVICE)
    monkeypatch.setattr(RadixTree, "lock", lambda self, node: None)
    monkeypatch.setattr(RadixTree, "unlock", lambda self, node: None)
    _fails("prefix_transparent", prop_prefix_transparent, PREFIX, DEVICE)


def test_prefix_law_rejects_shared_pages_out_of_order(monkeypatch):
    """Shared pages mapped into a request's row in the wrong order: the reused KV is wrong."""
    from harness.laws.prefix_transparent import prop_prefix_transparent
    from specdec.memory.manager import MemoryManager
    admit = MemoryManager.admit

    def reversed_pages(self, req):
        req.pages[:req.cached_len // self.page_size] = req.pages[:req.cached_len // self.page_size][::-1]
        admit(self, req)
    monkeypatch.setattr(MemoryManager, "admit", reversed_pages)
    with pytest.raises(OracleFailure) as info:
        prop_prefix_transparent(PREFIX, DEVICE)
    assert info.value.check in ("prefix_transparent", "kv_content"), info.value


def test_structure_rejects_tree_nodes_in_score_order(monkeypatch):
    """Section 5: the selected candidates keep ascending index order. In score order (the
    top-k's own) parents still precede children, so only the layout check sees it."""
    import specdec.spec.draft_decode_phase as ddp
    from specdec.spec import select
    cfg = RunConfig(topk=4, num_steps=3, ndt=8, page_size=1, draft="eagle", batch_size=2,
                    max_prompt_len=8, max_new_tokens=6, seed=3)
    prop_structure(cfg, DEVICE)

    def score_order(score_list, token_list, parents_list, ndt):
        parents, _, _ = select.organize_draft_results(score_list, token_list, parents_list, ndt)
        scores = torch.cat(score_list, dim=1).flatten(1)
        index = torch.topk(scores, ndt - 1, dim=-1).indices
        return parents, index, torch.gather(torch.cat(token_list, dim=1), 1, index)
    monkeypatch.setattr(ddp, "organize_draft_results", score_order)
    _fails("tree_order", prop_structure, cfg, DEVICE)
