"""`python -m specdec bench allreduce --tp N`: the all-reduce paths of specdec/tp/comm.py
side by side, per message size, as the decode, verify and draft graphs run them.

For each model's hidden size and each row count (tokens): NCCL; NCCL then the norm kernel
(what `tp_all_reduce='nccl'` runs after a row-parallel projection); the peer-memory kernel;
the peer kernel fused with the add and norm (what 'auto' runs up to the crossover). Each is
captured CALLS times back to back in one CUDA graph and replayed; a row gives microseconds per
call (rank 0's CUDA events, median of iters). The crossover per hidden size: the largest
message at which the fused peer kernel is still faster than NCCL + norm, what
specdec/tp/comm.py's CROSSOVER_BYTES should be on this machine. CUDA only: the peer path has
no CPU form."""
from __future__ import annotations

import torch

from specdec.bench.common import median, time_ms
from specdec.loading import resolve_model_config
from specdec.engine import DTYPES

CALLS = 32  # all-reduces per graph: a layer stack's worth, so launch cost is amortised
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
PEER_BYTES = 64 << 20  # the bench's own buffers: every size above is tried on both paths


def _paths(comm, peers, x, r, w):
    from kernels.norm import rms_norm
    from kernels.peer_all_reduce import fits, peer_all_reduce

    def nccl_norm():
        return rms_norm(comm.all_reduce(x), w, 1e-5, r)
    out = {"nccl": lambda: comm.all_reduce(x), "nccl+norm": nccl_norm}
    if fits(x, peers):
        out["peer"] = lambda: peer_all_reduce(x, peers)
        out["peer+norm"] = lambda: peer_all_reduce(x, peers, r, w, 1e-5)
    return out


def _graphed_us(fn, iters: int, warmup: int) -> float:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            fn()
    ms = median(time_ms(graph.replay, "cuda", iters, warmup))
    del graph
    return ms * 1e3 / CALLS


def _rank_rows(_engine, hiddens, dtype: str, iters: int, warmup: int) -> list[dict]:
    """On every rank: each path at each size (every rank captures and replays alike)."""
    import torch.distributed as dist
    from specdec.tp.comm import TPComm
    from specdec.tp.peer_memory import PeerMemory
    name = dist.group.WORLD.group_name
    comm = TPComm(dist.get_rank(), dist.get_world_size(), name)  # the group's path only
    dev = torch.device("cuda", torch.cuda.current_device())
    peers = PeerMemory(name, dev, PEER_BYTES).peers  # keeps its buffer mapped (owner)
    rows = []
    for hidden in hiddens:
        g = torch.Generator(device=dev).manual_seed(0)
        for n in ROWS:
            x = torch.randn(n, hidden, generator=g, device=dev).to(DTYPES[dtype])
            r, w = torch.randn_like(x), torch.randn(hidden, device=dev).to(x.dtype)
            for path, fn in _paths(comm, peers, x, r, w).items():
                rows.append({"hidden": hidden, "rows": n, "bytes": x.numel() * x.element_size(),
                             "path": path, "us": _graphed_us(fn, iters, warmup)})
    return rows


def crossovers(rows: list[dict]) -> dict:
    """Per hidden size: the largest message at which peer+norm beats nccl+norm (None: never),
    and whether it also wins at every smaller one."""
    out = {}
    for hidden in sorted({r["hidden"] for r in rows}):
        by = {(r["bytes"], r["path"]): r["us"] for r in rows if r["hidden"] == hidden}
        sizes = sorted({b for b, p in by if p == "peer+norm"})
        wins = [b for b in sizes if by[(b, "peer+norm")] < by[(b, "nccl+norm")]]
        out[hidden] = {"crossover_bytes": max(wins) if wins else None,
                       "wins_below": bool(wins) and wins == sizes[:len(wins)]}
    return out


def run(device: str, *, dtype: str, models: list[str], tp: int, iters: int,
        warmup: int) -> tuple[list[dict], dict]:
    if torch.device(device).type != "cuda" or torch.cuda.device_count() < tp or tp < 2:
        raise SystemExit(f"bench allreduce: needs --device cuda and --tp >= 2 with that many "
                         f"GPUs (device {device!r}, --tp {tp}, "
                         f"{torch.cuda.device_count()} GPUs visible)")
    from specdec.tp.group import TPGroup
    from specdec.tp.replicate import on_every_rank

    hiddens = sorted({resolve_model_config(m).hidden_size for m in models})
    group = TPGroup.leader(tp, "cuda", _rank_rows)  # its user (a weak reference): this bench
    try:
        rows = on_every_rank(group, None, _rank_rows, hiddens, dtype, iters, warmup)[0]
    finally:
        group.release()
    for r in rows:
        print(f"hidden {r['hidden']:>5} rows {r['rows']:>5} {r['bytes'] / 1024:>9.1f} KiB "
              f"{r['path']:<10} {r['us']:8.2f} us", flush=True)
    cross = crossovers(rows)
    for hidden, c in cross.items():
        print(f"hidden {hidden}: peer+norm beats nccl+norm up to {c['crossover_bytes']} bytes "
              f"(every smaller size too: {c['wins_below']})")
    return rows, {"tp": tp, "dtype": dtype, "iters": iters, "warmup": warmup,
                  "calls_per_graph": CALLS, "statistic": "median of iters graph replays / "
                  "calls, rank 0", "crossovers": {str(k): v for k, v in cross.items()}}
