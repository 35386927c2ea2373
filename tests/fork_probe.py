"""A module tests/test_fork_server.py runs as __main__ in forked and fresh processes:
`python -m fork_probe report|exit CODE|sleep|die`."""
import json
import os
import random
import signal
import sys
import time


def sleep_forever() -> None:
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "report":
        import torch
        print(json.dumps({"argv": sys.argv, "probe": os.environ.get("FORK_PROBE"),
                          "cwd": os.getcwd(), "random": random.random(),
                          "threads": torch.get_num_threads(), "pid": os.getpid(),
                          "ppid": os.getppid()}))
    elif what == "exit":
        print("to stderr", file=sys.stderr)
        sys.exit(int(sys.argv[2]))
    elif what == "sleep":
        print(os.getpid(), flush=True)
        sleep_forever()
    elif what == "die":
        print("before the signal", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
