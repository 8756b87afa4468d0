"""Family held out across size on synthetic blank stores whose family structure is known."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability import heldout
from entropy_lens.analysis.separability.settings import KnnSettings

SETTINGS = KnnSettings(k=7)
FEATURES = FeatureSettings(grid_points=8)
N_PROMPTS = 20
SHAPES = {"rising": 2.0, "falling": -2.0}  # slope of entropy over normalized depth, nats


def _profiles(shape: str, n_layers: int, offset: float, rng, n_prompts: int = N_PROMPTS) -> np.ndarray:
    """``[P, 3, L]`` profiles ``offset + slope * depth`` plus noise: a shape shared across sizes."""
    depth = (np.arange(n_layers) + 1) / n_layers
    clean = offset + SHAPES[shape] * depth
    return clean + rng.normal(scale=0.2, size=(n_prompts, 3, n_layers))


def _split(table):
    """The claim's row over the held-out models, and each model's own row."""
    over = table["model"] == heldout.OVER_MODELS
    return table[over].iloc[0] if over.any() else None, table[~over].reset_index(drop=True)


def _store(models: dict[str, tuple[str, str, int, float]], n_prompts: int = N_PROMPTS, seed: int = 0):
    """``models``: name -> (family, shape, layers, offset)."""
    rng = np.random.default_rng(seed)
    profiles = {m: _profiles(shape, n, off, rng, n_prompts) for m, (_, shape, n, off) in models.items()}
    return combined_dataset(profiles, families={m: spec[0] for m, spec in models.items()})


# Two families x two sizes; each family shares a shape, each model has its own offset.
FAMILY_SHAPES = {
    "qwen-s": ("qwen", "rising", 6, 2.0),
    "qwen-l": ("qwen", "rising", 12, 2.3),
    "gemma-s": ("gemma", "falling", 8, 2.1),
    "gemma-l": ("gemma", "falling", 16, 2.4),
}


def test_a_family_shape_shared_across_sizes_is_recognised_in_the_held_out_model(tmp_path):
    ds = lazy(_store({**FAMILY_SHAPES, "llama": ("llama", "rising", 10, 5.0)}), tmp_path)
    table = heldout.family_heldout({"blank": ds}, features=FEATURES, settings=SETTINGS)
    over, table = _split(table)
    assert list(table.columns) == list(heldout.HELDOUT_COLUMNS)
    assert list(table["model"]) == list(FAMILY_SHAPES)  # the single llama model is held out never
    # the claim's row counts models: 4 of 4 in their own family, exact interval over 4 models, bar 1/2
    assert (over["n"], over["n_own"], over["share"]) == (4, 4, 1.0) and table["own_majority"].all()
    assert over["ci_low"] == pytest.approx(0.025**0.25) and over["majority_share"] == pytest.approx(0.5)
    assert over["models_to_decide"] == heldout.models_to_decide(0.5) == 6 and "qwen-s 2" in over["predicted"]
    assert (table["n"] == N_PROMPTS).all() and (table["n_train"] == 4 * N_PROMPTS).all()
    assert (table["n_family_models"] == 2).all() and (table["n_train_families"] == 3).all()
    assert (table["share"] >= 0.9).all()
    assert (table["ci_low"] > table["chance"]).all() and (table["ci_low"] > table["majority_share"]).all()
    assert table["chance"].tolist() == pytest.approx([1 / 3] * 4)
    assert table["own_share_train"].tolist() == pytest.approx([0.25] * 4)  # 1 of 4 training models
    assert table["majority_share"].tolist() == pytest.approx([0.5] * 4)  # the other family's two models
    assert (table["k"] == SETTINGS.k).all()
    # every model of the synthetic store has vocabulary 1000: each family's pair shares its tokenizer
    assert table.set_index("model").loc["qwen-s", "note"] == (
        "confound: shares its tokenizer (vocabulary 1000) with qwen-l of its family, "
        "so family and tokenizer coincide here"
    )
    qwen = table.set_index("model").loc["qwen-s"]
    assert qwen["predicted"].startswith("qwen ") and qwen["n_own"] == int(qwen["predicted"].split()[1].rstrip(";"))


def test_family_labels_unrelated_to_shape_give_a_share_near_zero():
    # Each family holds one rising and one falling model: the held-out model's shape lives in the other family.
    crossed = {
        "qwen-s": ("qwen", "rising", 6, 2.0),
        "qwen-l": ("qwen", "falling", 12, 2.3),
        "gemma-s": ("gemma", "rising", 8, 2.1),
        "gemma-l": ("gemma", "falling", 16, 2.4),
    }
    table = heldout.family_heldout({"blank": _store(crossed)}, features=FEATURES, settings=SETTINGS)
    over, table = _split(table)
    assert len(table) == 4 and (over["n_own"], over["share"]) == (0, 0.0) and not table["own_majority"].any()
    assert (table["share"] <= 0.1).all() and (table["ci_high"] < table["chance"]).all()
    row = table.set_index("model").loc["qwen-s"]
    assert row["predicted"] == f"gemma {N_PROMPTS}" and row["n_own"] == 0 and row["chance"] == 0.5


def test_k_is_capped_below_the_training_samples_and_noted(caplog):
    with caplog.at_level(logging.WARNING):
        table = heldout.family_heldout(
            {"blank": _store(FAMILY_SHAPES, n_prompts=3)}, features=FEATURES, settings=KnnSettings(k=29)
        )
        _, table = _split(table)
    assert (table["n_train"] == 9).all() and (table["k"] == 8).all()
    assert table["note"].str.startswith("k capped 29 -> 8 (9 training samples); confound: shares its tokenizer").all()
    assert "k=29 is not below the 9 training samples" in caplog.text


def test_singleton_families_give_no_row_and_one_family_cannot_be_scored(caplog):
    singles = {m: (m, shape, n, off) for m, (_, shape, n, off) in FAMILY_SHAPES.items()}
    empty = heldout.family_heldout({"blank": _store(singles)}, features=FEATURES, settings=SETTINGS)
    assert empty.empty and list(empty.columns) == list(heldout.HELDOUT_COLUMNS)
    assert heldout.family_heldout({"tasks": _store(singles)}).empty  # no blank store
    one = {m: ("qwen", shape, n, off) for m, (_, shape, n, off) in list(FAMILY_SHAPES.items())[:2]}
    table = heldout.family_heldout({"blank": _store(one)}, features=FEATURES, settings=SETTINGS)
    _, table = _split(table)
    assert len(table) == 2 and table[["k", "n_own", "share", "ci_low", "ci_high"]].isna().all().all()
    assert table["note"].str.startswith("skipped: the other models hold 1 family (need >= 2)").all()
    assert "no store for dataset 'blank'" in caplog.text


def test_predicted_counts_are_listed_largest_first():
    assert heldout.predicted_counts(np.array(["gemma", "qwen", "qwen", "llama", "gemma", "qwen"])) == (
        "qwen 3; gemma 2; llama 1"
    )


def test_entropy_over_log_v_reads_each_models_own_vocabulary(tmp_path):
    vocab = {"qwen-s": 151936, "qwen-l": 151936, "gemma-s": 262144, "gemma-l": 256000}
    rng = np.random.default_rng(0)
    profiles = {m: _profiles(shape, n, off, rng) for m, (_, shape, n, off) in FAMILY_SHAPES.items()}
    ds = combined_dataset(profiles, families={m: s[0] for m, s in FAMILY_SHAPES.items()}, vocab_sizes=vocab)
    scaled = heldout.normalized_entropy(ds)
    ratio = ds["entropy"].sel(model="gemma-l") / scaled["entropy"].sel(model="gemma-l")
    assert float(ratio.mean()) == pytest.approx(np.log(256000))
    table = heldout.family_heldout({"blank": lazy(ds, tmp_path)}, features=FEATURES, settings=SETTINGS, normalize=True)
    _, table = _split(table)
    assert list(table["model"]) == list(FAMILY_SHAPES) and (table["share"] >= 0.9).all()
    notes = table.set_index("model")["note"]
    assert notes["qwen-s"].startswith("confound: shares its tokenizer (vocabulary 151936) with qwen-l")
    assert notes["gemma-s"] == ""  # another vocabulary than gemma-l: no shared tokenizer


def test_family_features_do_not_read_token_0_where_every_blank_sample_is_the_same():
    """Token 0 of a blank sample reads the BOS token alone, the same in every sample: here it alone carries the
    family's shape, the later tokens are noise common to every model. Family features start at token 1, so
    neither the held-out share, the family kNN nor the pairs' gap finds the family."""
    from entropy_lens.analysis.families.scales import model_samples
    from entropy_lens.analysis.features import FAMILY_FIRST_TOKEN, pooled_features
    from entropy_lens.analysis.separability.targets import STUDY_TARGETS, knn_table

    ds = _store(FAMILY_SHAPES)
    rng = np.random.default_rng(1)
    noise = {m: 2.0 + rng.normal(scale=0.2, size=ds.entropy.sel(model=m).shape) for m in FAMILY_SHAPES}
    entropy = ds.entropy.copy(data=np.stack([noise[m] for m in FAMILY_SHAPES]).astype(np.float32))
    entropy[:, :, 0] = ds.entropy[:, :, 0]  # token 0: the family's shape, as the store has it
    ds = ds.assign(entropy=entropy.where(np.isfinite(ds.entropy)))
    assert pooled_features(ds, settings=FEATURES, first_token=FAMILY_FIRST_TOKEN).X.shape[1] == 2 * 8
    assert pooled_features(ds, settings=FEATURES).X.shape[1] == 3 * 8
    table = heldout.family_heldout({"blank": ds}, features=FEATURES, settings=SETTINGS)
    _, table = _split(table)
    assert (table["share"] < 0.9).all() and (table["ci_low"] < table["majority_share"]).all()
    family = [t for t in STUDY_TARGETS if t.name == "family"]
    auc = knn_table({"blank": ds}, family, features=FEATURES, settings=KnnSettings(k=7))
    assert (auc["auc_mean"] < 0.75).all()  # token 0 alone would separate the families perfectly
    with pytest.raises(ValueError, match="first_token must be an int in"):
        pooled_features(ds, settings=FEATURES, first_token=3)
    samples = model_samples(ds)  # the pairs' gaps read each sample's mean over tokens 1 and 2
    for model in FAMILY_SHAPES:
        want = np.nanmean(ds.entropy.sel(model=model).values[:, 1:, : samples[model].depth.size], axis=1)
        np.testing.assert_allclose(samples[model].rows, want, rtol=1e-6)
