"""Every plot writes a valid, non-trivial PNG and an SVG, and leaves no figure open."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from synthetic import combined_dataset, lazy

from entropy_lens import plots
from entropy_lens.analysis import expansion, families, features

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MIN_PNG_BYTES = 5_000  # a blank 150-dpi canvas with axes is already larger; an empty file is not


def _check(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > MIN_PNG_BYTES
    svg = path.with_suffix(".svg")
    assert svg.exists() and b"<svg" in svg.read_bytes()[:2000]
    assert plt.get_fignums() == []


def _store():
    rng = np.random.default_rng(0)
    profiles = {
        "a-small": rng.uniform(1, 3, size=(6, 4, 4)),
        "a-large": rng.uniform(1, 3, size=(6, 4, 8)),
        "b-small": rng.uniform(3, 5, size=(6, 4, 5)),
    }
    return combined_dataset(
        profiles,
        families={"a-small": "a", "a-large": "a", "b-small": "b"},
        prompt_labels={"task": ["x", "y"] * 3},
    )


def test_profile_bands_plot(tmp_path):
    ds = _store()
    bands = pd.concat([features.profile_bands(ds, m, "task") for m in ("a-small", "a-large")])
    plots.plot_profile_bands(bands, tmp_path / "bands.png", title="tasks")
    _check(tmp_path / "bands.png")


def test_token_heatmap_with_decoded_tokens(tmp_path):
    values = np.linspace(0, 5, 6 * 4).reshape(6, 4)
    values[5] = np.nan  # masked token row is dropped
    top1 = np.arange(24).reshape(6, 4)
    words = ["the", " cat", "\n", "$x$", "a-very-long-token", ""] * 4
    out = tmp_path / "sub" / "heat.png"
    plots.plot_token_heatmap(values, top1, lambda i: words[i], out, token_labels=list("abcdef"), title="p0000")
    _check(out)


def _auc_row(model, target, split, measure, protocol, mean):
    return {
        "model": model,
        "target": target,
        "split": split,
        "measure": measure,
        "protocol": protocol,
        "auc_mean": mean,
        "auc_low": mean - 0.1,
        "auc_high": min(mean + 0.1, 1.0),
        "dummy_high": 0.6,
    }


def test_auc_bars_draw_grouped_rows_with_intervals(tmp_path):
    rows = [
        _auc_row(model, target, split, measure, protocol, 0.8)
        for model in ("m1", "m2")
        for target, split in (("task", ""), ("mmlu_correct", "base"))
        for measure in ("shannon", "renyi(a=2)")
        for protocol in ("grouped", "study")
    ]
    rows.append(_auc_row("all", "family", "", "shannon", "grouped", np.nan))
    plots.plot_auc_bars(pd.DataFrame(rows), tmp_path / "auc.png")
    _check(tmp_path / "auc.png")
    with pytest.raises(ValueError, match="no kNN rows of protocol 'grouped'"):
        plots.plot_auc_bars(pd.DataFrame(rows[1:2]), tmp_path / "none.png")


def test_letter_bias_figure(tmp_path):
    rows = [
        {
            "model": m,
            "style": s,
            "measure": x,
            "accuracy": 0.3,
            "ci_low": 0.2,
            "ci_high": 0.4,
            "chance": 0.25,
            "majority_baseline": 0.3,
            "answered_A": 1.0,
            "answered_B": 0.0,
            "answered_C": 0.0,
            "answered_D": 0.0,
        }
        for m in ("m1", "m2")
        for s in ("base", "instruct")
        for x in ("ll", "calibrated")
    ]
    plots.plot_letter_bias(pd.DataFrame(rows), tmp_path / "letters.png")
    _check(tmp_path / "letters.png")


def test_dendrogram_and_embedding(tmp_path):
    ds = _store()
    means = families.mean_profiles(families.layer_profiles(ds), grid_points=8)
    names = [str(m) for m in means["model"].values]
    plots.plot_dendrogram(
        families.linkage_matrix(means), names, tmp_path / "dendro.png", families=means["family"].values
    )
    _check(tmp_path / "dendro.png")
    emb = families.embed_samples(families.sample_profiles(ds, grid_points=8), method="pca")
    plots.plot_embedding(emb, tmp_path / "embed.png", title="PCA")
    _check(tmp_path / "embed.png")


def test_expansion_scatter(tmp_path):
    ds = _store()
    plots.plot_expansion(
        expansion.expansion_points(ds), tmp_path / "exp.png", spearman=expansion.expansion_spearman(ds)
    )
    _check(tmp_path / "exp.png")


def test_family_profiles_plot_and_svg_only_path(tmp_path):
    store = lazy(_store(), tmp_path)
    assert store["family"].dtype.kind != "U"  # strings come back from Zarr as StringDType
    profiles = families.layer_profiles(store)
    plots.plot_family_profiles(profiles, tmp_path / "fam.png", title="blank")
    _check(tmp_path / "fam.png")
    plots.plot_family_profiles(profiles, tmp_path / "only.svg")
    assert (tmp_path / "only.svg").exists() and not (tmp_path / "only.png").exists()
    with pytest.raises(ValueError, match="lack coordinates"):
        plots.plot_family_profiles(profiles.drop_vars("family"), tmp_path / "x.png")


def test_path_must_be_png_or_svg(tmp_path):
    bands = features.profile_bands(_store(), "a-small", "task")
    with pytest.raises(ValueError, match=r"must end in \.png"):
        plots.plot_profile_bands(bands, tmp_path / "bands.pdf")


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match=r"lacks columns \['family'\]"):
        plots.plot_embedding(pd.DataFrame({"x": [0.0], "y": [1.0]}), "unused.png")


def test_cell_text_is_safe_and_short():
    assert plots.cell_text("$x$") == r"\$x\$"
    assert plots.cell_text("\n") == "\\n"
    assert plots.cell_text("  ") == "··"
    assert plots.cell_text("abcdefghij") == "abcde…"
    assert plots.cell_text("") == "∅"
