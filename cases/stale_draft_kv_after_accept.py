from cases.case import Case, run

CASE = Case(
    fault="stale_draft_kv_after_accept",
    story="vLLM #14649: after acceptance the draft KV of the accepted tokens was not "
          "rewritten from the target's hidden states, so the draft kept attending to KV "
          "computed during drafting.",
    prop="structure", check="draft_extend_write_slots",
    example=run(1, steps=3, ndt=4),
)
