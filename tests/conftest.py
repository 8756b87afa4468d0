"""Shared fixtures: the real embedded model, materialized once per machine and reused; the tiny workflow,
run once per session."""

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock
from workflow_tiny import LOCAL_PROFILE, REPO, RUN_OUTPUT, prepare_workdir, run_snakemake


@pytest.fixture(scope="session")
def model_cache() -> Path:
    """Folder for materialized registry models (reused across runs; ignored by git)."""
    path = Path(os.environ.get("ENTROPY_LENS_CACHE", REPO / ".cache" / "models"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def smollm2(model_cache):
    """The real SmolLM2-135M-Instruct from its PyPI package (materialized on first use)."""
    from entropy_lens import load_model

    try:
        return load_model("smollm2-135m", device="cpu", cache_dir=model_cache)
    except ValueError as err:  # package not installed
        pytest.skip(f"smollm2-135m unavailable: {err}")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole workflow on the tiny config with the local profile, once per session.

    test_workflow reads its results, test_slurm compares SLURM's outputs with them byte for byte, and
    tests that change a setting and rerun work on a :func:`workflow_tiny.copy_workdir` copy, never on it.
    `make test` runs two pytest-xdist workers (``--dist loadfile``): the first to ask runs the workflow in
    the folder both share, under a lock, and the other waits for it and reads the same results.
    """
    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared  # the workers' common folder
    workdir, output, done = shared / "tiny_workflow", shared / "tiny_workflow.out", shared / "tiny_workflow.done"
    with FileLock(shared / "tiny_workflow.lock"):
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)  # a run that failed on the other worker
            prepare_workdir(workdir)
            # The one whole run of the suite: time for a machine whose cores other work shares.
            run = run_snakemake(workdir, "--profile", str(LOCAL_PROFILE), "--cores", "2", timeout=1200)
            output.write_text(run.stdout)
            done.touch()
    RUN_OUTPUT[workdir] = output.read_text()
    return workdir
