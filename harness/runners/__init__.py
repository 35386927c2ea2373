"""What runs the laws: suite.py (the laws paired with their strategies, and the entries),
pytest (pytest_plugin.py, profiles.py, xdist_gpu.py), `python -m harness` (cli.py: check.py,
zoo.py, repro, mixed_run.py, bench.py) and cases.py (finds the historical cases without
importing them by name)."""
