"""Extraction throughput and peak device memory on random-init models of real shapes.

The paper config runs hub models in bfloat16 on CUDA; a GPU node without the hub (or
before downloading 20 GB of weights) can still measure what matters for sizing jobs: the
same architecture at the same shape, random weights.  For each model (shapes shipped in
``entropy_lens/data/model_configs.json``) and batch size it prints prompts/s, generated
tokens/s, the lens's achieved GFLOP/s (2 x L x d x V per generated token) and the peak
CUDA memory, to set against ``entropy-lens plan`` (its cuda_* rates can be calibrated from them).

    python benchmarks/gpu_check.py                       # Gemma-2-2B and Llama-3.2-1B shapes, batch 8 and 32
    python benchmarks/gpu_check.py --device cpu --layers 2 --batches 2   # a smoke test of the script on a CPU

Random weights make random text: the numbers are about cost, not about profiles.
"""

from __future__ import annotations

import argparse
import time

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

from entropy_lens import extract_profiles
from entropy_lens.model.loading import wrap_model
from entropy_lens.workflow.plan import shipped_model_configs

DEFAULT_MODELS = ("google/gemma-2-2b-it", "meta-llama/Llama-3.2-1B-Instruct")


def word_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A whitespace tokenizer over words ``t0 .. t{V-1}`` (ids as the model's vocabulary)."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="t1", eos_token="t2", pad_token="t0")


def random_model(source: str, *, layers: int | None, dtype: torch.dtype, device: str):
    """A random-init model of the shipped shape of ``source`` (optionally fewer layers)."""
    fields = dict(shipped_model_configs()[source])
    if layers:
        fields["num_hidden_layers"] = layers
    config = AutoConfig.for_model(**fields)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype).to(device)
    return wrap_model(model, word_tokenizer(config.vocab_size), name=source, source=source)


def prompts(n: int, tokens: int, vocab: int, seed: int) -> list[str]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n, tokens), generator=generator)
    return [" ".join(f"t{i}" for i in row.tolist()) for row in ids]


def measure(lm, batch: int, *, prompt_tokens: int, new_tokens: int, budget_mb: int) -> dict[str, float]:
    texts = prompts(batch, prompt_tokens, lm.vocab_size, seed=batch)
    extract_profiles(lm, texts[:1], max_new_tokens=2, batch_size=1)  # warm-up: kernels, allocator
    if lm.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    extract_profiles(lm, texts, max_new_tokens=new_tokens, batch_size=batch, budget_bytes=budget_mb * 2**20)
    if lm.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    lens_flops = 2.0 * lm.n_layers * lm.model.config.hidden_size * lm.vocab_size * batch * new_tokens
    peak = torch.cuda.max_memory_allocated() / 2**30 if lm.device.type == "cuda" else float("nan")
    return {
        "seconds": seconds,
        "prompts_s": batch / seconds,
        "tokens_s": batch * new_tokens / seconds,
        "lens_gflops": lens_flops / seconds / 1e9,
        "peak_gib": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--batches", nargs="+", type=int, default=[8, 32])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--layers", type=int, default=None, help="fewer layers than the real model (smoke tests)")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--budget-mb", type=int, default=2048, help="lens working memory (config lens.budget_mb)")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device is visible: run on a GPU node, or pass --device cpu for a smoke test")
    dtype = getattr(torch, args.dtype)
    print(
        f"device {args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}), "
        f"{args.dtype}, {args.prompt_tokens} prompt tokens, {args.new_tokens} new tokens"
    )
    header = ("model", "batch", "s", "prompts/s", "tokens/s", "lens GFLOP/s", "peak GiB")
    print(f"{header[0]:36s} " + " ".join(f"{h:>{w}s}" for h, w in zip(header[1:], (5, 7, 9, 9, 12, 8), strict=True)))
    for source in args.models:
        lm = random_model(source, layers=args.layers, dtype=dtype, device=args.device)
        for batch in args.batches:
            m = measure(
                lm, batch, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens, budget_mb=args.budget_mb
            )
            print(
                f"{source:36s} {batch:5d} {m['seconds']:7.2f} {m['prompts_s']:9.2f} {m['tokens_s']:9.1f} "
                f"{m['lens_gflops']:12.1f} {m['peak_gib']:8.2f}"
            )
        del lm
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
