import dataclasses

from cases.case import Case, run

CASE = Case(
    fault="overlap_early_free",
    story="Overlap scheduling: round i+1 is queued, reserved for round i's worst case, before "
          "round i's results arrive. Shrinking a request to its new committed length when "
          "round i resolves hands back pages round i+1 is still committing into; the next "
          "reservation maps those positions to other pages (or another request takes them), "
          "and the committed KV of round i+1 is lost.",
    prop="overlap_equals_sync", check="overlap_equals_sync",
    example=dataclasses.replace(run(1, steps=3, ndt=4, draft="eagle", bs=3, seed=5), ragged=True),
)
