"""Provenance of local model sources: a folder's weights, config and tokenizer hashed into its stores."""

import json

from tiny import save_tiny_model

from entropy_lens import load_model
from entropy_lens.model import digest
from entropy_lens.model.loading import SOURCE_FILE, materialize_model, read_source


def _user_folder(tmp_path):
    """A tiny model folder as a user saves it: no provenance record of ours."""
    folder = save_tiny_model("llama", tmp_path / "mine", "llama")
    (folder / SOURCE_FILE).unlink()
    return folder


def test_a_local_folder_is_hashed_into_the_materialized_copy_and_the_model(tmp_path):
    folder = _user_folder(tmp_path)
    expected = digest.source_sha256(folder)
    assert len(expected) == 64
    assert load_model(folder, device="cpu", dtype="float32").sha256 == expected
    out = materialize_model(str(folder), tmp_path / "materialized")
    assert read_source(out)["sha256"] == expected  # extraction reads it from here into model_sha256


def test_new_weights_config_or_tokenizer_change_the_hash(tmp_path):
    folder = _user_folder(tmp_path)
    names = [p.as_posix() for p in digest.model_files(folder)]
    assert "config.json" in names and any(n.endswith(".safetensors") for n in names)
    before = digest.source_sha256(folder)
    weights = next(folder.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    after_weights = digest.source_sha256(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-3}))
    assert len({before, after_weights, digest.source_sha256(folder)}) == 3


def test_the_cache_hashes_a_file_again_only_when_it_changes(tmp_path, monkeypatch):
    folder = _user_folder(tmp_path)
    cache = tmp_path / "hashes.json"
    hashed = []
    real = digest.sha256_file
    monkeypatch.setattr(digest, "sha256_file", lambda path: hashed.append(path) or real(path))
    first = digest.source_sha256(folder, cache=cache)
    n_files = len(digest.model_files(folder))
    assert len(hashed) == n_files
    assert digest.source_sha256(folder, cache=cache) == first and len(hashed) == n_files  # nothing hashed again
    (folder / "config.json").write_text((folder / "config.json").read_text() + " ")
    assert digest.source_sha256(folder, cache=cache) != first and len(hashed) == n_files + 1
    cache.write_text("{torn")  # a damaged cache is read as empty, never trusted
    assert digest.source_sha256(folder, cache=cache) != first
