"""What runs the laws: suite.py (the laws paired with their strategies, and the entries),
`python -m harness` (cli.py: check.py, zoo.py, repro, mixed_run.py, bench.py, acceptance.py
and fault_table.py), cases.py (finds the historical cases without importing them by name),
findings.py and kernel_findings.py (what a docs/findings/ script runs). Over adapters:
engine_suite.py and kernel_suite.py (the laws, applicability, the replay line),
engine_check.py (`check --engine`), test_engine_laws.py and test_kernel_laws.py
(`pytest --engine`). The pytest plugin and its plumbing are one floor down, in gate/."""
