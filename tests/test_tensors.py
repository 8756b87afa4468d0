"""Tensor artifacts refuse a flipped byte: every single-bit flip of a small file, anywhere in it, is refused by
name, and `entropy-lens verify` names a damaged lens file."""

from __future__ import annotations

import pytest
import torch

from entropy_lens.store.manifest import MANIFEST, write_manifest
from entropy_lens.store.tensors import DIGEST_KEY, DamagedTensorsError, load_tensors, save_tensors
from entropy_lens.store.verify import verify

TENSORS = {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "bias": torch.tensor([0.5, -1.0, 2.0])}
META = {"entropy_lens_translators": '{"kind": "linear", "provenance": {"corpus": "words"}}'}


def test_a_saved_file_reads_back_whole(tmp_path):
    path = save_tensors(TENSORS, tmp_path / "lens.safetensors", META)
    tensors, metadata = load_tensors(path)
    assert metadata == META and all(torch.equal(tensors[k], TENSORS[k]) for k in TENSORS)
    assert not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(ValueError, match="reserved for the checksum"):
        save_tensors(TENSORS, tmp_path / "x.safetensors", {DIGEST_KEY: "0"})


def test_every_bit_flip_anywhere_in_the_file_is_refused(tmp_path):
    path = save_tensors(TENSORS, tmp_path / "lens.safetensors", META)
    whole = path.read_bytes()
    for position in range(len(whole)):
        for bit in (0, 7):
            damaged = bytearray(whole)
            damaged[position] ^= 1 << bit
            path.write_bytes(bytes(damaged))
            with pytest.raises(DamagedTensorsError, match=r"file .*lens.safetensors is damaged: .*snakemake --force"):
                load_tensors(path)
    path.write_bytes(whole[:-1])
    with pytest.raises(DamagedTensorsError, match=r"lens\.safetensors is damaged"):
        load_tensors(path)


def test_a_file_without_a_checksum_is_refused(tmp_path):
    from safetensors.torch import save_file

    save_file(TENSORS, str(tmp_path / "plain.safetensors"), metadata=META)
    with pytest.raises(DamagedTensorsError, match="records no checksum"):
        load_tensors(tmp_path / "plain.safetensors")


def test_verify_names_a_damaged_lens_file(tmp_path):
    (tmp_path / "lenses" / "m").mkdir(parents=True)
    path = save_tensors(TENSORS, tmp_path / "lenses" / "m" / "linear.safetensors", META)
    write_manifest(tmp_path / MANIFEST, ["results/lenses/m/linear.safetensors"])
    report = verify(tmp_path)
    assert report.whole and report.tables == 1
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10  # inside the bias
    path.write_bytes(bytes(data))
    report = verify(tmp_path)
    assert not report.whole
    checksum, recorded = report.findings  # the file's own checksum, then the sha256 the run's manifest recorded
    assert checksum.path == recorded.path == str(path) and "does not match the checksum" in checksum.why
    assert "the run recorded when it wrote it" in recorded.why
