#!/usr/bin/env bash
# A planted engine bug (a bug-zoo fault, switched on for the whole run) under
# `pytest -n auto -x`: the time from the first failure (the red gate's "the gate is red at T"
# line, harness/gate/red_gate.py) to the gate's exit, and the red output's summary lines.
#   bash bench/red_gate_timing.sh FAULT [OUT]      from the checkout's root
set -u
fault=${1:?usage: bash bench/red_gate_timing.sh FAULT [OUT]}
out=${2:-.}
mkdir -p "$out"
log="$out/red-$fault.log"
start=$(date +%s.%N)
COLUMNS=200 timeout 300 python -m pytest -n auto -x -v -p no:cacheprovider --faults "$fault" \
  --durations=5 > "$log" 2>&1
rc=$?
end=$(date +%s.%N)
red=$(grep -o "the gate is red at [0-9.]*" "$log" | head -1 | awk '{print $6}')
echo "fault $fault: pytest exit $rc, wall $(python -c "print(f'{$end - $start:.1f}')") s"
if [ -n "$red" ]; then
  echo "first failure at +$(python -c "print(f'{$red - $start:.1f}')") s; exit" \
       "$(python -c "print(f'{$end - $red:.1f}')") s after it"
else
  echo "no red-gate line in the log"
fi
grep -E "^(FAILED|ERROR)|the gate is red|stopping after|[0-9]+ (passed|failed)" "$log" | head -20
echo "tests that ended after the gate went red:"
sed -n '/the gate is red/,$p' "$log" | grep -E "^\[gw[0-9]+\] .*(PASSED|FAILED|SKIPPED|ERROR)" | head -40
