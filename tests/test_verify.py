"""`entropy-lens verify`: every store read to its last chunk, every table parsed, DVC's hashes checked."""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest
import yaml
from tiny import tiny_model

from entropy_lens import cli, extract_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.store import storage
from entropy_lens.store.manifest import MANIFEST, write_manifest
from entropy_lens.store.verify import verify


@pytest.fixture(scope="module")
def profiles():
    return extract_profiles(
        tiny_model("llama"), ["the cat", "a dog ran", "once upon a time"], generation=GenerationSettings(3)
    )


@pytest.fixture
def results(profiles, tmp_path):
    """A results folder of a DVC repository: a store, a CSV and a Parquet table, the tables folder tracked."""
    root = tmp_path / "repo" / "results"
    storage.write_profiles(profiles, root / "profiles" / "tiny" / "blank.zarr", layout=storage.Layout(2, 2))
    tables = root / "tables"
    tables.mkdir(parents=True)
    pd.DataFrame({"model": ["a", "b"], "auc": [0.9, 0.8]}).to_csv(tables / "knn_auc.csv", index=False)
    pd.DataFrame({"prompt_text": ["x", "y"]}).to_parquet(root / "tables" / "prompts.parquet")
    outputs = ["profiles/tiny/blank.zarr", "tables/knn_auc.csv", "tables/prompts.parquet"]
    write_manifest(root / MANIFEST, [f"results/{out}" for out in outputs])
    _track(root, "tables")
    return root


def _track(root, folder):
    """What `dvc add` records: results/<folder>.dvc naming a .dir manifest in the local cache."""
    entries = [
        {"md5": hashlib.md5(p.read_bytes()).hexdigest(), "relpath": str(p.relative_to(root / folder))}
        for p in sorted((root / folder).rglob("*"))
        if p.is_file()
    ]
    manifest = json.dumps(entries).encode()
    digest = hashlib.md5(manifest).hexdigest() + ".dir"
    cache = root.parent / ".dvc" / "cache" / "files" / "md5" / digest[:2]
    cache.mkdir(parents=True)
    (cache / digest[2:]).write_bytes(manifest)
    (root / f"{folder}.dvc").write_text(yaml.safe_dump({"outs": [{"md5": digest, "path": folder}]}))


def test_a_whole_folder_passes(results, capsys):
    report = verify(results)
    assert report.whole and (report.stores, report.tables, report.hashed) == (1, 2, 3)
    assert cli.main(["verify", str(results)]) == 0
    assert "1 stores, 2 tables and tensor files, 3 files against DVC hashes: all whole" in capsys.readouterr().out


def test_snakemakes_timestamp_in_a_store_is_no_damage_and_no_warning(results, recwarn):
    """Snakemake leaves .snakemake_timestamp inside directory outputs: zarr would warn once per store opened."""
    (results / "profiles" / "tiny" / "blank.zarr" / ".snakemake_timestamp").touch()
    assert verify(results).whole
    assert not [w for w in recwarn if "snakemake_timestamp" in str(w.message)]


def test_a_flipped_byte_in_a_store_is_named_with_the_remedy(results, capsys):
    store = results / "profiles" / "tiny" / "blank.zarr"
    chunk = store / "entropy" / "c" / "1" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x01
    chunk.write_bytes(bytes(data))
    assert cli.main(["verify", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {store}: profile store {store} is damaged (array 'entropy': ValueError: Stored and" in out
    assert f"snakemake --force {store}" in out and "1 damaged" in out


def _whys(results, path) -> list[str]:
    return [f.why for f in verify(results).findings if f.path == str(path)]


def test_a_truncated_table_fails_its_shape_and_its_dvc_hash(results):
    table = results / "tables" / "knn_auc.csv"
    table.write_bytes(table.read_bytes()[:-3])
    whys = _whys(results, table)
    assert whys[0] == "DamagedTableError: the file does not end with a newline (cut short?)"
    assert whys[1].startswith(f"MD5 {hashlib.md5(table.read_bytes()).hexdigest()} differs from DVC's ")


def test_a_missing_tracked_file_and_an_unreadable_parquet_are_named(results):
    (results / "tables" / "knn_auc.csv").unlink()
    parquet = results / "tables" / "prompts.parquet"
    parquet.write_bytes(parquet.read_bytes()[: len(parquet.read_bytes()) // 2])
    findings = verify(results).findings
    whys = [f.why for f in findings if f.path.endswith("knn_auc.csv")]
    assert whys == ["missing (the run's manifest lists it)", "missing (DVC recorded it)"]
    remedies = [f.remedy for f in findings if f.path == str(parquet)]
    assert remedies == [
        f"rebuild: snakemake --force {parquet}; or dvc pull its folder",
        f"dvc pull {parquet.parent}.dvc",
    ]


def test_a_store_without_checksums_is_whole_but_unprotected(profiles, results):
    store = results / "profiles" / "tiny" / "blank.zarr"
    shutil.rmtree(store)
    storage._object_strings(profiles).to_zarr(store, zarr_format=3, consolidated=False)  # zarr's defaults
    report = verify(results)
    assert report.whole
    assert [(f.path, f.state) for f in report.findings] == [(str(store), "unprotected")]


def test_a_folder_that_is_not_there_is_named():
    with pytest.raises(FileNotFoundError, match="no results folder at nowhere"):
        verify("nowhere")


def test_a_missing_chunk_is_damage_naming_the_store_the_array_and_the_chunk(results, capsys):
    """Zarr reads an absent chunk as its fill value (all NaN): every chunk is written, so absence is damage."""
    store = results / "profiles" / "tiny" / "blank.zarr"
    (store / "entropy" / "c" / "1" / "0" / "0").unlink()
    assert cli.main(["verify", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {store}: profile store {store} is damaged (array 'entropy': FileNotFoundError: chunk" in out
    assert "c/1/0/0 missing" in out and "1 damaged" in out


def test_a_deleted_table_and_store_the_manifest_lists_are_named(results, capsys):
    shutil.rmtree(results / "profiles" / "tiny" / "blank.zarr")
    (results / "tables" / "prompts.parquet").unlink()
    assert cli.main(["verify", str(results)]) == 1
    out = capsys.readouterr().out
    store = results / "profiles" / "tiny" / "blank.zarr"
    assert (
        f"DAMAGED {store}: missing (the run's manifest lists it); rebuild: snakemake results/profiles/tiny/blank.zarr"
        in out
    )
    assert f"DAMAGED {results / 'tables' / 'prompts.parquet'}: missing (the run's manifest lists it)" in out
    assert out.rstrip().endswith(": 3 damaged (3 of them missing)")  # the parquet: manifest and DVC


@pytest.mark.parametrize("content", ["empty", "input csvs"])
def test_a_folder_that_is_no_results_folder_is_refused_in_one_line(tmp_path, capsys, content):
    if content == "input csvs":
        (tmp_path / "questions.csv").write_text("subject,question\nmath,what is 1 + 1\n")
        (tmp_path / "stories.csv").write_bytes(b"text\nonce upon")  # no newline at the end
    with pytest.raises(ValueError, match=rf"{tmp_path} is not a results folder of a run: it holds no tables/manifest"):
        verify(tmp_path)
    assert cli.main(["verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("entropy-lens: error: ") and "\n" not in err and "DAMAGED" not in err
