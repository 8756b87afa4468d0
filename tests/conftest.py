"""Shared fixtures: the real embedded model, materialized once per machine and reused; the tiny workflow,
run once per session."""

import os
from pathlib import Path

import pytest
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
def tiny_run(tmp_path_factory) -> Path:
    """The whole workflow on the tiny config with the local profile, once per session.

    test_workflow reads its results, test_slurm compares SLURM's outputs with them byte for byte, and
    tests that change a setting and rerun work on a :func:`workflow_tiny.copy_workdir` copy, never on it.
    """
    workdir = prepare_workdir(tmp_path_factory.mktemp("tiny_workflow"))
    # The one whole run of the suite: time for a machine whose cores other work shares.
    RUN_OUTPUT[workdir] = run_snakemake(workdir, "--profile", str(LOCAL_PROFILE), "--cores", "2", timeout=1200).stdout
    return workdir


# `make test` runs the suite on two pytest-xdist workers (--dist loadgroup). The tests that read the session's
# tiny run, and the SLURM module (which compares its run with it), share one worker, so the whole run happens
# once; every other module keeps its tests on one worker, so that its module fixtures (a workflow run, a
# pushed DVC repository) also run once.
TINY_RUN_GROUP = "tiny_run"
TINY_RUN_MODULES = frozenset({"test_slurm"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if getattr(item, "module", None) else item.nodeid.split("::")[0]
        shares_run = "tiny_run" in getattr(item, "fixturenames", ()) or module in TINY_RUN_MODULES
        item.add_marker(pytest.mark.xdist_group(TINY_RUN_GROUP if shares_run else module))
