from cases.case import Case, run

CASE = Case(
    fault="dummy_lane_real_row",
    story="vLLM #56734: an idle rank's dummy batch ran the drafter's multi-step decode with "
          "slot mappings computed through the persistent block tables of whichever request "
          "last held each row, writing drafter KV into that request's (prefix-cached) blocks: "
          "acceptance latched at 0 until the prefix cache was reset.",
    prop="kv_content", check="kv_content",
    example=run(1, steps=3, ndt=4, draft="eagle", bs=5, graph=True, seed=5),
     # 5 pads to the bucket 6
)
