"""One PNG per result JSON, drawn from the JSON alone (so `bench plot` can redraw results
fetched from a machine without matplotlib)."""
from __future__ import annotations

import json


def _plt():
    import matplotlib
    matplotlib.use("Agg")  # no display on the bench machines
    import matplotlib.pyplot as plt
    return plt


def _title(ax, doc, what):
    ax.set_title(f"{what} on {doc['device']}  ({doc['date'][:10]}, torch {doc['torch']})", fontsize=9)


def decode(doc, plt):
    models = list(dict.fromkeys(r["model"] for r in doc["results"]))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = [r for r in doc["results"] if r["model"] == model]
        for impl in dict.fromkeys(r["impl"] for r in rows):
            pts = [(r["bs"], r["step_ms"]) for r in rows if r["impl"] == impl and r["step_ms"] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=impl)
        floor = sorted({(r["bs"], r["floor_ms"]) for r in rows})
        ax.plot(*zip(*floor), "k--", label="floor (bytes / copy bw)")
        ax.set(xscale="log", xlabel="batch size", ylabel="ms per decode step")
        ax.set_xticks([b for b, _ in floor], [str(b) for b, _ in floor])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        _title(ax, doc, f"decode {model}")
    return fig


def spec(doc, plt):
    rows, phases = doc["results"], doc["phases"]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4.8))
    labels = [f"{r['model']}\nbs{r['bs']} k{r['topk']}s{r['num_steps']}n{r['ndt']}" for r in rows]
    base = [0.0] * len(rows)
    for p in phases:
        vals = [r["phases_ms"][p] / r["decode_step_ms"] for r in rows]
        ax.bar(labels, vals, bottom=base, label=p)
        base = [b + v for b, v in zip(base, vals)]
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="one decode step")
    ax.set_ylabel("round cost in decode steps (= break-even acceptance length)")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=8)
    _title(ax, doc, "spec round breakdown")
    return fig


def graphs(doc, plt):
    rows = doc["results"]
    keys = list(dict.fromkeys((r["model"], r["bs"]) for r in rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(keys)), 4.5))
    w = 0.4
    for i, (flag, name) in enumerate(((False, "eager"), (True, "graph"))):
        vals = [next((r["round_ms"] for r in rows if (r["model"], r["bs"]) == k and r["cuda_graph"] == flag), 0)
                for k in keys]
        ax.bar([j + (i - 0.5) * w for j in range(len(keys))], vals, w, label=name)
    ax.set_xticks(range(len(keys)), [f"{m}\nbs{b}" for m, b in keys])
    ax.set_ylabel("ms per speculative round")
    ax.legend()
    _title(ax, doc, "eager vs CUDA graph")
    return fig


def prefix(doc, plt):
    rows = doc["results"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 4))
    names = ["no cache" if not r["prefix_cache"] else "prefix cache" for r in rows]
    a.bar(names, [r["prefill_tokens"] for r in rows])
    a.set_ylabel("tokens through the target prefill")
    b.bar(names, [r["ttft_ms_mean"] for r in rows])
    b.set_ylabel("mean time to first token (ms)")
    r = rows[0]
    _title(b, doc, f"{r['model']}: {r['requests']} requests, {r['prefix_tokens']}-token prefix")
    return fig


def harness(doc, plt):
    rows = doc["results"]
    zoo = ((doc.get("zoo") or {}).get("faults") or {}).get("rows") or []
    fig, axes = plt.subplots(1, 2 if zoo else 1, figsize=(14 if zoo else 7, 4.5), squeeze=False)
    ax = axes[0][0]
    ax.bar([r["property"] for r in rows], [r["examples_per_s"] for r in rows])
    ax.set_ylabel("examples / s")
    ax.tick_params(axis="x", labelsize=8, rotation=30)
    _title(ax, doc, "harness")
    if zoo:  # seconds to detection per fault; missed faults drawn red at their full time
        ax = axes[0][1]
        ax.barh([z["fault"] for z in zoo], [z["seconds"] for z in zoo],
                color=["C0" if z["caught"] else "red" for z in zoo])
        ax.set_xlabel("seconds to detection")
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title("bug zoo", fontsize=9)
    return fig


def profile(doc, plt):
    """Per profiled step: GPU busy time (kernels) and the rest of the wall time (launch gaps,
    host work), stacked."""
    rows = doc["results"]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4.5))
    labels = [f"{r['model']}\nbs{r['bs']}\n{r['what']}" for r in rows]
    busy = [r["gpu_busy_ms_per_step"] for r in rows]
    ax.bar(labels, busy, label="GPU busy (kernels)")
    ax.bar(labels, [max(0.0, r["step_ms"] - b) for r, b in zip(rows, busy)], bottom=busy,
           label="gaps and host")
    ax.set(yscale="log", ylabel="ms per step")
    ax.tick_params(axis="x", labelsize=6)
    ax.legend(fontsize=8)
    _title(ax, doc, "profile")
    return fig


def speedup(doc, plt):
    """bench e2e: plain vs speculative tokens/s per batch size and configuration (and tensor
    parallel size, with --tp), each bar labelled with the speedup and the accept length;
    the llama-8b projection as text."""
    rows = doc["results"]
    bss = sorted({r["bs"] for r in rows})
    tps = sorted({r.get("tp", 1) for r in rows})
    cfgs = list(dict.fromkeys((r["topk"], r["num_steps"], r["ndt"]) for r in rows))
    bars = [b for tp in tps for b in [(tp, None)] + [(tp, c) for c in cfgs]]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(bss) * len(bars)), 4.6))
    w = 0.8 / len(bars)
    notes = []
    for j, (tp, c) in enumerate(bars):
        cells = [next((r for r in rows if r["bs"] == b and r.get("tp", 1) == tp and
                       (c is None or (r["topk"], r["num_steps"], r["ndt"]) == c)), None)
                 for b in bss]
        xs = [i - 0.4 + w / 2 + j * w for i in range(len(bss))]
        key = "plain_tokens_per_s" if c is None else "spec_tokens_per_s"
        where = f" tp {tp}" if len(tps) > 1 else ""
        ax.bar(xs, [r[key] if r else 0 for r in cells], width=w,
               label=f"plain{where}" if c is None else
               f"spec topk {c[0]} steps {c[1]} ndt {c[2]}{where}")
        for x, r in zip(xs, cells):
            if r and c is not None:
                ax.text(x, r["spec_tokens_per_s"], f"{r['speedup']:.2f}x\nacc {r['mean_accept_length']:.2f}",
                        ha="center", va="bottom", fontsize=6)
                if r.get("projected_llama8b_speedup") and tp == 1:
                    notes.append(f"k{c[0]}s{c[1]}n{c[2]} bs{r['bs']}: "
                                 f"{r['projected_llama8b_speedup']:.2f}x")
    ax.set_xticks(range(len(bss)), [f"bs {b}" for b in bss])
    ax.set_ylabel("tokens/s, generate() (graphs + overlap)")
    ax.legend(fontsize=7)
    if notes:
        lines = [", ".join(notes[i:i + 3]) for i in range(0, len(notes), 3)]
        ax.set_xlabel("PROJECTION, llama-8b speedup (accept length / measured round cost):\n"
                      + "\n".join(lines), fontsize=7)
    _title(ax, doc, "plain vs speculative, trained pair")
    return fig


PLOTS = {"decode": decode, "spec": spec, "graphs": graphs, "harness": harness, "profile": profile,
         "prefix": prefix, "e2e": speedup}


def plot(doc: dict, png: str) -> None:
    plt = _plt()
    # Older results lack "bench": the command names it (python -m specdec bench WHAT ...).
    fig = PLOTS[doc.get("bench") or doc["command"].split()[4]](doc, plt)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    if doc.get("e2e"):  # generate() tokens/s, with and without overlap scheduling
        fig = e2e(doc, plt)
        fig.tight_layout()
        fig.savefig(png.rsplit(".", 1)[0] + "-e2e.png", dpi=120)
        plt.close(fig)


def e2e(doc, plt):
    rows = doc["e2e"]
    keys = list(dict.fromkeys((r["model"], r["bs"]) for r in rows))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(keys)), 4.2))
    x = range(len(keys))
    for off, ov in ((-0.2, False), (0.2, True)):
        vals = [next((r["tokens_per_s"] for r in rows if (r["model"], r["bs"]) == k
                      and r["overlap"] == ov), 0.0) for k in keys]
        ax.bar([i + off for i in x], vals, width=0.4, label="overlap" if ov else "sync")
    ax.set_xticks(list(x), [f"{m}\nbs{b}" for m, b in keys])
    ax.set_ylabel(f"tokens/s, generate() of {rows[0]['new_tokens']} new tokens")
    ax.legend(fontsize=8)
    _title(ax, doc, "end to end")
    return fig


def plot_file(path: str) -> str:
    """Redraw the PNG beside a result JSON."""
    with open(path) as f:
        doc = json.load(f)
    png = path.rsplit(".", 1)[0] + ".png"
    plot(doc, png)
    print(f"wrote {png}")
    return png
