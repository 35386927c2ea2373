"""The radix_tree law (harness/laws/radix_tree.py): it holds for the prefix cache's tree over
generated operation sequences, and it is not vacuous: planted mistakes in the tree (eviction
most recently used first, a use that does not refresh LRU order, a split that drops the
reference count, a match that counts a partly matched run whole) each fail it."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from harness.base.failure import OracleFailure
from harness.laws.radix_tree import RadixCase, prop_radix_tree, radix_cases
from specdec.prefix_cache.tree import RadixTree, _common


@settings(deadline=None, max_examples=200)
@given(case=radix_cases())
def test_generated_cases_pass(case):
    prop_radix_tree(case)


class _MostRecentFirst(RadixTree):
    """LRU order reversed: evict() sees every node's last use negated."""

    def evict(self, want):
        for n in self.nodes():
            n.last_access = -n.last_access
        try:
            return super().evict(want)
        finally:  # the nodes still held get their order back
            for n in self.nodes():
                n.last_access = -n.last_access


class _AcquireNotTouched(RadixTree):
    def _touch(self, node):
        if getattr(self, "_acquiring", False):
            return
        super()._touch(node)

    def acquire(self, keys):
        self._acquiring = True
        try:
            return super().acquire(keys)
        finally:
            self._acquiring = False


class _SplitDropsLocks(RadixTree):
    def _split(self, node, n):
        upper = super()._split(node, n)
        upper.lock_ref = 0
        return upper


class _MatchCountsRunWhole(RadixTree):
    def match(self, keys):
        node, i = self.root, 0
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            n = _common(child.key, keys[i:])
            i += len(child.key) if n < len(child.key) else n
            if n < len(child.key):
                break
            node = child
        return min(i, len(keys))


# Hand-written sequences, one per mistake, so each control fails on every run.
_LRU = (("insert", (0,)), ("insert", (1,)), ("acquire", (0,)), ("unlock", 0), ("evict", 1))
CONTROLS = {
    "most_recent_first": (_MostRecentFirst, (("insert", (0,)), ("insert", (1,)), ("evict", 1))),
    "acquire_not_touched": (_AcquireNotTouched, _LRU),
    "split_drops_locks": (_SplitDropsLocks, (("insert", (0, 1)), ("acquire", (0, 1)),
                                             ("acquire", (0,)), ("unlock", 1))),
    "match_counts_run_whole": (_MatchCountsRunWhole, (("insert", (0, 1, 2)),
                                                      ("match", (0, 2)))),
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_planted_mistakes_fail(name):
    tree_cls, ops = CONTROLS[name]
    prop_radix_tree(RadixCase(ops))  # the same sequence passes on the real tree
    with pytest.raises(OracleFailure, match="radix_tree"):
        prop_radix_tree(RadixCase(ops), tree_cls=tree_cls)
