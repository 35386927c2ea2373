"""What is drawn: configs.py (Hypothesis strategies over the engine's configuration space),
prefix_workloads.py (shared-prefix workloads), lifecycle_config.py (lifecycle runs), runs.py
(prompts from a seed, the greedy baseline) and drawn_run.py (a drawn configuration through
the engine); engine_cases.py (what the black-box laws draw for an adapter); trained_pair.py
(the trained pair's held-out prompts, accept lengths measured on them)."""
