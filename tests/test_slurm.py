"""The SLURM profile on a real one-node SLURM cluster started on this machine.

`scripts/slurm_localhost.sh` installs (apt-get) and starts munged, slurmctld and slurmd; the real
workflow (tiny config, the targets `CLUSTER_TARGETS` of `workflow_tiny`) then runs through
`--profile profiles/slurm` and must produce byte for byte what the session's local run (`tiny_run`)
produced. Skipped where SLURM cannot be installed or started (not root, no apt-get).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import xarray as xr
from workflow_tiny import (
    CLUSTER_TARGETS,
    FAILING_CHANGE,
    FAILING_RULE,
    FAILING_TARGETS,
    REPO,
    REPRODUCIBLE_ARTIFACTS,
    SHARD_SETTINGS,
    SHARDED_STORE,
    edit_config,
    file_contents,
    job_rules,
    jobs_in,
    nothing_to_do,
    prepare_workdir,
    run,
    run_snakemake,
    store_without_note,
    tool_env,
)

pytestmark = pytest.mark.slow

logger = logging.getLogger(__name__)

SLURM_SCRIPT = REPO / "scripts" / "slurm_localhost.sh"
SLURM_PROFILE = REPO / "profiles" / "slurm"
# slurm_localhost.sh exits with these statuses when the machine cannot run SLURM, or when another
# cluster of the script (another test session, a developer's) owns /etc/slurm/slurm.conf and munged.
EXIT_UNSUPPORTED = 3
EXIT_BUSY = 4
# Test sessions on one machine take turns with the cluster; this module takes about 5 minutes.
LOCK_FILE_NAME = "entropy-lens-slurm-localhost.lock"
LOCK_WAIT_SECONDS = 600
START_TIMEOUT = 300  # apt-get install included
STOP_TIMEOUT = 60
WORKFLOW_TIMEOUT = 480  # beside another test worker on 2 cores
MISSING_PARTITION = "no_such_partition"
# Shard jobs of slurm_run: the blank set (4 prompts per model) is one shard per model, tiny-llama's MMLU
# store (8 prompts) two.
EXPECTED_SHARD_JOBS = 4
# Polling: after a check that finds a job finished the plugin waits slurm-init-seconds-before-status-checks
# (10 s in the profile), after one that finds none 10 s more each time: checks come at 4, 18, 42 s with
# the value below. The tiny jobs take 6 to 16 s, so most waves of jobs cost one 18 s wait (with the
# profile's 10 s, 30 s). The plugin keeps `squeue` while MinJobAge (600 s here) is at least 3 x this value.
FAST_POLLING = ("--slurm-init-seconds-before-status-checks", "4", "--seconds-between-status-checks", "4")
# materialize_model declares 8000 MB (real models); a CI runner with 7 GB has no node that large, and
# sbatch would refuse the job. The tiny models need far less.
SMALL_MACHINE = ("--set-resources", "materialize_model:mem_mb=2000")
# CPUs the test node offers, even on a 2-core machine: independent tiny jobs (the two models'
# materialize and extract jobs, 1 and 2 threads) then run side by side, and wait for one poll, not two.
NODE_CPUS = 4
# Where the plugin writes each job's log; it names the file in the error report of a failed job.
SLURM_LOG_PATTERN = re.compile(r"\S*\.snakemake/slurm_logs/\S+\.log")
# The error report's line of log files: the rule's own (where the job script logs the cause), then the SLURM log.
REPORTED_LOGS_PATTERN = re.compile(r"^\s*log: (.+?) \(check log file", re.MULTILINE)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _passwordless_sudo() -> bool:
    if shutil.which("sudo") is None:
        return False
    return run(["sudo", "-n", "true"], cwd=REPO, timeout=30, check=False).returncode == 0


def _why_no_slurm() -> str | None:
    """A reason to skip, or None when this machine can install and start SLURM."""
    if os.geteuid() != 0 and not _passwordless_sudo():
        return "SLURM on localhost needs root or passwordless sudo (to install slurm-wlm, start munged/slurmd)"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "slurmctld is not installed and there is no apt-get to install slurm-wlm"
    return None


def _skip_unless_ci(reason: str) -> None:
    """Skip on a developer machine that cannot run SLURM; fail under ``CI=true``, where the suite must
    really test the cluster path (CI runs as root on a machine that can install slurm-wlm)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but the SLURM tests cannot run: {reason}")
    pytest.skip(reason)


@contextmanager
def _machine_lock() -> Iterator[None]:
    """Hold an exclusive lock shared by every test session on this machine, waiting for it if needed."""
    with (Path(tempfile.gettempdir()) / LOCK_FILE_NAME).open("w") as handle:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.skip(f"another test session held the localhost SLURM cluster for {LOCK_WAIT_SECONDS}s")
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Start a one-node SLURM cluster; yield the environment that points clients at it; stop it."""
    reason = _why_no_slurm()
    if reason:
        _skip_unless_ci(reason)
    state = tmp_path_factory.mktemp("slurm")
    env = tool_env(
        SLURM_LOCALHOST_CTLD_PORT=str(_free_port()),
        SLURM_LOCALHOST_SLURMD_PORT=str(_free_port()),
        SLURM_LOCALHOST_CPUS=str(max(NODE_CPUS, os.cpu_count() or 1)),
        SLURM_CONF=str(state / "slurm.conf"),
    )
    with _machine_lock():
        start = time.perf_counter()
        try:
            result = run(
                ["bash", str(SLURM_SCRIPT), "start", str(state)], cwd=state, env=env, timeout=START_TIMEOUT, check=False
            )
            if result.returncode in (EXIT_UNSUPPORTED, EXIT_BUSY):
                _skip_unless_ci(f"cannot run SLURM here: {result.stdout.strip().splitlines()[-1]}")
            if result.returncode != 0:
                pytest.fail(f"slurm_localhost.sh start failed ({result.returncode}):\n{result.stdout}")
            logger.warning("SLURM start took %.1f s", time.perf_counter() - start)
            yield env
        finally:
            run(["bash", str(SLURM_SCRIPT), "stop", str(state)], cwd=state, env=env, timeout=STOP_TIMEOUT, check=False)


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> tuple[Path, str]:
    """The workflow run through the SLURM profile with sharded extraction (`SHARD_SETTINGS`); returns its
    directory and Snakemake's output. One run for both questions: do SLURM jobs give the local run's
    bytes, and does each shard run as its own SLURM job (every job costs a poll)."""
    workdir = prepare_workdir(tmp_path_factory.mktemp("slurm_run") / "wf")
    edit_config(workdir, SHARD_SETTINGS)
    start = time.perf_counter()
    result = _slurm_snakemake(workdir, slurm_env, *CLUSTER_TARGETS, SHARDED_STORE)
    logger.warning("workflow via SLURM took %.1f s", time.perf_counter() - start)
    return workdir, result.stdout


def _slurm_snakemake(
    workdir: Path, env: dict[str, str], *targets: str, options: tuple[str, ...] = (), check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``targets`` through the SLURM profile (targets first: --set-resources takes several values)."""
    args = (*targets, "--profile", str(SLURM_PROFILE), *FAST_POLLING, *SMALL_MACHINE, *options)
    return run_snakemake(workdir, *args, env=env, timeout=WORKFLOW_TIMEOUT, check=check)


def test_slurm_run_matches_local_run(tiny_run: Path, slurm_run: tuple[Path, str], slurm_env: dict[str, str]) -> None:
    """SLURM's outputs are those of the session's local, unsharded run (the local profile, every target):
    byte for byte outside the stores; each store identical but for the gathered-shards note."""
    workdir, output = slurm_run
    produced = file_contents(workdir, REPRODUCIBLE_ARTIFACTS)
    stores = sorted({_store_of(path) for path in produced} - {None} - set(_shard_stores(workdir)))
    assert SHARDED_STORE in stores and CLUSTER_TARGETS[0] in stores, "the SLURM run must write the stores"
    reference = file_contents(tiny_run, REPRODUCIBLE_ARTIFACTS)  # a superset: tiny_run ran every target
    plain = {path: data for path, data in produced.items() if _store_of(path) is None}
    assert plain == {path: reference.get(path) for path in plain}
    for store in stores:
        xr.testing.assert_identical(store_without_note(workdir / store), store_without_note(tiny_run / store))
    # Every job went through sbatch, and SLURM ran it; each shard was a job of its own.
    cluster_jobs = [rule for rule in job_rules(output) if rule != "all"]
    assert cluster_jobs.count("extract_profiles") == EXPECTED_SHARD_JOBS == len(_shard_stores(workdir))
    assert output.count("has been submitted with SLURM jobid") == len(cluster_jobs)
    # The plugin comments each SLURM job "rule_<rule>" or "rule_<rule>_wildcards_<values>".
    comments = run(["squeue", "--states=all", "--noheader", "--format=%k"], cwd=workdir, env=slurm_env, timeout=30)
    ran = Counter(comment.removeprefix("rule_").split("_wildcards_")[0] for comment in comments.stdout.split())
    assert Counter(cluster_jobs) <= ran


def _store_of(path: str) -> str | None:
    """The Zarr store (``....zarr``) a relative file path lies in, or None."""
    parts = Path(path).parts
    ends = [i for i, part in enumerate(parts) if part.endswith(".zarr")]
    return str(Path(*parts[: ends[0] + 1])) if ends else None


def _shard_stores(workdir: Path) -> list[str]:
    return [str(path.relative_to(workdir)) for path in sorted(workdir.glob("results/profiles/*/*/shard*.zarr"))]


def test_slurm_run_leaves_nothing_to_do(slurm_run: tuple[Path, str], slurm_env: dict[str, str]) -> None:
    workdir, _ = slurm_run
    assert nothing_to_do(workdir, *CLUSTER_TARGETS, SHARDED_STORE, env=slurm_env)


def test_failed_job_names_rule_and_fixed_rerun_skips_finished_work(
    slurm_run: tuple[Path, str], slurm_env: dict[str, str], tmp_path: Path
) -> None:
    workdir = tmp_path / "wf"
    shutil.copytree(slurm_run[0], workdir, symlinks=True)
    targets = (*CLUSTER_TARGETS, *FAILING_TARGETS)
    good_config = edit_config(workdir, FAILING_CHANGE)
    failing = _slurm_snakemake(workdir, slurm_env, *targets, check=False)
    assert failing.returncode != 0
    assert f"Error in rule {FAILING_RULE}:" in failing.stdout
    assert failing.stdout.count("Error in rule") == 1, "only the failing job is reported"
    assert "SLURM-job" in failing.stdout and "FAILED" in failing.stdout
    # The error report names the job's SLURM log (the plugin deletes the logs of successful jobs) and the
    # rule's log, which holds the cause.
    slurm_logs = [workdir / log for log in SLURM_LOG_PATTERN.findall(failing.stdout) if (workdir / log).exists()]
    assert slurm_logs, "the error report must name the SLURM log"
    reported = [workdir / log for logs in REPORTED_LOGS_PATTERN.findall(failing.stdout) for log in logs.split(", ")]
    assert any("missing_stories.jsonl" in log.read_text() for log in reported if log.exists())
    failing_jobs = jobs_in(failing.stdout)
    assert FAILING_RULE in failing_jobs and len(failing_jobs) > 1
    finished = file_contents(workdir, REPRODUCIBLE_ARTIFACTS)
    finished_mtimes = {path: (workdir / path).stat().st_mtime_ns for path in finished}

    (workdir / "config.yaml").write_text(good_config)
    fixed = _slurm_snakemake(workdir, slurm_env, *targets)
    assert jobs_in(fixed.stdout) == {FAILING_RULE}, "finished jobs must not run again"
    assert {path: (workdir / path).stat().st_mtime_ns for path in finished} == finished_mtimes
    assert set(file_contents(workdir, REPRODUCIBLE_ARTIFACTS)) - set(finished) == {FAILING_TARGETS[0]}
    assert nothing_to_do(workdir, *targets, env=slurm_env)


def test_missing_partition_is_a_clear_error(slurm_env: dict[str, str], tmp_path: Path) -> None:
    workdir = prepare_workdir(tmp_path / "wf")
    bad = _slurm_snakemake(
        workdir,
        slurm_env,
        *CLUSTER_TARGETS,
        options=("--default-resources", f"slurm_partition={MISSING_PARTITION}"),
        check=False,
    )
    assert bad.returncode != 0
    assert "invalid partition specified" in bad.stdout
    assert MISSING_PARTITION in bad.stdout
    assert "Error in rule" in bad.stdout
