from cases.case import Case, run

CASE = Case(
    fault="kv_move_in_place",
    story="A KV move that scatters while it gathers (SGLang's compaction tests): when a "
          "source slot is also an earlier target, it is read after being overwritten. The "
          "draft's ancestry permutation (branches swapping parents) overlaps this way.",
    prop="self_draft", check="self_draft",
    example=run(3, steps=3, ndt=8, draft="self", bs=3),
)
