"""What each workflow job pays before its first line of work: the imports of its script, in a fresh interpreter.

Snakemake runs every ``script:`` job in a new Python process, so a job imports its modules anew each time; on a
2-core host importing torch alone costs seconds, about half the CPU of a small table job. This runs the import
statements of every ``workflow_scripts/*.py`` (read from its source, not executed) in a fresh subprocess, rounds
alternating and the fastest of each kept, beside an interpreter that imports nothing and one that imports what
Snakemake's own preamble does, and reports per job the wall seconds, their multiple of the bare interpreter's,
the CPU seconds (steadier than the wall on a shared host) and which heavy packages got loaded.

    python benchmarks/bench_imports.py [--rounds 2] [--jobs extract_profiles,paper_table]

It exits 1 when a job outside :data:`TORCH_JOBS` loads torch or transformers: a table or figure job that pulls
torch in through a module's top-level import is the regression this guards.
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow_scripts"
HEAVY = ("torch", "transformers", "sklearn", "scipy", "matplotlib", "xarray", "zarr", "dask", "pandas")
MODEL_PACKAGES = ("torch", "transformers")
# Jobs whose imports may load torch, and why: the rest must not.
TORCH_JOBS = {
    "extract_profiles": "runs the model",
    "fit_lens": "fits the lenses on the model",
    "generate_stories": "runs the model",
    "layer_skip_eval": "runs the model",
    "layer_skip_select": "runs the model",
    "materialize_model": "saves the model",
    "score_mmlu": "runs the model",
    "twin_model": "draws the twin's weights",
    "plot_heatmap": "decodes token ids with the model's tokenizer (transformers imports torch)",
    "paper_table": "the planted expansion nulls run the lens's torch metrics",
}
# What Snakemake's preamble imports in every script job before the script's first line (snakemake 9).
PREAMBLE = "import snakemake.script\nfrom snakemake.logging import logger\nfrom snakemake.iocontainers import Snakemake"
PROBE = """import json, sys
{code}
print(json.dumps([m for m in {heavy!r} if m in sys.modules]))
"""


def script_imports(path: Path) -> str:
    """The import statements of a script, one a line, in source order (``__future__`` left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    nodes = [n for n in nodes if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    return "\n".join(ast.unparse(n) for n in sorted(nodes, key=lambda n: n.lineno))


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def fresh_import(code: str) -> tuple[float, float, list[str]]:
    """(wall s of the process, its CPU s, heavy packages loaded) of ``code`` in a new interpreter.

    The CPU time moves less than the wall time on a host that other jobs share."""
    cpu = _children_cpu()
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code, heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    wall, cpu = time.perf_counter() - began, _children_cpu() - cpu
    if done.returncode:
        raise RuntimeError(f"importing failed:\n{code}\n{done.stderr.strip()}")
    return wall, cpu, json.loads(done.stdout)


def job_imports(names: list[str] | None = None) -> dict[str, str]:
    """Job (script name) -> its import statements, for every script or the ``names`` given."""
    paths = sorted(SCRIPTS.glob("*.py"))
    unknown = set(names or ()) - {p.stem for p in paths}
    if unknown:
        raise ValueError(f"no workflow script for {sorted(unknown)}; pick from workflow_scripts/*.py")
    return {p.stem: script_imports(p) for p in paths if not names or p.stem in names}


def measure(codes: dict[str, str], rounds: int) -> dict[str, tuple[float, float, list[str]]]:
    """Fastest of ``rounds`` fresh imports of each code, rounds alternating over all codes."""
    best: dict[str, tuple[float, float, list[str]]] = {}
    for _ in range(rounds):
        for name, code in codes.items():
            got = fresh_import(code)
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", default="", help="comma-separated script names (default: all)")
    args = parser.parse_args(argv)
    stale = set(TORCH_JOBS) - {p.stem for p in SCRIPTS.glob("*.py")}
    if stale:
        raise ValueError(f"TORCH_JOBS names no script: {sorted(stale)}; drop them from the list")
    jobs = job_imports([j for j in args.jobs.split(",") if j] or None)
    best = measure({"(bare python)": "pass", "(snakemake preamble)": PREAMBLE, **jobs}, args.rounds)
    bare = best["(bare python)"][0]
    print(f"{'job':24s} {'wall s':>7s} {'x bare':>7s} {'CPU s':>7s}  heavy packages loaded")
    wrong = []
    for name, (wall, cpu, loaded) in best.items():
        print(f"{name:24s} {wall:7.2f} {wall / bare:7.1f} {cpu:7.2f}  {' '.join(loaded)}")
        if name in jobs and name not in TORCH_JOBS and set(loaded) & set(MODEL_PACKAGES):
            wrong.append(name)
    light = [n for n in jobs if n not in TORCH_JOBS]
    print(f"\n{len(light) - len(wrong)} of {len(light)} jobs without a model import neither torch nor transformers")
    for name in wrong:
        print(f"FAIL {name}: loads {set(best[name][2]) & set(MODEL_PACKAGES)} (python -X importtime shows the chain)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
