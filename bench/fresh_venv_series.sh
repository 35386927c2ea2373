#!/usr/bin/env bash
# README's test command N times in a row, in one fresh venv made as README.md says (a CPU torch
# first, as .ci/run pins it, then `pip install -e ".[test]"`): nothing of the machine's image
# reaches the tests. From a checkout's root:
#   bash bench/fresh_venv_series.sh N [OUT]        OUT: where each run's log goes
# Prints the venv's versions, then one line per run: exit status, wall seconds, pytest's summary.
set -u -o pipefail
n=${1:?usage: bash bench/fresh_venv_series.sh N [OUT]}
out=${2:-.}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
torch_pin=$(sed -n 's/^PINNED_TORCH=\([^ ]*\).*/\1/p' .ci/run)
triton_pin=$(sed -n 's/^PINNED_TRITON=\([^ ]*\).*/\1/p' .ci/run)
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$torch_pin" "$triton_pin" &&
  "$work/venv/bin/python" -m pip install --quiet -e ".[test]" || exit 1
"$work/venv/bin/python" -m pip list --format=freeze |
  grep -iE '^(torch|triton|pytest|pytest-xdist|hypothesis|numpy|scipy)=' | tr '\n' ' '
echo "| cores $(nproc) | tree $(git log --oneline -1 2>/dev/null || echo '?')"
for i in $(seq 1 "$n"); do
  t0=$(date +%s)
  ( . "$work/venv/bin/activate" && pytest -n auto ) > "$out/fresh-run$i.log" 2>&1
  rc=$?
  echo "run $i rc $rc took $(( $(date +%s) - t0 )) s: $(tail -1 "$out/fresh-run$i.log" | tr -d '=')"
  grep -E "^(FAILED|ERROR)" "$out/fresh-run$i.log" | head -5
done
