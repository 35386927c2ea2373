#!/usr/bin/env bash
# Issue 23's GPU gate on a host with >= 2 GPUs (nvidia-h200-x2), one step per call so each
# fits a 10-minute device command; logs (and the bench JSONs) go to OUT.
#   bash bench/tp_gpu_gate.sh STEP [OUT]      STEP: one of the names below, or `all`
# From the checkout's root. Steps: exit (the TP endings over NCCL), multi (every multi_gpu
# test), zoo, check, mixed (200 requests, TP 2, checked after every step), suite / suite-ci
# (`pytest -n auto`, default and ci profiles), bench-decode / bench-spec (llama-8b, TP 2 vs 1).
set -u
step=${1:?usage: bash bench/tp_gpu_gate.sh STEP [OUT]}
out=${2:-bench/results/tp-gate-$(date +%F)}
mkdir -p "$out"
nvidia-smi -L > "$out/device.txt" 2>&1
py="python -m pytest -q -p no:cacheprovider"

run() {  # name, command...: the command, its wall time and exit status, its log's tail
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc in $((SECONDS - t0)) s (log: $out/$name.log)"
  tail -n 12 "$out/$name.log"
}

case $step in
  exit) run exit timeout 580 $py tests/test_tp_exit.py -s --durations=0 ;;
  multi) run multi timeout 580 $py -m multi_gpu --durations=15 ;;
  zoo) run zoo timeout 580 python -m harness zoo --device cuda --json "$out/zoo.json" ;;
  check) run check timeout 580 python -m harness check --device cuda --budget 60 ;;
  mixed) run mixed timeout 580 python -m harness mixed --device cuda --requests 200 --tp 2 ;;
  suite) run suite timeout 580 $py -n auto --durations=10 ;;
  suite-ci) SPECDEC_PROFILE=ci run suite-ci timeout 580 $py -n auto --durations=10 ;;
  bench-decode) run bench-decode timeout 580 python -m specdec bench decode --tp 2 \
      --models llama-8b --batch-sizes 1,8 --out "$out/decode-tp2.json" ;;
  bench-spec) run bench-spec timeout 580 python -m specdec bench spec --tp 2 \
      --models llama-8b --batch-sizes 1,8 --out "$out/spec-tp2.json" ;;
  all) for s in exit multi zoo check mixed suite suite-ci bench-decode bench-spec; do
         bash "$0" "$s" "$out"; done ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
