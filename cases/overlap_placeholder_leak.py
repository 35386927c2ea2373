from cases.case import Case, run

CASE = Case(
    fault="overlap_placeholder_leak",
    story="vLLM #47029: with async scheduling the host keeps a placeholder for the token still "
          "in flight; after a preemption / resume the placeholder (not the real token) reached "
          "the embedding lookup. Here one batch-wide 'a round is in flight' flag makes every "
          "request take its pending token from the device, also one admitted or resumed since: "
          "its row holds the previous occupant's token.",
    prop="overlap_equals_sync", check="overlap_equals_sync",
    example=run(1, steps=3, ndt=4, draft="eagle", bs=4, seed=5),
)
