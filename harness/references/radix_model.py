"""The prefix cache's tree, uncompressed: one entry per held path of page keys (the reference
of harness/laws/radix_tree.py). Paths are tuples of symbols; every prefix of a held path is
held. Uses are stamped by a counter, as the tree's LRU order is."""
from __future__ import annotations


class RadixModel:
    def __init__(self) -> None:
        self.held: dict[tuple, int] = {}   # path -> its last page
        self.used: dict[tuple, int] = {}   # path -> when a path through it was last used
        self.refs: dict[tuple, int] = {}   # path -> live acquisitions through it
        self.clock = 0

    def match(self, path: tuple) -> int:
        n = 0
        while n < len(path) and path[:n + 1] in self.held:
            n += 1
        return n

    def _use(self, path: tuple) -> None:
        self.clock += 1
        for n in range(1, len(path) + 1):
            self.used[path[:n]] = self.clock

    def insert(self, path: tuple, pages: list[int]) -> list[int]:
        """Positions whose page the tree must take (their path was not held)."""
        taken = [n for n in range(len(path)) if path[:n + 1] not in self.held]
        for n in taken:
            self.held[path[:n + 1]] = pages[n]
        self._use(path)
        return taken

    def acquire(self, path: tuple) -> list[int]:
        for n in range(1, len(path) + 1):
            self.refs[path[:n]] = self.refs.get(path[:n], 0) + 1
        self._use(path)
        return [self.held[path[:n]] for n in range(1, len(path) + 1)]

    def unlock(self, path: tuple) -> None:
        for n in range(1, len(path) + 1):
            self.refs[path[:n]] -= 1

    def _free(self, path: tuple) -> bool:
        return self.refs.get(path, 0) == 0

    def unreferenced(self) -> int:
        return sum(1 for p in self.held if self._free(p))

    def _leaves(self) -> list[tuple]:
        inner = {p[:-1] for p in self.held}
        return [p for p in self.held if p not in inner]

    def evict(self, freed: list[int], want: int) -> str | None:
        """Apply an eviction that freed `freed`; a description of what is wrong with it, or
        None."""
        by_page = {page: path for path, page in self.held.items()}
        if len(set(freed)) != len(freed):
            return f"freed a page twice: {sorted(freed)}"
        gone = []
        for page in freed:
            path = by_page.get(page)
            if path is None:
                return f"freed page {page}, which the tree does not hold"
            if not self._free(path):
                return f"freed page {page} of path {path}, referenced {self.refs[path]} times"
            gone.append(path)
        floor = min(want, self.unreferenced())
        if len(freed) < floor:
            return f"freed {len(freed)} pages; {floor} unreferenced ones were asked for"
        for path in gone:
            del self.held[path]
        orphans = [p for p in self.held if len(p) > 1 and p[:-1] not in self.held]
        if orphans:
            return f"freed the parent of held paths {orphans[:3]}"
        newest = max((self.used[p] for p in gone), default=None)
        older = [p for p in self._leaves() if self._free(p) and newest is not None
                 and self.used[p] < newest]
        if older:
            return (f"freed pages used at {newest} while unreferenced leaves used earlier stay: "
                    f"{[(p, self.used[p]) for p in older[:3]]}")
        return None
