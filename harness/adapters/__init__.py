"""Engine adapters: the engines the laws drive. protocol.py states the protocol (read it
first); specdec_engine.py (white-box), transformers_assisted.py (the worked foreign example);
registry.py maps `--engine NAME` to a class (built-ins, the `specdec.adapters` entry point
group, module:Class). docs/adapters.md: how to write one."""
