from cases.case import Case, run

CASE = Case(
    fault="draft_kv_indices_missing_topk",
    story="SGLang #27338: the draft graph's static kv-index buffer was sized for bs rows, not "
          "bs * topk branch rows; topk > 1 read past its end.",
    prop="structure", check="crash",
    example=run(2, steps=3, ndt=4, graph=True),
)
