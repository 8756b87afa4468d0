"""The one config loader: overlays, validation with defaults, cross-checks, and every shipped config planned."""

from __future__ import annotations

import re

import pytest
import yaml
from workflow_tiny import REPO

from entropy_lens import cli
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.settings import load_config, overlay, read_configs

DEFAULT = REPO / "config.yaml"
SHIPPED = {
    "default": (DEFAULT,),
    "paper": (REPO / "config" / "paper.yaml",),
    "study": (DEFAULT, REPO / "config" / "study.yaml"),
}


def test_overlay_merges_mappings_and_replaces_everything_else():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 2}
    top = {"a": {"y": [3]}, "c": {"z": 0}}
    assert overlay(base, top) == {"a": {"x": 1, "y": [3]}, "b": 2, "c": {"z": 0}}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 2}  # neither input changes


@pytest.mark.parametrize("name", list(SHIPPED))
def test_every_shipped_config_loads_with_defaults_and_plans(name):
    config = load_config(*SHIPPED[name])
    skip = config["layer_skip"]["enabled"]
    assert skip is (name != "default") and "prompts_per_job" in config["compute"]  # defaults filled
    plan = planning.plan_from_config(config)
    assert {job.rule for job in plan.jobs} >= {planning.EXTRACT}
    assert (planning.SKIP_EVAL in {job.rule for job in plan.jobs}) is skip  # the layer-skip jobs where it runs


def test_the_study_states_only_what_differs_from_the_default():
    study = yaml.safe_load((REPO / "config" / "study.yaml").read_text())
    default = yaml.safe_load(DEFAULT.read_text())
    assert "lens" not in study and "analysis" not in study and "storage" not in study
    merged = load_config(*SHIPPED["study"])
    assert list(merged["models"]) == sorted([*default["models"], "qwen2.5-coder-1.5b"])
    assert planning.dataset_models(merged) == {"mmlu": ["qwen2.5-coder-1.5b"], "blank": list(merged["models"])}
    assert merged["lens"] == load_config(DEFAULT)["lens"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["lens"].update(top_pp=0.5), "lens: Additional properties are not allowed ('top_pp'"),
        (lambda c: c["compute"].update(prompts_per_job=12), "compute.prompts_per_job (12) must be a multiple"),
        (lambda c: c["models"]["gemma3-270m"].update(source="gemma"), "models.gemma3-270m.source"),
        (lambda c: c["stories"].update(model="gpt2"), "stories.model 'gpt2' must be one of"),
        (lambda c: c["datasets"]["blank"].update(models=["gpt-5"]), "datasets.blank.models names ['gpt-5']"),
        (lambda c: c["layer_skip"].update(models=["gpt-5"]), "layer_skip.models names ['gpt-5']"),
        (
            lambda c: c["datasets"]["mmlu"].update(source="local"),
            "datasets.mmlu.source is 'local' but datasets.mmlu.path",
        ),
    ],
)
def test_a_bad_config_is_refused_naming_the_setting(tmp_path, edit, message):
    config = yaml.safe_load(DEFAULT.read_text())
    edit(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config(path)


def test_the_cli_plans_an_overlay(capsys):
    assert cli.main(["plan", "--configfile", *map(str, SHIPPED["study"]), "--results", "no-results-here"]) == 0
    assert "qwen2.5-coder-1.5b" in capsys.readouterr().out


def test_no_config_file_is_refused():
    with pytest.raises(ValueError, match="no config file given"):
        read_configs([])


def _reversed(value):
    """``value`` with the keys of every mapping in reverse order, models and datasets included."""
    if not isinstance(value, dict):
        return value
    return {key: _reversed(item) for key, item in list(value.items())[::-1]}


def test_a_reordered_config_hands_every_job_the_same_params(tmp_path):
    """Rules pass config sections as params, compared by repr: the same values in another key order, models
    and datasets included (a yaml.safe_dump copy sorts model names), give the same reprs."""
    config = yaml.safe_load(DEFAULT.read_text())
    assert list(config["models"]) != sorted(config["models"])  # the default lists its models out of name order
    shuffled = _reversed(config)
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(shuffled, sort_keys=False))
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(config))
    a, b, d = (load_config(tmp_path / f"{name}.yaml") for name in "abd")
    assert list(a["models"]["smollm2-135m"]) != list(config["models"]["smollm2-135m"])  # sorted, not as written
    assert repr(a) == repr(b) == repr(d)
    assert list(a["models"]) == sorted(config["models"]) and list(a["datasets"]) == sorted(config["datasets"])
    changed = yaml.safe_load((tmp_path / "b.yaml").read_text())
    changed["analysis"]["depth_grid"] += 1
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(changed))
    c = load_config(tmp_path / "c.yaml")
    assert repr(c["analysis"]) != repr(a["analysis"]) and repr(c["lens"]) == repr(a["lens"])
