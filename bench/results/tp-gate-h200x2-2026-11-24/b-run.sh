#!/usr/bin/env bash
# x2 call B: the NCCL endings with stack dumps, the decode bench's exit, the multi_gpu tests.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/gate; mkdir -p $O
T0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > $O/install.log 2>&1
py="python3 -m pytest -q -p no:cacheprovider"
step() { local name=$1 lim=$2; shift 2; local t=$SECONDS
  timeout -s INT -k 10 $lim "$@" > $O/$name.log 2>&1; local rc=$?
  echo "== $name rc=$rc $((SECONDS-t)) s (elapsed $((SECONDS-T0)))"; tail -n ${TAILN:-25} $O/$name.log; }
NCCL_DEBUG=WARN TAILN=12 step exit 150 $py tests/test_tp_exit.py -k nccl -s --durations=0 -rfE
TORCH_NCCL_ASYNC_ERROR_HANDLING=0 TAILN=12 step exit-noaeh 45 $py tests/test_tp_exit.py -k "hung and nccl" -s -rfE
PYTHONFAULTHANDLER=1 TAILN=8 step decode 70 python3 -m specdec bench decode --tp 2 --models llama-8b --batch-sizes 1,8 --out $O/decode-tp2.json
left=$((580 - (SECONDS-T0)))
TAILN=30 step multi $left $py -m multi_gpu -k "not tp_exit" -rfE --durations=0
