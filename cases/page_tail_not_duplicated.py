from cases.case import Case, run

CASE = Case(
    fault="page_tail_not_duplicated",
    story="SGLang #26972 / #7725: with page_size > 1 and topk > 1 each branch gets its own "
          "pages, and the prefix's last partial page must be copied into branches k >= 1; "
          "without it those branches attended to garbage.",
    prop="self_draft", check="self_draft",
    example=run(2, steps=2, ndt=6, draft="self", page_size=4),
)
