from cases.case import Case, run

CASE = Case(
    fault="draft_capture_positions_not_restored",
    story="SGLang's draft graph capture (run_once) left forward_batch.positions advanced by "
          "num_steps - 1 after each warmup/capture run, so the static buffer no longer held "
          "what replay assumed. Here the replay refills padded rows only up to their "
          "high-water mark, so padded lanes run at drifted positions.",
    prop="structure", oracle="padding_positions",
    example=run(2, 3, 4, bs=5, graph=True),
)
