"""The entropy schedule under both lenses (issue 48): per-block ΔH beside the held-out KL (checked against a plain
computation on a tiny model), the KL bar, convergence blocks, the blocks each lens selects, the two lenses'
agreement against a block permutation, and the extension row's rule on both sides and on a planted null."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_plots import _check, _panels, drawn  # noqa: F401 - drawn is a fixture
from test_translators import corpus
from tiny import tiny_model

from entropy_lens.analysis.schedule import (
    CHOICE_COLUMNS,
    KL_BAR,
    SCHEDULE_COLUMNS,
    choices_table,
    schedule_table,
)
from entropy_lens.analysis.schedule_agreement import (
    AGREEMENT_COLUMNS,
    AGREEMENT_READING,
    EVERY,
    UNDER_BAR,
    agreement_table,
    permutation_agreement,
)
from entropy_lens.cli.lens_schedule import render_agreement, render_choices, render_schedule
from entropy_lens.core.intervals import wilson_interval
from entropy_lens.lens.fitting import fit_linear
from entropy_lens.lens.held_out import held_out_tokens, read_held_out
from entropy_lens.lens.translators import identity
from entropy_lens.plots.lenses import plot_lens_schedule
from entropy_lens.verdicts import decision, rules
from entropy_lens.verdicts.claim_verdicts import combine
from entropy_lens.verdicts.claims.schedule import SCHEDULE_RULE
from entropy_lens.verdicts.nulls import MAX_PLANTED_RATE
from entropy_lens.verdicts.outcomes import CANNOT_BE_READ, Outcome
from entropy_lens.verdicts.rows import rows_of
from entropy_lens.verdicts.schedule_nulls import null_readings, planted_row, schedule_planted_rate

HOLDS, FAILS, UNSURE = (decision.EXTENSION_WORDS[v] for v in decision.VERDICTS)


def test_linear_lens_delta_h_and_kl_equal_a_plain_computation_on_a_tiny_model():
    """Per block, ΔH and KL of the schedule equal those computed apart: each held-out prompt run alone, its block
    outputs from transformers' own list at the last positions, through the translator, the final norm, the
    unembedding and a softmax; the final block reads the model's own logits."""
    lm = tiny_model("llama", seed=3, scale=2.0, n_layers=4)
    judged = corpus(5, 9, lm.tokenizer)
    linear, logit = fit_linear(lm, corpus(40, 1, lm.tokenizer)), identity(lm.n_layers, 32)
    held = held_out_tokens(lm, judged, batch_size=2, last=6)
    readings = {name: (r.kl, r.entropy) for name, r in (("logit", read_held_out(lm, logit, held)),
                                                         ("linear", read_held_out(lm, linear, held)))}  # fmt: skip
    schedule = schedule_table(readings, held.prompts, model="tiny", n_boot=200, seed=0)
    assert list(schedule.columns) == list(SCHEDULE_COLUMNS) and len(schedule) == 2 * lm.n_layers
    entropies, kls = {"logit": [], "linear": []}, {"logit": [], "linear": []}
    for ids in judged:
        with torch.inference_mode():
            out = lm.model(torch.tensor([ids]), output_hidden_states=True)
        own = torch.log_softmax(out.logits[0, -6:].double(), -1)  # [6, V] the model's own distribution
        for name, lens in (("logit", logit), ("linear", linear)):
            per_block = []
            for block in range(lm.n_layers):
                if block == lm.n_layers - 1:
                    log_q = own  # the final block's translator is the identity: the model's own logits
                else:
                    h = out.hidden_states[block + 1][0, -6:]
                    h = h @ lens.weight[block] + lens.bias[block]
                    log_q = torch.log_softmax(lm.model.lm_head(lm.model.model.norm(h)).double(), -1)
                per_block.append(((-(log_q.exp() * log_q).sum(-1)), (own.exp() * (own - log_q)).sum(-1)))
            entropies[name].append(torch.stack([h for h, _ in per_block], 1).numpy())
            kls[name].append(torch.stack([k for _, k in per_block], 1).numpy())
    for name in ("logit", "linear"):
        rows = schedule[schedule["lens"] == name].sort_values("block")
        entropy, kl = np.concatenate(entropies[name]), np.concatenate(kls[name])
        np.testing.assert_allclose(rows["delta_h"].to_numpy()[1:], np.diff(entropy, axis=1).mean(0), atol=2e-4)
        np.testing.assert_allclose(rows["kl"].to_numpy(), kl.mean(0), atol=2e-4)
        assert np.isnan(rows["delta_h"].iloc[0]) and not rows["under_bar"].iloc[0]  # block 0 has no ΔH
    assert not np.allclose(*(schedule[schedule["lens"] == n]["delta_h"].to_numpy()[1:] for n in ("logit", "linear")))


def _readings(kl_levels: dict[str, list[float]], delta: dict[str, list[float]], n_prompts: int = 10, tokens: int = 4,
              spread: dict[tuple[str, int], float] | None = None) -> tuple[dict, np.ndarray]:  # fmt: skip
    """Synthetic readings: per lens, each block's KL near its level (block ``b`` of ``lens`` varying over prompts
    by ``spread[lens, b]``) and entropies whose per-block change is near ``delta`` (first block's 5 nats)."""
    rng = np.random.default_rng(0)
    prompts = np.repeat(np.arange(n_prompts), tokens)
    out = {}
    for lens, levels in kl_levels.items():
        scales = [(spread or {}).get((lens, b), 0.02) for b in range(len(levels))]
        shift = np.array([rng.normal(scale=s, size=n_prompts) for s in scales])
        kl = np.clip(np.array(levels) + shift.T[prompts], 0, None)
        steps = np.array(delta[lens]) + rng.normal(scale=0.02, size=(len(prompts), len(delta[lens])))
        out[lens] = (kl, 5.0 + np.concatenate([np.zeros((len(prompts), 1)), np.cumsum(steps, 1)], 1))
    return out, prompts


LEVELS = {"logit": [9.0, 3.0, 1.0, 1.0, 0.5, 0.0], "linear": [3.0, 1.8, 1.0, 0.8, 0.4, 0.0]}
DELTA = {"logit": [1.0, 3.0, 0.5, -0.2, -0.8], "linear": [0.1, 0.2, 0.4, -0.1, -0.6]}


def test_a_block_counts_under_the_bar_when_its_intervals_upper_end_lies_below_it_and_so_do_both_ends_of_its_dh():
    # the linear lens's block 1: 1.8 nats, varying widely over prompts
    readings, prompts = _readings(LEVELS, DELTA, spread={("linear", 1): 1.0})
    schedule = schedule_table(readings, prompts, model="m", n_boot=500, seed=0).set_index(["lens", "block"])
    logit, linear = schedule.loc["logit"], schedule.loc["linear"]
    assert logit["block_under_bar"].tolist() == [False, False, True, True, True, True]
    assert logit["under_bar"].tolist() == [False, False, False, True, True, True]  # ΔH_2 reads block 1 (3 nats)
    assert linear.loc[1, "kl"] < KL_BAR < linear.loc[1, "kl_high"]  # its mean is under 2, its interval is not
    assert linear["block_under_bar"].tolist() == [False, False, True, True, True, True]
    # the logit lens's KL falls by 6 nats across block 1 while its entropy rises by 1: mostly convergence; across
    # block 2 it falls by 2 while its entropy rises by 3: not
    assert logit["convergence"].tolist() == [False, True, False, False, False, False]
    assert logit.loc[1, "kl_drop"] == pytest.approx(6.0, abs=0.05)
    assert logit.loc[2, "delta_h"] == pytest.approx(3.0, abs=0.02)
    assert logit.loc[2, "delta_h_low"] < 3.0 < logit.loc[2, "delta_h_high"]
    assert (logit["n_prompts"] == 10).all() and (logit["n_tokens"] == 40).all()
    with pytest.raises(ValueError, match="non-finite"):
        schedule_table({"logit": (np.full((4, 3), np.nan), np.zeros((4, 3)))}, np.arange(4), model="m", n_boot=10,
                       seed=0)  # fmt: skip
    with pytest.raises(ValueError, match="at least two of them"):
        schedule_table({"logit": (np.zeros((4, 3)), np.zeros((4, 3)))}, np.zeros(4), model="m", n_boot=10, seed=0)


def test_each_lens_selects_among_its_blocks_under_the_bar_and_says_where_a_phase_cannot_be_read():
    readings, prompts = _readings(
        {**LEVELS, "tuned": [5.0, 5.0, 5.0, 5.0, 5.0, 0.0]},
        {**DELTA, "linear": [0.1, -0.2, -0.4, -0.1, -0.6], "tuned": [0.3, 0.2, 0.1, -0.1, -0.2]},
    )
    schedule = schedule_table(readings, prompts, model="m", n_boot=300, seed=0)
    table = choices_table(schedule)
    assert list(table.columns) == list(CHOICE_COLUMNS)
    choices = table.set_index(["lens", "variant", "phase"])
    logit = choices.loc["logit"]
    # under its bar: ΔH of blocks 3, 4, 5 (+0.5, -0.2, -0.8); among every block, block 2 (+3.0) rises most
    assert logit.loc[("all_blocks", "expansion"), ["block", "every_block"]].tolist() == [3, 2]
    assert logit.loc[("all_blocks", "pruning"), ["block", "every_block"]].tolist() == [5, 5]
    assert logit.loc[("no_final", "pruning"), ["block", "every_block"]].tolist() == [4, 4]
    assert logit.loc[("all_blocks", "expansion"), "reading"] == "chosen"
    linear = choices.loc["linear"]
    # under its bar: ΔH of blocks 2..5 (block 2 reads block 1, 1.8 nats with a tight interval), all falling
    assert linear.loc[("all_blocks", "pruning"), "block"] == 5 and linear.loc[("no_final", "pruning"), "block"] == 3
    assert linear.loc[("all_blocks", "pruning"), "logit_block"] == 5
    assert linear.loc[("all_blocks", "expansion"), "logit_every_block"] == 2
    assert linear.loc[("all_blocks", "expansion"), "reading"] == f"{CANNOT_BE_READ}: no block under the bar rises"
    assert linear.loc[("all_blocks", "expansion"), "block"] == -1
    tuned = choices.loc["tuned"]
    assert (tuned["block"] == -1).all() and (tuned["reading"] == f"{CANNOT_BE_READ}: no block under the bar").all()
    assert (tuned["n_under_bar"] == 0).all()


def _delta(readings: dict, lens: str) -> np.ndarray:
    return np.diff(readings[lens][1], axis=1)


def test_agreement_reads_the_same_profile_beyond_its_block_permutation_and_unrelated_ones_within_it():
    rng = np.random.default_rng(3)
    same, prompts = null_readings(rng, 12, 12, planted=1.0)
    found = permutation_agreement(_delta(same, "logit"), _delta(same, "linear"), prompts, n_boot=500, seed=0)
    assert found["rho"] > 0.7 and found["ci_low"] > 0 and found["beyond_low"] > 0
    assert found["null_low"] < 0 < found["null_high"] and abs(found["null_estimate"]) < 0.1
    assert found["p_permutation"] < 0.01
    unrelated, prompts = null_readings(rng, 12, 12, planted=0.0)
    found = permutation_agreement(_delta(unrelated, "logit"), _delta(unrelated, "linear"), prompts, n_boot=500, seed=0)
    assert found["beyond_low"] < 0 < found["beyond_high"]
    assert all(np.isnan(v) for v in permutation_agreement(np.zeros((4, 2)), np.zeros((4, 2)), np.arange(4),
                                                          n_boot=10, seed=0).values())  # fmt: skip


def test_the_agreement_table_reads_the_blocks_under_the_fitted_lenss_bar_or_says_it_cannot():
    readings, prompts = _readings(LEVELS, DELTA)
    schedule = schedule_table(readings, prompts, model="m", n_boot=300, seed=0)
    table = agreement_table(readings, prompts, schedule, model="m", n_boot=300, seed=0).set_index("blocks")
    assert list(table.reset_index().columns) == ["blocks", *[c for c in AGREEMENT_COLUMNS if c != "blocks"]]
    assert table.loc[EVERY, "block_list"] == "1 2 3 4 5" and table.loc[EVERY, "reading"] == ""
    # the linear lens's ΔH is under its bar at blocks 2..5 (block 2 reads block 1: 1.8 nats, a tight interval)...
    assert table.loc[UNDER_BAR, "block_list"] == "2 3 4 5"
    # ... where the logit lens reads blocks 2, 3 as rising and 4, 5 as falling
    assert table.loc[UNDER_BAR, ["n_rising", "n_falling", "n_blocks"]].tolist() == [2, 2, 4]
    assert table.loc[UNDER_BAR, "convergence_blocks"] == "1"
    falling_only = {**DELTA, "logit": [1.0, -3.0, -0.5, -0.2, -0.8]}
    readings, prompts = _readings(LEVELS, falling_only)
    schedule = schedule_table(readings, prompts, model="m", n_boot=300, seed=0)
    row = agreement_table(readings, prompts, schedule, model="m", n_boot=300, seed=0).set_index("blocks").loc[UNDER_BAR]
    assert row["reading"] == f"{CANNOT_BE_READ}: no block under the bar that the logit lens reads as expansion"
    few = {"logit": LEVELS["logit"], "linear": [9.0, 9.0, 9.0, 1.0, 0.5, 0.0]}
    readings, prompts = _readings(few, DELTA)
    schedule = schedule_table(readings, prompts, model="m", n_boot=300, seed=0)
    row = agreement_table(readings, prompts, schedule, model="m", n_boot=300, seed=0).set_index("blocks").loc[UNDER_BAR]
    assert row["reading"].startswith(f"{CANNOT_BE_READ}: 2 block(s) under the bar") and np.isnan(row["rho"])


@pytest.mark.parametrize(
    ("rho", "n", "word"),
    [
        (decision.Interval(0.6, 0.2, 0.9), 10, HOLDS),  # above 0
        (decision.Interval(-0.2, -0.6, 0.25), 10, FAILS),  # its upper end rules out 0.3
        (decision.Interval(0.3, -0.1, 0.7), 10, UNSURE),  # 0 and 0.3 both inside
        (decision.Interval(0.6, 0.2, 0.9), 4, UNSURE),  # too few questions
        (decision.Interval(0.6, 0.6, 0.6), 10, UNSURE),  # a degenerate interval decides nothing
    ],
)
def test_the_rule_on_both_sides_of_its_thresholds(rho, n, word):
    verdict = rules.schedule_survives(rho, n=n, n_blocks=6)
    assert decision.EXTENSION_WORDS[verdict.verdict] == word


def test_a_schedule_that_cannot_be_read_says_so_in_its_own_word_counted_apart():
    found = rules.schedule_survives(
        decision.Interval(0.6, 0.2, 0.9), n=10, n_blocks=6, unreadable="cannot be read: no block"
    )
    assert isinstance(found, Outcome) and found.outcome == CANNOT_BE_READ
    assert combine([CANNOT_BE_READ, CANNOT_BE_READ], HOLDS, FAILS, UNSURE) == CANNOT_BE_READ
    assert combine([CANNOT_BE_READ, HOLDS], HOLDS, FAILS, UNSURE) == HOLDS
    assert combine([CANNOT_BE_READ, UNSURE], HOLDS, FAILS, UNSURE) == UNSURE
    readings, prompts = _readings(LEVELS, {**DELTA, "logit": [1.0, -3.0, -0.5, -0.2, -0.8]})
    schedule = schedule_table(readings, prompts, model="m", n_boot=300, seed=0)
    agreement = agreement_table(readings, prompts, schedule, model="m", n_boot=300, seed=0)
    (row,) = rows_of(AGREEMENT_READING.frame(agreement, "lens_schedule"), SCHEDULE_RULE)
    assert (row["verdict"], row["role"], row["split"]) == (CANNOT_BE_READ, "extension", "linear lens, blocks under its "
                                                           "2-nat bar")  # fmt: skip
    assert row["beyond_verdict"] == "" and row["why"].startswith(CANNOT_BE_READ)


def test_the_row_holds_beyond_its_null_where_the_lenses_agree_and_not_on_a_planted_null():
    """Through the paper table's row rule and decision function: two lenses reading one profile hold beyond the
    block permutation; two unrelated ones do not, in at most 5% of draws, though as stated they often hold."""
    row = planted_row(*null_readings(np.random.default_rng(0), 10, planted=1.0), seed=0)
    assert (row["verdict"], row["beyond_verdict"], row["null"]) == (HOLDS, decision.SHOWN, "block permutation")
    # the nulls table's test: a rate whose Wilson interval lies above 5% passes on nulls (1,000 draws: 2-4%)
    for n, seed in ((10, 0), (40, 1)):
        rate = schedule_planted_rate(n, 100, seed=seed, holds=True)
        assert wilson_interval(round(100 * rate), 100)[0] < MAX_PLANTED_RATE, (n, rate)
    stated = 0
    for draw in range(30):  # as stated alone, unrelated profiles often "hold": the null is what breaks them
        readings, prompts = null_readings(np.random.default_rng(draw), 40)
        stated += planted_row(readings, prompts, seed=draw)["verdict"] == HOLDS
    assert stated >= 5


def test_the_schedule_figure_and_the_cli_show_both_lenses_and_the_bar(tmp_path, drawn):  # noqa: F811
    readings, prompts = _readings(LEVELS, DELTA)
    schedule = schedule_table(readings, prompts, model="m", n_boot=200, seed=0)
    plot_lens_schedule(schedule, tmp_path / "schedule.png", bar=KL_BAR, title="t")
    _check(tmp_path / "schedule.png")
    delta_ax, kl_ax = _panels(drawn["schedule.png"])
    assert kl_ax.get_yscale() == "log" and any(line.get_ydata()[0] == KL_BAR for line in kl_ax.get_lines())
    assert {t.get_text() for t in delta_ax.get_legend().get_texts()} == {"logit lens", "linear lens"}
    text = render_schedule(schedule)
    assert "ΔH logit" in text and "KL linear" in text and "blocks 1" in text.splitlines()[-1]
    line = next(row for row in text.splitlines() if row.startswith("    4"))
    assert line.count("*") == 4  # block 4: both lenses' ΔH and KL under the bar
    choices = render_choices(choices_table(schedule))
    assert "expansion, all_blocks: logit 3 (2); linear 3 (3)" in choices
    agreement = agreement_table(readings, prompts, schedule, model="m", n_boot=200, seed=0)
    assert "block permutation" in render_agreement(agreement)


def test_the_schedule_table_refuses_readings_of_different_blocks():
    readings = {"logit": (np.zeros((4, 3)), np.zeros((4, 3))), "linear": (np.zeros((4, 4)), np.zeros((4, 4)))}
    with pytest.raises(ValueError, match="different numbers of blocks"):
        schedule_table(readings, np.repeat([0, 1], 2), model="m", n_boot=10, seed=0)


def test_skip_map_prints_the_schedule_under_both_lenses_where_a_lens_is_fitted(tmp_path, capsys):
    from test_cli import _skip_map_csv

    from entropy_lens import cli

    results = tmp_path / "results"
    _skip_map_csv(results)  # model "m"
    assert cli.main(["skip-map", "--results", str(results)]) == 0
    assert "the schedule under each lens" not in capsys.readouterr().out  # no lens fitted: the map alone
    readings, prompts = _readings(LEVELS, DELTA)
    schedule = schedule_table(readings, prompts, model="m", n_boot=200, seed=0)
    schedule.to_csv(results / "tables" / "lens_schedule.csv", index=False)
    choices_table(schedule).to_csv(results / "tables" / "lens_schedule_choices.csv", index=False)
    agreement = agreement_table(readings, prompts, schedule, model="m", n_boot=200, seed=0)
    agreement.to_csv(results / "tables" / "lens_schedule_agreement.csv", index=False)
    assert cli.main(["skip-map", "--results", str(results)]) == 0
    printed = capsys.readouterr().out
    assert "the schedule under each lens, on held-out questions" in printed
    assert "logit vs linear lens over the 4 blocks under the bar of the linear lens: rho" in printed
    assert printed.index("safe to skip") < printed.index("the schedule under each lens")
