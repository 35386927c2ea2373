import dataclasses

from cases.case import Case, run

CASE = Case(
    fault="finish_cap_before_stop",
    story="SGLang #33758: update_finish_state checked the max_new_tokens cap before the stop "
          "token. A spec round appends its whole accepted run, so when one round both reached "
          "a stop token and crossed the cap, the request finished as 'length' and returned "
          "the tokens after the stop (output [10, 11, STOP, 20, 21] for max_new_tokens 5).",
    prop="finish", check="finish",
    # self-draft accepts whole rounds: the stop (output 9) and the cap (12) fall in one round
    example=dataclasses.replace(run(1, steps=3, ndt=4, draft="self", bs=4, seed=5),
                                max_new_tokens=12,
                                stop_at=9),
)
