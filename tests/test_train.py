"""Training (specdec/train) and the committed trained pair (specdec/fixtures/pystdlib): the
tokenizer round trip, seeded determinism of both runs, the saved checkpoints read back by the
engine's loaders with the training forward's logits, and the fixture generating through
Engine(model=target, draft=eagle) with a measured accept length. CPU, tiny settings."""
from __future__ import annotations

import argparse
import json

import pytest
import torch

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

from specdec import Engine, SpecConfig  # noqa: E402
from specdec.fixtures import PYSTDLIB, trained_pair_paths  # noqa: E402
from specdec.loading import is_eagle_dir, load_eagle_head, load_llama, load_tokenizer  # noqa: E402
from specdec.trace import TraceRecorder  # noqa: E402
from specdec.train.corpus import EOS, stdlib_corpus  # noqa: E402
from specdec.train.dense import head_unroll, logits_of, target_hidden, unroll_mask  # noqa: E402
from specdec.train.eagle import train_eagle  # noqa: E402
from specdec.train.target import train_target  # noqa: E402
from specdec.train.tokenizer import save_tokenizer, train_tokenizer  # noqa: E402

FILES = 12  # the first stdlib files: enough text for a 300-token BPE and a few windows


def loop_args(out, seed, **kw):
    base = dict(out=str(out), steps=3, time_budget=None, batch=2, seq_len=32, eval_every=3,
                eval_windows=2, compile=False, seed=seed, device="cpu", dtype="float32",
                corpus_limit=FILES, warmup=2, lr=3e-3)
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory):
    corpus = stdlib_corpus(limit=FILES)
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer.json")
    save_tokenizer(train_tokenizer(corpus.split(False), 300), path)
    return path


def target_args(out, tok, seed):
    return loop_args(out, seed, tokenizer=tok, hidden=32, layers=2, heads=2, kv_heads=1,
                     intermediate=64, max_position=2048)


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory, tok_path):
    out = tmp_path_factory.mktemp("target")
    train_target(target_args(out, tok_path, 0))
    return str(out)


def test_tokenizer_round_trip(tok_path):
    """Byte-level BPE: any text (code, unicode, odd whitespace) decodes back exactly; EOS is
    id 0; the engine's TextCodec reads the file."""
    codec = load_tokenizer(tok_path)
    assert codec.vocab_size == 300 and codec._tok.token_to_id(EOS) == 0
    held = stdlib_corpus(limit=FILES).split(True)[0][:2000]
    for text in (held, "def f(x):\n\treturn x ** 2  # café ✓\r\n", "   \n\n"):
        assert codec.decode(codec.encode(text)) == text
    with pytest.raises(ValueError, match="needs at least 258"):
        train_tokenizer(["x"], 100)


def test_target_training_is_deterministic(tmp_path, tok_path, tiny_target):
    """Same seed -> bit-identical weights after a few steps; another seed -> other weights."""
    def weights(path):
        return {n: p.float() for n, p in load_llama(path, "cpu", torch.float32).state_dict().items()}
    again, other = tmp_path / "again", tmp_path / "other"
    train_target(target_args(again, tok_path, 0))
    train_target(target_args(other, tok_path, 1))
    a, b, c = weights(tiny_target), weights(str(again)), weights(str(other))
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert not all(torch.equal(a[n], c[n]) for n in a)


def test_saved_target_gives_the_training_forward_logits(tiny_target):
    """The checkpoint, loaded by specdec's loader into the paged engine, gives the dense
    training forward's logits (fp32) at the prefill's last row and every decode step."""
    eng = Engine(model=tiny_target, spec=None, device="cpu", dtype="float32", max_context=128)
    eng.recorder = TraceRecorder(page_size=1, keep_kv_slots=False)
    prompts = [[5, 17, 42, 99, 7, 3, 250], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]]
    outs = eng.generate(prompts, max_new_tokens=5)
    model = load_llama(tiny_target, "cpu", torch.float32)
    for i, (p, o) in enumerate(zip(prompts, outs)):
        with torch.no_grad():
            dense = logits_of(model, target_hidden(model, torch.tensor([p + o[:-1]])))[0]
        paged = torch.stack([f.logits[i] for f in eng.recorder.prefill])
        assert (paged - dense[len(p) - 1:]).abs().max().item() < 1e-4


def test_eagle_training_is_deterministic_and_loads(tmp_path, tok_path, tiny_target):
    """The head trains deterministically, saves in the EAGLE-1/2 layout, and the engine's
    loader reads it back with the same weights (bf16 as stored)."""
    def run(name, seed):
        args = loop_args(tmp_path / name, seed, tokenizer=tok_path, target=tiny_target,
                         unroll=2, w_feat=1.0, w_tok=0.5)
        train_eagle(args)
        return str(tmp_path / name)
    a, b = run("a", 0), run("b", 0)
    assert is_eagle_dir(a)
    target = load_llama(tiny_target, "cpu", torch.float32)
    ha, hb = (load_eagle_head(p, target, "cpu", torch.float32).state_dict() for p in (a, b))
    assert all(torch.equal(ha[n], hb[n]) for n in ha)


def test_unroll_mask_sees_what_draft_decode_sees():
    """Depth s, row p: the draft-extend keys at positions <= p-s, then exactly one key per
    later depth j at position p-s+j (its ancestors and itself); depth 0 is causal."""
    n = 6
    assert torch.equal(unroll_mask(n, 0, "cpu"), torch.ones(n, n).tril().bool())
    m = unroll_mask(n, 2, "cpu")
    p = 4
    assert m[p, :n].nonzero().flatten().tolist() == [0, 1, 2]
    assert m[p, n:2 * n].nonzero().flatten().tolist() == [3]
    assert m[p, 2 * n:].nonzero().flatten().tolist() == [4]


def test_fixture_contract():
    target, eagle, tok, heldout = trained_pair_paths()
    assert target.startswith(PYSTDLIB) and is_eagle_dir(eagle)
    data = json.load(open(heldout, encoding="utf-8"))
    assert data["python"].startswith("3.") and len(data["corpus_sha256"]) == 64
    prompts = data["prompts"]
    assert len(prompts) == 64 and all(64 <= len(p) <= 256 for p in prompts)
    assert load_tokenizer(tok).vocab_size == 4096


def test_fixture_generates_and_drafts_well(capsys):
    """The committed pair loads through Engine(model=target, draft=eagle) on CPU (fp32), its
    greedy tokens are the dense target's, and its mean accept length on 4 held-out prompts
    is printed (a measurement, not asserted beyond > 1: a trained head accepts something)."""
    target, eagle, _, heldout = trained_pair_paths()
    prompts = [p[:64] for p in json.load(open(heldout, encoding="utf-8"))["prompts"][:4]]
    eng = Engine(model=target, draft=eagle, spec=SpecConfig(topk=1, num_steps=3,
                                                            num_draft_tokens=4), device="cpu",
                 dtype="float32", max_context=128, max_batch=4)
    new = 12
    outs = eng.generate(prompts, max_new_tokens=new)
    model = load_llama(target, "cpu", torch.float32)
    ids = torch.tensor(prompts)
    with torch.no_grad():
        for _ in range(new):
            nxt = logits_of(model, target_hidden(model, ids)[:, -1]).argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    assert outs == ids[:, 64:].tolist()
    with capsys.disabled():
        print(f"\n[pystdlib fixture, CPU fp32] chain (1,3,4) on 4 held-out prompts: {eng.stats}")
    assert eng.stats.mean_acceptance_length > 1.0


def test_head_unroll_is_what_the_engine_drafts(monkeypatch):
    """The training unroll computes the engine's draft forwards: depth 0 over the prompt is the
    draft extend (every row), depth 1 at the bonus position and depth 2 after it are draft
    decode forwards 0 and 1 of the first round (chain), fed the candidates the engine drew.
    Fails if the shift, the feature feedback or the unroll mask differ from drafting."""
    target_dir, eagle_dir, _, heldout = trained_pair_paths()
    p = json.load(open(heldout, encoding="utf-8"))["prompts"][1][:32]
    eng = Engine(model=target_dir, draft=eagle_dir, spec=SpecConfig(topk=1, num_steps=3,
                                                                    num_draft_tokens=4),
                                                                    device="cpu",
                 dtype="float32", max_context=96, max_batch=1)
    eng.recorder = TraceRecorder(page_size=1, keep_kv_slots=False)
    eng.generate([p], max_new_tokens=4)
    extend = [f for f in eng.recorder.prefill if f.mode == "draft_extend"][0]
    rnd = eng.recorder.rounds[0]
    decode = [f for f in rnd.forwards if f.mode == "draft_decode"]
    bonus = [f for f in rnd.forwards if f.mode == "target_verify"][0].input_ids[0].item()
    ids = torch.tensor([p + [bonus] + [f.input_ids[0].item() for f in decode]])
    target = load_llama(target_dir, "cpu", torch.float32)
    head = load_eagle_head(eagle_dir, target, "cpu", torch.float32)
    with torch.no_grad():
        outs = head_unroll(head, ids, target_hidden(target, ids), 3)
    n = len(p)
    assert (outs[0][0, :n] - extend.hidden).abs().max().item() < 1e-4
    for s, f in enumerate(decode, start=1):
        assert f.positions.tolist() == [n + s - 1]
        assert (outs[s][0, n + s - 1] - f.hidden[0]).abs().max().item() < 1e-4
    # Negative control: depth s attending causally over the draft-extend keys (HASS's mask
    # left out: the row sees the extend keys at its ancestors' positions) is another forward.
    import specdec.train.dense as dense
    monkeypatch.setattr(dense, "unroll_mask", lambda n, s, device: torch.cat(
        [torch.ones(n, n, dtype=torch.bool, device=device).tril()]
        + [torch.eye(n, dtype=torch.bool, device=device)] * s, dim=1))
    with torch.no_grad():
        wrong = dense.head_unroll(head, ids, target_hidden(target, ids), 3)
    assert (wrong[1][0, n] - decode[0].hidden[0]).abs().max().item() > 1e-2
