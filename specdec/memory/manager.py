"""Request memory: request rows, page-aligned KV reservation and release."""
from __future__ import annotations

import torch

from specdec.host import to_device
from specdec.memory.allocator import PageAllocator
from specdec.memory.req_pool import ReqToTokenPool
from specdec.request import Req


class MemoryManager:
    def __init__(self, max_reqs: int, *, max_context: int, num_pages: int, page_size: int,
                 kernels, device: torch.device) -> None:
        self.page_size = page_size
        self.req_pool = ReqToTokenPool(max_reqs, max_context, device)
        self.allocator = PageAllocator(num_pages, page_size)
        self.k = kernels
        self.device = device
        self.prefix = None  # a PrefixCache when the engine runs with prefix_cache=True

    @property
    def available(self) -> int:
        """Pages a reservation can get: free ones plus what the prefix tree can give back."""
        return self.allocator.num_free + (self.prefix.evictable if self.prefix else 0)

    def make_room(self, n: int) -> None:
        """Evict unreferenced prefix pages until `n` pages are free (or none is left)."""
        short = n - self.allocator.num_free
        if short > 0 and self.prefix is not None:
            self.prefix.evict(short)

    @property
    def req_to_token(self) -> torch.Tensor:
        return self.req_pool.req_to_token

    def admit(self, req: Req) -> None:
        """A request row; the shared prefix pages (prefix cache) already at the front of
        req.pages are written into it."""
        req.row = self.req_pool.alloc()
        if req.pages:
            ps = self.page_size
            rows, starts, stops, slots = to_device(
                self.device, [req.row], [0], [len(req.pages) * ps],
                [p * ps + o for p in req.pages for o in range(ps)])
            self.k.assign_req_to_token_pool(rows, self.req_to_token, starts, stops, slots)

    def release(self, req: Req, insert: bool = False) -> None:
        """Free a request's pages and row. Prefix cache: `insert` gives its committed whole
        pages to the tree first; shared pages are unreferenced, not freed."""
        if self.prefix is not None:
            self.prefix.release(req, insert)
        else:
            self.allocator.free(req.pages, req.rid)
        req.pages = []
        if req.row > 0:
            self.req_pool.free(req.row)
        req.row = -1

    def pages_needed(self, req: Req, end: int) -> int:
        return max(0, -(-end // self.page_size) - len(req.pages))

    def reserve(self, reqs: list[Req], ends: list[int]) -> None:
        """Own whole pages covering positions [0, end) of each request; write req_to_token.

        All or nothing: if the pool cannot cover every request, nothing is allocated.
        """
        ps = self.page_size
        need = [self.pages_needed(r, e) for r, e in zip(reqs, ends)]
        self.make_room(sum(need))
        if sum(need) > self.allocator.num_free:
            from specdec.memory.allocator import OutOfSlots
            raise OutOfSlots(f"need {sum(need)} pages, {self.allocator.num_free} free")
        starts, stops, slots, rows = [], [], [], []
        for r, n in zip(reqs, need):
            if n == 0:
                continue
            new = self.allocator.alloc(n, r.rid)
            starts.append(len(r.pages) * ps)
            r.pages.extend(new)
            stops.append(len(r.pages) * ps)
            rows.append(r.row)
            slots.extend(p * ps + o for p in new for o in range(ps))
        if rows:
            rows_t, starts_t, stops_t, slots_t = to_device(self.device, rows, starts, stops, slots)
            self.k.assign_req_to_token_pool(rows_t, self.req_to_token, starts_t, stops_t, slots_t)

    def shrink(self, req: Req, keep: int) -> None:
        """Free whole pages lying past position `keep` (exclusive)."""
        n_keep = -(-keep // self.page_size)
        if len(req.pages) > n_keep:
            self.allocator.free(req.pages[n_keep:], req.rid)
            del req.pages[n_keep:]

    def check(self, live: list[Req]) -> None:
        self.allocator.check({r.rid: r.pages for r in live},
                             self.prefix.page_refs() if self.prefix is not None else None)
