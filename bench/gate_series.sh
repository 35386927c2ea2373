#!/usr/bin/env bash
# The gate N times in a row, each run profiled (the "green every time" series of docs/contract.md,
# Tiers). From the checkout's root:
#   bash bench/gate_series.sh FIRST LAST [OUT]     runs FIRST..LAST; OUT: where the logs go
# Each run: SPECDEC_GATE_PROFILE=DIR timeout GATE_TIMEOUT (150 s) pytest -n auto -q
# --durations=0 (README's command, the default Hypothesis profile: fresh seeds each run), then
# `python -m harness gate-profile DIR`. Stdout gets a summary per run
# (bench/gate_series_summary.py: counts, failures, the 10 slowest tests, the zoo faults' times
# inside the suite, the phase table; bench/triton_store.py: the compiled kernels' variants);
# OUT/runs.tgz holds every log and profile, rewritten
# after each run, with each run's profile directory (a device that returns few files still
# returns them all).
set -u -o pipefail
first=${1:?usage: bash bench/gate_series.sh FIRST LAST [OUT]}
last=${2:?usage: bash bench/gate_series.sh FIRST LAST [OUT]}
out=${3:-${OUT:-bench/results/gate-series-$(date +%F)}}
limit=${GATE_TIMEOUT:-150}
mkdir -p "$out"
logs=$(mktemp -d)
nvidia-smi -L 2>/dev/null || echo "no GPU"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())"
echo "cores $(nproc); tree $(git log --oneline -1 2>/dev/null || echo '?')"
for i in $(seq "$first" "$last"); do
  prof=$(mktemp -d)
  t0=$(date +%s)
  # The host's CPU time, sampled every 2 s beside the run: whether the gate is bound by cores.
  (while sleep 2; do head -1 /proc/stat; done) > "$logs/cpu$i.txt" 2>/dev/null &
  sampler=$!
  SPECDEC_GATE_PROFILE=$prof timeout "$limit" python -m pytest -n auto -q -p no:cacheprovider \
    --durations=0 > "$logs/run$i.log" 2>&1
  rc=$?
  kill "$sampler" 2>/dev/null
  took=$(( $(date +%s) - t0 ))
  python -m harness gate-profile "$prof" --top 40 > "$logs/profile$i.txt" 2>&1
  python bench/gate_series_summary.py "$i" "$rc" "$took" "$logs/run$i.log" "$logs/profile$i.txt" \
    "$logs/cpu$i.txt" | tee -a "$logs/summary.txt"
  python bench/triton_store.py | tee -a "$logs/summary.txt"
  mv "$prof" "$logs/profile$i"  # the records and GPU lock holds, for a closer look
  tar czf "$out/runs.tgz" -C "$logs" .
done
