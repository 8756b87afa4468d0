"""A model's random-init twin: the same config and tokenizer, new weights, the same bytes from the same seed."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from tiny import save_tiny_model
from transformers import AutoConfig, AutoTokenizer

from entropy_lens.model.digest import model_files, sha256_file, source_sha256
from entropy_lens.model.loading import SOURCE_FILE, load_model
from entropy_lens.model.twin import TWIN_INIT, build_twin, is_twin


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A tiny Qwen2 (tied embeddings) saved like a materialized model, with a generation config."""
    folder = save_tiny_model("qwen2", tmp_path_factory.mktemp("src") / "tiny-qwen2", family="qwen")
    meta = json.loads((folder / SOURCE_FILE).read_text())
    (folder / SOURCE_FILE).write_text(json.dumps({**meta, "name": "tiny-qwen2", "sha256": "abc"}))
    return folder


def _weights(folder):
    return load_file(folder / "model.safetensors")


def test_twin_keeps_config_and_tokenizer_and_draws_new_weights(source, tmp_path):
    twin = build_twin(source, tmp_path / "twin", seed=3)
    keep = ("_name_or_path", "transformers_version", "dtype")
    a, b = (AutoConfig.from_pretrained(f).to_dict() for f in (source, twin))
    assert {k: v for k, v in a.items() if k not in keep} == {k: v for k, v in b.items() if k not in keep}
    tok_a, tok_b = (AutoTokenizer.from_pretrained(f) for f in (source, twin))
    assert tok_a.get_vocab() == tok_b.get_vocab()
    assert tok_a.chat_template == tok_b.chat_template
    text = "once upon a time the cat ran"
    assert tok_a(text).input_ids == tok_b(text).input_ids
    trained, drawn = _weights(source), _weights(twin)
    assert set(trained) == set(drawn)  # the same tensors (tied embeddings stored once in both)
    differ = [k for k in trained if trained[k].shape == drawn[k].shape and not torch.equal(trained[k], drawn[k])]
    matrices = [k for k in trained if trained[k].ndim == 2]
    assert set(matrices) <= set(differ), "every weight matrix is drawn anew"
    model = load_model(twin, device="cpu", dtype="float32").model
    assert model.config.tie_word_embeddings
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_twin_provenance(source, tmp_path):
    twin = build_twin(source, tmp_path / "twin", seed=3)
    meta = json.loads((twin / SOURCE_FILE).read_text())
    assert meta["twin_of"] == "tiny-qwen2" and meta["twin_of_sha256"] == "abc"
    assert meta["seed"] == 3 and meta["init"] == TWIN_INIT and meta["family"] == "qwen"
    assert meta["sha256"] == source_sha256(twin)  # its own content hash, the provenance record left out
    assert is_twin(twin) and not is_twin(source)
    lm = load_model(twin, device="cpu", dtype="float32")
    assert lm.family == "qwen" and lm.sha256 == meta["sha256"]


def test_same_seed_same_bytes_other_seed_other_weights(source, tmp_path):
    first = build_twin(source, tmp_path / "a" / "twin", seed=7)
    again = build_twin(source, tmp_path / "b" / "elsewhere", seed=7)
    other = build_twin(source, tmp_path / "c" / "twin", seed=8)
    files = model_files(first)
    assert files == model_files(again)
    assert all(sha256_file(first / f) == sha256_file(again / f) for f in files)
    assert sha256_file(first / "model.safetensors") != sha256_file(other / "model.safetensors")
    a, c = _weights(first), _weights(other)
    assert not any(torch.equal(a[k], c[k]) for k in a if a[k].ndim == 2)


def test_twin_leaves_the_global_generator_alone(source, tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_twin(source, tmp_path / "twin", seed=1)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_twin_refuses_a_bad_seed(source, tmp_path, seed):
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        build_twin(source, tmp_path / "twin", seed=seed)


def test_a_model_that_is_itself_a_seeded_random_init_is_not_its_own_twin(source, tmp_path, monkeypatch):
    """The tiny source is ``torch.manual_seed(0)``'s init of its config: the seed-0 twin still draws other weights
    (its generator is seeded from a hash of the seed), and a twin that would equal its source is refused."""
    from entropy_lens.model import twin as twin_module

    drawn, trained = _weights(build_twin(source, tmp_path / "zero", seed=0)), _weights(source)
    assert any(not torch.equal(drawn[k], trained[k]) for k in trained)
    monkeypatch.setattr(twin_module, "generator_seed", lambda seed: seed)  # the plain seed: the source comes back
    with pytest.raises(ValueError, match=r"has its model's own weights .* set twins\.seed"):
        build_twin(source, tmp_path / "same", seed=0)
    assert not (tmp_path / "same").exists()
