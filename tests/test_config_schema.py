"""The config schema itself: every setting says what it is (a comma in a flow mapping once split descriptions)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from workflow_tiny import REPO

from entropy_lens.workflow.settings import check_config
from entropy_lens.workflow.settings import schema as shipped_schema


def properties(node: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every ``(path, spec)`` under a ``properties`` mapping, nested ones included."""
    if isinstance(node, dict):
        for name, spec in node.get("properties", {}).items():
            yield f"{path}.{name}".lstrip("."), spec
            yield from properties(spec, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                yield from properties(node[key], f"{path}[]")


def test_every_setting_has_one_description_and_no_stray_keys():
    schema = shipped_schema()
    found = list(properties(schema))
    assert len(found) > 50
    for path, spec in found:
        assert isinstance(spec, dict), path
        assert isinstance(spec.get("description"), str) and spec["description"].strip(), path
        stray = [key for key, value in spec.items() if value is None]
        assert not stray, f"{path}: keys {stray} with no value (an unquoted comma in a description?)"


def _default() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


@pytest.mark.parametrize(("folds", "repeats"), [(3, 1), (5, 1)])
def test_fold_counts_that_cannot_give_an_interval_are_refused(folds, repeats):
    config = _default()
    config["analysis"]["knn"].update(folds=folds, repeats=repeats)
    message = (
        f"analysis.knn.folds ({folds}) x analysis.knn.repeats ({repeats}) = {folds * repeats} fold AUCs cannot give "
        "an interval: the corrected resampled-t needs folds >= 3 and folds x repeats >= 6; raise them"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        check_config(config)


@pytest.mark.parametrize("repeats", [1, 5])
def test_fewer_than_three_folds_are_refused_by_the_one_fold_check(repeats):
    """The floor is checked once, where the config is read (the schema only asks for a positive count)."""
    config = _default()
    config["analysis"]["knn"].update(folds=2, repeats=repeats)
    with pytest.raises(ValueError, match=re.escape(f"analysis.knn.folds (2) x analysis.knn.repeats ({repeats})")):
        check_config(config)


def test_the_fewest_folds_that_give_an_interval_load():
    config = _default()
    config["analysis"]["knn"].update(folds=3, repeats=2)
    assert check_config(config)["analysis"]["knn"]["folds"] == 3


def test_the_old_knn_seed_is_refused_naming_the_two_seeds_that_replace_it():
    config = _default()
    config["analysis"]["knn"]["seed"] = 3
    with pytest.raises(
        ValueError,
        match=r"analysis\.knn\.seed is no longer a setting; set analysis\.knn\.fold_seed .* and "
        r"analysis\.bootstrap_seed",
    ):
        check_config(config)
    config["analysis"]["knn"].pop("seed")
    checked = check_config(config)
    assert (checked["analysis"]["knn"]["fold_seed"], checked["analysis"]["bootstrap_seed"]) == (0, 0)


@pytest.mark.parametrize("key", ["eval_questions", "sweep_questions", "set_questions"])
def test_layer_skip_counts_too_small_for_an_interval_are_refused(key):
    config = _default()
    config.setdefault("layer_skip", {})[key] = 1
    with pytest.raises(ValueError, match=re.escape(f"layer_skip.{key}: 1 is less than the minimum of 2")):
        check_config(config)
