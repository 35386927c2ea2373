from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="tp_peer_buffer_stale",
    story="The custom all-reduces of vLLM and SGLang sum registered IPC buffers, not the "
          "caller's tensor: a rank must stage its rows into its own registered buffer before "
          "the barrier that lets its peers read them. Skipped (an input taken to be registered "
          "already, a staging copy dropped from a captured graph), every rank sums what the "
          "buffers held from the call before: the ranks still agree with each other, and all "
          "of them are wrong.",
    prop="tp_equals_single", check="tp_equals_single",
    # CUDA only (the peer path does not exist on CPU); greedy, graphs on, the peer path.
    example=RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", batch_size=2,
                      max_prompt_len=12, max_new_tokens=8, seed=3, cuda_graph=True,
                      graph_bs=(2, 4), tp_size=2, tp_all_reduce="auto"),
)
