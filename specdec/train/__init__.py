"""Training a small target and its EAGLE head here, from the Python standard library's source
(`python -m specdec train tokenizer|target|eagle|accept`; RECIPE.md of the fixture).

- corpus.py: the stdlib *.py files, the train / held-out split, token streams, held-out prompts
- tokenizer.py: a byte-level BPE tokenizer trained on the train split
- dense.py: dense (non-paged) differentiable forwards over LlamaModel's and EagleHead's own
  parameters: the engine's math, batched [B, T] with causal attention
- loop.py: the shared loop (AdamW, warmup + cosine, progress, loss log, PNG, summary)
- target.py / eagle.py: the two training runs; save.py: HF-layout checkpoints
- accept.py: mean accept length of a trained pair on held-out prompts, through the Engine
- cli.py: the `train` subcommand
"""
