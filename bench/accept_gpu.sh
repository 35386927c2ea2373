#!/usr/bin/env bash
# Issue 25 on one H100: the acceptance gate in bf16 (writes the cuda-bfloat16 baseline), the
# acceptance laws under pytest on the GPU, and the end-to-end benchmark with the llama-8b
# projection. Everything lands in $OUT; copy back:
#   $OUT/acceptance_baselines.json -> harness/laws/acceptance_baselines.json (commit it)
#   $OUT/*.json, $OUT/*.png        -> bench/results/ (rename with the date, as the others)
# Usage: bash bench/accept_gpu.sh [stage ...]   stages: gate tests e2e (default: all three,
# about 6 minutes on an H100), faults (the fault table on the GPU, one process per fault,
# nine at once: run it as a second command, about 4 minutes, after copying the baseline the
# first wrote into harness/laws/: each command starts from a fresh copy of the tree).
# A failing stage is reported and the next one still runs; the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/accept_out}
mkdir -p "$OUT"
stages=${*:-gate tests e2e}
t0=$(date +%s)
rc=0
stamp() { echo "== $1 ($(( $(date +%s) - t0 ))s since start)"; }
failed() { echo "!! stage $1 failed"; rc=1; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

for stage in $stages; do
  case $stage in
  gate)
    # The whole grid (chains 1..5, trees topk 2..4 x steps 3..5 x ndt 4..10; EAGLE head and
    # standalone drafter), 32 held-out prompts x 96 tokens, bf16, eager: recorded as the
    # cuda-bfloat16 baseline (table + PNG in $OUT).
    stamp "gate --write-baseline"
    python -m harness acceptance --device cuda --dtype bfloat16 --grid full \
      --write-baseline --out "$OUT/acceptance-cuda-bfloat16.json" 2>&1 | tee "$OUT/gate.txt" \
      || failed gate
    cp harness/laws/acceptance_baselines.json "$OUT/acceptance_baselines.json"
    # The gate against the baseline just written, on the quick grid: every verdict ok.
    stamp "gate check"
    python -m harness acceptance --device cuda --dtype bfloat16 --grid quick \
      --out "$OUT/acceptance-cuda-bfloat16-check.json" 2>&1 | tee "$OUT/gate-check.txt" \
      || failed gate-check
    ;;
  tests)
    # The acceptance laws (gpu profile: bf16 and fp32 paths, real CUDA graphs, the trained
    # pair) and their negative controls, on the GPU, against the cuda-bfloat16 baseline.
    stamp "pytest acceptance"
    SPECDEC_PROFILE=gpu python -m pytest -q -p no:cacheprovider --durations=10 \
      tests/test_acceptance_laws.py tests/test_properties.py -k acceptance \
      2>&1 | tee "$OUT/pytest-acceptance.txt" || failed tests
    ;;
  e2e)
    # Plain vs speculative decoding of the trained target through generate(), graphs and
    # overlap on, bs 1, 8, 32, 256 new tokens; chains of 3 to 7 steps and two trees;
    # projection from llama-8b's round cost in bench/results/spec-h100-2026-11-23.json.
    stamp "bench e2e"
    python -m specdec bench e2e --device cuda --dtype bfloat16 --batch-sizes 1,8,32 \
      --e2e-tokens 256 --spec-configs "1,3,4;1,4,5;1,5,6;1,6,7;1,7,8;2,4,8;4,4,8" \
      --out "$OUT/e2e-h100.json" \
      2>&1 | tee "$OUT/e2e.txt" || failed e2e
    ;;
  faults)
    # Needs the cuda-bfloat16 baseline: run after `gate` (same command) or with the
    # committed one.
    stamp "fault table"
    python -m harness acceptance --device cuda --dtype bfloat16 --fault-table --jobs 9 \
      --out "$OUT/acceptance-faults-cuda-bfloat16.json" 2>&1 | tee "$OUT/faults.txt" \
      || failed faults
    ;;
  *) echo "unknown stage $stage (gate tests e2e faults)"; exit 2 ;;
  esac
done
stamp "done"
exit $rc
