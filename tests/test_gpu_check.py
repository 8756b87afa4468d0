"""benchmarks/gpu_check.py on a CPU at a tiny scale: every architecture of config/paper.yaml builds at its real
structure with shrunk widths, runs one extraction and is set against the plan's prediction."""

from __future__ import annotations

import csv
import importlib.util
import math
from pathlib import Path

import pytest

from entropy_lens.workflow.plan import shape_from_fields, shipped_model_configs

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)

PAPER_SOURCES = gpu_check.config_sources(gpu_check.PAPER)


def test_scaled_fields_keep_the_architecture_and_shrink_its_widths() -> None:
    shipped = shipped_model_configs()
    for source in PAPER_SOURCES:
        real, small = shipped[source], gpu_check.scaled_fields(shipped[source], 0.02, layers=2)
        a, b = shape_from_fields(real), shape_from_fields(small)
        assert (b.model_type, b.n_heads, b.n_kv_heads, b.n_experts, b.n_layers) == (
            a.model_type, a.n_heads, a.n_kv_heads, a.n_experts, 2), source  # fmt: skip
        assert b.hidden_size < a.hidden_size / 4 and b.head_dim % 8 == 0 and b.vocab_size % 8 == 0, source
        assert b.hidden_size % b.n_heads == 0, source  # transformers checks it (Gemma-2, Qwen3)
        assert b.vocab_size <= max(64, a.vocab_size), source
    assert gpu_check.scaled_fields(shipped[PAPER_SOURCES[0]], 1.0) == shipped[PAPER_SOURCES[0]]
    with pytest.raises(ValueError, match=r"scale must be in \(0, 1\].*got 0"):
        gpu_check.scaled_fields(shipped[PAPER_SOURCES[0]], 0)


@pytest.mark.slow
def test_gpu_check_runs_every_paper_architecture_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "check.csv"
    argv = ["--device", "cpu", "--dtype", "float32", "--scale", "0.01", "--layers", "2", "--batch", "2",
            "--prompt-tokens", "6", "--new-tokens", "2", "--budget-mb", "8", "--csv", str(out)]  # fmt: skip
    rows = gpu_check.main(argv)
    assert [r["source"] for r in rows] == PAPER_SOURCES  # the 15 models of the paper config, in its order
    types = {r["model_type"] for r in rows}
    assert types == {"gpt2", "gemma2", "llama", "qwen3", "phi3", "olmoe", "vit"}
    for r in rows:
        expected = 2 if r["model_type"] == "vit" else 2 * 2  # one CLS read per image; prompts x new tokens
        assert 0 < r["tokens"] <= expected and r["layers"] == 2, r
        assert r["seconds"] > 0 and r["predicted_s"] > 0 and r["predicted_peak_gib"] > 0, r
        assert math.isnan(r["peak_gib"])  # no CUDA: no device peak
    with out.open() as handle:
        assert [row["source"] for row in csv.DictReader(handle)] == PAPER_SOURCES


def test_gpu_check_stops_starting_models_past_its_time_budget(capsys: pytest.CaptureFixture) -> None:
    argv = ["--device", "cpu", "--dtype", "float32", "--scale", "0.01", "--layers", "2", "--batch", "1",
            "--prompt-tokens", "4", "--new-tokens", "1", "--max-seconds", "0",
            "--models", "openai-community/gpt2", "Qwen/Qwen3-1.7B"]  # fmt: skip
    rows = gpu_check.main(argv)
    assert [r["source"] for r in rows] == ["openai-community/gpt2"]
    assert "skipped (past --max-seconds 0): Qwen/Qwen3-1.7B" in capsys.readouterr().out


def test_gpu_check_refuses_cuda_where_none_is_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"no CUDA device is visible.*--device cpu"):
        gpu_check.main(["--device", "cuda"])


def _timed_rows(truth, workloads: list[tuple[int, int]]) -> list[dict]:
    """gpu_check rows of every paper model whose seconds are the plan's compute time under ``truth``."""
    shipped, rows = shipped_model_configs(), []
    for batch, new in workloads:
        args = gpu_check.parse_args(["--batch", str(batch), "--new-tokens", str(new)])
        for source in PAPER_SOURCES:
            shape, job, _ = gpu_check.predicted(shipped[source], batch, args)
            run = gpu_check.RunSettings("cuda", "bfloat16", args.budget_mb, threads=1)
            seconds = gpu_check._predicted(job, truth, run)
            rows.append({"source": source, "model_type": shape.model_type, "batch": batch, "prompt_tokens": 256,
                         "new_tokens": new, "tokens": batch * new, "seconds": seconds})  # fmt: skip
    return rows


def _write(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_fit_recovers_the_cuda_rates_the_rows_were_timed_at(tmp_path: Path) -> None:
    truth = gpu_check.PlanSettings(cuda_gflops=200_000.0, cuda_gbps=3_000.0, cuda_metric_ns=0.5, cuda_step_us=1_500.0)
    rows = _timed_rows(truth, [(32, 32), (8, 32), (32, 8)])
    startup = {**rows[0], "seconds": rows[0]["seconds"] + 5.0}  # the process's first row pays CUDA's start-up
    path = _write(tmp_path / "check.csv", [startup, *rows])
    fitted, table = gpu_check.fit_table([path], gpu_check.parse_args([]))
    assert len(table) == len(rows)  # the first row is left out, not fitted
    for name in ("cuda_metric_ns", "cuda_step_us"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-3), name
    assert fitted.cuda_metric_vocab_exponent == pytest.approx(0.0, abs=1e-3)
    assert table["ratio"].to_numpy() == pytest.approx(1.0, abs=1e-3)
    assert table["held_out"].to_numpy() == pytest.approx(1.0, abs=1e-3)


def test_fit_shows_a_model_the_rates_cannot_explain(tmp_path: Path) -> None:
    truth = gpu_check.PlanSettings(cuda_metric_ns=0.5, cuda_step_us=1_500.0)
    rows = _timed_rows(truth, [(32, 32), (8, 32)])
    slow = "meta-llama/Llama-3.2-1B-Instruct"
    rows = [{**r, "seconds": r["seconds"] * (3.0 if r["source"] == slow else 1.0)} for r in rows]
    _, table = gpu_check.fit_table([_write(tmp_path / "check.csv", [rows[0], *rows])], gpu_check.parse_args([]))
    held = table.groupby("source")["held_out"].mean()
    assert held[slow] == pytest.approx(1 / 3, rel=0.05)  # fitted without it, the plan reads it at its real rates
    assert held.drop(slow).to_numpy() == pytest.approx(1.0, abs=0.08)  # their fits hold the slow model's rows
