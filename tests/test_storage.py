"""Zarr stores: lossless round trip, atomic writes, schema checks on write and read."""

import numpy as np
import pytest
import xarray as xr
from tiny import tiny_model

from entropy_lens import extract_profiles
from entropy_lens.store import storage


@pytest.fixture(scope="module")
def profiles():
    ds = extract_profiles(tiny_model("llama"), ["the cat", "a dog ran", "once upon a time"], max_new_tokens=3)
    return ds.assign_coords(task=("prompt", np.array(["count", "gist", "count"], dtype=object)))


def test_round_trip_is_identical_and_lazy(profiles, tmp_path):
    path = storage.write_profiles(profiles, tmp_path / "s.zarr", chunk_prompts=2, shard_prompts=2)
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
