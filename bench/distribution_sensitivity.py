"""The smallest bias a distribution law sees: specdec's sampler with a planted acceptance
bias (its threshold_acc = t: t < 1 accepts drafts too often, the mistake of a rule scaled
wrong), run through the law's own check on M drawn cases per bias. For each bias it prints
the total-variation distance of the first token's distribution from p, computed exactly
from the case, and how many of the M cases the law rejected.

Chain (kernel_chain_distribution; one draft, q drawn apart from p):

    P(first = x) = q(x) a(x) + (1 - sum_y q(y) a(y)) r(x),  a = min(1, p / (t q)),
    r = norm(max(0, p - q)),     TV = 1/2 sum_x |P(x) - p(x)|.

Tree (kernel_tree_distribution; target only, the root's children c_1..c_m tried in sibling
order on one coin u, child j taken iff u < S_j / t, S_j = p(c_1) + ... + p(c_j)):

    P(first = c_j) = min(1, S_j / t) - min(1, S_{j-1} / t),
    P(first = x not a child) = (1 - min(1, S_m / t)) p(x) / (1 - S_m).

usage: PYTHONPATH=. python bench/distribution_sensitivity.py [--law chain|tree] [--cases M]
       [--rows N] [--thresholds 1.0,0.9,...] [--device cpu|cuda]
The law's own row count (its ROWS) unless --rows."""
from __future__ import annotations

import argparse

import kernels._triton_env  # noqa: F401,I001  (before triton)

import torch

from harness.adapters.specdec_kernels import SpecdecKernels
from harness.base.failure import OracleFailure
from harness.laws import kernel_chain_distribution as chain_law
from harness.laws import kernel_tree_distribution as tree_law
from harness.references import tree as T
from harness.strategies.kernel_inputs import KernelCase
from harness.strategies.tree_sampling_inputs import tree_rows


def first_token_tv(p: torch.Tensor, q: torch.Tensor, t: float) -> float:
    p, q = p.double(), q.double()
    a = torch.where(q > 0, torch.clamp(p / (t * q.clamp_min(1e-300)), max=1.0),
                    torch.zeros_like(q))
    residual = torch.clamp(p - q, min=0.0)
    r = residual / residual.sum() if float(residual.sum()) > 0 else p
    got = q * a + (1.0 - float((q * a).sum())) * r
    return 0.5 * float((got - p).abs().sum())


def tree_first_token_tv(row: dict, t: float) -> float:
    """The exact first-token TV of the target-only tree rule scaled by 1/t (docstring)."""
    p = torch.tensor(row["p"][0], dtype=torch.float64)
    children = [c for c in range(1, len(row["parents"])) if row["parents"][c] == 0]
    got, s_prev = torch.zeros_like(p), 0.0
    for c in children:  # ascending node order: the sibling order
        s = s_prev + float(p[row["cand"][c]])
        got[row["cand"][c]] += min(1.0, s / t) - min(1.0, s_prev / t)
        s_prev = s
    rest = p.clone()
    rest[[row["cand"][c] for c in children]] = 0.0
    if float(rest.sum()) > 0:
        got += (1.0 - min(1.0, s_prev / t)) * rest / rest.sum()
    return 0.5 * float((got - p).abs().sum())


def chain_case(seed: int, rows: int):
    case = KernelCase(law=chain_law.NAME, engine="specdec-kernels", seed=seed,
                      knobs={"rows": rows, "k": 1, "vocab": 4, "zeros": 0.0, "close": 0.0,
                             "deterministic": False, "variant": "classic"})
    b = chain_law.batch(case)
    return case, lambda t: first_token_tv(b["p"][0], b["draft_probs"][0, 0], t)


def tree_case(seed: int, rows: int):
    """Two children at the root and one below (topk 2, depth 2), p with a mass the
    children leave (cover 0), vocabulary 6."""
    case = KernelCase(law=tree_law.NAME, engine="specdec-kernels", seed=seed,
                      knobs={"bs": 1, "topk": 2, "spec_steps": 2, "ndt": 4, "vocab": 6,
                             "zeros": 0.0, "cover": 0.0, "follow": 0.7, "rows_n": rows})
    row = tree_rows(case)[0]
    assert T.child_links(row["parents"])  # a tree the law's own check takes
    return case, lambda t: tree_first_token_tv(row, t)


def planted(t: float, device: str):
    cls = type(f"Threshold{t}", (SpecdecKernels,), {"threshold_acc": t})
    return cls(device)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--law", choices=("chain", "tree"), default="chain")
    ap.add_argument("--cases", type=int, default=10)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--thresholds", default="1.0,0.95,0.9,0.8,0.7,0.5")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    law, make = (chain_law, chain_case) if args.law == "chain" else (tree_law, tree_case)
    rows = args.rows or law.ROWS["cpu" if args.device == "cpu" else "gpu"]
    shape = ("vocab 4, one draft, q drawn apart from p" if args.law == "chain" else
             "vocab 6, topk 2, depth 2, children leaving mass")
    print(f"# {law.NAME}, {rows} rows an example, {args.cases} cases a bias ({shape}), "
          f"device {args.device}")
    print(f"{'t':>5} {'TV mean':>8} {'TV min':>7} {'TV max':>7}  rejected")
    for t in map(float, args.thresholds.split(",")):
        kernels, tvs, caught = planted(t, args.device), [], 0
        for seed in range(args.cases):
            case, tv = make(1000 + seed, rows)
            tvs.append(tv(t))
            try:
                law.check(kernels, case)
            except OracleFailure:
                caught += 1
        print(f"{t:>5.2f} {sum(tvs) / len(tvs):>8.4f} {min(tvs):>7.4f} {max(tvs):>7.4f}  "
              f"{caught}/{args.cases}", flush=True)


if __name__ == "__main__":
    main()
