from cases.case import Case, run

CASE = Case(
    fault="draft_extend_width_steps_plus_one",
    story="SGLang #27545: the draft-extend graph laid requests out num_steps + 1 rows apart "
          "while the batch had ndt rows each, so for ndt != num_steps + 1 the kept row "
          "(accept_lens - 1) of every request after the first was another row's.",
    prop="self_draft", check="self_draft",
    example=run(2, steps=2, ndt=6, draft="self", graph=True),
)
