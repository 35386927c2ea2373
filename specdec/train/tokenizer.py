"""A byte-level BPE tokenizer trained on the corpus's train split (`tokenizers`).

Byte-level: every byte sequence encodes (no unknown token) and decodes back exactly.
Token 0 is EOS, the document separator; no BOS is added (prompts are plain code).
"""
from __future__ import annotations

import hashlib
import os

from specdec.train.corpus import EOS


def train_tokenizer(texts: list[str], vocab_size: int):
    """A `tokenizers.Tokenizer` with `vocab_size` entries (EOS included)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    if vocab_size < 257 + 1:
        raise ValueError(f"vocab_size={vocab_size}: a byte-level BPE needs at least 258 "
                         "(256 bytes, EOS, one merge)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    if tok.token_to_id(EOS) != 0:
        raise RuntimeError(f"{EOS} got id {tok.token_to_id(EOS)}, expected 0")
    return tok


def save_tokenizer(tok, path: str) -> str:
    """Write tokenizer.json; returns its sha256."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tok.save(path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_tokenizer_file(path: str):
    from tokenizers import Tokenizer
    if not os.path.isfile(path):
        raise ValueError(f"tokenizer {path!r} does not exist (train one with "
                         "`python -m specdec train tokenizer`)")
    return Tokenizer.from_file(path)


def run_tokenizer(args) -> dict:
    """`train tokenizer`: tokenizer.json from the train split, and heldout.json: the
    held-out prompts as token ids, with the Python version and corpus hash they came from."""
    import json
    import time

    from specdec.train.corpus import HELDOUT_EVERY, heldout_prompts, stdlib_corpus
    t0 = time.perf_counter()
    corpus = stdlib_corpus(limit=args.corpus_limit)
    tok = train_tokenizer(corpus.split(False), args.vocab)
    sha = save_tokenizer(tok, args.out)
    held_texts = corpus.split(True)
    prompts = heldout_prompts(tok, texts=held_texts, count=args.prompts, min_len=args.min_len,
                              max_len=args.max_len,
                              seed=args.seed)
    heldout = {"python": corpus.python, "corpus_sha256": corpus.sha256,
               "corpus_files": len(corpus.names), "corpus_bytes": corpus.num_bytes,
               "heldout_rule": f"files whose sorted index % {HELDOUT_EVERY} == 0",
               "heldout_files": len(held_texts), "tokenizer_sha256": sha, "seed": args.seed,
               "prompts": prompts}
    with open(args.heldout, "w", encoding="utf-8") as f:
        json.dump(heldout, f, separators=(",", ":"))
    wall = time.perf_counter() - t0
    print(f"[train tokenizer] vocab={tok.get_vocab_size()} files={len(corpus.names)} "
          f"bytes={corpus.num_bytes} python={corpus.python} corpus_sha256={corpus.sha256} "
          f"tokenizer_sha256={sha} prompts={len(prompts)} wall={wall:.1f}s", flush=True)
    return {"vocab": tok.get_vocab_size(), "tokenizer_sha256": sha, "wall_s": round(wall, 1),
            **{k: v for k, v in heldout.items() if k != "prompts"}}


def tokenized_corpus(tokenizer_path: str, limit: int | None = None):
    """The corpus, its tokenizer, and the train and held-out token streams (EOS between
    files): what `train target` and `train eagle` both start from."""
    from specdec.train.corpus import stdlib_corpus, token_stream
    corpus = stdlib_corpus(limit=limit)
    tok = load_tokenizer_file(tokenizer_path)
    eos_id = tok.token_to_id(EOS)
    return (corpus, tok, token_stream(tok, corpus.split(False), eos_id),
            token_stream(tok, corpus.split(True), eos_id))
