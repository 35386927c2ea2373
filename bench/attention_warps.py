"""Ad-hoc (#34): kernels/attention.py's paged_attention at decode shapes under launch variants,
microseconds per call (split kernel + combine) in a CUDA graph of 32 calls, median of 20 replays,
each checked against paged_attention_ref. Variants are text edits of kernels/attention.py loaded
as fresh modules: BLOCK_N, programs per SM, num_warps, and a software-pipelined `for` loop
(GPU only: the interpreter cannot range over a loaded bound). `--set 1` and `--set 2` are the two
runs of bench/results/attention-warps-h100-2026-11-27.txt. Run from the repository root:
PYTHONPATH=. python bench/attention_warps.py --set 2"""
import argparse
import importlib.util, time, torch
src0 = open("kernels/attention.py").read()
args_cli = argparse.ArgumentParser()
args_cli.add_argument("--set", type=int, choices=(1, 2), default=2)
SET = args_cli.parse_args().set

def variant(name, *, block_n=64, pps=4, nw=4, loop="while", ns=3):
    """nw=4 (Triton's default) is the launch before _NUM_WARPS = 2, the runs' "base"."""
    s = src0.replace("_BLOCK_N = 64", f"_BLOCK_N = {block_n}").replace("_PROGRAMS_PER_SM = 4", f"_PROGRAMS_PER_SM = {pps}")
    s = s.replace("_NUM_WARPS = 2", f"_NUM_WARPS = {nw}")
    if loop == "for":
        a = s.index("    while start < end:\n        pos = (start + offs_n)")
        s = s[:a] + f"    for blk in tl.range(start, end, BLOCK_N, num_stages={ns}):\n        pos = (blk + offs_n)" + s[a + len("    while start < end:\n        pos = (start + offs_n)"):]
        s = s.replace("        m_i = m_new\n        start += BLOCK_N\n", "        m_i = m_new\n")
    path = f"/tmp/attn_{name}.py"; open(path, "w").write(s)
    spec = importlib.util.spec_from_file_location(f"attn_{name}", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

dev = "cuda"; torch.manual_seed(0)
x = torch.empty(1 << 28, dtype=torch.uint8, device=dev); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(20): y.copy_(x)
torch.cuda.synchronize(); bw = 2 * x.numel() * 20 / (time.perf_counter() - t)
print(f"copy bw {bw/1e12:.2f} TB/s", torch.cuda.get_device_name())
ref = variant("ref")

def case(Hq, *, Hkv, D, R, ctx=1000, width=1040):
    slots = R * width + 16
    kb = torch.randn(slots, Hkv, D, dtype=torch.bfloat16, device=dev)
    vb = torch.randn_like(kb)
    pt = torch.randperm(slots - 16, device=dev)[: R * width].view(R, width).to(torch.int32)
    q = torch.randn(R, Hq, D, dtype=torch.bfloat16, device=dev)
    seq = torch.arange(R, dtype=torch.int32, device=dev)
    kvl = torch.full((R,), ctx, dtype=torch.int32, device=dev)
    ms = torch.zeros(R, dtype=torch.int32, device=dev); mo = torch.full((R,), -1, dtype=torch.int32, device=dev)
    mask = torch.ones(1, dtype=torch.bool, device=dev)
    return (q, kb, vb, pt, seq, kvl, ms, mo, mask, 1, D ** -0.5), R * ctx * Hkv * D * 2 * 2

def time_call(mod, args, n=32, reps=20):
    f = lambda: mod.paged_attention(*args)
    for _ in range(3): f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(); s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            for _ in range(n): out = f()
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize(); ts.append(e0.elapsed_time(e1) * 1e3 / n)
    ts.sort(); return ts[len(ts) // 2], out

VARIANTS = {1: None, 2: None}
VARIANTS[1] = {"base": {}, "bn32": dict(block_n=32), "bn128": dict(block_n=128), "pps2": dict(pps=2),
            "pps8": dict(pps=8), "nw2": dict(nw=2), "nw8": dict(nw=8),
            "for2": dict(loop="for", ns=2), "for3": dict(loop="for", ns=3), "for4": dict(loop="for", ns=4),
            "for3_bn32": dict(loop="for", ns=3, block_n=32), "for3_bn128": dict(loop="for", ns=3, block_n=128),
            "for3_pps8": dict(loop="for", ns=3, pps=8), "for3_pps2": dict(loop="for", ns=3, pps=2),
            "for3_nw8": dict(loop="for", ns=3, nw=8), "for2_bn128_nw8": dict(loop="for", ns=2, block_n=128, nw=8)}
VARIANTS[2] = {"base": {}, "nw2": dict(nw=2), "nw1": dict(nw=1), "nw2_bn128": dict(nw=2, block_n=128), "nw2_bn32": dict(nw=2, block_n=32),
            "nw2_pps8": dict(nw=2, pps=8), "nw2_pps2": dict(nw=2, pps=2), "nw2_for2": dict(nw=2, loop="for", ns=2),
            "nw4_bn128": dict(nw=4, block_n=128), "nw2_bn128_pps2": dict(nw=2, block_n=128, pps=2)}
variants = VARIANTS[SET]
ROWS = {1: (1, 8), 2: (1, 4, 8, 16, 64)}[SET]
mods = {k: variant(k, **v) for k, v in variants.items()}
for (mname, Hq, Hkv, D) in [("llama-1b", 32, 8, 64), ("llama-8b", 32, 8, 128)]:
    for R in ROWS:
        args, nbytes = case(Hq, Hkv=Hkv, D=D, R=R)
        want = ref.paged_attention_ref(*args).float()
        line = []
        for k, m in mods.items():
            try:
                us, out = time_call(m, args)
                err = (out.float() - want).abs().max().item()
                line.append(f"{k}={us:.2f}" + ("" if err < 2e-2 else f"(ERR {err:.3f})"))
            except Exception as e:
                line.append(f"{k}=FAIL({type(e).__name__}: {str(e)[:80]})")
        print(f"{mname} R={R} floor {nbytes/bw*1e6:.2f} us | " + " ".join(line), flush=True)
