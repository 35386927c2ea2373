"""Loading real checkpoints written by `transformers`: specdec's forward and greedy generation
against transformers' own, the weights and dtypes as stored, both config layouts; and the CLI
turning text into text with a local tokenizer.json."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from checkpoint_models import (CONFIGS, DEVICE, LLAMA3, ckpts, eagle_dir,  # noqa: E402,F401
                               engine, hf_model, prompts_for, save)
from harness.references.dense import reference_prefill  # noqa: E402
from specdec.__main__ import main  # noqa: E402
from specdec.loading.config import llama_model_config  # noqa: E402
from specdec.trace import TraceRecorder  # noqa: E402

TOL = 1e-4
NEW = 8  # greedy tokens per prompt


def hf_logits(model, tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([tokens], device=DEVICE)).logits[0].float()


def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt], device=DEVICE)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=n, min_new_tokens=n)
    return out[0, len(prompt):].tolist()


# -- logits and greedy tokens against transformers ----------------------------------------------
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_and_greedy_match_transformers(ckpts, name):
    path, hf = ckpts[name]
    vocab = hf.config.vocab_size
    eng = engine(path, max_batch=3)
    assert (eng.target.lm_head is None) == hf.config.tie_word_embeddings
    prompts = prompts_for(vocab, seed=len(name))
    eng.recorder = TraceRecorder(page_size=1, keep_kv_slots=False)
    outs = eng.generate(prompts, max_new_tokens=NEW)
    forwards = eng.recorder.prefill  # with spec=None: the prefill, then NEW-1 decode steps
    assert [f.mode for f in forwards] == ["extend"] + ["decode"] * (NEW - 1)

    prefill_diff = decode_diff = 0.0
    for i, (p, out) in enumerate(zip(prompts, outs)):
        ref = hf_logits(hf, p + out[:-1])
        # Every prompt position, dense attention over the loaded weights.
        dense, _, _, _ = reference_prefill(eng.target, p, eng.device)
        prefill_diff = max(prefill_diff, (dense - ref[:len(p)]).abs().max().item())
        # The engine's own paged path: the prefill's last row, then each decode step.
        paged = torch.stack([f.logits[i] for f in forwards]).to(DEVICE)
        decode_diff = max(decode_diff, (paged - ref[len(p) - 1:]).abs().max().item())
        assert out == hf_greedy(hf, p, NEW), f"prompt {i}"
    scale = hf_logits(hf, prompts[0]).abs().max().item()
    print(f"\n[{name}] max |logit diff| vs transformers: prefill (all positions) "
          f"{prefill_diff:.2e}, paged prefill+{NEW - 1} decode steps {decode_diff:.2e} "
          f"(|logits| up to {scale:.1f})")
    assert prefill_diff < TOL and decode_diff < TOL

    # Other page sizes, batched and ragged: the same tokens.
    for page_size in (4, 16):
        assert engine(path, max_batch=3, page_size=page_size).generate(prompts, max_new_tokens=NEW) == outs


def test_weights_loaded_not_reinitialised(ckpts):
    path, hf = ckpts["mha-untied-single"]
    ref = {n.removeprefix("model."): p.detach().cpu() for n, p in hf.named_parameters()}
    for seed in (0, 123):
        got = dict(engine(path, seed=seed).target.named_parameters())
        assert set(got) == set(ref)
        for n, p in got.items():
            assert torch.equal(p.cpu(), ref[n]), n


def test_dtype_conversion_on_load(ckpts, tmp_path):
    path, hf = ckpts["gqa-tied-headdim16of48-sharded"]
    ref = {n.removeprefix("model."): p.detach().cpu() for n, p in hf.named_parameters()}
    for dtype, torch_dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        eng = engine(path, dtype=dtype)
        for n, p in eng.target.named_parameters():
            assert p.dtype == torch_dtype and torch.equal(p.cpu(), ref[n].to(torch_dtype)), n
        assert len(eng.generate([[1, 2, 3]], max_new_tokens=4)[0]) == 4
    # A bf16 checkpoint read as float32.
    bf16 = save(hf_model(3, dtype=torch.bfloat16, **CONFIGS["mha-untied-single"][0]), tmp_path / "bf")
    src = safetensors_torch.load_file(os.path.join(bf16, "model.safetensors"))
    got = dict(engine(bf16).target.named_parameters())
    for n, t in src.items():
        assert t.dtype == torch.bfloat16
        assert got[n.removeprefix("model.")].dtype == torch.float32
        assert torch.equal(got[n.removeprefix("model.")].cpu(), t.float()), n


def test_config_layouts_agree(ckpts):
    """transformers 5's rope_parameters and transformers 4's rope_theta + rope_scaling parse the
    same; defaults follow LlamaConfig."""
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    with open(os.path.join(path, "config.json")) as f:
        raw = json.load(f)
    v5 = llama_model_config(raw, "v5")
    legacy = {k: v for k, v in raw.items() if k != "rope_parameters"}
    legacy.update(rope_theta=50000.0,  # transformers 4 style, and the older "type" key
                  rope_scaling={**{k: v for k, v in LLAMA3.items() if k != "rope_type"},
                                "type": "llama3"})
    assert llama_model_config(legacy, "v4") == v5
    assert v5.rope_theta == 50000.0 and v5.rope_scaling["rope_type"] == "llama3"
    assert v5.num_kv_heads == 1 and v5.head_dim == 16 and not v5.tie_word_embeddings
    minimal = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 1,
               "num_attention_heads": 4, "vocab_size": 50}
    cfg = llama_model_config(minimal, "min")
    assert (cfg.num_kv_heads, cfg.head_dim, cfg.rms_norm_eps, cfg.rope_theta, cfg.rope_scaling,
            cfg.max_position) == (4, 16, 1e-6, 10000.0, None, 2048)


# -- text in, text out --------------------------------------------------------------------------
def word_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def test_cli_text_in_text_out(ckpts, eagle_dir, tmp_path, capsys):
    src, _ = ckpts["llama3rope-mqa-untied-sharded"]
    model_dir = tmp_path / "model"
    shutil.copytree(src, model_dir)
    tok = word_tokenizer(300)
    tok.save(str(model_dir / "tokenizer.json"))
    text = "w5 w17 w250 w3 w99"
    ids = tok.encode(text).ids
    expected = tok.decode(engine(str(model_dir)).generate([ids], max_new_tokens=6)[0])
    common = ["--device", DEVICE, "--max-new-tokens", "6", "--prompt", text]
    assert main(["generate", "--model", str(model_dir), "--no-spec", *common]) == 0
    assert main(["generate", "--model", str(model_dir), "--draft", eagle_dir, "--topk", "2",
                 "--steps", "3", "--ndt", "6", *common]) == 0
    # --tokenizer elsewhere, the model directory without one.
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    tok.save(str(tok_dir / "tokenizer.json"))
    assert main(["generate", "--model", src, "--tokenizer", str(tok_dir), "--no-spec", *common]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "->" in line]
    print("\n" + "\n".join(lines))
    assert lines == [f"{text} -> {expected}"] * 3
    assert len(expected.split()) == 6
    # Without a tokenizer, prompts stay token ids.
    assert main(["generate", "--model", src, "--no-spec", *common[:-1], "5 17 250"]) == 0
    assert "5 17 250 -> " in capsys.readouterr().out
