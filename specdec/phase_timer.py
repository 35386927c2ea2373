"""Phase timing of a speculative round (`engine.phase_timer`, off unless attached).

`RoundRunner.spec_round` calls `begin_round()`, then `mark(label)` as each phase ends, then
`end_round()`. Each mark closes the segment since the previous one and names it. On CUDA a
mark records an event on the current stream (no sync: the GPU timeline is read later, once,
by `rounds()`); on CPU it reads perf_counter, since the work is done when the call returns.
"""
from __future__ import annotations

import time

import torch

PHASES = ("draft_decode", "verify", "accept_compact", "draft_extend")  # the rest is "host"


class PhaseTimer:
    def __init__(self, device: torch.device | str) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self._rounds: list[list] = []  # per round: [(label, event or seconds), ...]

    def _now(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def begin_round(self) -> None:
        self._rounds.append([("start", self._now())])

    def mark(self, label: str) -> None:
        """The segment ending now (since the previous mark) was `label`."""
        self._rounds[-1].append((label, self._now()))

    def end_round(self) -> None:
        self.mark("host")

    def rounds(self) -> list[dict[str, float]]:
        """Per round: milliseconds per label (a label marked twice is summed), and "total"
        (first to last mark). Synchronizes once on CUDA."""
        if self.cuda:
            torch.cuda.synchronize()
        out = []
        for marks in self._rounds:
            ms: dict[str, float] = {}
            for (_, a), (label, b) in zip(marks, marks[1:]):
                d = a.elapsed_time(b) if self.cuda else (b - a) * 1e3
                ms[label] = ms.get(label, 0.0) + d
            t0, t1 = marks[0][1], marks[-1][1]
            ms["total"] = t0.elapsed_time(t1) if self.cuda else (t1 - t0) * 1e3
            out.append(ms)
        return out
