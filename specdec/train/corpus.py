"""The corpus: the Python standard library's own *.py source, on every machine with Python.

Selection (fixed, deterministic for a given Python build): every *.py file under
sysconfig's stdlib directory, walked in sorted order, except site-packages / dist-packages
(third-party code that differs per machine), __pycache__, files over MAX_FILE_BYTES (a few
generated data tables, e.g. pydoc_data/topics.py: English text, not code) and files that are
not UTF-8 (a few deliberately mis-encoded test inputs). The test suite is kept: it is about
half of the stdlib's code and the corpus is small enough that the extra data matters more
than its style. Held out for evaluation: the files whose sorted index is a multiple of
HELDOUT_EVERY, split by file so no held-out line is ever trained on.

The stdlib's bytes differ between Python versions, so a trained fixture records the Python
version and corpus_sha256 it was made from, and commits its held-out prompts as token ids.
"""
from __future__ import annotations

import hashlib
import os
import random
import sys
import sysconfig
from dataclasses import dataclass

import torch

MAX_FILE_BYTES = 512 * 1024
HELDOUT_EVERY = 10
SKIP_DIRS = ("site-packages", "dist-packages", "__pycache__")
EOS = "<|endoftext|>"  # the document separator, token id 0


@dataclass
class Corpus:
    root: str
    python: str
    names: list[str]   # relative paths, sorted
    texts: list[str]
    sha256: str        # over (name, bytes) of every selected file, in order

    def split(self, heldout: bool) -> list[str]:
        return [t for i, t in enumerate(self.texts) if (i % HELDOUT_EVERY == 0) == heldout]

    @property
    def num_bytes(self) -> int:
        return sum(len(t.encode("utf-8")) for t in self.texts)


def stdlib_corpus(root: str | None = None, limit: int | None = None) -> Corpus:
    """The selected files under `root` (default: this Python's stdlib). `limit`: only the first
    `limit` files (tiny CPU runs; such a corpus has its own sha256)."""
    root = root or sysconfig.get_paths()["stdlib"]
    if not os.path.isdir(root):
        raise ValueError(f"corpus root {root!r} is not a directory")
    names, texts, digest = [], [], hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            if os.path.islink(path) or os.path.getsize(path) > MAX_FILE_BYTES:
                continue
            with open(path, "rb") as fh:
                raw = fh.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            name = os.path.relpath(path, root).replace(os.sep, "/")
            names.append(name)
            texts.append(text)
            digest.update(name.encode() + b"\0" + raw + b"\0")
            if limit is not None and len(names) >= limit:
                break
        if limit is not None and len(names) >= limit:
            break
    if not names:
        raise ValueError(f"no *.py files found under {root!r}")
    python = ".".join(map(str, sys.version_info[:3]))
    return Corpus(root, python, names, texts, digest.hexdigest())


def token_stream(codec, texts: list[str], eos_id: int) -> torch.Tensor:
    """All texts encoded and joined, each followed by EOS: int64 [N]."""
    ids: list[int] = []
    for enc in codec.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.int64)


def sample_windows(stream: torch.Tensor, batch: int, length: int,
                   gen: torch.Generator) -> torch.Tensor:
    """[batch, length] windows at seeded random offsets of the stream."""
    if stream.numel() <= length:
        raise ValueError(f"the token stream has {stream.numel()} tokens, fewer than a window "
                         f"of {length}: use a shorter --seq-len or a larger corpus")
    starts = torch.randint(0, stream.numel() - length, (batch,), generator=gen)
    return torch.stack([stream[s:s + length] for s in starts.tolist()])


def fixed_windows(stream: torch.Tensor, count: int, length: int) -> torch.Tensor:
    """Up to `count` disjoint [length] windows from the stream's start (held-out loss)."""
    n = min(count, stream.numel() // length)
    if n == 0:
        raise ValueError(f"the held-out stream has {stream.numel()} tokens, fewer than one "
                         f"window of {length}")
    return stream[:n * length].view(n, length)


def heldout_prompts(codec, *, texts: list[str], count: int, min_len: int, max_len: int,
                    seed: int, passes: int = 8) -> list[list[int]]:
    """`count` prompts of min_len .. max_len tokens from the held-out files: the files in a
    seeded order, each prompt starting at a seeded line start of its file; a small held-out
    split is walked again (up to `passes` times, new starts) until `count` are found."""
    rng = random.Random(seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    prompts: list[list[int]] = []
    for _ in range(passes):
        for i in order:
            want = rng.randint(min_len, max_len)
            lines = texts[i].splitlines(keepends=True)
            start = rng.randrange(max(1, len(lines) // 2))
            ids = codec.encode("".join(lines[start:])).ids
            if len(ids) >= want:
                prompts.append(ids[:want])
            if len(prompts) == count:
                return prompts
    raise ValueError(f"only {len(prompts)} prompts of {min_len}..{max_len} tokens found in "
                     f"{len(texts)} held-out files; {count} were asked for")
