"""Page allocator shared by the target and draft pools, with owner accounting.

Host-side and deterministic (a sorted free list). Every page is free, has exactly one owner
(a request id), or is held by the prefix tree (owner TREE, shared by the running requests
that reference it); page 0 holds reserved slot 0 and is never handed out. `check()` proves it.
"""
from __future__ import annotations

import heapq

FREE = -1
RESERVED = -2
TREE = -3  # held by the radix prefix cache (specdec/prefix_cache)


class OutOfSlots(RuntimeError):
    """Not enough free KV pages for a request's next step."""


class PageAllocator:
    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages < 2:
            raise ValueError(f"num_pages={num_pages}: need at least 2 (page 0 is reserved)")
        self.page_size = page_size
        self.num_pages = num_pages
        self.owner = [FREE] * num_pages
        self.owner[0] = RESERVED
        self._free = list(range(1, num_pages))  # a min-heap: lowest page first, deterministic

    @property
    def num_free(self) -> int:
        return len(self._free)

    def alloc(self, n: int, owner: int) -> list[int]:
        if n > len(self._free):
            raise OutOfSlots(f"need {n} pages, {len(self._free)} free of {self.num_pages - 1}")
        pages = [heapq.heappop(self._free) for _ in range(n)]
        for p in pages:
            assert self.owner[p] == FREE, f"page {p} handed out while owned by {self.owner[p]}"
            self.owner[p] = owner
        return pages

    def free(self, pages: list[int], owner: int) -> None:
        for p in pages:
            if self.owner[p] != owner:
                raise AssertionError(f"page {p} freed by {owner} but owned by {self.owner[p]}")
            self.owner[p] = FREE
            heapq.heappush(self._free, p)

    def transfer(self, pages: list[int], owner: int, new_owner: int) -> None:
        """Hand pages from one owner to another (a finished request's pages to the tree)."""
        for p in pages:
            if self.owner[p] != owner:
                raise AssertionError(f"page {p} handed over by {owner} but owned by {self.owner[p]}")
            self.owner[p] = new_owner

    def check(self, owned: dict[int, list[int]], tree: dict[int, int] | None = None) -> None:
        """Accounting law: free + owned + tree-held == all pages but page 0; no page has two
        owners; `owned` (owner -> pages, as the requests see it) agrees with the allocator;
        `tree` (page -> reference count, as the prefix tree sees it): each such page is held
        by the tree and its count equals the number of requests in `owned` that use it."""
        tree = tree or {}
        seen: dict[int, int] = {}
        uses = dict.fromkeys(tree, 0)
        for who, pages in owned.items():
            if len(set(pages)) != len(pages):
                raise AssertionError(f"request {who} lists a page twice")
            for p in pages:
                if p in tree:
                    uses[p] += 1
                    continue
                if p in seen:
                    raise AssertionError(f"page {p} owned by both {seen[p]} and {who}")
                if p == 0:
                    raise AssertionError(f"reserved page 0 owned by {who}")
                if self.owner[p] != who:
                    raise AssertionError(f"page {p} held by {who}, allocator says {self.owner[p]}")
                seen[p] = who
        for p, ref in tree.items():
            if self.owner[p] != TREE:
                raise AssertionError(f"page {p} is in the prefix tree, allocator says {self.owner[p]}")
            if ref != uses[p]:
                raise AssertionError(f"tree page {p}: reference count {ref}, used by {uses[p]} "
                                     "running requests")
        free = set(self._free)
        if len(free) != len(self._free):
            raise AssertionError("a page is on the free list twice")
        if free & (set(seen) | set(tree)):
            raise AssertionError(f"pages both free and owned: "
                                 f"{sorted(free & (set(seen) | set(tree)))[:8]}")
        if len(free) + len(seen) + len(tree) != self.num_pages - 1:
            leaked = set(range(1, self.num_pages)) - free - set(seen) - set(tree)
            raise AssertionError(f"leaked pages (neither free nor owned): {sorted(leaked)[:8]}")
