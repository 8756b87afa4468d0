"""The layer-skip sizing rule of benchmarks/pilot_skip.py: on synthetic pilot tables each size follows its own rows,
and the study's config holds the sizes the rule gives from the stored pilot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("pilot_skip", REPO / "benchmarks" / "pilot_skip.py")
pilot_skip = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pilot_skip)

PILOT = REPO / "benchmarks" / "measured" / "pilot_skip_amd_2026-12-07"


def _comparisons(k1: list[float], k2: list[float]) -> pd.DataFrame:
    rows = [{"k": 1, "second": "random", "needed_holm": v} for v in k1]
    rows += [{"k": 2, "second": "random", "needed_holm": v} for v in k2]
    rows += [{"k": 1, "second": "pruning", "needed_holm": 10_000.0}]  # not a "vs random" row: never read
    frame = pd.DataFrame(rows).assign(measure="calibrated", statistic="gold_logprob")
    other = frame.assign(statistic="accuracy", needed_holm=50_000.0)  # the quoted statistic: never read
    return pd.concat([frame, other, frame.assign(measure="ll", needed_holm=90_000.0)], ignore_index=True)


def _spearman(rhos: list[tuple[float, float, float]], n: int) -> pd.DataFrame:
    frame = pd.DataFrame(rhos, columns=["rho", "ci_low", "ci_high"]).assign(n=n)
    return frame.assign(measure="calibrated", statistic="gold_logprob")


def _drops(needed: list[float]) -> pd.DataFrame:
    frame = pd.DataFrame({"needed": needed}).assign(measure="calibrated", statistic="gold_logprob")
    return pd.concat([frame, frame.assign(statistic="accuracy", needed=7_000.0)], ignore_index=True)


def test_each_size_follows_its_own_primary_rows() -> None:
    spearman = _spearman([(0.5, 0.1, 0.7), (0.3, -0.1, 0.5), (0.0, -0.2, 0.2)], 20)
    sizes = pilot_skip.chosen_sizes(_comparisons([63, 172, 150], [25, 68, 70, 317]), spearman, _drops([18, 90, 119]))
    # k = 1: the largest vs-random row, up to a multiple of 50; k = 2: the median (69), up to a multiple of 10
    assert sizes["eval_questions"] == 200 and sizes["set_questions"] == 70
    # 75th percentile of 18, 90, 119 is 104.5: up to 110
    assert sizes["drop_questions"] == 110
    # the sign rows: rho 0.5 decided at 20 * (0.4 / 0.5)^2 = 12.8, rho 0.3 at 20 * (0.4 / 0.3)^2 = 35.6, rho 0 never:
    # the median is 35.6, up to 40
    assert sizes["sweep_questions"] == 40


def test_a_row_just_past_a_boundary_moves_its_size() -> None:
    spearman = _spearman([(0.5, 0.1, 0.7)], 20)
    below = pilot_skip.chosen_sizes(_comparisons([150.0], [30.0]), spearman, _drops([100.0]))
    above = pilot_skip.chosen_sizes(_comparisons([150.5], [30.5]), spearman, _drops([100.5]))
    assert (below["eval_questions"], below["set_questions"], below["drop_questions"]) == (150, 30, 100)
    assert (above["eval_questions"], above["set_questions"], above["drop_questions"]) == (200, 40, 110)


def test_the_study_config_holds_the_sizes_the_stored_pilot_gives() -> None:
    tables = [pd.read_csv(PILOT / f"{name}.csv") for name in ("comparisons", "criteria_spearman", "drop_scores")]
    skip = yaml.safe_load((REPO / "config" / "study.yaml").read_text())["layer_skip"]
    assert pilot_skip.chosen_sizes(*tables) == {key: skip[key] for key in pilot_skip.chosen_sizes(*tables)}
