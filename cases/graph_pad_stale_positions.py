from cases.case import Case, run

CASE = Case(
    fault="graph_pad_stale_positions",
    story="SGLang #10892: padded CUDA-graph lanes kept the positions and write slots of an "
          "earlier, larger batch, so padded rows wrote K/V into live requests' slots.",
    prop="kv_content", check="kv_content",
    example=run(1, steps=3, ndt=4, bs=7, graph=True),
)
