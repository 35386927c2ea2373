from cases.case import Case, run

CASE = Case(
    fault="graph_seq_lens_sum_unpadded",
    story="SGLang #26880: graph replay handed the metadata the raw seq_lens_sum, not the one "
          "including padded requests. Here the verify replay writes the FULL_MASK region up "
          "to where seq_lens_sum says it ends, so padded blocks keep stale (False) bits.",
    prop="structure", check="padding_reads",
    # Three padded lanes (5 in a bucket of 8) read stale bits in the first round; with the
    # fine buckets' one padded lane (5 in 6) this example did not expose the fault.
    example=run(2, steps=3, ndt=4, bs=5, graph=True, graph_bs=(8,)),
)
