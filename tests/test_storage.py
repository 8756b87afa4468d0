"""Zarr stores: lossless round trip, atomic writes, schema checks on write and read."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from tiny import tiny_model

from entropy_lens import extract_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.store import storage


@pytest.fixture(scope="module")
def profiles():
    ds = extract_profiles(
        tiny_model("llama"), ["the cat", "a dog ran", "once upon a time"], generation=GenerationSettings(3)
    )
    return ds.assign_coords(task=("prompt", np.array(["count", "gist", "count"], dtype=object)))


def test_round_trip_is_identical_and_lazy(profiles, tmp_path):
    path = storage.write_profiles(profiles, tmp_path / "s.zarr", layout=storage.Layout(2, 2))
    back = storage.open_profiles(path)
    assert back.entropy.chunks == ((2, 1), (3,), (3,))
    xr.testing.assert_identical(back.load(), profiles)


def test_failed_write_leaves_nothing(profiles, tmp_path, monkeypatch):
    target = tmp_path / "s.zarr"

    def broken(self, store, **kwargs):
        store.mkdir()
        (store / "zarr.json").write_text("{}")  # something half-written
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_zarr", broken)
    with pytest.raises(OSError, match="disk full"):
        storage.write_profiles(profiles, target)
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_a_store_whole(profiles, tmp_path):
    target = tmp_path / "s.zarr"
    storage.write_profiles(profiles, target)
    storage.write_profiles(profiles.isel(prompt=[0]), target)
    assert storage.open_profiles(target).sizes["prompt"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["s.zarr"]


def test_invalid_dataset_is_refused_before_writing(profiles, tmp_path):
    with pytest.raises(ValueError, match="variable 'entropy' is missing"):
        storage.write_profiles(profiles.drop_vars("entropy"), tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr").exists()


def test_opening_a_missing_store_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no profile store at .*nothing\.zarr"):
        storage.open_profiles(tmp_path / "nothing.zarr")


def test_store_of_an_older_schema_asks_for_re_extraction(profiles, tmp_path):
    old = profiles.drop_attrs(deep=False).assign_attrs(
        {k: v for k, v in profiles.attrs.items() if k != "n_params"} | {"schema_version": "1"}
    )
    path = tmp_path / "old.zarr"
    old.to_zarr(path, zarr_format=3, consolidated=False)
    with pytest.raises(ValueError, match=r"'n_params' is missing.*schema version '1'.*--forcerun extract_profiles"):
        storage.open_profiles(path)


def _damaged_copy(store, tmp_path, relative: str, damage) -> object:
    copy = tmp_path / "damaged.zarr"
    shutil.copytree(store, copy)
    target = copy / relative
    target.write_bytes(damage(target.read_bytes()))
    return copy


@pytest.mark.parametrize(
    ("relative", "damage", "cause"),
    [
        ("zarr.json", lambda b: b[:5] + b"\xff\xfe" + b[7:], "UnicodeDecodeError"),
        ("zarr.json", lambda b: b[: len(b) // 2], "JSONDecodeError"),
        ("entropy/zarr.json", lambda b: b"\xff" + b[1:], "UnicodeDecodeError"),
        ("prompt/c/0", lambda b: b[:-4], "ValueError: Stored and computed checksum"),  # coordinates: read at open
    ],
)
def test_damaged_metadata_names_the_store_and_the_rebuild(profiles, tmp_path, relative, damage, cause):
    store = storage.write_profiles(profiles, tmp_path / "s.zarr", layout=storage.Layout(2, 2))
    damaged = _damaged_copy(store, tmp_path, relative, damage)
    rebuild = r"`snakemake --force .*damaged\.zarr`.*`snakemake --forcerun extract_profiles`"
    expected = rf"profile store .*damaged\.zarr is damaged \({cause}.*{rebuild}"
    with pytest.raises(ValueError, match=expected):
        storage.open_profiles(damaged)


def test_damaged_chunk_names_the_store_when_it_is_read(profiles, tmp_path):
    store = storage.write_profiles(profiles, tmp_path / "s.zarr", layout=storage.Layout(2, 2))
    damaged = _damaged_copy(store, tmp_path, "entropy/c/1/0/0", lambda b: b[: len(b) // 2])
    ds = storage.open_profiles(damaged)  # data chunks are read lazily
    ds.entropy.isel(prompt=[0, 1]).load()  # the intact shard reads
    message = r"profile store .*damaged\.zarr is damaged \(array 'entropy': ValueError: Stored and computed checksum"
    with pytest.raises(ValueError, match=message + r".*snakemake --force .*--forcerun extract_profiles"):
        ds.load()


def test_every_flipped_byte_of_a_chunk_is_refused_naming_the_store_and_the_array(profiles, tmp_path):
    """Each array's chunks carry a CRC-32C: flipping any one byte of a shard file fails it when read."""
    store = storage.write_profiles(profiles, tmp_path / "s.zarr", layout=storage.Layout(2, 2))
    shard = store / "entropy/c/0/0/0"
    intact = shard.read_bytes()
    silent = []
    for position in range(len(intact)):
        damaged = bytearray(intact)
        damaged[position] ^= 0xFF
        shard.write_bytes(bytes(damaged))
        try:
            zarr.open_array(store / "entropy", mode="r")[:]
        except ValueError:
            continue
        silent.append(position)
    assert silent == [], f"flipped bytes read without an error at {silent} of {len(intact)}"
    damaged = bytearray(intact)
    damaged[len(intact) // 2] ^= 0x01
    shard.write_bytes(bytes(damaged))
    remedy = r"snakemake --force .*s\.zarr.*`dvc pull`"
    with pytest.raises(ValueError, match=rf"s\.zarr is damaged \(array 'entropy': ValueError: Stored and .*{remedy}"):
        storage.open_profiles(store).load()


def test_a_missing_chunk_file_is_refused_at_open_naming_the_store_the_array_and_the_chunk(profiles, tmp_path):
    """Zarr reads an absent chunk as its fill value: every chunk is written (all-NaN ones too), so absence is
    damage, refused on every read."""
    nan = profiles.assign(entropy=profiles.entropy.where(profiles.entropy < 0))  # an all-fill array
    store = storage.write_profiles(nan, tmp_path / "s.zarr", layout=storage.Layout(2, 2))
    assert storage.missing_chunks(store) == {}
    xr.testing.assert_identical(storage.open_profiles(store).load(), nan)
    (store / "entropy/c/1/0/0").unlink()
    assert storage.missing_chunks(store) == {"entropy": ["c/1/0/0"]}
    message = r"s\.zarr is damaged \(array 'entropy': FileNotFoundError: chunk file\(s\) c/1/0/0 missing; .*--force"
    with pytest.raises(ValueError, match=message):
        storage.open_profiles(store)


def test_damaged_combined_store_names_combine_profiles(profiles, tmp_path):
    store = tmp_path / "combined.zarr"
    store.mkdir()
    (store / "zarr.json").write_bytes(b"\xff\xfe")
    with pytest.raises(
        ValueError, match=r"combined\.zarr is damaged .*`snakemake --forcerun combine_profiles` every such job"
    ):
        storage.open_profiles(store, combined=True)


def test_the_written_store_contract_is_the_schema():
    """docs/store_contract.md is generated from the schema (python scripts/store_contract.py), never edited."""
    from entropy_lens.store.contract import contract_markdown

    written = (Path(__file__).resolve().parents[1] / "docs" / "store_contract.md").read_text(encoding="utf-8")
    assert written == contract_markdown(), "run python scripts/store_contract.py"
    assert "| `entropy` | prompt, token, layer | float32 | nat |" in written


def test_combined_store_keeps_each_model_partners_and_fills_a_store_without_them(profiles, tmp_path):
    from entropy_lens.store import schema
    from entropy_lens.store.combine import combine_models

    partners = profiles.partner.values.tolist()  # one batch: one cycle through its three prompts
    assert sorted(partners) == ["p0000", "p0001", "p0002"] and all(
        p != q for p, q in zip(partners, profiles.prompt.values, strict=True)
    )
    old = profiles.drop_vars([schema.NUCLEUS_JACCARD_CROSS, schema.PARTNER])  # extracted before the null
    both = combine_models(
        {"new": profiles, "old": old}, families={"new": "a", "old": "a"}, n_params={"new": 1, "old": 1}
    )
    assert both.partner.dims == ("model", "prompt")
    assert both.partner.values.tolist() == [partners, ["", "", ""]]
    np.testing.assert_array_equal(both.nucleus_jaccard_cross.values[0], profiles.nucleus_jaccard_cross.values)
    assert np.isnan(both.nucleus_jaccard_cross.values[1]).all()
    back = storage.open_profiles(storage.write_profiles(both, tmp_path / "c.zarr", combined=True), combined=True)
    xr.testing.assert_identical(back.load(), both)
    with pytest.raises(ValueError, match="need the coordinate 'partner'"):
        schema.validate_profiles(profiles.drop_vars(schema.PARTNER))
