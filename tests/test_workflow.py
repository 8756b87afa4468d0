"""The real Snakemake DAG: dry runs of both configs, lint, a tiny end-to-end run, resume, recovery."""

import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_tiny import (
    CONFIG_FILE,
    IMAGES_PER_CLASS,
    MOE_LAYERS,
    REPO,
    RUN_OUTPUT,
    SMALL_TARGET,
    TINY_MODELS,
    copy_workdir,
    edit_config,
    file_contents,
    job_rules,
    jobs_in,
    nothing_to_do,
    prepare_moe_vit_workdir,
    prepare_workdir,
    run,
    run_snakemake,
    snakemake_cmd,
    start,
)

from entropy_lens import cli
from entropy_lens.lens.translators import Translators
from entropy_lens.prompts.counts import prompt_count
from entropy_lens.skipping.plan import read_plan
from entropy_lens.store import schema, storage
from entropy_lens.verdicts import claim, decision
from entropy_lens.verdicts import registry as claims
from entropy_lens.verdicts.outcomes import OUTCOMES
from entropy_lens.verdicts.readings import TWIN
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.settings import load_config

pytestmark = pytest.mark.slow

# Seconds a background run may take to reach the state a test waits for, and to stop after Ctrl-C.
START_SECONDS = 300
STOP_SECONDS = 120
# What Snakemake says when another run, live or killed, holds the working directory's lock.
LOCK_ERROR = "Directory cannot be locked"
PROFILES = "results/profiles"


@pytest.mark.parametrize("configfiles", [(CONFIG_FILE,), ("config/paper.yaml",), (CONFIG_FILE, "config/study.yaml")])
def test_dry_run_builds_the_dag(configfiles):
    """--forceall plans every job whether or not a run already built them (make run, then make test)."""
    files = [REPO / f for f in configfiles]
    out = run(snakemake_cmd(REPO, "-n", "--forceall", configfile=files), cwd=REPO, timeout=300)
    assert "extract_profiles" in out.stdout and "combine_profiles" in out.stdout


def test_tables_of_another_config_do_not_shape_the_plan(tmp_path):
    """`make run` (default config), then a dry run and a plan of the paper config in the same folder:
    the default's 48-prompt MMLU table must not set the paper plan's shards (the config does)."""
    stale = [f"results/datasets/{t}.parquet" for t in ("mmlu", "blank", "formats", "layer_skip_eval")]
    run(snakemake_cmd(tmp_path, *stale, "--cores", "2", configfile=REPO / CONFIG_FILE), cwd=tmp_path, timeout=300)
    paper = REPO / "config/paper.yaml"
    out = run(snakemake_cmd(tmp_path, "-n", "--forceall", configfile=paper), cwd=tmp_path, timeout=300).stdout
    config = load_config(paper)
    tables = {t: tmp_path / "results/datasets" / f"{t}.parquet" for t in ("mmlu", "blank", "formats")}
    planned = planning.plan_from_config(config, tables=tables)
    mmlu = [j for j in planned.jobs if j.rule == planning.EXTRACT and j.dataset == "mmlu"]
    shards = -(-prompt_count("mmlu", config["datasets"]["mmlu"]) // config["compute"]["prompts_per_job"])
    assert {(j.model, j.n_shards) for j in mmlu} == {(m, shards) for m in planning.dataset_models(config)["mmlu"]}
    assert shards > 1 and {j.token_source for j in mmlu} == {"estimate"}
    assert len([j for j in planned.jobs if j.rule == planning.EXTRACT]) == job_rules(out).count("extract_profiles")


def test_the_cost_plan_waits_until_a_job_asks_for_its_resources(tmp_path):
    """Reading the rules makes no plan (`--list-rules` loads no tokenizer, reads no table); a dry run asks for
    the jobs' resources, and only then is the plan made: it reads the stories table (one prompt, left by
    another config) and says that it estimates instead."""
    workdir = prepare_workdir(tmp_path)
    (workdir / "results/datasets").mkdir(parents=True)
    pd.DataFrame({"prompt_id": ["p0"], "prompt_text": ["a story"]}).to_parquet(
        workdir / "results/datasets/tasks.parquet"
    )
    stale = "results/datasets/tasks.parquet holds 1 prompts but the config builds"
    listed = run_snakemake(workdir, "--list-rules", timeout=120).stdout
    assert "extract_profiles" in listed and stale not in listed
    assert stale in run_snakemake(workdir, "-n", timeout=120).stdout


def test_paper_config_lists_the_study_models():
    models = yaml.safe_load((REPO / "config/paper.yaml").read_text())["models"]
    assert len(models) == 15  # the study's 12, Phi-3-mini, and beyond the study an MoE decoder and a ViT
    assert {m["family"] for m in models.values()} == {"gpt2", "gemma", "llama", "qwen", "phi", "olmoe", "vit"}


def test_lint_passes():
    run(snakemake_cmd(REPO, "--lint"), cwd=REPO, timeout=300)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["lens"].update(top_pp=0.5), "top_pp"),
        (lambda c: c["datasets"]["blank"].update(n_samples=-3), "n_samples"),
        (lambda c: c["models"]["tiny-llama"].update(family=7), "family"),
        (lambda c: c["analysis"].setdefault("knn", {}).update(test="bonferroni"), "('test' was unexpected)"),
        (
            lambda c: c["analysis"].setdefault("knn", {}).update(folds=3, repeats=1),
            "analysis.knn.folds (3) x analysis.knn.repeats",
        ),
        (lambda c: c["models"]["tiny-llama"].update(source="./tiny_models/tiny-lama"), "models.tiny-llama.source"),
        (lambda c: c["models"]["tiny-llama"].update(source="smollm2"), "unknown model source 'smollm2'"),
        (lambda c: c["datasets"]["tasks"].update(models=["tiny-mistral"]), "datasets.tasks.models names"),
    ],
)
def test_bad_config_fails_before_any_job(tmp_path, edit, message):
    prepare_workdir(tmp_path)
    config = yaml.safe_load((tmp_path / CONFIG_FILE).read_text())
    edit(config)
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(config))
    out = run_snakemake(tmp_path, "--cores", "1", check=False)
    assert out.returncode != 0
    assert message in out.stdout
    assert not (tmp_path / "results").exists()


# tiny_run (tests/conftest.py): the whole tiny workflow, run once per session.


@dataclass(frozen=True)
class _Drawn:
    texts: list[str]  # every text element, in order
    groups: Counter  # element groups by matplotlib's id prefix: line2d, patch, LineCollection, ...


def _svg(path: Path) -> _Drawn:
    """What a figure's SVG (written with svg.fonttype none) drew."""
    svg = path.read_text()
    return _Drawn(
        re.findall(r"<text[^>]*>([^<]*)</text>", svg), Counter(re.findall(r'<g id="([A-Za-z0-9]+)_\d+"', svg))
    )


def _data_lines(path: Path, points: int) -> int:
    """Lines of at least ``points`` points drawn inside the axes (clipped to them; tick marks are not)."""
    paths = re.findall(r'<path d="([^"]+)"[^>]*clip-path=', path.read_text())
    return sum(len(re.findall(r"[ML] ", d)) >= points for d in paths)


def test_combined_store_follows_the_schema(tiny_run):
    ds = storage.open_profiles(tiny_run / f"{PROFILES}/tasks.zarr", combined=True)
    assert ds.entropy.chunks is not None, "open_zarr must be lazy (dask)"
    assert ds.entropy.dims == ("model", "prompt", "token", "layer")
    assert ds.renyi.dims == ("model", "prompt", "token", "layer", "alpha")
    assert list(ds.model.values) == ["tiny-llama", "tiny-qwen"]
    assert list(ds.family.values) == ["llama", "qwen"]
    assert (ds.n_params.values > 10_000).all()  # read from the models, not left at 0
    assert ds.sizes["prompt"] == 2 * 24
    for label in ("task", "phrasing", "template", "scrambled", "story_id"):
        assert label in ds.coords and ds[label].dims == ("prompt",)
    assert ds.depth.dims == ("model", "layer") and float(ds.depth.max()) == 1.0
    for var in ("entropy", "renyi", "nucleus_size"):
        assert ds[var].attrs["units"] == schema.VARIABLES[var].units
    assert set(schema.COMBINED_ATTRS) <= set(ds.attrs)


def test_per_model_store_is_chunked_compressed_and_labelled(tiny_run):
    import zarr

    path = tiny_run / f"{PROFILES}/tiny-llama/formats.zarr"
    ds = storage.open_profiles(path)
    assert {"format", "topic"} <= set(ds.coords)
    arr = zarr.open_array(path / "entropy", mode="r")
    assert arr.metadata.zarr_format == 3
    assert arr.chunks[0] == 4  # chunk_prompts in the tiny config
    assert "zstd" in str(arr.compressors).lower()


def test_mmlu_scores_and_tables(tiny_run):
    ds = storage.open_profiles(tiny_run / f"{PROFILES}/mmlu.zarr", combined=True)
    assert set(np.unique(ds.correct_ll.values)) <= {0, 1}
    assert set(np.unique(ds.correct_calibrated.values)) <= {0, 1}
    assert set(np.unique(ds.correct_parsed.values)) <= {-1, 0, 1}
    table = pd.read_csv(tiny_run / "results/tables/mmlu_accuracy.csv")
    assert set(table["measure"]) == {"ll", "calibrated", "parsed"} and "tiny-qwen" in set(table["model"])
    assert (table["ci_low"].dropna() <= table["accuracy"].dropna()).all()
    # What the figures drew, read from their SVGs (text stays text): bars of the letters answered and
    # accuracy whiskers per model (2 styles x 3 measures each), one labelled profile line per model.
    letters = _svg(tiny_run / "results/figures/mmlu_letters.svg")
    assert {"tiny-llama", "tiny-qwen", "base", "instruct", "ll", "calibrated", "parsed"} <= set(letters.texts)
    assert letters.groups["patch"] >= 2 * 6 * 4  # models x rows x stacked letters
    assert letters.groups["LineCollection"] == 2 * 2  # per model: accuracy whiskers, majority baselines
    profiles = _svg(tiny_run / "results/figures/mean_profiles_blank.svg")
    labels = [t for t in profiles.texts if t.startswith("tiny-")]
    assert [t.split(" (")[0] for t in labels] == ["tiny-llama", "tiny-qwen"]
    assert _data_lines(tiny_run / "results/figures/mean_profiles_blank.svg", points=3) >= 2  # a profile per model


def test_layer_skip_sweep_map_and_comparisons(tiny_run):
    """Every block skipped alone on the sweep's questions, the paired design on every evaluation question, both
    variants compared, the map drawn."""
    plan = read_plan(tiny_run / "results/layer_skip/tiny-llama/plan.json")
    blocks = yaml.safe_load((tiny_run / "resources/models/tiny-llama/config.json").read_text())["num_hidden_layers"]
    assert plan.model == "tiny-llama" and plan.n_layers == blocks and plan.n_calibration == 2
    correct = pd.read_parquet(tiny_run / "results/layer_skip/tiny-llama/correct.parquet")
    singles = correct[correct["kind"] == "single"]
    assert sorted(singles["layers"].unique()) == [str(b) for b in range(blocks)]
    chosen = {b for s in plan.selections if s.k == 1 for b in (*s.expansion, *s.pruning)}
    per_block = singles[singles["measure"] == "ll"].groupby("layers")["question"].nunique()
    assert all(per_block[str(b)] == (6 if b in chosen else 4) for b in range(blocks))  # sweep: 4 of the 6
    random = correct[(correct["kind"] == "random") & (correct["k"] == 1) & (correct["measure"] == "ll")]
    assert random.groupby("condition")["question"].nunique().eq(6).all()  # one random block per question
    skip_map = pd.read_csv(tiny_run / "results/tables/skip_map.csv")
    assert len(skip_map) == 2 * 2 * blocks  # models x measures x blocks
    assert set(skip_map["reading"]) <= {"safe", "costly", "unclear"}
    comparisons = pd.read_csv(tiny_run / "results/tables/layer_skip_comparisons.csv")
    k1 = comparisons[(comparisons["k"] == 1) & (comparisons["model"] == "tiny-llama")]
    assert set(k1["variant"]) == {"all_blocks", "no_final"} and set(k1["statistic"]) == {"accuracy", "gold_logprob"}
    all_blocks = k1[(k1["variant"] == "all_blocks") & (k1["second"] == "random")]
    assert (all_blocks["n"] == 6).all() and all_blocks["n_sets"].between(1, blocks - 1).all()
    assert set(k1["lens"]) <= {"logit", "linear", "logit, linear"}
    stability = pd.read_csv(tiny_run / "results/tables/layer_skip_stability.csv")
    assert set(stability["lens"]) == {"logit", "linear"}  # tiny-llama's blocks chosen through its linear lens too
    assert stability.groupby(["model", "lens", "variant", "kind"])["share"].sum().round(6).eq(1.0).all()
    figure = _svg(tiny_run / "results/figures/skip_map_tiny-llama.svg")
    assert {"mean ΔH (nats)", "Δ accuracy (points)", "ΔH on held-out questions (nats)"} <= set(figure.texts)
    assert {"held-out KL (nats)", "logit lens", "linear lens", "tuned lens"} <= set(figure.texts)  # a lens is fitted
    assert "held-out KL (nats)" not in _svg(tiny_run / "results/figures/skip_map_tiny-qwen.svg").texts  # none here


def test_skip_criteria_and_exit_curve_per_block(tiny_run):
    """The pruning criteria, one row per block, each one's Spearman with the cost, and the exit curve."""
    blocks = yaml.safe_load((tiny_run / "resources/models/tiny-llama/config.json").read_text())["num_hidden_layers"]
    criteria = pd.read_csv(tiny_run / "results/tables/skip_criteria.csv")
    llama = criteria[criteria["model"] == "tiny-llama"]
    assert llama["layer"].tolist() == list(range(blocks)) and (llama["n"] == 6).all()  # the readings: every question
    assert llama["block_influence"].between(0, 2).all() and llama["angular"].between(0, 1).all()
    spearman = pd.read_csv(tiny_run / "results/tables/skip_criteria_spearman.csv")
    four = {"delta_h", "block_influence", "angular", "position", "entrodrop"}
    # the linear lens is fitted for tiny-llama alone: ΔH read through it joins its criteria, not tiny-qwen's
    by_model = spearman.groupby("model")["criterion"].agg(set).to_dict()
    assert by_model == {"tiny-llama": four | {"delta_h_linear"}, "tiny-qwen": four}
    assert llama["delta_h_linear"].iloc[1:].notna().all()
    assert criteria.loc[criteria["model"] == "tiny-qwen", "delta_h_linear"].isna().all()
    exit_curve = pd.read_csv(tiny_run / "results/tables/skip_exit.csv")
    sizes = exit_curve.groupby(["lens", "model", "measure"]).size()
    assert sizes["logit"].eq(blocks + 1).all() and exit_curve["accuracy"].notna().all()
    # the linear lens, fitted for tiny-llama alone, reads blocks 1..L (no translator for the embeddings)
    assert set(sizes["linear"].index.get_level_values("model")) == {"tiny-llama"} and sizes["linear"].eq(blocks).all()
    last = exit_curve[(exit_curve["model"] == "tiny-llama") & (exit_curve["position"] == blocks)]
    assert last.groupby("measure")["accuracy"].nunique().eq(1).all()  # both lenses read the model's own answer
    threshold = pd.read_csv(tiny_run / "results/tables/skip_exit_threshold.csv")
    lenses = threshold.groupby("model")["lens"].agg(set).to_dict()
    assert lenses == {"tiny-llama": {"logit", "linear"}, "tiny-qwen": {"logit"}}
    assert (tiny_run / "results/figures/skip_criteria_tiny-llama.png").stat().st_size > 0
    assert (tiny_run / "results/figures/skip_exit_tiny-llama.png").stat().st_size > 0
    drops = pd.read_csv(tiny_run / "results/tables/skip_drop_sets.csv", keep_default_na=False)
    chosen = drops.groupby("model")["criterion"].agg(set).to_dict()
    assert chosen == {
        "tiny-llama": four | {"delta_h_linear", "gromov_contiguous"},
        "tiny-qwen": four | {"gromov_contiguous"},
    }
    scores = pd.read_csv(tiny_run / "results/tables/skip_drop_scores.csv", dtype={"layers": str})
    assert set(scores["criterion"]) == set(drops["criterion"]) and set(scores["statistic"]) == {
        "accuracy",
        "gold_logprob",
    }
    assert (
        (scores["n"] == 4).all()
        and (scores["n_sets"] >= 1).all()
        and scores["null_name"].str.startswith("random").all()
    )


def test_fitted_lenses_are_artifacts_judged_on_questions_no_analysis_reads(tiny_run):
    """Each fitted kind is saved with its provenance and judged beside the logit lens on held-out questions
    that neither the fit nor any analysed set draws; the final block reads the model's own logits."""
    tables = {name: pd.read_parquet(tiny_run / f"results/datasets/{name}.parquet") for name in
              ("lens_fit", "lens_held_out", "mmlu", "layer_skip_calibration", "layer_skip_eval")}  # fmt: skip
    ids = {name: set(table["question_id"].astype(str)) for name, table in tables.items()}
    assert (len(ids["lens_fit"]), len(ids["lens_held_out"])) == (3, 2)
    analysed = ids["mmlu"] | ids["layer_skip_calibration"] | ids["layer_skip_eval"]
    assert not ids["lens_fit"] & ids["lens_held_out"] and not (ids["lens_fit"] | ids["lens_held_out"]) & analysed
    blocks = yaml.safe_load((tiny_run / "resources/models/tiny-llama/config.json").read_text())["num_hidden_layers"]
    for kind in ("linear", "tuned"):
        lens = Translators.load(tiny_run / f"results/lenses/tiny-llama/{kind}.safetensors")
        assert lens.kind == kind and lens.n_layers == blocks and lens.provenance["prompts"] == 3
        assert lens.provenance["corpus"].startswith("mmlu questions outside every analysed set")
    table = pd.read_csv(tiny_run / "results/tables/lens_fit.csv")
    assert table.groupby("kind").size().to_dict() == {"linear": blocks, "logit": blocks, "tuned": blocks}
    assert set(table["model"]) == {"tiny-llama"} and (table["n_prompts"] == 2).all()
    assert (table["n_tokens"] == 2 * 4).all()  # the last 4 positions of each held-out question
    final = table[table["block"] == blocks - 1]
    assert final["kl"].abs().max() < 1e-5
    assert (table["ci_low"] <= table["kl"] + 1e-9).all() and (table["kl"] <= table["ci_high"] + 1e-9).all()
    assert (tiny_run / "results/figures/lens_fit.png").stat().st_size > 0


def test_the_learning_curve_and_the_schedule_under_both_lenses(tiny_run):
    """The linear lens read at each size of its curve (3 corpus prompts: 1 and 3), the tuned lens once, on the
    held-out tokens; the schedule per model, the blocks each lens selects, the lenses' agreement, the extension row."""
    blocks = yaml.safe_load((tiny_run / "resources/models/tiny-llama/config.json").read_text())["num_hidden_layers"]
    readings = pd.read_parquet(tiny_run / "results/lenses/tiny-llama/linear_readings.parquet")
    sizes = readings.drop_duplicates(["lens", "fit_prompts"])[["lens", "fit_prompts"]].values.tolist()
    assert sizes == [["logit", 0], ["linear", 1], ["linear", 3]]
    assert readings.groupby(["lens", "fit_prompts"]).size().eq(2 * 4 * blocks).all()  # 2 questions x 4 positions
    plateau = pd.read_csv(tiny_run / "results/tables/lens_fit_plateau.csv")
    assert plateau.groupby("kind")["fit_prompts"].agg(list).to_dict() == {"linear": [1, 3], "tuned": [3]}
    assert set(plateau["reading"]) <= {"plateau", "still improving", "undecided"}
    curve = pd.read_csv(tiny_run / "results/tables/lens_fit_curve.csv")
    assert len(curve) == (2 + 1) * blocks and (tiny_run / "results/figures/lens_fit_curve.png").stat().st_size > 0
    schedule = pd.read_csv(tiny_run / "results/tables/lens_schedule.csv")
    assert schedule.groupby("lens").size().to_dict() == {"linear": blocks, "logit": blocks, "tuned": blocks}
    own = pd.read_csv(tiny_run / "results/lenses/tiny-llama/schedule.csv")
    pd.testing.assert_frame_equal(own, schedule, check_dtype=False)  # one model: its own table is the whole
    assert schedule.groupby("lens")["delta_h"].apply(lambda v: v.iloc[1:].notna().all()).all()
    choices = pd.read_csv(tiny_run / "results/tables/lens_schedule_choices.csv")
    assert len(choices) == 3 * 2 * 2  # lenses x variants x phases
    agreement = pd.read_csv(tiny_run / "results/tables/lens_schedule_agreement.csv", keep_default_na=False)
    assert sorted(agreement["lens"].unique()) == ["linear", "tuned"] and len(agreement) == 2 * 2
    table = pd.read_csv(tiny_run / "results/tables/paper_comparison.csv", keep_default_na=False)
    rows = table[table["claim_id"] == "schedule_survives"]
    assert len(rows) == 2 and set(rows["role"]) == {"extension"}
    assert set(rows["verdict"]) <= {"holds", "does not hold", "undecided", "cannot be read"}
    assert (tiny_run / "results/figures/lens_schedule.png").stat().st_size > 0


def test_verdicts_are_read_again_under_each_fitted_lens(tiny_run):
    """fitted_lens.profile_datasets: the same prompts and generated tokens read through each fitted kind (the store
    says which lens), analysed as under the logit lens; each verdict beside the other, the headline counts the
    changes and the verdict table carries each kind's verdict."""
    for dataset in ("formats", "blank"):
        logit = storage.open_profiles(tiny_run / f"{PROFILES}/tiny-llama/{dataset}.zarr")
        for kind in ("linear", "tuned"):
            lens = storage.open_profiles(tiny_run / f"results/lens_profiles/{kind}/tiny-llama/{dataset}.zarr")
            assert lens.attrs["lens_kind"] == kind and logit.attrs.get("lens_kind", "logit") == "logit"
            np.testing.assert_array_equal(lens.token_id.values, logit.token_id.values)  # the same generations
            entropy, under_logit = lens.entropy.values, logit.entropy.values
            np.testing.assert_allclose(entropy[..., -1], under_logit[..., -1], rtol=1e-4, atol=1e-4)  # final block
            assert np.nanmax(np.abs(entropy[..., :-1] - under_logit[..., :-1])) > 1e-3  # earlier blocks read anew
    changes = pd.read_csv(tiny_run / "results/tables/lens_robustness.csv", keep_default_na=False)
    assert set(changes["kind"]) == {"linear", "tuned"} and set(changes["dataset"]) == {"formats", "blank"}
    assert set(changes["model"]) <= {"tiny-llama", "all"}
    assert changes["verdict_logit"].ne("").all() and changes["verdict_lens"].ne("").all()
    assert changes["changed"].astype(str).isin(["True", "False"]).all()
    assert (changes["changed"].astype(str) == "True").eq(changes["verdict_logit"] != changes["verdict_lens"]).all()
    assert set(changes["claim"]) >= {claims.claim("spearman").name, claims.claim("overlap").name}
    blocks = pd.read_csv(tiny_run / "results/tables/lens_blocks.csv")
    n_layers = int(blocks["block"].max()) + 1
    assert len(blocks) == 2 * 2 * n_layers  # per kind and dataset, one row per block
    final = blocks[blocks["block"] == n_layers - 1]
    assert final["difference"].abs().max() < 1e-3  # the final block reads the model's own logits
    markdown = (tiny_run / "results/tables/lens_robustness.md").read_text()
    for kind in ("linear", "tuned"):
        counted = changes[(changes["kind"] == kind) & (changes["headline"].astype(str) == "True")]
        changed = int((counted["changed"].astype(str) == "True").sum())
        assert f"Under the {kind} lens, {changed} of {len(counted)} verdicts change" in markdown
        assert (
            f"Under the {kind} lens, {changed} of {len(counted)}"
            in (tiny_run / "results/tables/verdicts.md").read_text()
        )
    top = pd.read_csv(tiny_run / "results/tables/verdicts.csv", keep_default_na=False)
    spearman = top[(top["claim_id"] == "spearman") & (top["model"] == "tiny-llama") & (top["split"] == "blank")]
    expected = changes[
        (changes["claim_id"] == "spearman") & (changes["split"] == "blank") & (changes["kind"] == "linear")
    ]
    assert len(spearman) == 1 and spearman["under_linear"].tolist() == expected["verdict_lens"].tolist()
    assert top.loc[top["model"] != "tiny-llama", "under_linear"].eq("").all()


def test_twins_are_profiled_apart_and_read_beside_their_models(tiny_run):
    """twins: each blank-set model's random-init twin (its config and tokenizer, new weights from the seed) profiled on
    the same prompts into its own stores, never the trained models' combined store; the twin table reads both, and
    the verdicts carry each learned-structure row's twin reading."""
    for model in TINY_MODELS:
        twin, trained = tiny_run / f"resources/twins/{model}", tiny_run / f"resources/models/{model}"
        provenance = yaml.safe_load((twin / "entropy_lens_source.json").read_text())
        assert provenance["twin_of"] == model and provenance["seed"] == 0 and provenance["init"] == "random init"
        assert (twin / "config.json").read_text() == (trained / "config.json").read_text()
        mine = storage.open_profiles(tiny_run / f"{PROFILES}/twins/{model}/blank.zarr")
        theirs = storage.open_profiles(tiny_run / f"{PROFILES}/{model}/blank.zarr")
        assert list(mine.indexes["prompt"]) == list(theirs.indexes["prompt"])
        assert not np.allclose(mine.entropy.values, theirs.entropy.values, equal_nan=True)
    combined = storage.open_profiles(tiny_run / f"{PROFILES}/twins/blank.zarr", combined=True)
    assert list(combined.model.values) == list(TINY_MODELS) and list(combined.family.values) == ["llama", "qwen"]
    assert not (tiny_run / f"{PROFILES}/twins/formats.zarr").exists()  # twins.datasets: blank only
    table = pd.read_csv(tiny_run / "results/tables/twins.csv", keep_default_na=False)
    assert set(table["dataset"]) == {"blank", "mmlu"} and table["null_name"].str.startswith("random-init twin").all()
    assert {"separability", "spearman", "overlap", "shape"} <= set(table["reading"])
    top = pd.read_csv(tiny_run / "results/tables/paper_comparison.csv", keep_default_na=False)
    read = top[top[TWIN.word].isin(decision.BEYOND_WORDS)]
    # on the blank set alone: the expansion rows name it as their split, the separability rows as their dataset
    assert set(read["claim_id"]) >= {"spearman", "overlap", "model_identity"}
    assert set(read.loc[read["split"] != "", "split"]) == {"blank"}
    assert read[TWIN.name].str.startswith("random-init twin").all()
    nulls = pd.read_csv(tiny_run / "results/tables/nulls.csv", keep_default_na=False)
    assert len(nulls[nulls["reading"] == TWIN.key]) == len(read)  # the nulls table has a row per twin reading
    assert "Beyond the twin" in (tiny_run / "results/tables/verdicts.md").read_text()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_user_mmlu_file_feeds_the_prompt_set_and_the_layer_skip_questions(tmp_path, suffix):
    """datasets.mmlu.source: local with a file in the schema's columns (no mapping), through the workflow."""
    workdir = prepare_workdir(tmp_path)
    questions = pd.DataFrame(
        {
            "subject": ["astronomy"] * 4 + ["virology"] * 4,
            "question": [f"user question {i}?" for i in range(8)],
            **{f"choice_{c}": [f"{c}{i}" for i in range(8)] for c in "abcd"},
            "answer": list("ABCDabcd"),
        }
    )
    path = workdir / f"my_questions{suffix}"
    if suffix == ".csv":
        questions.to_csv(path, index=False)
    else:
        questions.to_json(path, orient="records", lines=True)
    # n_questions 0: every question of the file, counted when the DAG is built.
    edit_config(workdir, {"datasets": {"mmlu": {"source": "local", "path": path.name, "n_questions": 0}}})
    targets = ("results/datasets/mmlu.parquet", "results/datasets/layer_skip_eval.parquet")
    out = run_snakemake(workdir, *targets, "--cores", "1")
    assert jobs_in(out.stdout) == {"prepare_mmlu", "prepare_layer_skip"}
    table = pd.read_parquet(workdir / targets[0])
    assert len(table) == 8 * 2 and set(table["question"]) == set(questions["question"])  # two styles
    assert set(table["answer"]) == set("ABCD") and table["prompt_text"].str.contains("user question").all()
    evaluation = pd.read_parquet(workdir / targets[1])
    assert len(evaluation) == 6 and evaluation["question"].isin(questions["question"]).all()  # 8 less 2 calibration


def test_the_run_ends_with_the_verdicts(tiny_run):
    table = pd.read_csv(tiny_run / "results/tables/paper_comparison.csv", keep_default_na=False)
    assert {"verdict", "why", "ci_low", "ci_high", "study", "study_protocol"} <= set(table.columns)
    claimed = table[table["verdict"] != ""]
    # every role may also read mechanical (its null cannot be beaten) or cannot test (its design cannot test it)
    apart = {decision.MECHANICAL, decision.CANNOT_TEST}
    words = {
        claim.FINDING: {*decision.VERDICTS, *apart},
        claim.PRECONDITION: {*decision.PRECONDITION_WORDS.values(), *apart},
        claim.EXTENSION: {
            *decision.EXTENSION_WORDS.values(),
            *OUTCOMES,
            decision.INCONCLUSIVE,
            *apart,
        },  # inconclusive: not run
    }
    for role, rows in claimed.groupby("role"):
        assert set(rows["verdict"]) <= words[role], (role, set(rows["verdict"]))
    assert set(claimed["role"]) == set(words)  # the tiny run has rows of every role
    assert (claimed["why"] != "").all()
    headline = (tiny_run / "results/tables/verdicts.md").read_text()
    assert "task separability (intact prompts)" in headline and "Spearman" in headline
    # one model per family in the tiny run: the same-family pair claims are listed, saying why they cannot run
    assert claims.claim("clustering").name in headline and claims.claim("size_resolution").name in headline
    # the pair claims: the design cannot test them (no family has two sizes); the held-out family: not run
    pairs = table[table["claim_id"].isin(["clustering", "size_resolution"])]
    assert len(pairs) == 2 and pairs["why"].str.startswith("cannot test: no family has two sizes").all(), pairs["why"]
    assert pairs["why"].str.contains("one model per family").all() and (pairs["verdict"] == decision.CANNOT_TEST).all()
    heldout = table[table["claim_id"] == "family_heldout"]
    assert len(heldout) == 1 and heldout["why"].str.startswith("not run: one model per family").all(), heldout["why"]
    pooled = table[table["claim_id"].isin(["family", "model_identity"])]  # two one-model families
    identity = pooled[pooled["claim_id"] == "model_identity"]
    assert len(identity) > 0 and set(identity["role"]) == {claim.EXTENSION}
    (family,) = pooled[pooled["claim_id"] == "family"].to_dict("records")  # the study's claim, said unread
    assert family["role"] == claim.FINDING and family["why"].startswith("not run: one model per family")
    assert "gap_low" in pd.read_csv(tiny_run / "results/tables/family_pairs.csv").columns
    timings = pd.read_csv(tiny_run / "results/tables/run_timings.csv")
    assert "extract_profiles" in set(timings["rule"]) and timings["seconds"].iloc[-1] > 0
    printed = RUN_OUTPUT[tiny_run]  # the onsuccess hook prints the headline, no line wider than 120 characters
    table_text = (tiny_run / "results/tables/verdicts.txt").read_text()
    assert table_text in printed and "claim" in table_text and "ours (95% CI)" in table_text
    assert max(len(line) for line in table_text.splitlines()) <= 120
    assert "results/tables/paper_comparison.md" in RUN_OUTPUT[tiny_run]


def test_the_plan_stands_beside_the_run_for_every_model_job(tiny_run, monkeypatch):
    table = pd.read_csv(tiny_run / "results/tables/plan_vs_run.csv", keep_default_na=True)
    assert list(table.columns) == [
        *("rule", "model", "dataset", "shard", "predicted_s", "measured_s", "ratio"),
        *("predicted_mb", "measured_rss_mb", "peak_rss_mb", "mem_ratio"),
    ]
    monkeypatch.chdir(tiny_run)  # the config names its model folders relative to the working directory
    planned = planning.plan_from_config(load_config(CONFIG_FILE))
    assert sorted(zip(table["rule"], table["model"], table["dataset"].fillna(""), strict=True)) == sorted(
        (j.rule, j.model, j.dataset) for j in planned.jobs
    )
    assert {"extract_profiles", "layer_skip_select", "layer_skip_eval"} <= set(table["rule"])
    assert table["measured_s"].gt(0).all() and table["measured_rss_mb"].gt(0).all()  # every job ran and measured
    np.testing.assert_allclose(table["ratio"], table["predicted_s"] / table["measured_s"])
    # every model job's log ends with its exact peak, and the memory ratio reads it (Snakemake samples its own)
    assert table["peak_rss_mb"].gt(0).all()
    np.testing.assert_allclose(table["mem_ratio"], table["predicted_mb"] / table["peak_rss_mb"])


def test_second_run_has_nothing_to_do(tiny_run):
    assert nothing_to_do(tiny_run)


def test_rerun_of_same_config_gives_identical_stores(tiny_run, tmp_path):
    """The extraction job, run again on the same inputs, writes the same bytes."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    store = f"{PROFILES}/tiny-llama/blank.zarr"
    again = run_snakemake(workdir, store, "--cores", "2", "--forcerun", "extract_profiles")
    assert job_rules(again.stdout).count("extract_profiles") == 1
    assert file_contents(workdir, (store,)) == file_contents(tiny_run, (store,))


def test_moe_decoder_and_vit_run_through_the_whole_workflow(tmp_path):
    """rule all on a tiny OLMoE (blank set) and a tiny ViT (generated images): 20 jobs."""
    workdir = prepare_moe_vit_workdir(tmp_path)
    run_snakemake(workdir, "--cores", "2")
    blank = storage.open_profiles(workdir / f"{PROFILES}/blank.zarr", combined=True)
    routing = blank[schema.ROUTING_ENTROPY].sel(model="tiny-moe").values  # [P, T, L]
    generated = blank.token_id.sel(model="tiny-moe").values >= 0  # [P, T]: a sample may stop at its EOS
    assert np.isfinite(routing[generated]).all() and np.isnan(routing[~generated]).all()
    assert blank.sizes[schema.EXPERT_RANK] == 2
    vit = storage.open_profiles(workdir / f"{PROFILES}/tiny-vit/images.zarr")
    assert vit.sizes["token"] == 1 and vit.attrs["modality"] == "image" and vit.attrs["readout"] == "cls"
    images = storage.open_profiles(workdir / f"{PROFILES}/images.zarr", combined=True)
    assert images.sizes["prompt"] == 3 * IMAGES_PER_CLASS
    assert set(images.label.values) == {"stripes", "columns", "checker"}
    table = pd.read_csv(workdir / "results/tables/routing_entropy.csv")
    row = table.set_index(["dataset", "model"]).loc[("blank", "tiny-moe")]
    assert row["n_moe_layers"] == MOE_LAYERS - 1 and row["n_prompts"] == 4
    assert row["ci_low"] <= row["spearman_layers"] <= row["ci_high"]
    knn = pd.read_csv(workdir / "results/tables/knn_auc.csv")
    image_rows = knn[(knn["target"] == "image_class") & (knn["measure"] == "shannon")]
    assert set(image_rows["protocol"]) == {"grouped", "study"} and (image_rows["n_samples"] == 12).all()
    assert image_rows["auc_mean"].notna().all()
    expansion = pd.read_csv(workdir / "results/tables/expansion_images.csv")
    assert expansion["model"].tolist() == ["tiny-vit"] and expansion["n_prompts"].item() == 12
    table = pd.read_csv(workdir / "results/tables/paper_comparison.csv")
    assert (table["claim_id"] == "image_class").any()


def test_one_model_plans_no_family_analysis_and_completes(tmp_path):
    """One model with blank enabled: family analyses compare models, so none is planned, and the run ends."""
    workdir = prepare_workdir(tmp_path)
    config = yaml.safe_load((workdir / CONFIG_FILE).read_text())
    model = next(iter(TINY_MODELS))
    config["models"] = {model: config["models"][model]}
    (workdir / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False))
    planned = jobs_in(run_snakemake(workdir, "-n", "--cores", "1").stdout)
    assert "extract_profiles" in planned and "paper_table" in planned
    assert "family_fingerprints" not in planned
    # The run itself on blank alone: the other datasets and layer skipping cost time and change nothing here.
    others = {name: {"enabled": False} for name in config["datasets"] if name != "blank"}
    edit_config(workdir, {"datasets": others, "layer_skip": {"enabled": False}, "fitted_lens": {"enabled": False}})
    out = run_snakemake(workdir, "--cores", "2")
    assert "family_fingerprints" not in jobs_in(out.stdout)
    table = pd.read_csv(workdir / "results/tables/paper_comparison.csv", keep_default_na=False)
    family = table[table["claim_id"] == "family"]  # one family: nothing to separate, and the table says so
    assert len(family) > 0 and (family["verdict"] == "inconclusive").all()
    assert family["why"].str.contains(">= 2", regex=False).all(), family["why"].tolist()
    # The family shape claims: the llama model gets a verdict on its blank profiles; no GPT model, so not run.
    assert "family_shapes" in jobs_in(out.stdout)
    llama = table[table["claim_id"] == "shape_llama"]
    assert llama["model"].tolist() == [model] and llama["split"].tolist() == ["blank"] and llama["verdict"].all()
    gpt = table[table["claim_id"] == "shape_gpt"]
    assert gpt["why"].tolist() == ["not run: no model of family gpt or gpt2 in this configuration"]
    overlap = table[table["claim_id"] == "overlap"].set_index("measure")
    # containment decides, Jaccard beside it, and containment on the cells whose nucleus size changes
    assert sorted(overlap.index) == ["containment", "containment_size_changes", "jaccard"]
    assert overlap.loc["jaccard", "estimate"] <= overlap.loc["containment", "estimate"]
    assert overlap.loc["containment", "null"].startswith("cross-prompt")  # its null, computed in the same run
    assert set(overlap["verdict"]) <= set(decision.VERDICTS)
    headline = (workdir / "results/tables/verdicts.md").read_text()
    assert "**Claims of the study:" in headline  # no MMLU: the accuracy precondition is listed, not run
    assert "**Preconditions: 0 met, 0 not met, 0 undecided; 1 not run (" in headline


@pytest.fixture
def background(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Starts the tiny workflow in a working directory, in the background, as a terminal would;
    kills whatever still runs at teardown. Its output goes to ``<workdir>.log``."""
    started: list[subprocess.Popen] = []

    def launch(workdir: Path, *args: str) -> subprocess.Popen:
        with _log(workdir).open("w") as log:
            started.append(start(snakemake_cmd(workdir, *args), cwd=workdir, stdout=log))
        return started[-1]

    yield launch
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _log(workdir: Path) -> Path:
    return workdir.with_name(f"{workdir.name}.log")


def _wait_until(proc: subprocess.Popen, workdir: Path, ready: Callable[[], object], what: str) -> None:
    """Poll ``ready`` until it is true; fail, showing the run's output, if the run ends first or times out."""
    deadline = time.monotonic() + START_SECONDS
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            state = "ended" if proc.poll() is not None else f"took {START_SECONDS}s"
            pytest.fail(f"the run {state} before {what}; output:\n{_log(workdir).read_text()[-4000:]}")
        time.sleep(0.1)


def _locks(workdir: Path) -> list[Path]:
    return list((workdir / ".snakemake" / "locks").glob("*"))


def _extraction_started(workdir: Path) -> bool:
    return bool(_locks(workdir)) and any((workdir / "logs" / "extract_profiles").rglob("*.log"))


def test_interrupted_run_resumes_without_redoing_finished_jobs(tmp_path, background):
    workdir = prepare_workdir(tmp_path / "wf")
    proc = background(workdir, SMALL_TARGET, "--cores", "1")  # one job at a time: the extractions in turn
    stores = workdir / PROFILES
    _wait_until(proc, workdir, lambda: list(stores.glob("*/*.zarr")), "a per-model store")
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group
    proc.wait(timeout=STOP_SECONDS)
    finished = {p: p.stat().st_mtime for p in stores.glob("*/*.zarr")}
    assert finished, "the run was interrupted before any store was written"
    for path in stores.rglob("*.zarr"):  # nothing half-written looks complete
        storage.open_profiles(path, combined=path.parent == stores)
    out = run_snakemake(workdir, SMALL_TARGET, "--cores", "2", check=False)
    incomplete = set()
    if out.returncode != 0:  # the job killed mid-way is flagged by Snakemake's incomplete tracking
        assert "IncompleteFilesException" in out.stdout, out.stdout[-3000:]
        listed = out.stdout.split("Incomplete files:")[1].splitlines()
        incomplete = {workdir / line.strip() for line in listed if line.strip()}
        run_snakemake(workdir, SMALL_TARGET, "--cores", "2", "--rerun-incomplete")
    for path, mtime in finished.items():
        if path not in incomplete:
            assert path.stat().st_mtime == mtime, f"{path} was redone"
    storage.open_profiles(workdir / SMALL_TARGET, combined=True)


def test_hard_killed_run_is_unlocked_and_resumed(tmp_path, background):
    """SIGKILL (the OOM killer, a dropped session) leaves the lock; unlock + --rerun-incomplete recover."""
    workdir = prepare_workdir(tmp_path / "wf")
    proc = background(workdir, SMALL_TARGET, "--cores", "1")
    _wait_until(proc, workdir, lambda: _extraction_started(workdir), "an extraction job started")
    os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and its running job, with no chance to clean up
    proc.wait(timeout=STOP_SECONDS)
    assert _locks(workdir), "a hard kill leaves the lock behind"
    blocked = run_snakemake(workdir, SMALL_TARGET, "--cores", "1", check=False)
    assert blocked.returncode != 0 and LOCK_ERROR in blocked.stdout
    assert cli.main(["unlock", "--directory", str(workdir)]) == 0
    assert not _locks(workdir)
    run_snakemake(workdir, SMALL_TARGET, "--cores", "2", "--rerun-incomplete")
    for model in TINY_MODELS:
        storage.open_profiles(workdir / PROFILES / model / "blank.zarr")
    storage.open_profiles(workdir / SMALL_TARGET, combined=True)
    assert nothing_to_do(workdir, SMALL_TARGET)


def test_unlock_refuses_while_a_run_works_in_the_directory(tmp_path, background, capsys):
    workdir = prepare_workdir(tmp_path / "wf")
    proc = background(workdir, SMALL_TARGET, "--cores", "1")
    _wait_until(proc, workdir, lambda: _locks(workdir), "the run locked its directory")
    status = cli.main(["unlock", "--directory", str(workdir)])
    assert proc.poll() is None, "the run must still be working when unlock is called"
    assert status == 2
    assert f"pid {proc.pid} (" in capsys.readouterr().err
    assert _locks(workdir), "the live run's lock must stay"


def _reordered(value):
    """``value`` with the keys of every mapping reversed, models and datasets included."""
    if not isinstance(value, dict):
        return value
    return {key: _reordered(item) for key, item in list(value.items())[::-1]}


def test_a_memory_or_chunking_setting_reruns_nothing(tiny_run, tmp_path):
    """lens.budget_mb (how the lens tiles the vocabulary and chunks rows) and storage.chunk_prompts (how a store is
    cut into files) change no value: no rule takes them as params, so after a run there is nothing to do; what the
    lens measures (top_p) is a param of every model job that reads through it."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    edit_config(workdir, {"lens": {"budget_mb": 64}, "storage": {"chunk_prompts": 8}})
    assert nothing_to_do(workdir)
    edit_config(workdir, {"lens": {"top_p": 0.7}})
    assert {"extract_profiles", "layer_skip_select"} <= jobs_in(run_snakemake(workdir, "-n").stdout)


def test_reruns_follow_real_changes_only(tiny_run, tmp_path):
    """After a run: the config with its keys reordered (models and datasets too) reruns nothing; a changed value
    reruns what reads it; new weights in a local model folder rerun that model's materialization (and what
    follows), no other."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    config = yaml.safe_load((workdir / CONFIG_FILE).read_text())
    reordered = _reordered(config)
    (workdir / CONFIG_FILE).write_text(yaml.safe_dump(reordered, sort_keys=False))
    assert nothing_to_do(workdir, SMALL_TARGET)
    edit_config(workdir, {"datasets": {"blank": {"temperature": 0.9}}})
    changed = jobs_in(run_snakemake(workdir, SMALL_TARGET, "-n").stdout)
    assert "extract_profiles" in changed and "materialize_model" not in changed
    (workdir / CONFIG_FILE).write_text(yaml.safe_dump(reordered, sort_keys=False))
    model = next(iter(TINY_MODELS))
    weights = next((workdir / "tiny_models" / model).glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    rules = job_rules(run_snakemake(workdir, SMALL_TARGET, "-n").stdout)
    assert rules.count("materialize_model") == 1 and rules.count("extract_profiles") == 1
