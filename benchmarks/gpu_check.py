"""Every architecture of the paper config at its real shape, random init, no download, against the plan.

The paper config runs hub models in bfloat16 on CUDA; a GPU node without the hub (or before downloading
60 GB of weights) can still measure what sizes its jobs: the same architecture at the same shape, random
weights.  For each model of the config (shapes shipped in ``entropy_lens/data/model_configs.json``, the
real ``config.json`` fields) one extraction of ``--batch`` prompts of ``--prompt-tokens`` tokens,
``--new-tokens`` generated (an image classifier: ``--batch`` random images), is timed and set against
what ``entropy-lens plan`` predicts for that workload on that device: seconds (the plan's compute term,
without its per-job overhead), the lens's GFLOP/s (2 x L x d x V per token read) and the peak device
memory (the plan's weights + KV cache + activations + lens memory, without its CUDA context allowance).
A ratio measured / predicted far from 1 says which ``cuda_*`` rate of the plan to refit.

    python benchmarks/gpu_check.py                         # the 15 models of config/paper.yaml (--max-seconds 480)
    python benchmarks/gpu_check.py --models google/gemma-2-2b-it --batch 8
    python benchmarks/gpu_check.py --device cpu --dtype float32 --scale 0.02 --layers 2   # CPU smoke test
    python benchmarks/gpu_check.py --fit benchmarks/measured/gpu_check_h200_*.csv    # the plan's CUDA rates

``--scale`` shrinks every width (head size, hidden and MLP sizes, vocabulary) by that factor and keeps the
architecture: it makes the script testable on a CPU, not its numbers meaningful there.  Models still
waiting when ``--max-seconds`` is spent are listed as skipped.  Random weights make random text: the
numbers are about cost, not about profiles.

``--fit`` reads such rows back (no model is built) and fits the plan's ``cuda_*`` rates to them
(:func:`entropy_lens.workflow.plan.fit_rates`, without the per-job overhead: the rows time one extraction
after a warm-up), leaving out the first row of each file (it pays the process's CUDA start-up). Printed: the
``plan:`` fields for the config, and each row's predicted / measured seconds in sample and with its model left
out of the fit.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import torch
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageClassification, PreTrainedTokenizerFast

from entropy_lens import extract_profiles
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.vision import extract_image_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.lens_model import wrap_model
from entropy_lens.store import schema
from entropy_lens.workflow.plan import (
    EXTRACT,
    Job,
    PlanSettings,
    RunSettings,
    Workload,
    fit_rates,
    plan_job,
    shape_from_fields,
    shipped_model_configs,
)
from entropy_lens.workflow.plan.cost import compute_seconds

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "config" / "paper.yaml"
ALPHAS = (0.5, 1.0, 5.0)  # config/paper.yaml's lens.alphas
GIB = 2**30
COLUMNS = ("source", "model_type", "layers", "hidden", "vocab", "batch", "prompt_tokens", "new_tokens", "tokens",
           "seconds", "predicted_s", "tokens_s", "lens_gflops", "predicted_lens_gflops", "peak_gib",
           "predicted_peak_gib")  # fmt: skip
# The plan settings a --fit prints: the CUDA rates and the metrics' vocabulary exponent.
CUDA_FIELDS = ("cuda_gflops", "cuda_gbps", "cuda_metric_ns", "cuda_step_us", "cuda_metric_vocab_exponent")


def config_sources(path: Path) -> list[str]:
    """The model sources of a workflow config, in its order, each once."""
    return list(dict.fromkeys(spec["source"] for spec in yaml.safe_load(path.read_text())["models"].values()))


def _scaled(value: int, scale: float, step: int) -> int:
    """``value x scale`` rounded to a positive multiple of ``step`` (kernels want rows of 16-byte multiples)."""
    return step * max(1, round(value * scale / step))


def scaled_fields(fields: Mapping, scale: float, layers: int | None = None) -> dict:
    """``config.json`` fields with every width times ``scale`` (heads, experts and positions kept) and,
    if given, ``layers`` blocks.

    The head size is scaled to a multiple of 8 (rotary embeddings pair dimensions); where the hidden size is
    heads x head size (no ``head_dim`` field: GPT-2, Llama-3-8B, Phi-3, OLMoE's q/k norms) it stays so, and
    elsewhere it stays a multiple of the heads (transformers checks it).

    Raises:
        ValueError: for a ``scale`` outside ``(0, 1]``.
    """
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1] (1: the real shape), got {scale!r}")
    out = dict(fields)
    hidden_key = "n_embd" if "n_embd" in out else "hidden_size"
    heads_key = "n_head" if "n_head" in out else "num_attention_heads"
    if layers:
        out["n_layer" if "n_layer" in out else "num_hidden_layers"] = layers
    if scale == 1:
        return out
    heads = out[heads_key]
    head_dim = out.get("head_dim") or out[hidden_key] // heads
    small_head = _scaled(head_dim, scale, 8)
    if out.get("head_dim"):
        out["head_dim"] = small_head
        out[hidden_key] = heads * _scaled(out[hidden_key] // heads, scale, 4)  # a multiple of the heads
    else:
        out[hidden_key] = heads * small_head
    out.update({k: small_head for k in ("query_pre_attn_scalar",) if k in out})
    out.update({k: _scaled(out[k], scale, 8) for k in ("intermediate_size", "n_inner") if out.get(k)})
    if "image_size" not in out:
        out["vocab_size"] = max(64, _scaled(out["vocab_size"], scale, 8))
    return out


def word_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A whitespace tokenizer over words ``t0 .. t{V-1}`` (ids as the model's vocabulary)."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="t1", eos_token="t2", pad_token="t0")


def random_model(source: str, fields: Mapping, *, dtype: torch.dtype, device: str):
    """A random-init model of these fields, built on ``device`` (no host copy of its weights)."""
    image = "image_size" in fields
    if not image:  # the word tokenizer's special ids (a scaled vocabulary may end before the real ones)
        fields = {**fields, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    config = AutoConfig.for_model(**fields)
    torch.manual_seed(0)
    with torch.device(device):
        auto = AutoModelForImageClassification if image else AutoModelForCausalLM
        model = auto.from_config(config, dtype=dtype)
    if image:
        from transformers import ViTImageProcessor  # the paper's one image classifier is a ViT

        side = config.image_size
        processor = ViTImageProcessor(size={"height": side, "width": side})
        return wrap_model(model, processor, name=source, source=source)
    return wrap_model(model, word_tokenizer(config.vocab_size), name=source, source=source)


def _texts(n: int, tokens: int, vocab: int, seed: int) -> list[str]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n, tokens), generator=generator)
    return [" ".join(f"t{i}" for i in row.tolist()) for row in ids]


def _images(n: int, side: int, seed: int) -> list:
    from PIL import Image

    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (n, side, side, 3), generator=generator, dtype=torch.uint8).numpy()
    return [Image.fromarray(p) for p in pixels]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_once(lm, batch: int, *, prompt_tokens: int, new_tokens: int, budget_mb: int) -> tuple[float, int]:
    """Seconds of one extraction of ``batch`` prompts (images), after a warm-up, and the tokens it read."""
    lens = LensSettings(alphas=ALPHAS, budget_bytes=budget_mb * 2**20)
    if lm.readout is not None:
        images = _images(batch, lm.model.config.image_size, seed=batch)
        extract_image_profiles(lm, images[:1], lens=lens, batch_size=1)  # warm-up: kernels, allocator
        run = lambda: extract_image_profiles(lm, images, lens=lens, batch_size=batch)  # noqa: E731
    else:
        texts = _texts(batch, prompt_tokens, lm.vocab_size, seed=batch)
        warm, timed = GenerationSettings(2), GenerationSettings(new_tokens)
        extract_profiles(lm, texts[:1], generation=warm, prompting=PromptSettings(batch_size=1), lens=lens)  # warm-up
        batched = PromptSettings(batch_size=batch)
        run = lambda: extract_profiles(lm, texts, generation=timed, prompting=batched, lens=lens)  # noqa: E731
    device = str(lm.device)
    _sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    profiles = run()
    _sync(device)
    seconds = time.perf_counter() - start
    read = int(profiles[schema.ENTROPY].isel({schema.LAYER: 0}).notnull().sum())  # tokens before any stop
    return seconds, read


def predicted(fields: Mapping, batch: int, args: argparse.Namespace):
    """The shape, the plan's :class:`JobPlan` of this workload on this device and dtype (default plan
    settings) and the matmul GFLOP/s the plan assumes for the lens there."""
    shape = shape_from_fields(fields)
    if shape.image_tokens:
        work = Workload(batch, shape.image_tokens - 1, shape.image_tokens - 1, 1, batch, len(ALPHAS))
    else:
        work = Workload(batch, args.prompt_tokens, args.prompt_tokens, args.new_tokens, batch, len(ALPHAS))
    device = "cuda" if args.device.startswith("cuda") else "cpu"
    run, settings = RunSettings(device, args.dtype, args.budget_mb, threads=torch.get_num_threads()), PlanSettings()
    rates = settings.rates(run)
    matmul = rates.gflops_32 if run.dtype_bytes == 4 else rates.gflops_16  # the rate the plan gives the lens
    return shape, plan_job(Job(EXTRACT, "check", "check", 0, 1, shape, (work,)), run, settings), matmul


def check_model(source: str, fields: Mapping, args: argparse.Namespace) -> dict:
    """One row: the model's shape, what one extraction measured and what the plan predicted for it."""
    lm = random_model(source, fields, dtype=getattr(torch, args.dtype), device=args.device)
    seconds, read = run_once(
        lm, args.batch, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens, budget_mb=args.budget_mb
    )
    peak = torch.cuda.max_memory_allocated() / GIB if args.device.startswith("cuda") else math.nan
    shape, plan, matmul = predicted(fields, args.batch, args)
    del lm
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    lens_flops = 2.0 * shape.n_layers * shape.hidden_size * shape.vocab_size * read
    return {
        "source": source, "model_type": shape.model_type, "layers": shape.n_layers, "hidden": shape.hidden_size,
        "vocab": shape.vocab_size, "batch": args.batch, "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens, "tokens": read, "seconds": seconds,
        "predicted_s": plan.compute_s, "tokens_s": read / seconds, "lens_gflops": lens_flops / seconds / 1e9,
        "predicted_lens_gflops": matmul,
        "peak_gib": peak,
        "predicted_peak_gib": (plan.weights_bytes + plan.kv_bytes + plan.activation_bytes + plan.lens_bytes) / GIB,
    }  # fmt: skip


def _fit_row(row: pd.Series, shipped: Mapping, args: argparse.Namespace):
    """The run settings, the plan of one timed row's workload (at its recorded shape) and its seconds."""
    image = row["model_type"] == "vit"
    new = 1 if image else int(row["new_tokens"])
    prompt = int(row["prompt_tokens"]) if pd.notna(row["prompt_tokens"]) else args.prompt_tokens
    again = argparse.Namespace(**{**vars(args), "prompt_tokens": prompt, "new_tokens": new})
    _, job, _ = predicted(shipped[row["source"]], int(row["batch"]), again)
    run = RunSettings("cuda", args.dtype, args.budget_mb, threads=1)
    return run, job, float(row["seconds"])


def fit_table(paths: Sequence[Path], args: argparse.Namespace) -> tuple[PlanSettings, pd.DataFrame]:
    """The plan settings fitted to the rows of ``paths`` (each file's first row left out), and per row the
    predicted / measured seconds in sample (``ratio``) and with the row's model out of the fit (``held_out``)."""
    tables = [pd.read_csv(path).iloc[1:] for path in paths]
    table = pd.concat(tables, ignore_index=True)
    if "new_tokens" not in table:  # rows written before the workload had columns of its own
        table["new_tokens"], table["prompt_tokens"] = table["tokens"] // table["batch"], math.nan
    shipped = shipped_model_configs()
    unknown = sorted(set(table["source"]) - set(shipped))
    if unknown:
        raise SystemExit(f"{', '.join(map(str, paths))}: no shipped config.json fields for {unknown}")
    rows = [_fit_row(row, shipped, args) for _, row in table.iterrows()]
    fitted = fit_rates(rows, PlanSettings(), "cuda", overhead=False)
    table["ratio"] = [_predicted(job, fitted, run) / s for run, job, s in rows]
    held = []
    for source, run, job, seconds in zip(table["source"], *zip(*rows, strict=True), strict=True):
        others = [r for r, other in zip(rows, table["source"], strict=True) if other != source]
        held.append(_predicted(job, fit_rates(others, PlanSettings(), "cuda", overhead=False), run) / seconds)
    table["held_out"] = held
    return fitted, table


def _predicted(job, settings: PlanSettings, run: RunSettings) -> float:
    """Compute seconds of ``job`` under ``settings`` (no per-job overhead: the rows time the extraction only)."""
    return compute_seconds(job.terms, settings.rates(run), job.vocab_size)


def report_fit(paths: Sequence[Path], args: argparse.Namespace) -> pd.DataFrame:
    """Print the fitted ``plan:`` fields and the fit per row; return the rows with their ratios."""
    fitted, table = fit_table(paths, args)
    fields = ", ".join(f"{name}: {getattr(fitted, name):.4g}" for name in CUDA_FIELDS)
    print(f"plan: {{{fields}}}")
    shown = table[["source", "batch", "new_tokens", "seconds", "ratio", "held_out"]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for column in ("ratio", "held_out"):
        print(f"{column}: predicted / measured {table[column].min():.2f}-{table[column].max():.2f} "
              f"(median {table[column].median():.2f}) over {len(table)} rows")  # fmt: skip
    return table


def _line(row: Mapping) -> str:
    ratio = row["seconds"] / row["predicted_s"] if row["predicted_s"] else math.nan
    return (
        f"{row['source']:40s} {row['layers']:4d} {row['hidden']:6d} {row['tokens']:6d} {row['seconds']:8.2f} "
        f"{row['predicted_s']:8.2f} {ratio:6.2f} {row['tokens_s']:9.1f} {row['lens_gflops']:9.1f} "
        f"{row['peak_gib']:7.2f} {row['predicted_peak_gib']:7.2f}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", type=Path, default=PAPER, help="whose models to check (default: the paper's)")
    parser.add_argument("--models", nargs="+", help="hub ids to check (default: every source of --configfile)")
    parser.add_argument("--batch", type=int, default=32, help="prompts per pass (config/paper.yaml: 32)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--scale", type=float, default=1.0, help="widths times this (CPU smoke tests)")
    parser.add_argument("--layers", type=int, default=None, help="fewer blocks than the real model (smoke tests)")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=32, help="config/paper.yaml's max_new_tokens")
    parser.add_argument("--budget-mb", type=int, default=2048, help="lens working memory (config lens.budget_mb)")
    parser.add_argument("--max-seconds", type=float, default=480, help="start no further model after this long")
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    parser.add_argument("--fit", type=Path, nargs="+", metavar="CSV", help="fit the plan's CUDA rates to these rows")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[dict]:
    """Check each model in turn; print one line each (and write ``--csv``); return the rows."""
    args = parse_args(argv)
    if args.fit:
        return report_fit(args.fit, args).to_dict("records")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device is visible: run on a GPU node, or pass --device cpu for a smoke test")
    shipped = shipped_model_configs()
    sources = args.models or config_sources(args.configfile)
    unknown = [s for s in sources if s not in shipped]
    if unknown:
        raise SystemExit(
            f"no shipped config.json fields for {unknown}: add them to entropy_lens/data/model_configs.json "
            "(docs/architecture.md, 'A model family')"
        )
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"device {args.device} ({name}), {args.dtype}, batch {args.batch}, {args.prompt_tokens} prompt tokens, "
          f"{args.new_tokens} new tokens, widths x {args.scale}")  # fmt: skip
    print(f"{'model':40s} {'L':>4s} {'d':>6s} {'tokens':>6s} {'s':>8s} {'plan s':>8s} {'ratio':>6s} "
          f"{'tokens/s':>9s} {'lens GF/s':>9s} {'GiB':>7s} {'plan GiB':>7s}")  # fmt: skip
    rows, start = [], time.perf_counter()
    for i, source in enumerate(sources):
        if i and time.perf_counter() - start > args.max_seconds:  # the first model always runs
            print(f"skipped (past --max-seconds {args.max_seconds:g}): {', '.join(sources[i:])}")
            break
        rows.append(check_model(source, scaled_fields(shipped[source], args.scale, args.layers), args))
        print(_line(rows[-1]), flush=True)
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
