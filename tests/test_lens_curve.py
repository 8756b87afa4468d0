"""The fitted lens's learning curve (issue 48): nested prefixes of the corpus solved as it is read, each read on
the same held-out tokens; the curve's table, its plateau rule on both sides, and its figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from test_plots import _check, _panels, drawn  # noqa: F401 - drawn is a fixture
from test_translators import corpus
from tiny import tiny_model

from entropy_lens.analysis.lens_curve import (
    IMPROVING,
    PLATEAU,
    PLATEAU_COLUMNS,
    UNDECIDED,
    curve_tables,
    last_doubling,
    plateau_reading,
    plateau_table,
)
from entropy_lens.analysis.lens_fit import READING_COLUMNS, final_readings, reading_arrays, readings_frame
from entropy_lens.lens.decoding import lens_logits
from entropy_lens.lens.entropy import shannon_entropy
from entropy_lens.lens.fitting import NormalEquations, fit_curve, fit_linear, fit_linear_curve
from entropy_lens.lens.held_out import held_out_kl, held_out_tokens, read_held_out
from entropy_lens.plots.lenses import plot_lens_curve
from entropy_lens.prompts.counts import curve_sizes


@pytest.fixture(scope="module")
def lm():
    return tiny_model("llama", seed=3, scale=2.0, n_layers=4)


def test_curve_sizes_double_up_to_the_corpus():
    assert curve_sizes(24, 3) == [6, 12, 24]
    assert curve_sizes(3, 4) == [1, 3] and curve_sizes(5, 1) == [5]
    with pytest.raises(ValueError, match="points must be a positive integer"):
        curve_sizes(8, 0)


def test_each_prefix_of_the_curve_is_the_fit_of_that_prefix_alone(lm):
    prompts = corpus(40, 1, lm.tokenizer)
    curve = list(fit_linear_curve(lm, prompts, [10, 20, 40], batch_size=8, provenance={"corpus": "words"}))
    assert [lens.provenance["prompts"] for _, lens in curve] == [10, 20, 40]
    assert [tokens for tokens, _ in curve] == [sum(map(len, prompts[:n])) for n in (10, 20, 40)]
    for n, (_, lens) in zip((10, 20, 40), curve, strict=True):
        alone = fit_linear(lm, prompts[:n], batch_size=8)
        torch.testing.assert_close(lens.weight, alone.weight, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(lens.bias, alone.bias, atol=1e-4, rtol=1e-4)
    assert curve[-1][1].provenance["corpus"] == "words"
    # the fit of 40 prompts reads the held-out prompts closer to the model than that of 10
    judged = corpus(6, 9, lm.tokenizer)
    first, last = (held_out_kl(lm, curve[i][1], judged)[0][:, :-1].mean() for i in (0, -1))
    assert last < first
    ((n_prompts, n_tokens, tuned),) = fit_curve(lm, "tuned", prompts[:8], points=4, steps=1, batch_size=4)
    assert (n_prompts, n_tokens, tuned.kind) == (8, sum(map(len, prompts[:8])), "tuned")
    for sizes in ([], [0, 4], [4, 4], [4, 41]):
        with pytest.raises(ValueError, match="curve sizes must be increasing prompt counts"):
            next(fit_linear_curve(lm, prompts, sizes))
    with pytest.raises(ValueError, match="no token added"):
        NormalEquations(4, 32).solve()


def test_a_held_out_reading_is_each_blocks_kl_and_entropy_through_the_lens(lm):
    """KL and entropy of every token and block equal the model's own distribution and the lens's, computed
    plainly from the residuals (translator, final norm, unembedding, log-softmax)."""
    lens = fit_linear(lm, corpus(30, 1, lm.tokenizer))
    held = held_out_tokens(lm, corpus(4, 5, lm.tokenizer), batch_size=3, last=5)
    reading = read_held_out(lm, lens, held)
    resid = torch.cat(held.batches)  # [n, L, d]
    with torch.inference_mode():
        target = torch.log_softmax(lm.model.lm_head(lm.model.model.norm(resid[:, -1])), -1)
        for block in range(lm.n_layers):
            mapped = resid[:, block] @ lens.weight[block] + lens.bias[block]
            log_q = torch.log_softmax(lm.model.lm_head(lm.model.model.norm(mapped)), -1)
            kl = (target.exp() * (target - log_q)).sum(-1)
            np.testing.assert_allclose(reading.kl[:, block], kl.numpy(), rtol=1e-4, atol=1e-5)
            entropy = shannon_entropy(lens_logits(lm, mapped)).numpy()
            np.testing.assert_allclose(reading.entropy[:, block], entropy, rtol=1e-4, atol=1e-5)
    assert reading.kl.shape == (held.n_tokens, lm.n_layers) == (20, 4)
    with pytest.raises(ValueError, match="no held-out prompt"):
        held_out_tokens(lm, [], batch_size=2)


def _token_kl(levels: list[float], rng: np.random.Generator, prompts: np.ndarray, spread: float) -> np.ndarray:
    """``[n_tokens, 3]`` KL of two blocks at the given levels (each prompt shifts both alike) and a final block 0."""
    shift = rng.normal(scale=spread, size=prompts.max() + 1)[prompts]
    return np.stack([levels[0] + shift, levels[1] + shift, np.zeros(len(prompts))], axis=1)


@pytest.mark.parametrize(
    ("levels", "reading"),
    [
        ([3.0, 2.0, 1.95], PLATEAU),  # the last doubling gains 0.05 nats: stopped
        ([3.0, 2.0, 1.5], IMPROVING),  # it gains 0.5 nats: more tokens still help
        ([3.0, 2.0, 1.9], UNDECIDED),  # 0.1 nats, on the margin itself
    ],
)
def test_the_plateau_rule_reads_the_last_doublings_gain_paired_over_prompts(levels, reading):
    rng = np.random.default_rng(0)
    prompts = np.repeat(np.arange(10), 4)
    noise = rng.normal(scale=0.01, size=(40, 1))  # the same tokens under every size: paired
    kls = [_token_kl([level, level], np.random.default_rng(1), prompts, 0.5) + noise * (i + 1)
           for i, level in enumerate(levels)]  # fmt: skip
    sizes = [(8, 800), (16, 1600), (32, 3200)]
    table = plateau_table(kls, prompts, sizes, model="m", kind="linear", n_boot=500, seed=0)
    assert list(table.columns) == list(PLATEAU_COLUMNS)
    assert table["reading"].iloc[-1] == reading and table["reading"].iloc[0] == UNDECIDED
    assert table["mean_kl"].tolist() == pytest.approx([float(k[:, :-1].mean()) for k in kls])
    gain, low, high = last_doubling(kls[-2], kls[-1], prompts, n_boot=500, seed=0)
    assert gain == pytest.approx(levels[-2] - levels[-1], abs=0.02) and low < gain < high
    assert high - low < 0.1  # paired: each prompt's shift cancels (unpaired, the interval would span about 0.6)
    assert (table["ci_low"].iloc[-1], table["ci_high"].iloc[-1]) == pytest.approx((low, high))


def test_the_plateau_reading_on_both_sides_of_its_margin():
    assert plateau_reading(0.0, 0.09) == PLATEAU
    assert plateau_reading(0.11, 0.3) == IMPROVING
    assert plateau_reading(0.05, 0.15) == UNDECIDED
    assert plateau_reading(float("nan"), float("nan")) == UNDECIDED
    with pytest.raises(ValueError, match="the same tokens and blocks"):
        last_doubling(np.zeros((4, 3)), np.zeros((5, 3)), np.arange(4), n_boot=10, seed=0)


def _readings(levels: list[float], n_prompts: int = 5, tokens: int = 3) -> pd.DataFrame:
    """A fit job's readings: the logit lens and the linear lens at each corpus size (mean KL at ``levels``)."""
    rng = np.random.default_rng(0)
    prompts = np.repeat([f"q{i}" for i in range(n_prompts)], tokens)
    entropy = rng.uniform(1, 4, size=(len(prompts), 3))
    frames = [readings_frame(np.full((len(prompts), 3), 9.0), entropy, prompts, lens="logit", fit_prompts=0,
                             fit_tokens=0)]  # fmt: skip
    for i, level in enumerate(levels):
        kl = np.concatenate([rng.normal(level, 0.1, size=(len(prompts), 2)), np.zeros((len(prompts), 1))], 1)
        frames.append(readings_frame(kl, entropy, prompts, lens="linear", fit_prompts=2**i, fit_tokens=10 * 2**i))
    return pd.concat(frames, ignore_index=True)


def test_readings_round_trip_and_give_the_curve_of_each_size():
    frame = _readings([3.0, 2.0])
    assert list(frame.columns) == list(READING_COLUMNS) and len(frame) == 3 * 15 * 3
    kl, entropy, prompts = reading_arrays(frame, "linear", 2)
    assert kl.shape == entropy.shape == (15, 3) and prompts.tolist() == list(np.repeat([f"q{i}" for i in range(5)], 3))
    curve, plateau = curve_tables(frame, model="m", kind="linear", n_boot=200, seed=0)
    assert curve.groupby("fit_tokens").size().to_dict() == {10: 3, 20: 3}
    assert plateau["fit_prompts"].tolist() == [1, 2] and plateau["improvement"].iloc[1] == pytest.approx(1.0, abs=0.1)
    readings, owners = final_readings([frame, frame])  # the logit lens once; each kind at its largest size
    assert list(readings) == ["logit", "linear"] and np.array_equal(readings["linear"][0], kl)
    assert owners.tolist() == prompts.tolist()
    shifted = frame.assign(kl=np.where(frame["lens"] == "logit", frame["kl"] + 1, frame["kl"]))
    with pytest.raises(ValueError, match="differs between the jobs"):
        final_readings([frame, shifted])
    with pytest.raises(ValueError, match="no held-out reading of the linear lens on 4 prompts"):
        reading_arrays(frame, "linear", 4)


def test_the_curve_figure_draws_one_line_per_corpus_size(tmp_path, drawn):  # noqa: F811
    curve, _ = curve_tables(_readings([3.0, 2.0, 1.5]), model="m", kind="linear", n_boot=100, seed=0)
    plot_lens_curve(curve, tmp_path / "curve.png", bar=2.0, title="t")
    _check(tmp_path / "curve.png")
    (ax,) = _panels(drawn["curve.png"])
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert labels == ["10 tokens", "20 tokens", "40 tokens"] and ax.get_yscale() == "log"
    assert ax.get_title() == "m (linear lens)"
