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
from entropy_lens.store.manifest import MANIFEST, read_manifest, write_manifest
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
    out = capsys.readouterr().out
    checked = "1 stores, 2 tables and tensor files, 2 files against the run's hashes, 3 files against DVC hashes"
    assert f"{checked}: all whole" in out


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


def test_a_table_edited_into_another_well_formed_one_is_named_without_dvc(results, capsys):
    """Every "reproduced" of a verdict table turned into "not reproduced": it still parses, and no DVC hash
    covers its folder; the sha256 the manifest recorded when the run wrote it names it."""
    verdicts = results / "tables" / "verdicts.csv"
    verdicts.write_text("claim,verdict\nseparability,reproduced\nspearman,reproduced\n")
    write_manifest(results / MANIFEST, ["results/profiles/tiny/blank.zarr", "results/tables/knn_auc.csv"])
    for tracker in results.glob("*.dvc"):
        tracker.unlink()  # no DVC at all
    assert cli.main(["verify", str(results)]) == 0
    capsys.readouterr()
    verdicts.write_text(verdicts.read_text().replace("reproduced", "not reproduced"))
    assert cli.main(["verify", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {verdicts}: sha256 " in out and "the run recorded when it wrote it (edited?)" in out
    assert f"snakemake --force results/tables/verdicts.csv results/{MANIFEST.as_posix()}" in out
    assert out.rstrip().endswith("0 files against DVC hashes: 1 damaged")


def test_a_deleted_table_the_manifest_only_hashed_is_named(results, capsys):
    """verdicts.csv is no final output of its own (the paper table's sibling), but the run recorded its hash."""
    (results / "tables" / "verdicts.csv").write_text("claim,verdict\nseparability,reproduced\n")
    write_manifest(results / MANIFEST, ["results/tables/knn_auc.csv"])
    (results / "tables" / "verdicts.csv").unlink()
    whys = _whys(results, results / "tables" / "verdicts.csv")
    assert whys == ["missing (the run recorded its hash when it wrote it)"]


def test_the_manifest_hashes_every_file_but_stores_timings_and_itself(results):
    (results / "benchmarks").mkdir()
    (results / "benchmarks" / "extract.tsv").write_text("s\n1.0\n")
    (results / "figures").mkdir()
    (results / "figures" / "knn_auc.svg").write_text("<svg/>\n")
    write_manifest(results / MANIFEST, ["results/tables/knn_auc.csv"])
    hashes = read_manifest(results)["hashes"]
    assert sorted(hashes) == ["figures/knn_auc.svg", "tables/knn_auc.csv", "tables/prompts.parquet"]
    assert hashes["tables/knn_auc.csv"] == hashlib.sha256((results / "tables" / "knn_auc.csv").read_bytes()).hexdigest()


def test_a_manifest_of_version_1_lists_outputs_and_no_hashes(results):
    (results / MANIFEST).write_text(json.dumps({"version": 1, "results": "results", "outputs": ["tables/knn_auc.csv"]}))
    assert read_manifest(results)["hashes"] == {}
    (results / "tables" / "knn_auc.csv").write_text("model,auc\na,0.1\n")
    assert verify(results).whole is False  # DVC's hash still names it; the manifest has none to compare


def _whys(results, path) -> list[str]:
    return [f.why for f in verify(results).findings if f.path == str(path)]


def test_a_truncated_table_fails_its_shape_and_its_dvc_hash(results):
    table = results / "tables" / "knn_auc.csv"
    table.write_bytes(table.read_bytes()[:-3])
    whys = _whys(results, table)
    assert whys[0] == "DamagedTableError: the file does not end with a newline (cut short?)"
    assert whys[1].endswith("the run recorded when it wrote it (edited?)")
    assert whys[2].startswith(f"MD5 {hashlib.md5(table.read_bytes()).hexdigest()} differs from DVC's ")


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
        f"rebuild: snakemake --force results/tables/prompts.parquet results/{MANIFEST}; or dvc pull its folder",
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
