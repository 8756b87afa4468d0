"""The bfloat16 path (the paper config's dtype) on CPU, where torch runs it too.

Weights and activations in bf16 keep 8 significant bits (relative rounding ~2^-9 per
operation), so a bf16 profile is not the float32 one: over a few dozen blocks the residual
stream drifts by about a percent, and entropy (a smooth function of the logits) moves by
hundredths of a nat, most on the flat early layers.  Measured here: tiny models of six
architectures, max |dH| 0.021 nats (mean 0.006); SmolLM2-135M, max 0.10 nats, p99 0.085,
mean 0.018, on three prompts x 4 tokens.  The tolerances below leave about 2.5x headroom.
What must hold exactly: the lens runs the final norm and unembedding in the weights'
dtype as the model does, so its last layer is the bf16 model's own next-token
distribution (within float32 rounding of the statistics), and greedy tokens whose
float32 lead is clear do not change.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny import ARCHS, save_tiny_model
from workflow_tiny import copy_workdir, edit_config, jobs_in, run_snakemake

from entropy_lens import extract_profiles, load_model
from entropy_lens.lens.entropy import shannon_entropy
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.loading import cpu_has_bf16_matmul
from entropy_lens.store import storage

PROMPTS = ["once upon a time there was", "the cat sat on the", "how many words"]
TINY_MAX_NATS, TINY_MEAN_NATS = 0.05, 0.015
REAL_MAX_NATS, REAL_MEAN_NATS = 0.25, 0.05
# float32 rounding of the statistics over a vocabulary of up to 49k entries
LAST_LAYER_NATS = 1e-4
# Gemma-2 soft-caps its logits in bf16, the lens in float32 after the bf16 unembedding: the model's
# capped logits carry bf16 rounding (|dz| <= cap * 2^-9), which moves entropy by up to ~1e-3 nats.
CAPPED_LAST_LAYER_NATS = 2e-3
# Where the CPU has no bfloat16 matmul (AVX2 only), torch multiplies bfloat16 in software: on such a host the real
# SmolLM2's last block read in the batched, padded extraction was 0.022 nats from a one-prompt forward (the cause
# within torch's kernels not isolated); on hosts with AVX512-BF16 it stays under LAST_LAYER_NATS.
SOFTWARE_BF16_LAST_LAYER_NATS = 0.05


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("bf16")
    return {arch: save_tiny_model(arch, root / arch, arch) for arch in ARCHS}


def _pair(folder, prompts, tokens):
    f32 = load_model(folder, device="cpu", dtype="float32")
    b16 = load_model(folder, device="cpu", dtype="bfloat16")
    return (
        b16,
        extract_profiles(f32, prompts, generation=GenerationSettings(tokens)),
        extract_profiles(b16, prompts, generation=GenerationSettings(tokens)),
    )


def _last_layer_gap(lm, prompts, ds) -> float:
    """Largest |H| gap between the lens's last layer and the model's own logits, at the first token."""
    gaps = []
    with torch.inference_mode():
        for i, prompt in enumerate(prompts):
            ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"]
            own = lm.model(input_ids=ids).logits[0, -1].float()  # soft-capped by the model where it caps
            gaps.append(abs(shannon_entropy(own[None])[0].item() - float(ds.entropy.values[i, 0, -1])))
    return max(gaps)


@pytest.mark.parametrize("arch", ARCHS)
def test_bf16_profiles_track_float32_within_the_stated_tolerance(tiny_folders, arch):
    b16, f32_ds, b16_ds = _pair(tiny_folders[arch], PROMPTS, 4)
    assert b16.dtype == torch.bfloat16 and b16_ds.attrs["dtype"] == "bfloat16" and f32_ds.attrs["dtype"] == "float32"
    assert b16_ds.entropy.dtype == np.float32  # the statistics are float32 whatever the weights
    gap = np.abs(b16_ds.entropy.values - f32_ds.entropy.values)
    assert np.nanmax(gap) < TINY_MAX_NATS and np.nanmean(gap) < TINY_MEAN_NATS
    np.testing.assert_array_equal(b16_ds.token_id.values, f32_ds.token_id.values)
    assert _last_layer_gap(b16, PROMPTS, b16_ds) < (CAPPED_LAST_LAYER_NATS if b16.softcap else LAST_LAYER_NATS)


@pytest.mark.slow
def test_bf16_on_the_real_smollm2(smollm2, model_cache):
    prompts = ["The capital of France is", "Once upon a time, there was a little", "def fibonacci(n):"]
    b16, f32_ds, b16_ds = _pair(model_cache / "smollm2-135m", prompts, 4)
    gap = np.abs(b16_ds.entropy.values - f32_ds.entropy.values)
    assert np.nanmax(gap) < REAL_MAX_NATS and np.nanmean(gap) < REAL_MEAN_NATS
    np.testing.assert_array_equal(b16_ds.token_id.values, f32_ds.token_id.values)
    bound = LAST_LAYER_NATS if cpu_has_bf16_matmul() else SOFTWARE_BF16_LAST_LAYER_NATS
    assert _last_layer_gap(b16, prompts, b16_ds) < bound


@pytest.mark.slow
def test_tiny_workflow_runs_in_bf16_and_says_so(tiny_run, tmp_path):
    """compute.dtype reaches the extraction job (a param: changing it reruns extraction alone) and its store."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    edit_config(workdir, {"compute": {"dtype": "bfloat16"}})
    store = "results/profiles/tiny-llama/blank.zarr"
    rerun = run_snakemake(workdir, store, "--cores", "2")
    assert jobs_in(rerun.stdout) == {"extract_profiles"}
    per_model = storage.open_profiles(workdir / store)
    assert per_model.attrs["dtype"] == "bfloat16"
    assert storage.open_profiles(tiny_run / store).attrs["dtype"] == "float32"
    assert per_model.entropy.dtype == np.float32
    valid = per_model.token_id.values >= 0  # [P, T]: slots before each sample stopped
    assert np.isfinite(per_model.entropy.values[valid]).all() and np.isnan(per_model.entropy.values[~valid]).all()
    # the first step sees the same prompt in both runs: bf16 tracks float32 there at every layer
    first = (
        per_model.entropy.isel(token=0).values - storage.open_profiles(tiny_run / store).entropy.isel(token=0).values
    )
    assert np.abs(first).max() < 0.05


def test_bfloat16_where_fast_follows_the_hosts_bfloat16_units(monkeypatch):
    from entropy_lens.model import loading

    monkeypatch.setattr(loading, "cpu_has_bf16_matmul", lambda: False)
    assert loading.resolve_dtype("bfloat16_where_fast", "cpu") == torch.float32
    assert loading.resolve_dtype("bfloat16_where_fast", "cuda") == torch.bfloat16
    monkeypatch.setattr(loading, "cpu_has_bf16_matmul", lambda: True)
    assert loading.resolve_dtype("bfloat16_where_fast", "cpu") == torch.bfloat16
    with pytest.raises(ValueError, match="'auto' or 'bfloat16_where_fast', got 'bf16'"):
        loading.resolve_dtype("bf16", "cpu")
