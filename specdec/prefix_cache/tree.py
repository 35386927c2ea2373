"""A radix tree over page keys: each symbol is one KV page's key (its tokens, plus for an
EAGLE head the next token), each node holds a run of symbols and their page indices.

Host-side and deterministic: LRU order is a counter, not a clock. Reference counts sit on
nodes; a lock takes a node and all its ancestors (a request uses the whole path).
"""
from __future__ import annotations

import heapq

from specdec import faults

Key = tuple  # one page's key


class Node:
    __slots__ = ("key", "pages", "children", "parent", "lock_ref", "last_access", "serial")

    def __init__(self, key: list[Key], pages: list[int], parent: "Node | None") -> None:
        self.key, self.pages, self.parent = key, pages, parent
        self.children: dict[Key, Node] = {}
        self.lock_ref = 0
        self.last_access = 0
        self.serial = 0  # creation order: breaks LRU ties deterministically

    @property
    def is_leaf(self) -> bool:
        return not self.children


def evictable(node: Node) -> bool:
    """A node may be evicted only when no running request uses it."""
    return node.lock_ref == 0 or faults.on("prefix_evict_referenced")  # ignores the count


class RadixTree:
    def __init__(self) -> None:
        self.root = Node([], [], None)
        self.root.lock_ref = 1  # never evicted
        self._clock = 0
        self._serial = 0

    def _new(self, key, pages, parent) -> Node:
        self._serial += 1
        node = Node(key, pages, parent)
        node.serial = self._serial
        return node

    def _touch(self, node: Node) -> None:
        self._clock += 1
        while node is not None:
            node.last_access = self._clock
            node = node.parent

    # -- lookup -------------------------------------------------------------------------
    def match(self, keys: list[Key]) -> int:
        """How many leading symbols of `keys` the tree holds (no side effect)."""
        node, i = self.root, 0
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            n = _common(child.key, keys[i:])
            i += n
            if n < len(child.key):
                break
            node = child
        return i

    def acquire(self, keys: list[Key]) -> tuple[list[int], Node]:
        """Pages of all of `keys` (which must be held: match() said so), locked. Splits a node
        so that the lock covers exactly these pages. Returns (pages, the last node)."""
        node, i, pages = self.root, 0, []
        while i < len(keys):
            child = node.children[keys[i]]
            n = _common(child.key, keys[i:])
            if n < len(child.key):
                child = self._split(child, n)
            pages += child.pages
            i += n
            node = child
        self.lock(node)
        self._touch(node)
        return pages, node

    def _split(self, node: Node, n: int) -> Node:
        """Cut `node` after its first n symbols; returns the new upper part."""
        upper = self._new(node.key[:n], node.pages[:n], node.parent)
        upper.lock_ref, upper.last_access = node.lock_ref, node.last_access
        node.parent.children[upper.key[0]] = upper
        node.key, node.pages, node.parent = node.key[n:], node.pages[n:], upper
        upper.children[node.key[0]] = node
        return upper

    # -- reference counts ---------------------------------------------------------------
    def lock(self, node: Node) -> None:
        while node is not self.root:
            node.lock_ref += 1
            node = node.parent

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            node.lock_ref -= 1
            assert node.lock_ref >= 0, "prefix node unlocked more often than locked"
            node = node.parent

    # -- insertion ----------------------------------------------------------------------
    def insert(self, keys: list[Key], pages: list[int]) -> list[int]:
        """Add the path `keys` with `pages`; where the tree already holds a symbol, its own
        page stays. Returns the indices i whose page the tree took (pages[i] is now held by
        the tree); the caller keeps the rest (duplicates of held pages, or already held)."""
        node, i, taken = self.root, 0, []
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                leaf = self._new(list(keys[i:]), list(pages[i:]), node)
                node.children[keys[i]] = leaf
                taken += range(i, len(keys))
                node = leaf
                break
            n = _common(child.key, keys[i:])
            if n < len(child.key):
                child = self._split(child, n)
            i += n
            node = child
        self._touch(node)
        return taken

    # -- eviction -----------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        out, stack = [], [self.root]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out[1:]

    def evictable_pages(self) -> int:
        """Pages that evict() could give back: those of nodes no running request uses (a lock
        takes the ancestors too, so such a node's whole subtree is unused)."""
        return sum(len(n.pages) for n in self.nodes() if evictable(n))

    def evict(self, want: int) -> list[int]:
        """Remove least recently used evictable leaves until `want` pages are given back or
        none is left. Returns the pages removed (the caller frees them)."""
        heap = [(n.last_access, n.serial, n) for n in self.nodes() if n.is_leaf and evictable(n)]
        heapq.heapify(heap)
        out: list[int] = []
        while heap and len(out) < want:
            _, _, leaf = heapq.heappop(heap)
            out += leaf.pages
            parent = leaf.parent
            del parent.children[leaf.key[0]]
            if parent is not self.root and parent.is_leaf and evictable(parent):
                heapq.heappush(heap, (parent.last_access, parent.serial, parent))
        return out


def _common(a: list[Key], b: list[Key]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
