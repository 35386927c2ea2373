"""One runner for every captured phase: static buffers, buckets, padding, capture, replay.

A phase (specdec/spec/phases.py) declares its inputs (a frozen dataclass, and an InputSpec
for each field the runner pads) and a forward over them. The runner pads live inputs to a
bucket size (contract section 8), and either replays the captured graph of that bucket or
runs the phase eagerly; in batch-invariant eager mode the eager path pads to the same
buckets, so both run identical shapes. What a phase can derive on the device from its inputs
(write slots from req_to_token, say) it derives in `prepare`, which runs inside the capture:
replays then do no host work for it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from specdec import faults
from specdec.graphs.cuda_graph import GraphFactory
from specdec.tp.replicate import agree

DEFAULT_BUCKETS = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 161, 16))
SEQ_LEN_FILL = 1  # padded requests' seq_len: a one-token context reading reserved slot 0
# What the graph_pad_stale_positions fault leaves stale in padded rows: positions, and the
# inputs that write slots derive from (phases derive their slots on the device, `prepare`).
_STALE_UNDER_FAULT = ("positions", "out_cache_loc", "req_pool_indices", "seq_lens",
                      "kv_prefix_lens")


@dataclass(frozen=True)
class InputSpec:
    """`per_req` rows per request, then `tail` dims; padded rows hold `pad`."""

    per_req: int
    tail: tuple = ()
    dtype: torch.dtype = torch.int64
    pad: float = 0


def pad_inputs(specs: dict[str, InputSpec], *, live: dict[str, torch.Tensor], bs: int, size: int,
               out: dict[str, torch.Tensor] | None = None,
               dirty: dict[str, int] | None = None) -> dict[str, torch.Tensor]:
    """Copy live rows (`live`: by input name) into `out` (static buffers) or fresh tensors,
    padding rows to `size` requests with each input's pad value. Returns views of exactly
    `size` requests, by input name.

    Static buffers are refilled only up to their high-water mark `dirty[name]` (rows an
    earlier replay wrote live data into): rows past it still hold the pad value, because no
    phase writes its static inputs (the draft decode derives each forward's positions rather
    than advancing its positions buffer: SGLang #25015). That saves a fill per input per
    replay."""
    views = {}
    for name, spec in specs.items():
        src = live[name]
        n_live, n_all = bs * spec.per_req, size * spec.per_req
        if out is None:
            dst = torch.empty((n_all, *spec.tail), dtype=spec.dtype, device=src.device)
            dst[n_live:].fill_(spec.pad)
        else:
            dst = out[name][:n_all]
            mark = dirty.get(name, 0) if dirty is not None else n_all
            if n_live < min(mark, n_all) and not (name in _STALE_UNDER_FAULT
                                                  and faults.on("graph_pad_stale_positions")):
                dst[n_live:min(mark, n_all)].fill_(spec.pad)
            if dirty is not None:  # rows past n_all that an earlier, larger batch wrote stay dirty
                dirty[name] = mark if mark > n_all else n_live
        dst[:n_live].copy_(src.reshape(n_live, *spec.tail))
        views[name] = dst
    return views


def idle_lanes_from_live_row(views, live, bs: int, size: int) -> None:
    """The tp_idle_rank_dummy_writes fault: a worker rank builds its idle (padded) lanes from
    its own last live request row instead of reserved row 0."""
    if size > bs and "req_pool_indices" in views:
        views["req_pool_indices"][bs:size].copy_(live["req_pool_indices"][bs - 1:bs].expand(size - bs))


class PhaseRunner:
    def __init__(self, phase, *, device: torch.device, use_graph: bool, buckets: list[int],
                 max_bs: int, batch_invariant: bool, factory: GraphFactory | None) -> None:
        self.phase = phase
        self.device = device
        self.batch_invariant = batch_invariant
        self.buckets = sorted({b for b in buckets if 1 <= b <= max_bs})
        # Per captured size: the graph, its outputs, its metadata, the padded inputs it was
        # captured on and what `prepare` derived inside it (both refilled by each replay).
        self.graphs, self.outputs, self.metadata = {}, {}, {}
        self.captured_inputs, self.prepared = {}, {}
        self.dirty: dict[str, int] = {}  # per static input: rows past it hold the pad value
        self.last_ran_graph = False
        # Tensor parallelism (specdec/tp/): this rank, and the group every decision is checked
        # against before the phase's collectives run (None: no check, or one rank).
        self.tp_rank, self.tp_agree = 0, None
        # Graphs are captured on first use, one bucket at a time (contract section 8): a run
        # pays only for the phases and sizes it replays. `on_capture(graphs)` hears of each
        # new graph (a TP group ends its graphs before its communicators: tp/captured.py).
        self.use_graph, self.factory = use_graph and bool(self.buckets), factory
        self.on_capture = None
        self.static: dict[str, torch.Tensor] = {}

    # -- capture ------------------------------------------------------------------------
    def capture_all(self) -> None:
        """Every bucket now, largest first (benchmarks: nothing captured inside a timing)."""
        for size in reversed(self.buckets):
            self.capture_size(size)

    def capture_size(self, size: int) -> None:
        if size in self.graphs:
            return
        # Outside inference mode, though a step (under it) calls this: the CPU stand-in
        # cannot model a capture under it (specdec/graphs/standin.py), and both paths capture
        # alike.
        with torch.inference_mode(False), torch.no_grad():
            if not self.static:  # sized for the largest bucket, shared by every size's graph
                top = self.buckets[-1]
                self.static = {n: torch.zeros((top * s.per_req, *s.tail), dtype=s.dtype,
                                              device=self.device)
                               for n, s in self.phase.inputs.items()}
                # The phase's own static buffers (the verify's tree mask) at the largest size
                # too, whichever size is captured first.
                self.phase.extra_static(top, self.static)
            with self.factory.capturing():
                self._capture(self.factory, size)
        if self.on_capture is not None:
            self.on_capture([self.graphs[size]])

    def _capture(self, factory: GraphFactory, size: int) -> None:
        empty = {n: torch.empty((0, *s.tail), dtype=s.dtype, device=self.device)
                 for n, s in self.phase.inputs.items()}
        padded = pad_inputs(self.phase.inputs, live=empty, bs=0, size=size,
                            out=self.static)  # all pad
        x = self.phase.input_type(**padded, **self.phase.extra_static(size, self.static))

        def body():
            # Derived inputs and metadata are built inside the graph from the static inputs:
            # every replay rebuilds them on the device, with no host work and no copy.
            prep = self.phase.prepare(x, size)
            md = self.phase.capture_metadata(x, prep, size)
            return self.phase.forward(x, prep, size, md), prep, md

        graph = factory.make()
        self.outputs[size], self.prepared[size], self.metadata[size] = graph.capture(body)
        self.graphs[size], self.captured_inputs[size] = graph, x

    def can_run(self, bs: int) -> bool:
        return self.use_graph and bs <= self.buckets[-1]

    def bucket(self, bs: int) -> int:
        return next(b for b in self.buckets if b >= bs)

    # -- run ----------------------------------------------------------------------------
    def run(self, live, bs: int):
        """The phase's outputs for the bs live requests (`live`: the phase's input dataclass),
        as fresh tensors (never the graph's buffers). Index space: lanes of the padded size;
        lane b < bs is batch position b, lanes bs.. are padding (reserved row 0). Outputs are
        cut back to batch positions."""
        self.last_ran_graph = self.can_run(bs)
        if faults.on("tp_rank_divergent_padding") and self.tp_rank > 0:
            self.last_ran_graph = False  # a worker falls back to eager where rank 0 replays
        invariant = self.batch_invariant and bs <= max(self.buckets, default=0)
        size = self.bucket(bs) if self.last_ran_graph or invariant else bs
        if self.tp_agree is not None:  # every rank pads alike and replays or runs eager alike
            agree(self.tp_agree, (type(self.phase).__name__, self.last_ran_graph, size))
        fields = {name: getattr(live, name) for name in self.phase.inputs}
        if self.last_ran_graph:
            self.capture_size(size)  # after the ranks agreed: every rank captures alike
            padded = pad_inputs(self.phase.inputs, live=fields, bs=bs, size=size, out=self.static,
                                dirty=self.dirty)
            if faults.on("tp_idle_rank_dummy_writes") and self.tp_rank > 0:
                idle_lanes_from_live_row(padded, fields, bs, size)
            extra = self.phase.load_extra(live, bs, size, self.captured_inputs[size])
            x = dataclasses.replace(live, **padded, **extra)
            prep, md = self.prepared[size], self.metadata[size]  # derived in the capture
            self.phase.replay_metadata(x, prep, size, md)
            self.graphs[size].replay()
            out = self.outputs[size]
            self.phase.after_replay(x, prep=prep, size=size, bs=bs, md=md, out=out)
        else:
            padded = pad_inputs(self.phase.inputs, live=fields, bs=bs, size=size)
            if faults.on("tp_idle_rank_dummy_writes") and self.tp_rank > 0:
                idle_lanes_from_live_row(padded, fields, bs, size)
            x = dataclasses.replace(live, **padded, **self.phase.load_extra(live, bs, size, None))
            prep = self.phase.prepare(x, size)
            out = self.phase.forward(x, prep, size, None, bs)
        return self.phase.slice_outputs(out, bs)
