"""The smallest bias the chain distribution law sees: specdec's chain sampler with a planted
acceptance bias (accept with probability min(1, p / (t q)): t < 1 accepts drafts too often,
the mistake of a rule scaled wrong), run through kernel_chain_distribution's own check on M
drawn cases per bias. For each bias it prints the total-variation distance of the first
token's distribution from p, computed exactly from the case's p and q:

    P(first = x) = q(x) a(x) + (1 - sum_y q(y) a(y)) r(x),  a = min(1, p / (t q)),
    r = norm(max(0, p - q)),     TV = 1/2 sum_x |P(x) - p(x)|,

and how many of the M cases the law rejected (a confirmed rejection, as the gate sees it).

usage: PYTHONPATH=. python bench/distribution_sensitivity.py [--cases M] [--rows N]
       [--thresholds 1.0,0.9,...] [--device cpu|cuda]
The law's own row count (kernel_chain_distribution.ROWS) unless --rows."""
from __future__ import annotations

import argparse

import kernels._triton_env  # noqa: F401,I001  (before triton)

import torch

from harness.adapters.specdec_kernels import SpecdecKernels
from harness.base.failure import OracleFailure
from harness.laws import kernel_chain_distribution as law
from harness.strategies.kernel_inputs import KernelCase


def first_token_tv(p: torch.Tensor, q: torch.Tensor, t: float) -> float:
    p, q = p.double(), q.double()
    a = torch.where(q > 0, torch.clamp(p / (t * q.clamp_min(1e-300)), max=1.0),
                    torch.zeros_like(q))
    residual = torch.clamp(p - q, min=0.0)
    r = residual / residual.sum() if float(residual.sum()) > 0 else p
    got = q * a + (1.0 - float((q * a).sum())) * r
    return 0.5 * float((got - p).abs().sum())


def planted(t: float, device: str):
    cls = type(f"Threshold{t}", (SpecdecKernels,), {"threshold_acc": t})
    return cls(device)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--thresholds", default="1.0,0.95,0.9,0.8,0.7,0.5")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    rows = args.rows or law.ROWS["cpu" if args.device == "cpu" else "gpu"]
    print(f"# kernel_chain_distribution, {rows} rows an example, {args.cases} cases a bias "
          f"(vocab 4, one draft, q drawn apart from p), device {args.device}")
    print(f"{'t':>5} {'TV mean':>8} {'TV min':>7} {'TV max':>7}  rejected")
    for t in map(float, args.thresholds.split(",")):
        kernels, tvs, caught = planted(t, args.device), [], 0
        for seed in range(args.cases):
            case = KernelCase(law=law.NAME, engine="specdec-kernels", seed=1000 + seed,
                              knobs={"rows": rows, "k": 1, "vocab": 4, "zeros": 0.0,
                                     "close": 0.0, "deterministic": False,
                                     "variant": "classic"})
            b = law.batch(case)
            tvs.append(first_token_tv(b["p"][0], b["draft_probs"][0, 0], t))
            try:
                law.check(kernels, case)
            except OracleFailure:
                caught += 1
        print(f"{t:>5.2f} {sum(tvs) / len(tvs):>8.4f} {min(tvs):>7.4f} {max(tvs):>7.4f}  "
              f"{caught}/{args.cases}", flush=True)


if __name__ == "__main__":
    main()
