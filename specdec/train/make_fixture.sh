#!/usr/bin/env bash
# The pystdlib fixture's recipe, on one GPU (RECIPE.md quotes its run): tokenizer + held-out
# prompts, the target, two EAGLE heads (multi-step unroll 3, and EAGLE-1's plain training),
# the accept-length table of each on the held-out prompts; the head with the higher chain
# (1,3,4) + tree (4,4,8) accept length becomes OUT/eagle. Logs, curves, tables and the other
# head go to OUT/aux.tgz. Usage (repo root): specdec/train/make_fixture.sh OUT
set -euo pipefail
OUT=${1:?usage: make_fixture.sh OUT}
W=$OUT/work
mkdir -p "$W"
run() { local s=$SECONDS; echo "+ ${*:2}"; "${@:2}"; echo "[$1] wall $((SECONDS - s))s"; }
run tokenizer python -m specdec train tokenizer --out "$OUT/tokenizer.json" \
    --heldout "$OUT/heldout.json" --vocab 4096 --prompts 64 --min-len 64 --max-len 256 --seed 0
run target python -m specdec train target --tokenizer "$OUT/tokenizer.json" --out "$OUT/target" \
    --steps 600 --warmup 100 --lr 2e-3 --batch 64 --seq-len 512 --eval-every 100 --seed 0 --compile
mv "$OUT/target/target_log.json" "$OUT/target/target_loss.png" "$W/"
train_head() {  # name unroll w_feat w_tok
    run "eagle-$1" timeout 200 python -m specdec train eagle --tokenizer "$OUT/tokenizer.json" \
        --target "$OUT/target" --out "$W/eagle-$1" --unroll "$2" --w-feat "$3" --w-tok "$4" \
        --steps 1500 --warmup 100 --lr 2e-3 --batch 32 --seq-len 512 --eval-every 250 \
        --seed 0 --compile || return 0
    run "accept-$1" python -m specdec train accept --target "$OUT/target" --draft "$W/eagle-$1" \
        --heldout "$OUT/heldout.json" --out "$W/accept-$1.json" || true
}
train_head unroll3 3 0.5 1.0
train_head unroll1 1 1.0 0.1
python - "$W" "$OUT/eagle" <<'PY'
import json, os, shutil, sys
work, dest = sys.argv[1:]
def score(name):
    path = os.path.join(work, f"accept-{name}.json")
    if not os.path.isfile(path):
        return -1.0
    rows = {(r["topk"], r["steps"], r["ndt"]): r["accept_length"] for r in json.load(open(path))["rows"]}
    return rows.get((1, 3, 4), 0) + rows.get((4, 4, 8), 0)
best = max(["unroll3", "unroll1"], key=score)
print(f"# fixture head: eagle-{best} (chain + tree accept {score(best):.3f})")
os.makedirs(dest, exist_ok=True)
for f in ("config.json", "model.safetensors"):
    shutil.copy(os.path.join(work, f"eagle-{best}", f), dest)
PY
tar czf "$OUT/aux.tgz" -C "$W" .
rm -rf "$W"
