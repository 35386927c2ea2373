"""Benchmark results: JSON stamped with device, date, versions and the exact command."""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys

import torch


def stamp(device: str, argv: list[str] | None = None, prog: str = "python -m specdec") -> dict:
    """argv: the arguments after `prog` (default sys.argv's; tests pass theirs)."""
    import shlex

    import triton
    name = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu"
    argv = sys.argv[1:] if argv is None else argv
    return {"device": name, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(), "host": platform.node(),
            "command": f"{prog} {shlex.join(argv)}"}


def write(path: str, *, device: str, rows: list[dict], bench: str | None = None,
          extra: dict | None = None, argv: list[str] | None = None, plot: bool = True,
          prog: str = "python -m specdec") -> dict:
    """The stamped JSON at `path` and, with `plot`, its PNG beside it (same stem). A missing
    matplotlib (a bare GPU machine) is recorded, not fatal: `bench plot PATH` redraws later.
    prog: the command argv follows (`python -m harness` for the harness bench)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    doc = {**stamp(device, argv, prog), "bench": bench, **(extra or {}), "results": rows}
    if plot and bench is not None:
        png = path.rsplit(".", 1)[0] + ".png"
        try:
            from specdec.bench.plots import plot as draw
            draw(doc, png)
            doc["plot"] = png
            print(f"wrote {png}")
        except ImportError as exc:
            doc["plot_error"] = f"{exc}: run `python -m specdec bench plot {path}` where matplotlib is"
            print(f"no plot: {doc['plot_error']}")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {path}")
    return doc
