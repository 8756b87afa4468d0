"""The real Snakemake DAG: dry runs of both configs, lint, a tiny end-to-end run, resume."""

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml
from workflow_tiny import REPO, default_sigint, prepare_workdir, run_snakemake, snakemake_cmd

from entropy_lens import schema, storage

pytestmark = pytest.mark.slow


def dry_run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    exe = Path(__import__("sys").executable).with_name("snakemake")
    return subprocess.run(
        [str(exe), "-n", *args], cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("configfile", [None, "config/paper.yaml"])
def test_dry_run_builds_the_dag(configfile):
    """--forceall plans every job whether or not a run already built them (make run, then make test)."""
    args = ["--configfile", configfile] if configfile else []
    out = dry_run("--forceall", *args)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "extract_profiles" in out.stdout and "combine_profiles" in out.stdout


def test_paper_config_lists_the_study_models():
    models = yaml.safe_load((REPO / "config/paper.yaml").read_text())["models"]
    assert len(models) == 13
    assert {m["family"] for m in models.values()} == {"gpt2", "gemma", "llama", "qwen", "phi"}


def test_lint_passes():
    exe = Path(__import__("sys").executable).with_name("snakemake")
    out = subprocess.run([str(exe), "--lint"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["lens"].update(top_pp=0.5), "top_pp"),
        (lambda c: c["datasets"]["blank"].update(n_samples=-3), "n_samples"),
        (lambda c: c["models"]["tiny-llama"].update(family=7), "family"),
        (lambda c: c["analysis"].setdefault("knn", {}).update(test="bonferroni"), "bonferroni"),
        (lambda c: c["models"]["tiny-llama"].update(source="./tiny_models/tiny-lama"), "models.tiny-llama.source"),
        (lambda c: c["models"]["tiny-llama"].update(source="smollm2"), "unknown model source 'smollm2'"),
        (lambda c: c["datasets"]["tasks"].update(models=["tiny-mistral"]), "datasets.tasks.models names"),
    ],
)
def test_bad_config_fails_before_any_job(tmp_path, edit, message):
    prepare_workdir(tmp_path)
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    edit(config)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = run_snakemake(tmp_path, "--cores", "1")
    assert out.returncode != 0
    assert message in out.stderr
    assert not (tmp_path / "results").exists()


RUN_OUTPUT: dict[Path, str] = {}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tiny_workflow")
    prepare_workdir(workdir)
    out = run_snakemake(workdir, "--cores", "2")
    assert out.returncode == 0, out.stderr[-5000:]
    RUN_OUTPUT[workdir] = out.stdout + out.stderr
    return workdir


def test_combined_store_follows_the_schema(tiny_run):
    ds = storage.open_profiles(tiny_run / "results/profiles/tasks.zarr", combined=True)
    assert ds.entropy.chunks is not None, "open_zarr must be lazy (dask)"
    assert ds.entropy.dims == ("model", "prompt", "token", "layer")
    assert ds.renyi.dims == ("model", "prompt", "token", "layer", "alpha")
    assert list(ds.model.values) == ["tiny-llama", "tiny-qwen"]
    assert list(ds.family.values) == ["llama", "qwen"]
    assert (ds.n_params.values > 10_000).all()  # read from the models, not left at 0
    assert ds.sizes["prompt"] == 2 * 24
    for label in ("task", "phrasing", "template", "scrambled", "story_id"):
        assert label in ds.coords and ds[label].dims == ("prompt",)
    assert ds.depth.dims == ("model", "layer") and float(ds.depth.max()) == 1.0
    for var in ("entropy", "renyi", "nucleus_size"):
        assert ds[var].attrs["units"] == schema.VARIABLES[var].units
    assert set(schema.COMBINED_ATTRS) <= set(ds.attrs)


def test_per_model_store_is_chunked_compressed_and_labelled(tiny_run):
    import zarr

    path = tiny_run / "results/profiles/tiny-llama/formats.zarr"
    ds = storage.open_profiles(path)
    assert {"format", "topic"} <= set(ds.coords)
    arr = zarr.open_array(path / "entropy", mode="r")
    assert arr.metadata.zarr_format == 3
    assert arr.chunks[0] == 4  # chunk_prompts in the tiny config
    assert "zstd" in str(arr.compressors).lower()


def test_mmlu_scores_and_tables(tiny_run):
    ds = storage.open_profiles(tiny_run / "results/profiles/mmlu.zarr", combined=True)
    assert set(np.unique(ds.correct_ll.values)) <= {0, 1}
    assert set(np.unique(ds.correct_calibrated.values)) <= {0, 1}
    assert set(np.unique(ds.correct_parsed.values)) <= {-1, 0, 1}
    table = pd.read_csv(tiny_run / "results/tables/mmlu_accuracy.csv")
    assert set(table["measure"]) == {"ll", "calibrated", "parsed"} and "tiny-qwen" in set(table["model"])
    assert (table["ci_low"].dropna() <= table["accuracy"].dropna()).all()
    assert (tiny_run / "results/figures/mmlu_letters.png").stat().st_size > 5000
    assert (tiny_run / "results/figures/mean_profiles_blank.png").stat().st_size > 5000


def test_the_run_ends_with_the_verdicts(tiny_run):
    table = pd.read_csv(tiny_run / "results/tables/paper_comparison.csv", keep_default_na=False)
    assert {"verdict", "why", "ci_low", "ci_high", "study", "study_protocol"} <= set(table.columns)
    claimed = table[table["verdict"] != ""]
    assert set(claimed["verdict"]) <= {"reproduced", "not reproduced", "inconclusive"}
    assert (claimed["why"] != "").all()
    headline = (tiny_run / "results/tables/verdicts.md").read_text()
    assert "task separability (intact prompts)" in headline and "Spearman" in headline
    timings = pd.read_csv(tiny_run / "results/tables/run_timings.csv")
    assert "extract_profiles" in set(timings["rule"]) and timings["seconds"].iloc[-1] > 0
    assert "| claim | model |" in RUN_OUTPUT[tiny_run]  # printed by the onsuccess hook
    assert "results/tables/paper_comparison.md" in RUN_OUTPUT[tiny_run]


def test_second_run_has_nothing_to_do(tiny_run):
    out = run_snakemake(tiny_run, "-n", "--cores", "1")
    assert out.returncode == 0
    assert "Nothing to be done" in out.stdout + out.stderr


def test_rerun_of_same_config_gives_identical_stores(tiny_run, tmp_path):
    prepare_workdir(tmp_path)  # the tiny models are rebuilt from the same seeds: identical weights
    out = run_snakemake(tmp_path, "--cores", "2", "results/profiles/blank.zarr", "results/profiles/formats.zarr")
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("blank", "formats"):
        a = storage.open_profiles(tiny_run / f"results/profiles/{name}.zarr", combined=True).load()
        b = storage.open_profiles(tmp_path / f"results/profiles/{name}.zarr", combined=True).load()
        xr.testing.assert_equal(a, b)


def test_interrupted_run_resumes_without_redoing_finished_jobs(tmp_path):
    prepare_workdir(tmp_path)
    proc = subprocess.Popen(
        snakemake_cmd(tmp_path, "--cores", "1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    stores = tmp_path / "results/profiles"
    deadline = time.time() + 300
    while time.time() < deadline and not list(stores.glob("*/*.zarr")):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group
    proc.wait(timeout=120)
    finished = {p: p.stat().st_mtime for p in stores.glob("*/*.zarr")}
    assert finished, "the run was interrupted before any store was written"
    for path in stores.rglob("*.zarr"):  # nothing half-written looks complete
        storage.open_profiles(path, combined=path.parent == stores)
    out = run_snakemake(tmp_path, "--cores", "2")
    incomplete = set()
    if out.returncode != 0:  # the job killed mid-way is flagged by Snakemake's incomplete tracking
        assert "IncompleteFilesException" in out.stderr, out.stderr[-3000:]
        incomplete = {
            tmp_path / line.strip() for line in out.stderr.split("Incomplete files:")[1].splitlines() if line.strip()
        }
        out = run_snakemake(tmp_path, "--cores", "2", "--rerun-incomplete")
        assert out.returncode == 0, out.stderr[-3000:]
    for path, mtime in finished.items():
        if path not in incomplete:
            assert path.stat().st_mtime == mtime, f"{path} was redone"
    assert (tmp_path / "results/profiles/tasks.zarr/zarr.json").exists()
