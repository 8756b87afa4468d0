"""The SLURM profile on a real one-node SLURM cluster started on this machine.

`scripts/slurm_localhost.sh` installs (apt-get) and starts munged, slurmctld and slurmd; the
workflow then runs through `--profile profiles/slurm` and must produce what a local run produces.
Skipped where SLURM cannot be installed or started (not root, no apt-get).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from workflow_under_test import (
    REPO_ROOT,
    SNAKEMAKE,
    WORKFLOW,
    file_contents,
    jobs_in,
    new_workdir,
    nothing_to_do,
    run,
    tool_env,
)

pytestmark = pytest.mark.slow

logger = logging.getLogger(__name__)

SLURM_SCRIPT = REPO_ROOT / "scripts" / "slurm_localhost.sh"
SLURM_PROFILE = REPO_ROOT / "profiles" / "slurm"
LOCAL_PROFILE = REPO_ROOT / "profiles" / "local"
# slurm_localhost.sh exits with these statuses when the machine cannot run SLURM, or when another
# cluster of the script (another test session, a developer's) owns /etc/slurm/slurm.conf and munged.
EXIT_UNSUPPORTED = 3
EXIT_BUSY = 4
# Test sessions on one machine take turns with the cluster; a module takes about 2 minutes.
LOCK_FILE_NAME = "entropy-lens-slurm-localhost.lock"
LOCK_WAIT_SECONDS = 600
START_TIMEOUT = 300  # apt-get install included
STOP_TIMEOUT = 60
WORKFLOW_TIMEOUT = 240
JOB_TIMEOUT = 120
MISSING_PARTITION = "no_such_partition"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _passwordless_sudo() -> bool:
    if shutil.which("sudo") is None:
        return False
    return subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=30, check=False).returncode == 0


def _why_no_slurm() -> str | None:
    """A reason to skip, or None when this machine can install and start SLURM."""
    if os.geteuid() != 0 and not _passwordless_sudo():
        return "SLURM on localhost needs root or passwordless sudo (to install slurm-wlm, start munged/slurmd)"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "slurmctld is not installed and there is no apt-get to install slurm-wlm"
    return None


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
        pytest.skip(reason)
    state = tmp_path_factory.mktemp("slurm")
    env = tool_env(
        SLURM_LOCALHOST_CTLD_PORT=str(_free_port()),
        SLURM_LOCALHOST_SLURMD_PORT=str(_free_port()),
        SLURM_CONF=str(state / "slurm.conf"),
    )
    with _machine_lock():
        start = time.perf_counter()
        try:
            result = subprocess.run(
                ["bash", str(SLURM_SCRIPT), "start", str(state)],
                env=env,
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT,
                check=False,
            )
            if result.returncode in (EXIT_UNSUPPORTED, EXIT_BUSY):
                pytest.skip(f"cannot run SLURM here: {result.stderr.strip().splitlines()[-1]}")
            if result.returncode != 0:
                pytest.fail(f"slurm_localhost.sh start failed ({result.returncode}):\n{result.stderr}")
            logger.warning("SLURM start took %.1f s", time.perf_counter() - start)
            yield env
        finally:
            subprocess.run(["bash", str(SLURM_SCRIPT), "stop", str(state)], env=env, timeout=STOP_TIMEOUT, check=False)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workflow run with the local profile: the reference outputs."""
    workdir = new_workdir(WORKFLOW, tmp_path_factory.mktemp("local") / "wf")
    cmd = [SNAKEMAKE, "--profile", str(LOCAL_PROFILE), "--directory", str(workdir), *WORKFLOW.snakemake_args()]
    run(cmd, cwd=workdir, env=tool_env(), timeout=WORKFLOW_TIMEOUT)
    return workdir


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory: pytest.TempPathFactory, slurm_env: dict[str, str]) -> tuple[Path, str]:
    """The workflow run through the SLURM profile; returns its directory and Snakemake's output."""
    workdir = new_workdir(WORKFLOW, tmp_path_factory.mktemp("slurm_run") / "wf")
    start = time.perf_counter()
    result = _slurm_snakemake(workdir, slurm_env, *WORKFLOW.snakemake_args())
    logger.warning("workflow via SLURM took %.1f s", time.perf_counter() - start)
    return workdir, result.stdout


def _slurm_snakemake(
    workdir: Path, env: dict[str, str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [SNAKEMAKE, "--profile", str(SLURM_PROFILE), "--directory", str(workdir), *args]
    return run(cmd, cwd=workdir, env=env, timeout=WORKFLOW_TIMEOUT, check=check)


def test_slurm_run_matches_local_run(local_run: Path, slurm_run: tuple[Path, str], slurm_env: dict[str, str]) -> None:
    workdir, output = slurm_run
    reference = file_contents(local_run, WORKFLOW.artifacts)
    assert reference, "the local run must produce artifacts"
    assert file_contents(workdir, WORKFLOW.artifacts) == reference
    # Every job went through sbatch, and SLURM ran it: the plugin comments each job "rule_<name>".
    assert output.count("has been submitted with SLURM jobid") == len(jobs_in(output))
    comments = run(["squeue", "--states=all", "--noheader", "--format=%k"], cwd=workdir, env=slurm_env, timeout=30)
    assert {f"rule_{name}" for name in jobs_in(output)} <= set(comments.stdout.split())


def test_slurm_run_leaves_nothing_to_do(slurm_run: tuple[Path, str], slurm_env: dict[str, str]) -> None:
    workdir, _ = slurm_run
    assert nothing_to_do(workdir, WORKFLOW, slurm_env)


def test_failed_job_names_rule_and_fixed_rerun_skips_finished_work(
    slurm_run: tuple[Path, str], slurm_env: dict[str, str], tmp_path: Path
) -> None:
    workdir = tmp_path / "wf"
    shutil.copytree(slurm_run[0], workdir, symlinks=True)
    failing = _slurm_snakemake(workdir, slurm_env, *WORKFLOW.snakemake_args(*WORKFLOW.failing_config), check=False)
    assert failing.returncode != 0
    assert f"Error in rule {WORKFLOW.failing_rule}:" in failing.stdout
    assert "SLURM-job" in failing.stdout and "FAILED" in failing.stdout
    assert jobs_in(failing.stdout) == {WORKFLOW.failing_rule}

    fixed = _slurm_snakemake(workdir, slurm_env, *WORKFLOW.snakemake_args())
    assert jobs_in(fixed.stdout) == {WORKFLOW.failing_rule}, "finished jobs must not run again"
    assert file_contents(workdir, WORKFLOW.artifacts) == file_contents(slurm_run[0], WORKFLOW.artifacts)


def test_missing_partition_is_a_clear_error(slurm_env: dict[str, str], tmp_path: Path) -> None:
    workdir = new_workdir(WORKFLOW, tmp_path / "wf")
    bad = _slurm_snakemake(
        workdir,
        slurm_env,
        *WORKFLOW.snakemake_args(),
        "--default-resources",
        f"slurm_partition={MISSING_PARTITION}",
        check=False,
    )
    assert bad.returncode != 0
    assert "invalid partition specified" in bad.stdout
    assert MISSING_PARTITION in bad.stdout
    assert "Error in rule" in bad.stdout
