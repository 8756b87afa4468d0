"""ΔH against routing entropy: synthetic stores with a known answer, and a tiny MoE model's store."""

import numpy as np
import pytest
import xarray as xr
from tiny import tiny_model

from entropy_lens import extract_profiles
from entropy_lens.analysis.expansion.spearman import spearman
from entropy_lens.analysis.routing import (
    LAYER_COLUMNS,
    SUMMARY_COLUMNS,
    layer_means,
    layer_spearman_interval,
    routing_correlation,
    routing_pairs,
    routing_tables,
)
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.store import schema
from entropy_lens.store.combine import combine_models

P, T, L = 12, 3, 8


def synthetic(coupled: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``[P, T, L]`` entropy and routing entropy; with ``coupled``, layer l's ΔH rises with its routing."""
    rng = np.random.default_rng(seed)
    layer_r = np.linspace(0.2, 1.3, L)  # routing entropy grows with depth
    routing = layer_r + rng.normal(0, 0.05, (P, T, L))
    steps = (layer_r - layer_r.mean()) if coupled else rng.normal(0, 0.3, L)
    delta = steps + rng.normal(0, 0.05, (P, T, L))
    entropy = 3.0 + np.cumsum(delta, axis=2)
    return entropy.astype(np.float32), routing.astype(np.float32)


def test_pairs_skip_dense_layers_and_masked_slots():
    entropy, routing = synthetic(True)
    routing[:, :, 3] = np.nan  # a dense block
    entropy[0, 2, :] = np.nan  # a masked slot
    d_h, _, layer, prompt = routing_pairs(entropy, routing)
    assert 3 not in set(layer) and set(layer) == set(range(1, L)) - {3}
    assert d_h.size == (P * T - 1) * (L - 2)
    np.testing.assert_allclose(d_h[(layer == 1) & (prompt == 1)], np.diff(entropy[1, :, :2], axis=1)[:, 0], rtol=1e-6)
    with pytest.raises(ValueError, match=r"share a \[P, T, L\] shape"):
        routing_pairs(entropy, routing[..., :-1])


def test_coupled_layers_correlate_and_the_interval_says_so():
    entropy, routing = synthetic(True)
    d_h, r, layer, prompt = routing_pairs(entropy, routing)
    low, high = layer_spearman_interval(d_h, r, layer, prompt, n_boot=200, seed=0)
    assert 0.9 < low <= high <= 1.0


def test_uncoupled_layers_do_not():
    entropy, routing = synthetic(False, seed=4)
    d_h, r, layer, prompt = routing_pairs(entropy, routing)
    low, high = layer_spearman_interval(d_h, r, layer, prompt, n_boot=200, seed=0)
    means = layer_means(d_h, r, layer)
    rho = spearman(means["mean_delta_entropy"].to_numpy(), means["mean_routing_entropy"].to_numpy())[0]
    assert low <= rho <= high and low < 0.5  # far from the coupled case's near-certain rank agreement


def _combined(entropy: np.ndarray, routing: np.ndarray) -> xr.Dataset:
    dims = ("model", "prompt", "token", "layer")
    return xr.Dataset(
        {
            schema.ENTROPY: (dims, entropy[None]),
            schema.ROUTING_ENTROPY: (dims, routing[None]),
        },
        coords={
            "model": ["m"],
            "prompt": [f"p{i}" for i in range(P)],
            "layer": np.arange(L),
            schema.N_LAYERS: ("model", [L]),
            schema.FAMILY: ("model", ["moe"]),
            schema.DEPTH: (("model", "layer"), ((np.arange(L) + 1) / L)[None]),
        },
    )


def test_summary_row_reads_a_combined_store():
    summary, per_layer = routing_correlation(_combined(*synthetic(True)), n_boot=200)
    row = summary.iloc[0]
    assert row["model"] == "m" and row["family"] == "moe" and row["n_moe_layers"] == L - 1
    assert row["spearman_layers"] == pytest.approx(1.0)
    assert row["ci_low"] > 0.9 and row["cells_ci_low"] <= row["spearman_cells"] <= row["cells_ci_high"]
    assert list(per_layer["layer"]) == list(range(1, L)) and (per_layer["n"] == P * T).all()


def test_tiny_moe_store_gives_a_row_per_moe_model_and_none_for_dense():
    prompts = ["the cat", "once upon a time", "how many words", "the dog ran", "a big tree", "the sun"]
    moe = extract_profiles(tiny_model("qwen2_moe"), prompts, generation=GenerationSettings(3))
    dense = extract_profiles(tiny_model("llama"), prompts, generation=GenerationSettings(3))
    combined = combine_models(
        {"moe": moe, "dense": dense}, families={"moe": "qwen", "dense": "llama"}, n_params={"moe": 1, "dense": 1}
    )
    summary, per_layer = routing_tables({"tasks": combined, "blank": combine_models(
        {"dense": dense}, families={"dense": "llama"}, n_params={"dense": 1})}, n_boot=100)  # fmt: skip
    assert list(summary.columns) == list(SUMMARY_COLUMNS) and list(per_layer.columns) == list(LAYER_COLUMNS)
    assert summary[["dataset", "model"]].values.tolist() == [["tasks", "moe"]]
    # 3 blocks, block 1 dense: only block 2 pairs a ΔH with a routing entropy
    assert summary["n_moe_layers"].item() == 1 and summary["note"].item().startswith("fewer than 3")
    assert per_layer["layer"].tolist() == [2]


def test_no_moe_model_gives_empty_tables_with_their_columns():
    dense = extract_profiles(tiny_model("llama"), ["the cat"], generation=GenerationSettings(2))
    summary, per_layer = routing_tables({"blank": combine_models({"d": dense}, families={"d": "l"}, n_params={"d": 1})})
    assert summary.empty and list(summary.columns) == list(SUMMARY_COLUMNS)
    assert per_layer.empty and list(per_layer.columns) == list(LAYER_COLUMNS)
