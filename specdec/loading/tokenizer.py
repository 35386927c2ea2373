"""Text in, text out: a `tokenizers` tokenizer from a local tokenizer.json."""
from __future__ import annotations

import os

TOKENIZER_FILE = "tokenizer.json"


def has_tokenizer(path: str | os.PathLike) -> bool:
    return os.path.isfile(os.path.join(os.fspath(path), TOKENIZER_FILE))


class TextCodec:
    """encode(text) -> token ids (special tokens as the tokenizer's post-processor adds them,
    e.g. Llama's BOS); decode(ids) -> text without special tokens."""

    def __init__(self, path: str | os.PathLike) -> None:
        from tokenizers import Tokenizer
        path = os.fspath(path)
        file = path if os.path.isfile(path) else os.path.join(path, TOKENIZER_FILE)
        if not os.path.isfile(file):
            raise ValueError(f"tokenizer {path!r}: no {TOKENIZER_FILE} there (expected a "
                             "directory holding a `tokenizers` tokenizer.json)")
        self.path = file
        self._tok = Tokenizer.from_file(file)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text).ids)

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


def load_tokenizer(path: str | os.PathLike) -> TextCodec:
    return TextCodec(path)
