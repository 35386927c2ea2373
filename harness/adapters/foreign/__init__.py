"""Foreign engines' released wheels, installed into a cache folder of their own
(install.py) and run in a subprocess of their own (worker.py, remote.py), so their pins and
settings (an interpreter on CPU, numpy below 2.4, stubs) never reach the harness process."""
