"""Mean accept length of a trained pair on held-out prompts, through Engine.generate.

Accept length as the engine's Stats count it (mean_acceptance_length): tokens committed per
request-round, accepted drafts plus the bonus token.
"""
from __future__ import annotations

import json
import time

from specdec import Engine, SpecConfig

DEFAULT_CONFIGS = "1,1,2;1,2,3;1,3,4;1,5,6;2,3,6;4,4,8;4,4,16;8,5,32"


def parse_configs(text: str) -> list[tuple[int, int, int]]:
    try:
        out = [tuple(int(x) for x in c.split(",")) for c in text.split(";") if c.strip()]
    except ValueError:
        out = []
    if not out or any(len(c) != 3 for c in out):
        raise ValueError(f"--configs {text!r}: expected topk,steps,ndt;... e.g. '1,3,4;4,4,8'")
    return out


def read_heldout(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or not data.get("prompts"):
        raise ValueError(f"{path}: expected a JSON object with a non-empty 'prompts' list")
    return data


def accept_lengths(target: str, *, draft: str, prompts: list[list[int]],
                   configs: list[tuple[int, int, int]], new_tokens: int, device: str,
                   dtype: str, batch: int = 32) -> list[dict]:
    """One row per (topk, steps, ndt): mean accept length over every request-round."""
    rows = []
    max_context = max(map(len, prompts)) + new_tokens + 80
    for topk, steps, ndt in configs:
        eng = Engine(model=target, draft=draft, spec=SpecConfig(topk=topk, num_steps=steps,
                                                                num_draft_tokens=ndt),
                     device=device, dtype=dtype, max_batch=batch, max_context=max_context)
        t0 = time.perf_counter()
        for i in range(0, len(prompts), batch):
            eng.generate(prompts[i:i + batch], max_new_tokens=new_tokens)
        wall = time.perf_counter() - t0
        st = eng.stats
        rows.append({"topk": topk, "steps": steps, "ndt": ndt,
                     "accept_length": round(st.mean_acceptance_length, 4),
                     "req_rounds": st.req_rounds, "accepted": st.accepted,
                     "wall_s": round(wall, 2)})
        eng.close()
        print(f"topk {topk} steps {steps} ndt {ndt:>2}: accept length "
              f"{st.mean_acceptance_length:.3f} over {st.req_rounds} request-rounds "
              f"({wall:.1f}s)", flush=True)
    return rows


def run_accept(args) -> dict:
    data = read_heldout(args.heldout)
    prompts = data["prompts"][:args.prompts]
    rows = accept_lengths(args.target, draft=args.draft, prompts=prompts,
                          configs=parse_configs(args.configs),
                          new_tokens=args.new_tokens, device=args.device, dtype=args.dtype,
                          batch=args.batch)
    out = {"device": args.device, "dtype": args.dtype, "prompts": len(prompts),
           "new_tokens": args.new_tokens, "rows": rows}
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return out
