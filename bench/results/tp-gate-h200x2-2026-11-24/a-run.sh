#!/usr/bin/env bash
# x2 call A: NCCL endings, TP decode bench, mixed TP2, then the whole suite.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/gate; mkdir -p $O
T0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > $O/install.log 2>&1
nvidia-smi -L | tee $O/device.txt; nvidia-smi topo -m >> $O/device.txt 2>&1
python3 -c 'import torch,triton;print(torch.__version__, triton.__version__, torch.cuda.device_count())' | tee -a $O/device.txt
py="python3 -m pytest -q -p no:cacheprovider"
step() { local name=$1 lim=$2; shift 2; local t=$SECONDS
  timeout -s INT -k 10 $lim "$@" > $O/$name.log 2>&1; local rc=$?
  echo "== $name rc=$rc $((SECONDS-t)) s (elapsed $((SECONDS-T0)))"; tail -n ${TAILN:-25} $O/$name.log; }
step exit 100 $py tests/test_tp_exit.py -k nccl -s --durations=0 -rfE
step decode 90 python3 -m specdec bench decode --tp 2 --models llama-8b --batch-sizes 1,8 --out $O/decode-tp2.json
step mixed 70 python3 -m harness mixed --device cuda --requests 200 --tp 2
left=$((575 - (SECONDS-T0)))
TAILN=40 step suite $left $py -n auto -rfE --durations=10
