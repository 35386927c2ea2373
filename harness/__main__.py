"""`python -m harness check|repro`."""
from __future__ import annotations

import argparse
import json
import sys

import kernels._triton_env  # noqa: F401  (before anything imports triton)
import torch
from hypothesis import settings

import conftest  # noqa: F401  (registers the Hypothesis profiles)
from harness.check import check
from harness.oracles import OracleFailure
from harness.properties import PROPERTIES
from harness.runs import default_device
from harness.strategies import RunConfig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="sweep every property for a time budget")
    c.add_argument("--budget", type=float, default=60.0, help="seconds for the whole sweep")
    c.add_argument("--profile", default=None, help="Hypothesis profile (dev, ci, gpu, nightly)")
    c.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    r = sub.add_parser("repro", help="replay one configuration of one property")
    r.add_argument("property", choices=sorted(PROPERTIES))
    r.add_argument("--config", required=True, help="the JSON a failure report printed")
    r.add_argument("--device", default=None)
    args = ap.parse_args(argv)
    device = args.device or default_device()
    if device == "cpu":
        torch.set_num_threads(1)  # tiny CPU models: threads only contend (see conftest.py)
    if args.cmd == "check":
        profile = settings.get_profile(args.profile) if args.profile else settings.default
        return check(args.budget, device, profile)
    cfg = RunConfig(**json.loads(args.config))
    try:
        PROPERTIES[args.property](cfg, device)
    except OracleFailure as exc:
        print(f"FAILED {args.property}: {exc}")
        return 1
    except Exception as exc:  # a crash is a failure too: show where
        import traceback
        traceback.print_exc()
        print(f"FAILED {args.property}: {type(exc).__name__}: {exc}")
        return 1
    print(f"passed {args.property} on {device}: {cfg.to_dict()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
