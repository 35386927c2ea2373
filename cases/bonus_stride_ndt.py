from cases.case import Case, run

CASE = Case(
    fault="bonus_stride_ndt",
    story="SGLang #26866: the accepted-token buffer (stride num_steps + 1) was read with "
          "stride ndt, so with ndt != num_steps + 1 every request after the first took "
          "another request's tokens.",
    prop="lossless_greedy", check="lossless_greedy",
    example=run(2, steps=2, ndt=6),
)
