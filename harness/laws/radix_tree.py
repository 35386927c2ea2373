"""Law radix_tree: the prefix cache's radix tree is a map from held page paths to pages, with
reference counts and LRU eviction of unreferenced leaves (contract section 11).

The tree (specdec/prefix_cache/tree.py) compresses runs of page keys into nodes and splits
them on demand; the model here (harness/references/radix_model.py) keeps one entry per
held path of page keys, uncompressed. Under any sequence of insert / acquire / unlock /
match / evict, after every operation:
- match(keys) is the length of the longest held prefix of keys;
- insert(keys, pages) takes exactly the positions whose path was not held, and keeps the
  pages already held for the others;
- acquire(keys) of a held path returns its held pages, in order, and references every
  prefix of it until unlock;
- evict(want) frees only held, unreferenced pages, each at most once, at least
  min(want, unreferenced held pages) of them, leaving the held paths prefix-closed; and
  least recently used first: no page it frees was used more recently than a remaining
  unreferenced leaf (a use: an insert or acquire of a path through it);
- the tree holds exactly the model's paths and pages, and evictable_pages() counts the
  unreferenced ones.
Node shape (where runs split) is the tree's business; the law reads only paths and pages.

Observables: RadixTree's return values, its nodes (key runs, pages, lock counts) and
evictable_pages(). Reference: harness/references/radix_model.py. Strategy: radix_cases,
here (a small alphabet so that paths share prefixes, split nodes and diverge)."""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.references.radix_model import RadixModel
from specdec.prefix_cache.tree import RadixTree
from harness.laws.declaration import Law
from harness.strategies.tiers import fixed_strategy

NAME = "radix_tree"  # the law whose checks this module raises (OracleFailure)

ALPHABET = 3   # page keys: few enough that drawn paths share and split runs
MAX_DEPTH = 6  # pages per path


@dataclass(frozen=True)
class RadixCase:
    """ops: ("insert" | "acquire" | "match", path) with path a tuple of symbols,
    ("unlock", i): the i-th live lock (mod their number), ("evict", want)."""

    ops: tuple

    def to_dict(self) -> dict:
        return {"ops": [list(op) for op in self.ops]}


def radix_cases():
    path = st.lists(st.integers(0, ALPHABET - 1), min_size=1, max_size=MAX_DEPTH).map(tuple)
    # Weighted toward building the tree: evictions and unlocks need something to act on.
    kinds = st.sampled_from(("insert",) * 3 + ("acquire", "match") * 2 + ("unlock", "evict"))

    def op(kind):
        if kind == "unlock":
            return st.tuples(st.just(kind), st.integers(0, 7))
        if kind == "evict":
            return st.tuples(st.just(kind), st.integers(1, 2 * MAX_DEPTH))
        return st.tuples(st.just(kind), path)
    return st.builds(RadixCase, st.lists(kinds.flatmap(op), min_size=4, max_size=40).map(tuple))


# Explicit examples (run first by the suite): each tree feature the law reads, once.
EXAMPLES = (
    RadixCase((("insert", (0, 1, 2)), ("match", (0, 1, 0)), ("match", (0, 2)))),  # partial runs
    RadixCase((("insert", (0, 1)), ("acquire", (0,)), ("evict", 4))),  # a split, locked above
    RadixCase((("insert", (0, 1)), ("acquire", (0, 1)), ("acquire", (0,)), ("unlock", 1),
               ("evict", 4))),  # a split of a locked run
    RadixCase((("insert", (0,)), ("insert", (1,)), ("acquire", (0,)), ("unlock", 0),
               ("evict", 1))),  # LRU refreshed by a use
)


def _keys(path) -> list[tuple]:
    return [(s,) for s in path]


def tree_paths(tree) -> dict[tuple, int]:
    """Every held path (symbols from the root) -> its page, read from the tree's nodes."""
    out, stack = {}, [(tree.root, ())]
    while stack:
        node, prefix = stack.pop()
        for child in node.children.values():
            path = prefix
            for key, page in zip(child.key, child.pages):
                path = path + key
                out[path] = page
            stack.append((child, path))
    return out


def prop_radix_tree(case: RadixCase, device: str | None = None, tree_cls=RadixTree) -> None:
    """Law: the radix tree agrees with the uncompressed model after every operation of
    `case` (the module docstring). `device` is unused: the tree lives on the host."""
    tree, model = tree_cls(), RadixModel()
    locks: list[tuple] = []  # (node, path) of live acquisitions
    next_page = 1

    def fail(i, op, what):
        raise OracleFailure(NAME, NAME, f"op {i} {op}: {what}")

    for i, (kind, arg) in enumerate(case.ops):
        arg = tuple(arg) if isinstance(arg, list) else arg  # a --config from JSON
        op = (kind, arg)
        if kind == "insert":
            pages = list(range(next_page, next_page + len(arg)))
            next_page += len(arg)
            want = model.insert(arg, pages)
            taken = tree.insert(_keys(arg), pages)
            if list(taken) != want:
                fail(i, op, f"took positions {list(taken)}, the model {want}")
        elif kind == "acquire":
            m = model.match(arg)
            if m == 0:
                continue
            want = model.acquire(arg[:m])
            pages, node = tree.acquire(_keys(arg[:m]))
            if list(pages) != want:
                fail(i, op, f"acquired pages {list(pages)}, the held ones are {want}")
            locks.append((node, arg[:m]))
        elif kind == "unlock":
            if not locks:
                continue
            node, path = locks.pop(arg % len(locks))
            tree.unlock(node)
            model.unlock(path)
        elif kind == "match":
            got, want = tree.match(_keys(arg)), model.match(arg)
            if got != want:
                fail(i, op, f"matched {got} pages, the longest held prefix is {want}")
        elif kind == "evict":
            freed = tree.evict(arg)
            problem = model.evict(freed, arg)
            if problem:
                fail(i, op, problem)
        else:
            raise ValueError(f"radix_tree: unknown operation {kind!r}")
        held = tree_paths(tree)
        if held != model.held:
            extra = sorted(set(held.items()) - set(model.held.items()))[:3]
            missing = sorted(set(model.held.items()) - set(held.items()))[:3]
            fail(i, op, f"the tree holds {len(held)} paths, the model {len(model.held)}: "
                        f"(path, page) only in the tree {extra}, only in the model {missing}")
        if tree.evictable_pages() != model.unreferenced():
            fail(i, op, f"evictable_pages() = {tree.evictable_pages()}, unreferenced held "
                        f"pages = {model.unreferenced()}")


LAW = Law(
    name="radix_tree", rank=170, prop=prop_radix_tree, config=RadixCase,
    summary="the prefix cache's radix tree == an uncompressed map of held page paths: matches, "
            "insertions, references, LRU eviction of unreferenced leaves (section 11)",
    strategy=fixed_strategy(radix_cases), examples=EXAMPLES,
    controls=("tests/test_radix_tree_law.py::test_planted_mistakes_fail",))
