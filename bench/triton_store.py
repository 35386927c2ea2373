"""How many compiled variants of each Triton kernel the gate's store of published kernels
holds (harness/gate/triton_cache.py): what a machine with no Triton cache compiles in its
first gate run. `python bench/triton_store.py` prints one line; bench/gate_series.sh runs it
after each run."""
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness.gate.xdist_gpu import cache_base  # noqa: E402


def main() -> None:
    store = os.path.join(cache_base(), "published")
    names: Counter = Counter()
    for key in os.listdir(store) if os.path.isdir(store) else ():
        found = {f.rsplit(".", 1)[0] for f in os.listdir(os.path.join(store, key))
                 if f.endswith(".json") and not f.startswith("__grp__")}
        names.update(found)
    print(f"  Triton store: {sum(names.values())} kernel variants; "
          + ", ".join(f"{n} {c}" for n, c in names.most_common()))


if __name__ == "__main__":
    main()
