"""Adapters: the engines and kernels the laws drive, behind one registry (registry.py:
`--engine NAME[@VERSION]` to a class) and one applicability rule (applicability.py).
Engine adapters (the black-box laws' door): protocol.py states the protocol (read it first);
specdec_engine.py (white-box), transformers_assisted.py (the worked foreign example).
Kernel adapters (the kernel laws' door): kernel_protocol.py; specdec_kernels.py (this
checkout's kernels), sglang_kernels.py and vllm_kernels.py (their released wheels, run in a
worker subprocess over the release's own install folder: foreign/). docs/adapters.md: how
to write one."""
