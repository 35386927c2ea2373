"""What runs the laws: suite.py (the laws paired with their strategies, and the entries),
pytest (pytest_plugin.py, profiles.py, xdist_gpu.py), `python -m harness` (cli.py: check.py,
zoo.py, repro, mixed_run.py, bench.py, acceptance.py and fault_table.py) and cases.py (finds
the historical cases without importing them by name). Over adapters: engine_suite.py (the
black-box laws, applicability, the replay line), engine_check.py (`check --engine`),
test_engine_laws.py (`pytest --engine`)."""
