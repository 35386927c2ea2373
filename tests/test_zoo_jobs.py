"""The zoo's verdict does not depend on how it is scheduled: faults run in parallel jobs
(harness/runners/zoo_jobs.py), each in a process of its own, give the rows that one process
running them one after another gives (caught, first failing check, declared check seen,
examples until then), in registry order; bad `--jobs` is refused."""
from __future__ import annotations

import io
import subprocess
import sys

from harness.runners.zoo import zoo

# Cheap faults of three laws (structure, a crash, the draft extend), caught in a few examples.
FAULTS = ["draft_positions_early_increment", "draft_kv_indices_missing_topk",
          "stale_draft_kv_after_accept"]


def _verdict(rows):
    return [(r.fault, r.caught, r.prop, r.check, r.declared_caught, r.examples) for r in rows]


def test_parallel_jobs_give_the_sequential_rows():
    out = io.StringIO()
    parallel = zoo("cpu", profile_name="ci", names=FAULTS, out=out, jobs=2)
    sequential = zoo("cpu", profile_name="ci", names=FAULTS, out=io.StringIO(), in_process=True)
    assert [r.fault for r in parallel] == FAULTS
    assert _verdict(parallel) == _verdict(sequential)
    assert all(r.caught and r.declared_caught for r in parallel)
    assert "caught 3/3; wall" in out.getvalue() and "2 jobs" in out.getvalue()


def test_bad_jobs_refused():
    res = subprocess.run([sys.executable, "-m", "harness", "zoo", "--jobs", "0", "--faults",
                          FAULTS[0]], capture_output=True, text=True)
    assert res.returncode == 2 and "--jobs '0'" in res.stderr
