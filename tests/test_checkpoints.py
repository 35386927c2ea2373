"""Loading real checkpoints: tiny random Llama models written by `transformers` (sharded and
not, tied and untied, GQA/MQA, head_dim != hidden/heads, llama3 and linear RoPE scaling) are
loaded by specdec and compared with transformers' own forward and greedy generation; EAGLE
heads round-trip and drive lossless speculative decoding; bad checkpoints fail clearly; the
CLI turns text into text with a local tokenizer.json."""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from harness.references.dense import reference_prefill  # noqa: E402
from specdec import Engine, SpecConfig  # noqa: E402
from specdec.__main__ import main  # noqa: E402
from specdec.loading import load_eagle_head, save_eagle_head  # noqa: E402
from specdec.loading.config import llama_model_config  # noqa: E402
from specdec.model.eagle import EagleHead  # noqa: E402
from specdec.model.llama import LlamaModel  # noqa: E402
from specdec.trace import TraceRecorder  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOL = 1e-4
NEW = 8  # greedy tokens per prompt

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}

# name -> (LlamaConfig kwargs, max_shard_size or None for one file)
CONFIGS = {
    "mha-untied-single": (dict(vocab_size=256, hidden_size=64, intermediate_size=128,
                               num_attention_heads=4, num_key_value_heads=4,
                               rms_norm_eps=1e-6), None),
    "gqa-tied-headdim16of48-sharded": (dict(vocab_size=200, hidden_size=48, intermediate_size=96,
                                            num_attention_heads=4, num_key_value_heads=2,
                                            head_dim=16, tie_word_embeddings=True,
                                            rms_norm_eps=1e-5), "20KB"),
    "llama3rope-mqa-untied-sharded": (dict(vocab_size=300, hidden_size=64, intermediate_size=128,
                                           num_attention_heads=4, num_key_value_heads=1,
                                           rope_theta=50000.0, rope_scaling=LLAMA3), "40KB"),
    "linearrope-tied-single": (dict(vocab_size=128, hidden_size=32, intermediate_size=64,
                                    num_attention_heads=2, num_key_value_heads=1,
                                    tie_word_embeddings=True,
                                    rope_scaling={"rope_type": "linear", "factor": 2.0}), None),
}


def hf_model(seed: int, dtype=torch.float32, **kw):
    """A random LlamaForCausalLM whose every weight (norms included) is seeded noise, scaled so
    that logits are well separated (no near-ties in greedy)."""
    base = dict(num_hidden_layers=2, max_position_embeddings=512, bos_token_id=None,
                eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    cfg = transformers.LlamaConfig(**{**base, **kw})
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1.0 + 0.1 * noise if "norm" in name else noise / p.shape[-1] ** 0.5)
    return model.to(dtype)


def save(model, path, shard=None):
    kw = {} if shard is None else {"max_shard_size": shard}
    model.save_pretrained(str(path), **kw)
    return str(path)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """name -> (directory, transformers model on DEVICE)."""
    out = {}
    for i, (name, (kw, shard)) in enumerate(CONFIGS.items()):
        model = hf_model(10 + i, **kw)
        path = save(model, tmp_path_factory.mktemp(name), shard)
        if shard is not None:
            assert os.path.isfile(os.path.join(path, "model.safetensors.index.json"))
        out[name] = (path, model.to(DEVICE))
    return out


def prompts_for(vocab: int, seed: int = 0, n: int = 3) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(3, 20))] for _ in range(n)]


def hf_logits(model, tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([tokens], device=DEVICE)).logits[0].float()


def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt], device=DEVICE)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=n, min_new_tokens=n)
    return out[0, len(prompt):].tolist()


def engine(path, spec=None, **kw):
    return Engine(model=path, spec=spec, device=DEVICE, dtype=kw.pop("dtype", "float32"), **kw)


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
        assert engine(path, max_batch=3, page_size=page_size).generate(prompts, NEW) == outs


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
        assert len(eng.generate([[1, 2, 3]], 4)[0]) == 4
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


# -- EAGLE heads and standalone drafts ----------------------------------------------------------
def seeded_head(eng: Engine, fc_bias=True, own_embedding=False, seed=1) -> EagleHead:
    head = EagleHead(eng.cfg, eng.target, fc_bias=fc_bias, own_embedding=own_embedding)
    head.init_from_target(seed)
    return head.to(device=eng.device, dtype=eng.dtype)


@pytest.mark.parametrize("fc_bias,own_embedding", [(True, False), (False, True)])
def test_eagle_head_round_trip(ckpts, tmp_path, fc_bias, own_embedding):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    eng = engine(path)
    head = seeded_head(eng, fc_bias, own_embedding)
    save_eagle_head(head, tmp_path / "eagle")
    loaded = load_eagle_head(tmp_path / "eagle", eng.target, eng.device, eng.dtype)
    # The head's config is the target's with one layer (and no tied head of its own).
    assert loaded.cfg == dataclasses.replace(head.cfg, num_layers=1, tie_word_embeddings=False)
    a, b = dict(head.named_parameters()), dict(loaded.named_parameters())
    assert set(a) == set(b) and ("fc.bias" in a) == fc_bias
    assert ("embed_tokens.weight" in a) == own_embedding
    for n in a:
        assert torch.equal(a[n], b[n]), n
    assert torch.equal(head.rope.cos, loaded.rope.cos)


@pytest.fixture(scope="module")
def eagle_dir(ckpts, tmp_path_factory):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    out = tmp_path_factory.mktemp("eagle")
    save_eagle_head(seeded_head(engine(path)), out)
    return str(out)


@pytest.mark.parametrize("topk,steps,ndt,page_size,graph", [
    (1, 3, 4, 1, False), (1, 2, 3, 4, False), (2, 3, 6, 1, False), (4, 2, 8, 4, False),
    (2, 3, 6, 4, True)])
def test_spec_with_loaded_eagle_is_lossless(ckpts, eagle_dir, topk, steps, ndt, page_size, graph):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    prompts = prompts_for(300, seed=5, n=4)
    plain = engine(path, max_batch=4, page_size=page_size).generate(prompts, 16)
    eng = engine(path, SpecConfig(topk, steps, ndt), draft=eagle_dir, max_batch=4,
                 page_size=page_size, cuda_graph=graph, cuda_graph_bs=[1, 2, 4])
    assert isinstance(eng.drafter, EagleHead) and eng.drafter.fc.bias is not None
    saved = safetensors_torch.load_file(os.path.join(eagle_dir, "model.safetensors"))
    assert torch.equal(eng.drafter.fc.bias.cpu(), saved["fc.bias"])  # not re-initialised
    assert eng.generate(prompts, 16) == plain
    eng.check_accounting()
    print(f"\n[eagle topk={topk} steps={steps} ndt={ndt} page={page_size} graph={graph}] "
          f"{eng.stats}")


def test_official_eagle_layout_detected_by_keys(ckpts, tmp_path):
    """An EAGLE-1/2 checkpoint as published: architectures LlamaForCausalLM, `fc.weight`,
    `fc.bias`, its own `embed_tokens.weight`, one layer without input_layernorm."""
    path, _ = ckpts["gqa-tied-headdim16of48-sharded"]
    eng = engine(path)
    out = tmp_path / "official"
    save_eagle_head(seeded_head(eng, own_embedding=True), out)
    with open(out / "config.json") as f:
        raw = json.load(f)
    raw["architectures"] = ["LlamaForCausalLM"]
    (out / "config.json").write_text(json.dumps(raw))
    prompts = prompts_for(200, seed=9)
    spec_eng = engine(path, SpecConfig(2, 3, 6), draft=str(out), max_batch=3)
    assert isinstance(spec_eng.drafter, EagleHead) and spec_eng.drafter.embed_tokens is not None
    assert spec_eng.generate(prompts, 12) == engine(path, max_batch=3).generate(prompts, 12)


def test_standalone_draft_from_llama_dir(ckpts, tmp_path):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    draft_hf = hf_model(99, vocab_size=300, hidden_size=32, intermediate_size=64,
                        num_attention_heads=2, num_key_value_heads=2)
    draft = save(draft_hf, tmp_path / "draft")
    prompts = prompts_for(300, seed=4)
    plain = engine(path, max_batch=3).generate(prompts, 12)
    # A draft narrower than the target (hidden 32 vs 64), eager and through (stand-in) graphs.
    for topk, steps, ndt, graph in [(1, 3, 4, False), (2, 2, 5, False), (2, 2, 5, True)]:
        eng = engine(path, SpecConfig(topk, steps, ndt), draft=draft, max_batch=3,
                     cuda_graph=graph, cuda_graph_bs=[1, 2, 4])
        assert isinstance(eng.drafter, LlamaModel) and eng.drafter.cfg.hidden_size == 32
        assert torch.equal(eng.drafter.embed_tokens.weight.cpu(),
                           draft_hf.model.embed_tokens.weight.detach().cpu())
        assert eng.generate(prompts, 12) == plain
    # The target's own directory as its draft: every draft accepted (no ties at fp32 here).
    eng = engine(path, SpecConfig(1, 3), draft=path, max_batch=3)
    assert eng.generate(prompts, 12) == plain
    assert eng.stats.mean_acceptance_length == 4.0


# -- clear errors -------------------------------------------------------------------------------
def edited_copy(src: str, dst, config=None, tensors=None) -> str:
    """Copy checkpoint `src` (one safetensors file) to dst, editing config.json and tensors."""
    shutil.copytree(src, dst)
    if config is not None:
        with open(os.path.join(dst, "config.json")) as f:
            raw = json.load(f)
        config(raw)
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(raw, f)
    if tensors is not None:
        file = os.path.join(dst, "model.safetensors")
        sd = safetensors_torch.load_file(file)
        tensors(sd)
        safetensors_torch.save_file(sd, file, metadata={"format": "pt"})
    return str(dst)


def test_error_unsupported_architecture(ckpts, tmp_path):
    src, _ = ckpts["mha-untied-single"]
    bad = edited_copy(src, tmp_path / "m", config=lambda c: c.update(
        architectures=["MistralForCausalLM"], model_type="mistral"))
    with pytest.raises(ValueError, match=r"architecture 'MistralForCausalLM' is not supported; "
                                         r"expected one of \['LlamaForCausalLM'\]"):
        engine(bad)
    with pytest.raises(ValueError, match=r"architecture 'MistralForCausalLM'"):
        engine(src, SpecConfig(), draft=bad)


@pytest.mark.parametrize("edit,pattern", [
    (lambda c: c.update(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}),
     r"rope_type='yarn' is not supported; expected one of \['default', 'linear', 'llama3'\]"),
    (lambda c: c.update(hidden_act="gelu"), r"hidden_act='gelu' is not supported"),
    (lambda c: c.update(attention_bias=True), r"attention_bias=true is not supported"),
    (lambda c: c.pop("intermediate_size"), r"lacks 'intermediate_size'"),
])
def test_error_unsupported_config(ckpts, tmp_path, edit, pattern):
    src, _ = ckpts["mha-untied-single"]
    with pytest.raises(ValueError, match=pattern):
        engine(edited_copy(src, tmp_path / "m", config=edit))


def test_error_missing_and_unexpected_tensors(ckpts, tmp_path):
    src, _ = ckpts["mha-untied-single"]
    missing = edited_copy(src, tmp_path / "a",
                          tensors=lambda sd: sd.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ValueError, match=r"missing tensors \['model.layers.1.mlp.up_proj.weight'\]"):
        engine(missing)
    extra = edited_copy(src, tmp_path / "b", tensors=lambda sd: sd.update(
        {"model.layers.0.self_attn.q_proj.bias": torch.zeros(64)}))
    with pytest.raises(ValueError, match=r"unexpected tensors \['model.layers.0.self_attn.q_proj.bias'\]"):
        engine(extra)
    untied_without_head = edited_copy(src, tmp_path / "c", tensors=lambda sd: sd.pop("lm_head.weight"))
    with pytest.raises(ValueError, match=r"missing tensors \['lm_head.weight'\]"):
        engine(untied_without_head)
    # A sharded checkpoint whose index names a shard that is gone.
    sharded, _ = ckpts["gqa-tied-headdim16of48-sharded"]
    gone = tmp_path / "d"
    shutil.copytree(sharded, gone)
    shard = sorted(p for p in os.listdir(gone) if p.endswith(".safetensors"))[0]
    os.remove(gone / shard)
    with pytest.raises(ValueError, match=rf"maps '.*' to '{shard}', which is missing"):
        engine(str(gone))


def test_error_shape_mismatch_checkpoint_vs_config(ckpts, tmp_path):
    src, _ = ckpts["mha-untied-single"]
    bad = edited_copy(src, tmp_path / "m", config=lambda c: c.update(intermediate_size=96))
    with pytest.raises(ValueError, match=r"shape mismatch between checkpoint and config: "
                                         r"'model.layers.0.mlp.down_proj.weight' has shape "
                                         r"\[64, 128\], config.json implies \[64, 96\]"):
        engine(bad)


def test_error_draft_target_mismatch(ckpts, tmp_path):
    target, _ = ckpts["gqa-tied-headdim16of48-sharded"]      # hidden 48, vocab 200
    other, _ = ckpts["mha-untied-single"]                    # hidden 64, vocab 256
    wide = tmp_path / "wide"
    save_eagle_head(seeded_head(engine(other)), wide)
    with pytest.raises(ValueError, match=r"EAGLE head hidden_size=64 but the target's "
                                         r"hidden_size=48: they must match"):
        engine(target, SpecConfig(), draft=str(wide))
    same_hidden = tmp_path / "vocab"
    save_eagle_head(seeded_head(engine(target)), same_hidden)
    edited = edited_copy(str(same_hidden), tmp_path / "vocab2",
                         config=lambda c: c.update(vocab_size=256))
    with pytest.raises(ValueError, match=r"draft vocab_size=256 but the target's vocab_size=200"):
        engine(target, SpecConfig(), draft=edited)
    with pytest.raises(ValueError, match=r"draft vocab_size=256 but the target's vocab_size=200"):
        engine(target, SpecConfig(), draft=other)  # a standalone Llama draft
    with pytest.raises(ValueError, match=r"is an EAGLE head, not a target model"):
        engine(str(same_hidden))
    three = edited_copy(str(same_hidden), tmp_path / "l3", tensors=lambda sd: sd.update(
        {"midlayer.self_attn.q_proj.weight": torch.zeros(1)}))
    with pytest.raises(ValueError, match=r"unexpected tensors \['midlayer.self_attn.q_proj.weight'\] "
                                         r"\(this looks like an EAGLE-3 head"):
        engine(target, SpecConfig(), draft=three)


def test_error_paths(tmp_path):
    with pytest.raises(ValueError, match=r"unknown model shape '/no/such/dir'.*or a checkpoint directory"):
        Engine(model="/no/such/dir")
    with pytest.raises(ValueError, match=r"has no config.json"):
        Engine(model=str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(ValueError, match=r"lacks 'hidden_size'"):
        Engine(model=str(tmp_path))


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
    expected = tok.decode(engine(str(model_dir)).generate([ids], 6)[0])
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
