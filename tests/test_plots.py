"""Every plot draws what its name promises (lines, bars, whiskers, labels), writes a PNG and an SVG,
and leaves no figure open."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from synthetic import combined_dataset, lazy

from entropy_lens.analysis import bands as analysis_bands
from entropy_lens.analysis.expansion import overlap, spearman
from entropy_lens.analysis.families import clustering
from entropy_lens.analysis.families import profiles as family_profiles
from entropy_lens.plots import style
from entropy_lens.plots.accuracy import plot_letter_bias
from entropy_lens.plots.expansion import plot_expansion, plot_overlap_depth
from entropy_lens.plots.families import plot_dendrogram, plot_embedding
from entropy_lens.plots.knn import plot_auc_bars
from entropy_lens.plots.profiles import cell_text, plot_family_profiles, plot_profile_bands, plot_token_heatmap
from entropy_lens.plots.skipping import plot_skip_map

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch) -> dict[str, Figure]:
    """The figures the plot functions save, by file name, for the tests to read what was drawn."""
    figures: dict[str, Figure] = {}
    save = style.save_figure

    def record(fig: Figure, path) -> None:
        figures[Path(path).name] = fig
        save(fig, path)

    monkeypatch.setattr(style, "save_figure", record)
    return figures


def _check(path):
    assert path.read_bytes()[:8] == PNG_MAGIC
    svg = path.with_suffix(".svg")
    assert svg.exists() and b"<svg" in svg.read_bytes()[:2000]
    assert plt.get_fignums() == []


def _panels(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def _ticks(labels) -> list[str]:
    return [label.get_text() for label in labels]


def _whiskers(ax) -> list[np.ndarray]:
    """The interval whiskers of every error bar on ``ax``: one ``[2, 2]`` segment each."""
    return [seg for c in ax.containers if isinstance(c, ErrorbarContainer) for seg in c.lines[2][0].get_segments()]


def _legend_texts(fig: Figure) -> set[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    return {text.get_text() for legend in legends for text in legend.get_texts()}


_ZERO_AXES = ([(0.0, 0.0), (0.0, 1.0)], [(0.0, 0.0), (1.0, 0.0)])  # axvline(0), axhline(0)


def _unnamed_series(fig: Figure) -> list[str]:
    """Every drawn series (bars, lines, line and marker collections; an error bar's parts and a line's band
    belong to their series, the zero axes x = 0 and y = 0 are axes) whose label the figure's legends do not show."""
    named, missing = _legend_texts(fig), []
    for ax in _panels(fig):
        parts = {id(a) for c in ax.containers if isinstance(c, ErrorbarContainer) for a in c.get_children()}
        parts |= {id(line) for line in ax.get_lines() if sorted(map(tuple, line.get_xydata())) in _ZERO_AXES}
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        lines = [a for a in [*ax.get_lines(), *ax.collections] if id(a) not in parts]
        series = bars + [a for a in lines if isinstance(a, (LineCollection, PathCollection)) or a in ax.get_lines()]
        missing += [f"{ax.get_title()}: {a.get_label()}" for a in series if a.get_label() not in named]
    return missing


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


def test_profile_bands_plot(tmp_path, drawn):
    ds = _store()
    bands = pd.concat([analysis_bands.profile_bands(ds, m, "task") for m in ("a-small", "a-large")])
    plot_profile_bands(bands, tmp_path / "bands.png", title="tasks")
    _check(tmp_path / "bands.png")
    panels = _panels(drawn["bands.png"])
    assert [ax.get_title() for ax in panels] == ["a-small", "a-large"]
    assert _unnamed_series(drawn["bands.png"]) == []
    for ax, n_layers in zip(panels, (4, 8), strict=True):  # one line and one band per task
        assert [line.get_label() for line in ax.get_lines()] == ["x", "y"]
        assert all(len(line.get_xdata()) == n_layers for line in ax.get_lines())
        assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 2
        for line in ax.get_lines():  # the drawn means are the frame's, not zeros or another model's
            rows = bands[(bands["model"] == ax.get_title()) & (bands["value"] == line.get_label())]
            np.testing.assert_allclose(line.get_ydata(), rows["mean"])
            np.testing.assert_allclose(line.get_xdata(), rows["depth"])


def test_token_heatmap_with_decoded_tokens(tmp_path, drawn):
    values = np.linspace(0, 5, 6 * 4).reshape(6, 4)
    values[5] = np.nan  # masked token row is dropped
    top1 = np.arange(24).reshape(6, 4)
    words = ["the", " cat", "\n", "$x$", "a-very-long-token", ""] * 4
    out = tmp_path / "sub" / "heat.png"
    plot_token_heatmap(values, top1, lambda i: words[i], out, token_labels=list("abcdef"), title="p0000")
    _check(out)
    ax = _panels(drawn["heat.png"])[0]
    (image,) = [a for a in ax.get_images() if isinstance(a, AxesImage)]
    assert image.get_array().shape == (5, 4)  # the masked row is gone
    np.testing.assert_allclose(np.ma.getdata(image.get_array()), values[:5])
    assert _ticks(ax.get_yticklabels()) == list("abcde")
    assert sorted(t.get_text() for t in ax.texts) == sorted(cell_text(words[i]) for i in range(20))


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


def test_auc_bars_draw_grouped_rows_with_intervals(tmp_path, drawn):
    rows = [
        _auc_row(model, target, split, measure, protocol, 0.8)
        for model in ("m1", "m2")
        for target, split in (("task", ""), ("mmlu_correct", "base"))
        for measure in ("shannon", "renyi(a=2)")
        for protocol in ("grouped", "study")
    ]
    rows.append(_auc_row("all", "family", "", "shannon", "grouped", np.nan) | {"note": "skipped: 1 class"})
    plot_auc_bars(pd.DataFrame(rows), tmp_path / "auc.png", names={"family": "model identity"})
    _check(tmp_path / "auc.png")
    fig = drawn["auc.png"]
    panels = _panels(fig)
    assert [ax.get_title() for ax in panels] == ["m1", "m2", "all models pooled"]
    assert _unnamed_series(fig) == []  # the measures, the dummy's tick and chance are all in the legend
    assert {"shannon", "renyi(a=2)", "dummy classifier: upper end of its 95% CI", "chance (0.5)"} <= _legend_texts(fig)
    pooled = panels[2]  # the unscored row: no bar, a note where it would stand, its reason under the figure
    assert _ticks(pooled.get_xticklabels()) == ["model identity"]
    assert [(t.get_text(), round(t.get_position()[0], 6)) for t in pooled.texts] == [("not scored", -0.2)]
    assert pooled.get_xlabel() == "not scored: model identity (skipped: 1 class)"
    assert [ax.get_xlabel() for ax in panels[:2]] == ["", ""]
    for ax in panels[:2]:  # 2 targets x 2 measures of the grouped protocol, each bar with its interval
        assert _ticks(ax.get_xticklabels()) == ["task", "mmlu_correct/base"]
        bars = [bar for c in ax.containers if isinstance(c, BarContainer) for bar in c]
        assert [round(bar.get_height(), 6) for bar in bars] == [0.8] * 4
        whiskers = _whiskers(ax)
        assert len(whiskers) == 4 and all(np.allclose(w[:, 1], [0.7, 0.9]) for w in whiskers)
        errorbars = [line for c in ax.containers if isinstance(c, ErrorbarContainer) for line in c.lines[2]]
        dummies = [c for c in ax.collections if isinstance(c, LineCollection) and c not in errorbars]
        ends = [seg[:, 1] for c in dummies for seg in c.get_segments()]  # the dummy's upper end over each bar
        assert len(ends) == 4 and np.allclose(ends, 0.6)
    with pytest.raises(ValueError, match="no kNN rows of protocol 'grouped'"):
        plot_auc_bars(pd.DataFrame(rows[1:2]), tmp_path / "none.png")


def test_letter_bias_figure(tmp_path, drawn):
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
    plot_letter_bias(pd.DataFrame(rows), tmp_path / "letters.png")
    _check(tmp_path / "letters.png")
    panels = _panels(drawn["letters.png"])
    assert len(panels) == 4  # letters and accuracy, per model
    names = ["base\nll", "base\ncalibrated", "instruct\nll", "instruct\ncalibrated"]
    for letters, accuracy in (panels[0:3:2], panels[1:4:2]):
        assert _ticks(letters.get_xticklabels()) == names == _ticks(accuracy.get_xticklabels())
        heights = [bar.get_height() for c in letters.containers for bar in c]
        assert len(heights) == 16 and sum(heights) == pytest.approx(4.0)  # 4 letters x 4 bars, stacked to 1
        whiskers = _whiskers(accuracy)
        assert len(whiskers) == 4 and all(np.allclose(w[:, 1], [0.2, 0.4]) for w in whiskers)


def test_dendrogram_and_embedding(tmp_path, drawn):
    ds = _store()
    means = family_profiles.mean_profiles(family_profiles.layer_profiles(ds), grid_points=8)
    names = [str(m) for m in means["model"].values]
    plot_dendrogram(clustering.linkage_matrix(means), names, tmp_path / "dendro.png", families=means["family"].values)
    _check(tmp_path / "dendro.png")
    dendro = _panels(drawn["dendro.png"])[0]
    assert sorted(_ticks(dendro.get_yticklabels())) == sorted(names)
    assert sum(len(c.get_segments()) for c in dendro.collections if isinstance(c, LineCollection)) == len(names) - 1
    emb = clustering.embed_samples(family_profiles.sample_profiles(ds, grid_points=8), method="pca")
    plot_embedding(emb, tmp_path / "embed.png", title="PCA")
    _check(tmp_path / "embed.png")
    scatters = [c for c in _panels(drawn["embed.png"])[0].collections if isinstance(c, PathCollection)]
    assert [c.get_label() for c in scatters] == ["a", "b"]
    assert sum(len(c.get_offsets()) for c in scatters) == len(emb) > 0


def test_expansion_scatter(tmp_path, drawn):
    ds = _store()
    points = spearman.expansion_points(ds)
    plot_expansion(points, tmp_path / "exp.png", spearman=spearman.expansion_spearman(ds))
    _check(tmp_path / "exp.png")
    fig = drawn["exp.png"]
    scatters = [c for c in _panels(fig)[0].collections if isinstance(c, PathCollection)]
    models = list(pd.unique(points["model"]))
    # the models' points are drawn in turns, so none lies under all the others'
    assert [c.get_label().split(" ")[0] for c in scatters] == models * (len(scatters) // len(models))
    assert len(scatters) > len(models) and all("ρ=" in c.get_label() for c in scatters)
    assert sum(len(c.get_offsets()) for c in scatters) == len(points) > 0
    assert _unnamed_series(fig) == [] and len(_legend_texts(fig)) == len(models)  # each model named once
    for model in models:  # each point where the frame puts it: (Δ nucleus, ΔH) of its model
        drawn_points = np.concatenate([c.get_offsets() for c in scatters if c.get_label().split(" ")[0] == model])
        rows = points[points["model"] == model][["delta_nucleus", "delta_entropy"]].to_numpy()
        np.testing.assert_allclose(np.unique(drawn_points, axis=0), np.unique(rows, axis=0))
        assert len(drawn_points) == len(rows)


def _overlap_store():
    """Two models whose Jaccard rises with depth, with prompt noise; equal nucleus sizes keep it consistent."""
    rng = np.random.default_rng(1)
    jaccard, nucleus = {}, {}
    for model, n_layers in (("a-small", 4), ("a-large", 8)):
        shape = (6, 4, n_layers)
        jaccard[model] = np.clip(np.linspace(0.1, 0.7, n_layers) + 0.05 * rng.normal(size=shape), 0, 1)
        jaccard[model][..., -1] = np.nan
        nucleus[model] = np.full(shape, 8, dtype=np.int32)
    profiles = {m: np.ones(j.shape) for m, j in jaccard.items()}
    return combined_dataset(profiles, jaccard=jaccard, nucleus=nucleus)


def test_overlap_depth_draws_each_statistic_with_its_band_and_the_half_line(tmp_path, drawn):
    frame = overlap.overlap_by_depth(_overlap_store(), n_boot=50)
    plot_overlap_depth(frame, tmp_path / "overlap.png", title="overlap")
    _check(tmp_path / "overlap.png")
    panels = _panels(drawn["overlap.png"])
    assert [ax.get_title() for ax in panels] == ["a-small", "a-large"]
    assert _unnamed_series(drawn["overlap.png"]) == []
    for ax, model in zip(panels, ("a-small", "a-large"), strict=True):
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert sorted(lines) == ["containment", "half shared", "jaccard"]
        for statistic in ("jaccard", "containment"):
            rows = frame[(frame["model"] == model) & (frame["statistic"] == statistic)].sort_values("depth")
            np.testing.assert_allclose(lines[statistic].get_xdata(), rows["depth"])
            np.testing.assert_allclose(lines[statistic].get_ydata(), rows["mean"])
        half = lines["half shared"]
        assert np.allclose(half.get_ydata(), 0.5) and half.get_linestyle() == "--"
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 2
        ys = np.concatenate([band.get_paths()[0].vertices[:, 1] for band in bands])
        rows = frame[frame["model"] == model]
        assert ys.min() == pytest.approx(rows["ci_low"].min()) and ys.max() == pytest.approx(rows["ci_high"].max())
    with pytest.raises(ValueError, match=r"lacks columns \['statistic'\]"):
        plot_overlap_depth(frame.drop(columns="statistic"), tmp_path / "x.png")


def test_family_profiles_plot_and_svg_only_path(tmp_path, drawn):
    store = lazy(_store(), tmp_path)
    assert store["family"].dtype.kind != "U"  # strings come back from Zarr as StringDType
    profiles = family_profiles.layer_profiles(store)
    plot_family_profiles(profiles, tmp_path / "fam.png", title="blank")
    _check(tmp_path / "fam.png")
    lines = _panels(drawn["fam.png"])[0].get_lines()
    assert [line.get_label() for line in lines] == [
        "a-small (a, 4 layers)",
        "a-large (a, 8 layers)",
        "b-small (b, 5 layers)",
    ]
    assert [len(line.get_xdata()) for line in lines] == [4, 8, 5]
    for line, model in zip(lines, ("a-small", "a-large", "b-small"), strict=True):
        np.testing.assert_allclose(line.get_ydata(), profiles.sel(model=model).dropna("layer").values)
    plot_family_profiles(profiles, tmp_path / "only.svg")
    assert (tmp_path / "only.svg").exists() and not (tmp_path / "only.png").exists()
    with pytest.raises(ValueError, match="lack coordinates"):
        plot_family_profiles(profiles.drop_vars("family"), tmp_path / "x.png")


def test_path_must_be_png_or_svg(tmp_path):
    bands = analysis_bands.profile_bands(_store(), "a-small", "task")
    with pytest.raises(ValueError, match=r"must end in \.png"):
        plot_profile_bands(bands, tmp_path / "bands.pdf")


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match=r"lacks columns \['family'\]"):
        plot_embedding(pd.DataFrame({"x": [0.0], "y": [1.0]}), "unused.png")


def test_cell_text_is_safe_and_short():
    assert cell_text("$x$") == r"\$x\$"
    assert cell_text("\n") == "\\n"
    assert cell_text("  ") == "··"
    assert cell_text("abcdefghij") == "abcde…"
    assert cell_text("") == "∅"


def test_skip_map_draws_delta_h_and_both_costs_per_block(tmp_path, drawn):
    from test_criticality import COSTS, DELTA_H, _plan, _sweep

    from entropy_lens.skipping.criticality import skip_map

    table = skip_map(_sweep(COSTS), _plan(DELTA_H), n_boot=100)
    rows = table[table["measure"] == "calibrated"].sort_values("layer")
    plot_skip_map(rows, tmp_path / "map.png", title="m")
    _check(tmp_path / "map.png")
    delta_h, accuracy, logprob = _panels(drawn["map.png"])
    bars = [bar for c in delta_h.containers for bar in c]
    np.testing.assert_allclose([bar.get_height() for bar in bars], rows["delta_h"].fillna(0.0))
    chosen = rows["marks"].astype(bool) & rows["eligible"]
    colours = {tuple(np.round(bar.get_facecolor()[:3], 3)) for bar, c in zip(bars, chosen, strict=True) if c}
    assert len(colours) == 2  # expansion and pruning blocks stand out in two colours
    assert [t.get_text() for t in delta_h.texts] == ["no ΔH:\nnot eligible"]  # block 0, shown with its cost
    for ax, name, scale in ((accuracy, "d_accuracy", 100.0), (logprob, "d_logprob", 1.0)):
        (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
        np.testing.assert_allclose(points.get_offsets()[:, 1], rows[name] * scale)
        whiskers = [seg[:, 1] for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]
        np.testing.assert_allclose(sorted(w.min() for w in whiskers), sorted(rows[f"{name}_low"] * scale))
    assert accuracy.get_ylabel() == "Δ accuracy (points)"


def test_heatmap_text_contrasts_with_its_cell_and_no_glyph_is_a_box(tmp_path, drawn):
    values = np.linspace(0, 5, 6 * 4).reshape(6, 4)
    plot_token_heatmap(values, np.zeros((6, 4), dtype=int), lambda i: "中", tmp_path / "heat.png")
    ax = _panels(drawn["heat.png"])[0]
    (image,) = ax.get_images()
    luminance = image.to_rgba(values)[..., :3] @ [0.2126, 0.7152, 0.0722]
    for text in ax.texts:  # dark text on light cells (viridis' yellow end), light text on dark ones
        j, i = (round(v) for v in text.get_position())
        assert text.get_color() == ("black" if luminance[i, j] > 0.5 else "white")
    assert {t.get_color() for t in ax.texts} == {"black", "white"}
    assert ax.texts[-1].get_color() == "black"  # the largest value, yellow
    assert cell_text("中") == "U+4E2D" and cell_text("\u200b") == "U+200B"  # DejaVu Sans lacks CJK; invisible
    assert cell_text("é") == "é" and cell_text("Ω") == "Ω"  # glyphs the font has stay as they are
