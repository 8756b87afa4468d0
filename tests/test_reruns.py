"""Reruns that repeat: the same inputs on the same host give the same bytes (bfloat16 included); the threads a
model job ran on are recorded, and a run that would scale them down says so; the stores' layout reruns nothing."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from tiny import tiny_model
from workflow_tiny import (
    copy_workdir,
    edit_config,
    file_contents,
    job_rules,
    nothing_to_do,
    run_snakemake,
)

from entropy_lens import extract_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.store.combine import gather_shards
from entropy_lens.workflow.jobs import scaled_threads_line, warn_scaled_threads

SKIP_MODEL = "tiny-llama"
SKIP_EVAL = tuple(
    f"results/layer_skip/{SKIP_MODEL}/{name}"
    for name in ("correct.parquet", "profiles.csv", "readings.parquet", "angles.parquet", "drops.parquet")
)


def test_a_store_records_the_threads_it_was_computed_on():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ds = extract_profiles(tiny_model("llama"), ["the cat", "a dog"], generation=GenerationSettings(2))
    finally:
        torch.set_num_threads(before)
    assert ds.attrs["threads"] == 1


def test_shards_on_other_threads_gather_with_each_shards_threads():
    """A shard resumed under another --cores: its values may differ in the last bits, which the store says."""
    ds = extract_profiles(tiny_model("llama"), ["the cat", "a dog", "a bird", "one"], generation=GenerationSettings(2))
    left, right = ds.isel(prompt=slice(0, 2)).copy(), ds.isel(prompt=slice(2, 4)).copy()
    left.attrs, right.attrs = {**ds.attrs, "threads": 2}, {**ds.attrs, "threads": 1}
    assert gather_shards([left, right], list(ds.prompt.values)).attrs["threads"] == "2,1"
    right.attrs["threads"] = 2
    assert gather_shards([left, right], list(ds.prompt.values)).attrs["threads"] == 2


@pytest.mark.parametrize(("granted", "warned"), [(1, True), (2, False)])
def test_a_model_job_on_other_threads_than_the_config_warns(caplog, granted, warned):
    job = SimpleNamespace(threads=granted, config={"compute": {"threads": 2}})
    with caplog.at_level(logging.WARNING):
        warn_scaled_threads(job)
    assert (scaled_threads_line(2, 1) in caplog.text) is warned
    assert "compute.threads is 2 but model jobs run on 1" in scaled_threads_line(2, 1)


@pytest.mark.slow
def test_a_run_with_fewer_cores_than_threads_says_so_before_it_starts(tiny_run, tmp_path):
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    edit_config(workdir, {"compute": {"threads": 2}})
    target = ("results/datasets/blank.parquet", "--forcerun", "prepare_blank")  # threads are no param: force a job
    out = run_snakemake(workdir, *target, "--cores", "1").stdout
    assert f"entropy-lens: warning: {scaled_threads_line(2, 1)}" in out
    assert out.index("entropy-lens: warning") < out.index("rule prepare_blank")  # before the run starts
    out = run_snakemake(workdir, *target, "--cores", "2").stdout
    assert "entropy-lens: warning" not in out and "rule prepare_blank" in out


@pytest.mark.slow
def test_a_skip_sweep_job_run_again_writes_the_same_bytes_in_bfloat16(tiny_run, tmp_path):
    """The layer-skip sweep (every block skipped alone, the k >= 2 sets, the readings) of one model in bfloat16,
    run, then run again on the same inputs: every table it writes is byte for byte the same."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    edit_config(workdir, {"compute": {"dtype": "bfloat16"}})
    first = run_snakemake(workdir, *SKIP_EVAL, "--cores", "2")
    assert job_rules(first.stdout).count("layer_skip_eval") == 1
    before = file_contents(workdir, (f"results/layer_skip/{SKIP_MODEL}",))
    again = run_snakemake(workdir, *SKIP_EVAL, "--cores", "2", "--forcerun", "layer_skip_eval")
    assert job_rules(again.stdout) == ["layer_skip_eval"]
    after = file_contents(workdir, (f"results/layer_skip/{SKIP_MODEL}",))
    assert set(SKIP_EVAL) <= set(after) and after == before


@pytest.mark.slow
def test_the_stores_layout_reruns_nothing(tiny_run, tmp_path):
    """storage.chunk_prompts and shard_prompts change how stores are cut into files, no value: rule all (the cost
    plan against the run included) has nothing to do."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    edit_config(workdir, {"storage": {"chunk_prompts": 2, "shard_prompts": 4}})
    assert nothing_to_do(workdir)
