"""Kernel adapters: engines' own speculative kernels behind one harness-side form
(protocol.py); the foreign ones run in a subprocess of their own (harness/foreign/)."""
