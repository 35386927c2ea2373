from cases.case import Case, run

CASE = Case(
    fault="tree_accept_not_compacted",
    story="SGLang #26997: with topk > 1 the accepted tree path was not moved to the front of "
          "the request's block (KV, predict, hidden states), so the chain-layout code after "
          "verify committed the wrong tokens and KV.",
    prop="structure", check="accepted_tokens",
    example=run(2, steps=3, ndt=4, draft="self"),
)
