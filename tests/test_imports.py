"""Jobs without a model do not import torch: every workflow job is a fresh Python process, and on a 2-core host
importing torch costs a table or figure job seconds of its few (benchmarks/bench_imports.py measures them)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_imports", REPO / "benchmarks" / "bench_imports.py")
bench_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_imports)


def test_script_imports_reads_every_import_statement_of_a_script(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "from __future__ import annotations\nimport json\n\nfrom a.b import c, d\n\nwith x:\n    import e.f as g\n"
    )
    assert bench_imports.script_imports(script) == "import json\nfrom a.b import c, d\nimport e.f as g"


def test_jobs_without_a_model_load_neither_torch_nor_transformers() -> None:
    jobs = bench_imports.job_imports()
    light = {name: code for name, code in jobs.items() if name not in bench_imports.TORCH_JOBS}
    assert set(bench_imports.TORCH_JOBS) <= set(jobs)
    assert {"lens_robustness", "layer_skip_table", "plot_skip_criteria", "prepare_tasks"} <= set(light)
    # One process for all of them: a module any of them imports that pulls torch in shows here.
    _, _, loaded = bench_imports.fresh_import("\n".join(light.values()))
    assert {"pandas", "xarray", "sklearn", "matplotlib"} <= set(loaded)  # the probe sees what the jobs do load
    assert not set(loaded) & set(bench_imports.MODEL_PACKAGES), loaded


def test_the_claim_registry_loads_neither_torch_nor_the_parquet_stack() -> None:
    """The registry (every claim's object, with its nulls named by import path) and the workflow's parse read no
    model and no parquet file. pandas 3 imports pyarrow's core itself, so the probe names the parquet stack."""
    code = (
        "import json, sys\nimport entropy_lens.verdicts.registry\n"
        "print(json.dumps([m for m in ('torch', 'transformers', 'pyarrow.parquet') if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(done.stdout) == []
