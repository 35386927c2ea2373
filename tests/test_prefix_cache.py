"""The radix prefix cache (specdec/prefix_cache): the tree's own rules, and the documented
behaviour at its edges: a prompt entirely cached, an empty match, a pool too small for one
request beside the tree, a flush while requests run. Nothing leaks in any of them."""
from __future__ import annotations

import random

import pytest

from specdec import Engine, SpecConfig
from specdec.memory.allocator import TREE, PageAllocator
from specdec.prefix_cache import RadixTree

SPEC = SpecConfig(topk=1, num_steps=3, num_draft_tokens=4)


def _engine(**kw) -> Engine:
    kw = {"page_size": 1, "draft": "eagle", "max_batch": 2, "max_context": 64, **kw}
    return Engine("tiny", spec=SPEC, prefix_cache=True, **kw)


def _prompt(n: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(256) for _ in range(n)]


def _all_free(eng: Engine) -> None:
    eng.flush_prefix_cache()
    eng.check_accounting([])
    alloc = eng.memory.allocator
    assert alloc.num_free == alloc.num_pages - 1


# -- the tree ---------------------------------------------------------------------------
def test_tree_match_split_insert_dedup():
    t = RadixTree()
    keys = [(1,), (2,), (3,), (4,)]
    assert t.insert(keys, [10, 11, 12, 13]) == [0, 1, 2, 3]
    assert t.match([(1,), (2,), (9,)]) == 2
    # A path sharing two symbols: the tree keeps its pages there and takes only the rest.
    assert t.insert([(1,), (2,), (7,)], [20, 21, 22]) == [2]
    pages, node = t.acquire([(1,), (2,)])  # splits exactly at the lock
    assert pages == [10, 11] and node.lock_ref == 1
    assert sorted(p for n in t.nodes() for p in n.pages) == [10, 11, 12, 13, 22]


def test_tree_evicts_lru_unreferenced_leaves_only():
    t = RadixTree()
    t.insert([(1,), (2,)], [1, 2])
    assert t.insert([(1,), (3,)], [9, 3]) == [1]  # page 9 duplicates the tree's page 1
    t.insert([(5,)], [4])
    _, node = t.acquire([(1,), (3,)])  # locks (1,) and (3,)
    assert t.evictable_pages() == 2  # (2,) and (5,)
    assert sorted(t.evict(10)) == [2, 4]  # the locked path stays
    t.unlock(node)
    assert sorted(t.evict(10)) == [1, 3]  # a parent goes once its last child has


def test_accounting_law_sees_tree_reference_counts():
    a = PageAllocator(5, 1)
    pages = a.alloc(2, 7)
    a.transfer(pages[:1], 7, TREE)
    a.check({7: pages}, {pages[0]: 1})
    with pytest.raises(AssertionError, match="reference count"):
        a.check({7: pages}, {pages[0]: 0})
    with pytest.raises(AssertionError, match="leaked"):
        a.check({7: pages[1:]}, {})  # the tree page is in no node: leaked


# -- edges of the engine ----------------------------------------------------------------
@pytest.mark.parametrize("draft", ["eagle", "self"])
def test_prompt_entirely_cached_runs_a_one_token_extend(draft):
    eng = _engine(draft=draft)
    p = _prompt(9)
    first = eng.generate([p], max_new_tokens=5)
    before = eng.stats.prefill_tokens
    assert eng.generate([p], max_new_tokens=5) == first
    assert eng.stats.prefill_tokens - before == 1  # the last prompt token, recomputed
    assert eng.stats.prefix_hit_tokens == 8
    _all_free(eng)


def test_empty_match_prefills_everything():
    eng = _engine()
    eng.generate([_prompt(7, 1)], max_new_tokens=3)
    eng.generate([_prompt(6, 2)], max_new_tokens=3)
    assert eng.stats.prefix_hit_tokens == 0 and eng.stats.prefill_tokens == 13
    _all_free(eng)


def test_tree_gives_pages_back_before_a_request_is_refused():
    """A pool of one worst-case request: the tree holds the first request's pages, and a
    second, different request of the same size still runs (the tree is evicted)."""
    probe = _engine()
    pages = probe._worst_pages(_prompt(20), 20)
    eng = _engine(num_pages=pages + 1)
    eng.generate([_prompt(20, 3)], max_new_tokens=20)
    assert eng.prefix_cache.evictable > 0
    eng.generate([_prompt(20, 4)], max_new_tokens=20)
    eng.check_accounting([])
    _all_free(eng)


def test_flush_while_running_keeps_referenced_pages():
    eng = _engine()
    p = _prompt(12, 5)
    eng.generate([p], max_new_tokens=4)
    eng.generate([_prompt(10, 6)], max_new_tokens=4)  # a second, unrelated tree branch
    rid = eng.add_request(p + [1, 2], 6)
    eng.step()  # admitted, sharing p's pages
    (req,) = eng.scheduler.running
    assert req.cached_len > 0
    freed = eng.flush_prefix_cache()
    assert freed > 0  # the unrelated branch and p's unreferenced tail
    eng.check_accounting()  # the shared pages are still the tree's, referenced once
    assert all(eng.memory.allocator.owner[pg] == TREE for pg in req.pages[:req.cached_len])
    while eng.has_unfinished():
        eng.step()
    assert eng.output(rid).finish_reason == "length"
    _all_free(eng)


def test_flush_without_prefix_cache_is_a_no_op():
    eng = Engine("tiny", spec=SPEC, max_context=64)
    assert eng.prefix_cache is None and eng.flush_prefix_cache() == 0
