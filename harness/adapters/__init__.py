"""Engine adapters: the engines the laws drive; protocol.py states the protocol."""
