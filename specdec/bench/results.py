"""Benchmark results: JSON stamped with device, date, versions and the exact command."""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys

import torch


def stamp(device: str) -> dict:
    import triton
    name = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu"
    return {"device": name, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "torch": torch.__version__, "triton": triton.__version__,
            "command": "python -m specdec " + " ".join(sys.argv[1:])}


def write(path: str, device: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump({**stamp(device), "results": rows}, f, indent=1)
    print(f"wrote {path}")
