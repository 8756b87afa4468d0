"""The workflow that the SLURM and DVC tests run, and the helpers both modules share.

`WORKFLOW` is the one place to change when the real tiny-config workflow replaces the stand-in:
its Snakefile, how a working directory is laid out, the Snakemake targets and options, the
artifacts DVC versions, a config change with the rules it must rerun, and a config that makes one
named rule fail. Every run is `snakemake --snakefile <snakefile> --directory <workdir> ...`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SNAKEMAKE = str(VENV_BIN / "snakemake")
# Seconds a command may take after SIGINT (Snakemake then cancels its cluster jobs) before SIGKILL.
GRACE_SECONDS = 30
# Snakemake writes this marker into directory outputs; its mtime, not its content, matters.
TIMESTAMP_MARKER = ".snakemake_timestamp"
# Lines Snakemake prints for each job it runs or would run: "rule NAME:" / "localrule NAME:".
JOB_LINE_PREFIXES = ("rule ", "localrule ")


@dataclass(frozen=True)
class WorkflowUnderTest:
    """A workflow directory plus what the tests need to know about it.

    Attributes:
        snakefile: The Snakefile; runs happen in other directories (`--directory`).
        prepare: Lays out a fresh working directory (config, inputs) given its path.
        targets: Snakemake targets (empty: the default target, rule `all`).
        options: Other Snakemake options every run gets (e.g. `--configfile`, `config/tiny.yaml`).
        config_args: `--config KEY=VALUE` items every run gets (e.g. a tiny config).
        artifacts: Output paths DVC versions, one `.dvc` file each, relative to the workflow dir.
        change: A `--config` item that changes one setting after a complete run.
        change_reruns: The rules that `change` must rerun, and no others.
        failing_config: `--config` items that make a job fail.
        failing_rule: The rule whose job fails under `failing_config`.
        missing_object: An artifact file whose remote object the missing-object test deletes.
    """

    snakefile: Path
    prepare: Callable[[Path], object]
    targets: tuple[str, ...]
    options: tuple[str, ...]
    config_args: tuple[str, ...]
    artifacts: tuple[str, ...]
    change: str
    change_reruns: frozenset[str]
    failing_config: tuple[str, ...]
    failing_rule: str
    missing_object: str

    def snakemake_args(self, *extra_config: str) -> list[str]:
        """Snakefile, targets, options, and `--config` with the base items plus `extra_config`.

        `--config` comes last because it takes several values (later items win).
        """
        config = [*self.config_args, *extra_config]
        head = ["--snakefile", str(self.snakefile), *self.targets, *self.options]
        return [*head, *(["--config", *config] if config else [])]


STANDIN_DIR = REPO_ROOT / "tests" / "standin_workflow"


def _prepare_standin(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(STANDIN_DIR / "config.yaml", workdir / "config.yaml")


STANDIN = WorkflowUnderTest(
    snakefile=STANDIN_DIR / "Snakefile",
    prepare=_prepare_standin,
    targets=(),
    options=(),
    config_args=(),
    artifacts=("results/datasets", "results/profiles", "results/tables"),
    change="decimals=2",
    change_reruns=frozenset({"summarize"}),
    failing_config=("fail_summarize=true",),
    failing_rule="summarize",
    missing_object="results/tables/summary.csv",
)

WORKFLOW = STANDIN
# Moves artifacts through DVC (dvc add + push; pull + snakemake --touch); run in the working directory.
DVC_SYNC = STANDIN_DIR / "dvc_sync.sh"


def new_workdir(workflow: WorkflowUnderTest, dest: Path) -> Path:
    """A freshly prepared working directory at `dest`."""
    workflow.prepare(dest)
    return dest


def tool_env(**extra: str) -> dict[str, str]:
    """Environment for subprocesses: the venv first on PATH, no analytics, a fixed git identity."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        DVC_NO_ANALYTICS="1",
        GIT_AUTHOR_NAME="test",
        GIT_AUTHOR_EMAIL="test@example.org",
        GIT_COMMITTER_NAME="test",
        GIT_COMMITTER_EMAIL="test@example.org",
        NO_PROXY="127.0.0.1,localhost",
    )
    env.update(extra)
    return env


def run(
    cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `cmd`, merging stderr into stdout; on timeout send SIGINT, then SIGKILL, and fail.

    Args:
        cmd: Command and arguments.
        cwd: Working directory.
        env: Full environment.
        timeout: Seconds before SIGINT.
        check: Fail the test (showing the output) when the exit status is not 0.
    """
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} timed out after {timeout}s (sent SIGINT); output:\n{out[-4000:]}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, "")
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited with {result.returncode}; output:\n{out[-4000:]}")
    return result


def jobs_in(output: str) -> set[str]:
    """Names of the rules Snakemake ran or would run, from its log output (rule `all` left out)."""
    names = set()
    for line in output.splitlines():
        if line.startswith(JOB_LINE_PREFIXES) and line.rstrip().endswith(":"):
            names.add(line.split()[1].rstrip(":"))
    return names - {"all"}


def file_contents(root: Path, paths: tuple[str, ...]) -> dict[str, bytes]:
    """Map of relative path -> bytes for every file under `paths` in `root`, markers left out."""
    contents = {}
    for top in paths:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and path.name != TIMESTAMP_MARKER:
                contents[str(path.relative_to(root))] = path.read_bytes()
    return contents


def nothing_to_do(workdir: Path, workflow: WorkflowUnderTest, env: dict[str, str]) -> bool:
    """True when `snakemake -n` in `workdir` reports nothing to do."""
    result = run([SNAKEMAKE, "-n", *workflow.snakemake_args()], cwd=workdir, env=env, timeout=120)
    return "Nothing to be done" in result.stdout
