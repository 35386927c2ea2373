#!/bin/bash
# The mutation campaign: each named mistake of mutants.py planted alone in a copy of this
# checkout, then the ordinary `pytest -n 2 -x` (the gate, the only detector). A mutant that
# passes is a survivor: a law is missing, or the mistake changes nothing a law can observe.
# usage: bash bench/mutation/run.sh OUT name...   (OUT/results: one line per mutant)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd); shift
python3 "$ROOT/bench/mutation/mutants.py" || exit 1   # every mutant still applies
for name in "$@"; do
  T=$(mktemp -d)
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$T")
  python3 - "$name" "$T" "$ROOT/bench/mutation" <<'PY' || { echo "$name APPLY-FAILED" >> "$OUT/results"; continue; }
import sys; sys.path.insert(0, sys.argv[3]); from mutants import M
name, tree = sys.argv[1], sys.argv[2]
(_, f, old, new), = [m for m in M if m[0] == name]
p = f"{tree}/{f}"; s = open(p).read()
assert s.count(old) == 1, (name, s.count(old)); open(p, "w").write(s.replace(old, new))
PY
  t0=$(date +%s)
  (cd "$T" && PYTHONPATH="$T" timeout 1500 python3 -m pytest -n 2 -x -q -p no:cacheprovider > "$OUT/$name.log" 2>&1); rc=$?
  first=$(grep -m1 -E "^FAILED|^ERROR" "$OUT/$name.log")
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s $(tail -1 "$OUT/$name.log") :: $first" >> "$OUT/results"
  rm -rf "$T"
done
