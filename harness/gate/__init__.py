"""**Gate**: the plumbing that makes `pytest -n auto` a GPU gate, apart from the laws it runs:
the pytest plugin (pytest_plugin.py), Hypothesis profiles, one GPU per xdist worker and the
multi-GPU grouping (xdist_gpu.py), the shared Triton kernel store (triton_cache.py), the
fork server for the zoo's detection processes (fork_server.py), test order by measured
seconds (gate_order.py), the gate profiler (gate_profile.py), bytecode placement."""
