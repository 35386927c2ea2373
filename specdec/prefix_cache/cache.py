"""The prefix cache seen from the memory manager: which pages a new request may reuse, what
a leaving request gives to the tree, eviction and flush (contract section 11).

Reuse length L of a request whose prefill runs over n tokens (prompt, plus the committed
output of a resumed request), page aligned:
- the target recomputes at least the last token (its logits and hidden state), so L <= n - 1;
- a standalone draft's row p depends on tokens 0..p only: the tree is keyed by the pages'
  tokens and a match of m pages gives L = min(m * ps, page_floor(n - 1));
- an EAGLE head's row p consumes token p + 1: the last row of a cached page is valid only
  for the continuation it was computed with, so each page's key also holds the token after
  it (SGLang keys EAGLE's tree by bigrams for this). Same formula over those keys.
Nothing the new request recomputes lies in a shared page (L is page aligned), so shared pages
are read-only: target and draft KV at their slots stay what their first owner wrote.
Insertion takes committed positions only (< seq_len), whole pages, when a request finishes
(and, if the engine says so, when it is retracted).
"""
from __future__ import annotations

from specdec import faults
from specdec.memory.allocator import TREE, PageAllocator
from specdec.prefix_cache.tree import Key, RadixTree
from specdec.request import Req


class PrefixCache:
    def __init__(self, allocator: PageAllocator, page_size: int, shifted: bool) -> None:
        self.allocator = allocator
        self.page_size = page_size
        self.shifted = shifted
        self.tree = RadixTree()

    @property
    def key_extra(self) -> int:
        """Tokens past a page its key holds: the next token for an EAGLE head."""
        if faults.on("eagle_prefix_not_bigram_aligned"):
            return 0  # SGLang #10846: EAGLE keyed like a standalone draft
        return 1 if self.shifted else 0

    def keys(self, tokens: list[int], n_pages: int) -> list[Key]:
        ps, extra = self.page_size, self.key_extra
        return [tuple(tokens[p * ps:(p + 1) * ps + extra]) for p in range(n_pages)]

    def _key_pages(self, tokens: list[int]) -> int:
        """Whole pages of `tokens` whose key is complete."""
        return max(0, (len(tokens) - self.key_extra) // self.page_size)

    # -- admission ----------------------------------------------------------------------
    def lock(self, req: Req) -> None:
        """Reuse what the tree holds of req's prefill tokens: its shared pages go to the front
        of req.pages (locked), req.cached_len = L positions, req.matched_len = what the tree
        matched (tokens, keys' extra included)."""
        tokens = req.prefill_tokens
        ps = self.page_size
        m = self.tree.match(self.keys(tokens, self._key_pages(tokens)))
        req.matched_len = m * ps + self.key_extra if m else 0
        n_shared = min(m, (len(tokens) - 1) // ps)
        req.cached_len = n_shared * ps
        if n_shared:
            req.pages, req.prefix_node = self.tree.acquire(self.keys(tokens, n_shared))
        else:
            req.pages, req.prefix_node = [], None

    def unlock(self, req: Req) -> None:
        """Give back a request's references without inserting anything (admission undone)."""
        if req.prefix_node is not None:
            self.tree.unlock(req.prefix_node)
        req.pages, req.prefix_node, req.cached_len, req.matched_len = [], None, 0, 0

    # -- leaving ------------------------------------------------------------------------
    def release(self, req: Req, insert: bool) -> None:
        """Free req's own pages and drop its references; with `insert`, first give the tree
        the whole pages of its committed positions (< seq_len)."""
        shared = req.cached_len // self.page_size
        keep = set(range(shared))  # the tree's pages: never freed by the request
        if insert:
            committed = req.seq_len
            if faults.on("prefix_insert_uncommitted"):
                committed = req.seq_len + 1  # the pending bonus counted as committed
            tokens = req.prompt + req.output
            n = min(committed // self.page_size, self._key_pages(tokens), len(req.pages))
            taken = [i for i in self.tree.insert(self.keys(tokens, n), req.pages[:n])
                     if i >= shared]
            self.allocator.transfer([req.pages[i] for i in taken], req.rid, TREE)
            keep.update(taken)
        if req.prefix_node is not None:
            self.tree.unlock(req.prefix_node)
        self.allocator.free([p for i, p in enumerate(req.pages) if i not in keep], req.rid)
        req.pages, req.prefix_node, req.cached_len, req.matched_len = [], None, 0, 0

    # -- giving pages back --------------------------------------------------------------
    @property
    def evictable(self) -> int:
        return self.tree.evictable_pages()

    def evict(self, want: int) -> int:
        """Free at least `want` pages from unreferenced LRU leaves, or all there are."""
        pages = self.tree.evict(want)
        self.allocator.free(pages, TREE)
        return len(pages)

    def flush(self) -> int:
        """Drop every node no running request uses; nodes in use stay (a running request's
        pages are never taken from it). Returns the pages freed."""
        return self.evict(self.allocator.num_pages)

    def page_refs(self) -> dict[int, int]:
        """Every tree-held page -> its reference count (running requests using it)."""
        out: dict[int, int] = {}
        for node in self.tree.nodes():
            for p in node.pages:
                if p in out:
                    raise AssertionError(f"page {p} held by two prefix-tree nodes")
                out[p] = node.lock_ref
        return out
