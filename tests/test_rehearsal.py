"""The paper run's hub path, rehearsed offline: stand-ins of every model and hub dataset of config/paper.yaml
written into a local Hugging Face cache (scripts/rehearsal_cache.py) and read back through the library's own
hub loaders, the one-line errors of a hub model that is neither cached nor reachable, and the paper DAG."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from entropy_lens.cli import main
from entropy_lens.model.loading import load_model
from entropy_lens.prompts.images import image_records
from entropy_lens.prompts.mmlu import load_hub_mmlu
from entropy_lens.prompts.stories import load_hub_stories
from entropy_lens.workflow import fetch
from entropy_lens.workflow.settings import load_config

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "config" / "paper.yaml"
_spec = importlib.util.spec_from_file_location("rehearsal_cache", REPO / "scripts" / "rehearsal_cache.py")
cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cache)


def _offline(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Point the hub and datasets libraries at ``root`` (hub/, datasets/) and forbid the network, as the
    environment variables of ``make rehearsal`` do before the libraries are imported."""
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", root / "datasets")


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-ins of every model and hub dataset of config/paper.yaml, once per module."""
    root = tmp_path_factory.mktemp("rehearsal_cache")
    cache.write_cache(root, yaml.safe_load(PAPER.read_text()))
    return root


@pytest.fixture
def offline(standins: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _offline(monkeypatch, standins)
    return standins


def _paper_models() -> dict[str, dict]:
    return yaml.safe_load(PAPER.read_text())["models"]


def test_every_paper_model_loads_by_its_hub_id(offline: Path) -> None:
    """Each stand-in is found under the paper's own hub id, of the class the shipped config names, tiny."""
    depths = {}
    for name, spec in _paper_models().items():
        lm = load_model(spec["source"], device="cpu")
        fields = cache.hub_models({"models": {name: spec}})[spec["source"]]
        assert lm.source == f"hub:{spec['source']}"
        assert lm.model.config.model_type == fields["model_type"], name
        assert lm.n_params < cache.MAX_PARAMS, name
        if fields["model_type"] != "vit":
            tied = lm.unembed.weight.data_ptr() == lm.model.get_input_embeddings().weight.data_ptr()
            assert tied == fields["tie_word_embeddings"], name
            ids = lm.tokenizer("Once upon a time", return_tensors="pt").input_ids
            assert lm.model(ids).logits.shape[-1] == lm.vocab_size, name  # it runs, not only loads (OLMoE's q/k norms)
        depths[name] = lm.n_layers
    assert len({depths[f"gpt2-{size}"] for size in ("small", "medium", "large", "xl")}) == 4  # four GPT-2 depths
    assert depths["gemma-2-9b-it"] > depths["gemma-2-2b-it"] >= cache.MIN_LAYERS


@pytest.mark.parametrize(
    ("hub_id", "feature"),
    [
        ("openai-community/gpt2", lambda m: type(m.transformer.h[0].attn.c_attn).__name__ == "Conv1D"),
        ("openai-community/gpt2", lambda m: hasattr(m.transformer, "wpe") and hasattr(m.transformer, "ln_f")),
        ("google/gemma-2-2b-it", lambda m: m.config.final_logit_softcapping == 30.0),
        ("google/gemma-2-2b-it", lambda m: m.config.sliding_window == cache.SLIDING_WINDOW),
        ("google/gemma-2-2b-it", lambda m: hasattr(m.model.layers[0], "pre_feedforward_layernorm")),
        ("meta-llama/Llama-3.2-1B-Instruct", lambda m: m.config.rope_parameters["rope_type"] == "llama3"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", lambda m: m.config.rope_parameters["rope_type"] == "default"),
        ("Qwen/Qwen3-1.7B", lambda m: hasattr(m.model.layers[0].self_attn, "q_norm")),
        ("microsoft/Phi-3-mini-4k-instruct", lambda m: hasattr(m.model.layers[0].self_attn, "qkv_proj")),
        ("microsoft/Phi-3-mini-4k-instruct", lambda m: hasattr(m.model.layers[0].mlp, "gate_up_proj")),
        ("allenai/OLMoE-1B-7B-0924-Instruct", lambda m: m.model.layers[0].mlp.gate.weight.shape[0] == 4),
        ("google/vit-base-patch16-224", lambda m: m.classifier.out_features == 1000),
    ],
)
def test_standins_keep_the_structure_the_lens_meets(offline: Path, hub_id: str, feature) -> None:
    assert feature(load_model(hub_id, device="cpu").model)


def test_a_standin_reads_text_through_its_lens_parts(offline: Path) -> None:
    """Gemma-2's stand-in: its tokenizer encodes any text (byte-level), the lens parts give the model's logits."""
    import torch

    lm = load_model("google/gemma-2-2b-it", device="cpu")
    ids = lm.tokenizer("Once upon a time, a zebra saw 42 stars!", return_tensors="pt").input_ids
    assert lm.tokenizer.unk_token_id not in ids[0].tolist()
    out = lm.model(ids, output_hidden_states=True)
    # The last hidden state transformers hands back is already normed: the head and the soft-cap give the logits.
    capped = lm.softcap * torch.tanh(lm.unembed(out.hidden_states[-1]) / lm.softcap)  # [1, T, V]
    assert capped.shape[-1] == lm.vocab_size == len(lm.tokenizer)
    torch.testing.assert_close(capped, out.logits)


def test_hub_loaders_parse_the_real_schemas(offline: Path) -> None:
    stories = load_hub_stories(8)
    assert len(stories) == 8 and stories["text"].str.startswith("Once upon a time").all()
    test, validation = load_hub_mmlu(), load_hub_mmlu(split="validation")
    assert len(test) == len(cache.MMLU_SUBJECTS) * 8 and set(test["answer"]) <= set("ABCD")
    assert validation["question_id"].str.startswith("validation:").all()
    images = image_records({"source": "hub", "hub_config": "320px", "split": "validation"})
    assert set(images["label"]) == set(cache.IMAGENETTE_LABELS)
    assert all(b.startswith(b"\x89PNG") for b in images["image"])


def _broken(case: str):
    """``(repo, config, columns, features, the column named, load)`` of a split with one column wrong."""
    from datasets import Features, List, Value

    text, texts = Value("string"), ["a", "b"]
    if case == "mmlu choices a string":
        columns = {"question": texts, "subject": texts, "choices": ["1,2,3,4"] * 2, "answer": texts}
        return "cais/mmlu", "all", columns, Features(dict.fromkeys(columns, text)), "choices", load_hub_mmlu
    if case == "mmlu without answer":
        columns = {"question": texts, "subject": texts, "choices": [["1", "2", "3", "4"]] * 2}
        features = Features({"question": text, "subject": text, "choices": List(text)})
        return "cais/mmlu", "all", columns, features, "answer", load_hub_mmlu
    if case == "stories without text":
        return (
            "roneneldan/TinyStories",
            "default",
            {"story": texts},
            Features({"story": text}),
            "text",
            (lambda: load_hub_stories(2)),
        )
    columns = {"image": texts, "label": texts}
    return (
        "frgfm/imagenette",
        "320px",
        columns,
        Features(dict.fromkeys(columns, text)),
        "image",
        (lambda: image_records({"source": "hub", "hub_config": "320px", "split": "validation"})),
    )


@pytest.mark.parametrize(
    "case", ["mmlu choices a string", "mmlu without answer", "stories without text", "images a string"]
)
def test_a_wrong_schema_names_the_dataset_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    repo, config, columns, features, column, load = _broken(case)
    cache.write_dataset(tmp_path / "datasets", repo, config, {"test": columns, "validation": columns}, features)
    _offline(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match=rf"{re.escape(repo)}.*{column!r}"):
        load()


def test_a_hub_model_neither_cached_nor_reachable_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _offline(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match=r"'meta-llama/Llama-3.2-1B'.*not in the Hugging Face cache.*HF_HUB_OFFLINE=1"):
        load_model("meta-llama/Llama-3.2-1B", device="cpu")
    assert main(["profile", "--model", "meta-llama/Llama-3.2-1B", "--prompt", "hi", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(tmp_path / "hub") in err and "HF_HUB_OFFLINE=1" in err


def test_plan_names_the_models_missing_locally(
    standins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """With every stand-in cached, plan names none; with an empty cache, every hub model of the paper config."""
    args = ["plan", "--configfile", str(PAPER), "--results", str(tmp_path / "r"), "--models", str(tmp_path / "m")]
    _offline(monkeypatch, standins)
    assert main(args) == 0
    assert "not on this machine" not in capsys.readouterr().out
    _offline(monkeypatch, tmp_path)
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("not on this machine"))
    assert f"{len(_paper_models())} hub models" in line and "gemma-2-9b-it" in line and "HF_HUB_OFFLINE=1" in line


def test_a_config_naming_an_unshipped_hub_id_says_where_its_fields_go() -> None:
    with pytest.raises(ValueError, match=r"'acme/unknown-7b'.*model_configs.json"):
        cache.hub_models({"models": {"x": {"source": "acme/unknown-7b"}}})


GATED = ("gemma-2-2b-it", "gemma-2-9b-it", "Llama-3.2-1B-Instruct", "Llama-3.2-3B-Instruct", "Meta-Llama-3-8B-Instruct")


def test_fetch_checks_the_rehearsal_cache_offline_and_names_what_an_empty_one_lacks(
    standins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Offline, fetch downloads nothing: against the stand-ins every model and dataset of the paper config is
    whole (exit 0); against an empty cache each is named with what it lacks (exit 1). Gated models are named
    with the licence to accept either way."""
    n_sources = len(_paper_models()) + 3
    _offline(monkeypatch, standins)
    assert main(["fetch", "--configfile", str(PAPER)]) == 0
    out = capsys.readouterr().out
    assert "HF_HUB_OFFLINE=1: nothing is downloaded; checking the cache" in out
    assert out.rstrip().splitlines()[-1].startswith(f"all {n_sources} sources are in the cache")
    gated = [line for line in out.splitlines() if line.startswith("gated: ")]
    assert len(gated) == len(GATED) and all(any(name in line for line in gated) for name in GATED)
    assert "dataset cais/mmlu (all: test, validation): ok" in out  # the test split and the lens corpus's
    _offline(monkeypatch, tmp_path)
    assert main(["fetch", "--configfile", str(PAPER)]) == 1
    out = capsys.readouterr().out
    assert "model Qwen/Qwen3-8B (qwen3-8b): MISSING config.json" in out
    assert "dataset frgfm/imagenette (320px: validation): MISSING split validation" in out
    assert f"{n_sources} of {n_sources} sources missing from the cache" in out


def test_fetch_names_a_snapshot_without_its_weights(
    standins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    repo = "models--openai-community--gpt2"
    shutil.copytree(standins / "hub" / repo, tmp_path / "hub" / repo)
    next((tmp_path / "hub" / repo).rglob("model.safetensors")).unlink()
    (tmp_path / "gpt2.yaml").write_text("models: {gpt2-small: {source: openai-community/gpt2, family: gpt2}}\n")
    _offline(monkeypatch, tmp_path)
    assert main(["fetch", "--configfile", str(REPO / "config.yaml"), str(tmp_path / "gpt2.yaml")]) == 1
    assert "model openai-community/gpt2 (gpt2-small): MISSING the weights" in capsys.readouterr().out


def test_fetch_online_downloads_what_is_missing_and_names_a_gated_model_it_may_not(
    standins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Online (the download stubbed: the hub is unreachable here), fetch downloads only what the cache lacks; a
    gated model this account may not download is named with its licence, and the check then fails."""
    _offline(monkeypatch, tmp_path)
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    shutil.copytree(standins / "datasets", tmp_path / "datasets")
    asked = []

    def download(source: fetch.HubSource, say) -> None:
        asked.append(source.repo_id)
        if source.repo_id.startswith("meta-llama/"):
            raise ValueError(f"{source.label} could not be downloaded: {fetch.gated_line(source)}")
        folder = cache.repo_folder(Path(""), "model", source.repo_id)
        shutil.copytree(standins / "hub" / folder, tmp_path / "hub" / folder)

    monkeypatch.setattr(fetch, "download", download)
    assert main(["fetch", "--configfile", str(PAPER)]) == 1
    captured = capsys.readouterr()
    assert sorted(asked) == sorted(spec["source"] for spec in _paper_models().values())  # no dataset: all cached
    assert "meta-llama/Llama-3.2-1B-Instruct (llama-3.2-1b-instruct) could not be downloaded: gated:" in captured.err
    assert "3 of 18 sources missing from the cache" in captured.out
    assert main(["fetch", "--configfile", str(PAPER)]) == 1 and len(asked) == 2 * len(_paper_models()) - 12


def test_missing_sources_skip_what_is_materialized_or_prepared(standins: Path, tmp_path: Path, monkeypatch) -> None:
    """The dry run's check: every hub source of the paper config is missing from an empty cache, but not a model
    already materialized under resources/models, nor a dataset whose prompt tables are made."""
    config = load_config(PAPER)
    _offline(monkeypatch, tmp_path)
    results, models = tmp_path / "results", tmp_path / "resources" / "models"
    named = [source.repo_id for source, _ in fetch.missing_sources(config, results, models)]
    assert len(named) == len(_paper_models()) + 3
    (models / "qwen3-8b").mkdir(parents=True)
    (models / "qwen3-8b" / "config.json").write_text("{}")
    (results / "datasets").mkdir(parents=True)
    for table in ("tasks", "images"):
        (results / "datasets" / f"{table}.parquet").write_text("")
    named = [source.repo_id for source, _ in fetch.missing_sources(config, results, models)]
    assert "Qwen/Qwen3-8B" not in named and "roneneldan/TinyStories" not in named and "cais/mmlu" in named
    line = fetch.missing_line(fetch.missing_sources(config, results, models), "config/paper.yaml")
    assert (
        "HF_HUB_OFFLINE=1: their jobs will fail" in line and "entropy-lens fetch --configfile config/paper.yaml" in line
    )
    _offline(monkeypatch, standins)
    assert fetch.missing_sources(config, results, models) == []


def _dry_run(root: Path, *overlays: Path) -> str:
    """The stdout of ``snakemake -n`` over config.yaml and ``overlays``, offline on the stand-ins in ``root``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(root / "hub")}
    env["HF_DATASETS_CACHE"] = str(root / "datasets")
    configs = [str(REPO / "config.yaml"), *map(str, overlays)]
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "--directory", str(root / "run"),
         "--configfile", *configs],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _job_counts(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.MULTILINE)}


@pytest.mark.slow
def test_the_rehearsal_dag_holds_every_paper_rule(standins: Path, tmp_path: Path) -> None:
    """``snakemake -n`` of the rehearsal (the paper config and its scaled-down overlay) plans every rule the
    paper run plans, layer skipping and the tuned lens included, with MMLU in two shards per model. Against the
    stand-ins it names nothing missing; against an empty cache, every hub model and dataset, before any job."""
    rehearsal = _dry_run(standins, PAPER, REPO / "config" / "rehearsal.yaml")
    counts, paper = _job_counts(rehearsal), _job_counts(_dry_run(standins, PAPER))
    assert "not in this machine's Hugging Face cache" not in rehearsal
    empty = _dry_run(tmp_path, PAPER)
    warning = next(line for line in empty.splitlines() if "not in this machine's Hugging Face cache" in line)
    assert f"{len(_paper_models())} models: " in warning and "3 datasets: " in warning
    assert empty.index(warning) < empty.index("Job stats:")
    assert set(counts) == set(paper), sorted(set(counts) ^ set(paper))
    needed = {"fit_lens", "extract_lens_profiles", "layer_skip_select", "layer_skip_eval", "layer_skip_table",
              "routing_entropy", "prepare_images", "score_mmlu", "paper_table", "lens_robustness",
              "gather_shards"}  # fmt: skip
    assert needed <= set(counts), sorted(needed - set(counts))
    text_models = yaml.safe_load(PAPER.read_text())["datasets"]["tasks"]["models"]
    assert counts["fit_lens"] == 2 * len(text_models)  # linear and tuned
    shards = set(re.findall(r"results/profiles/([\w.-]+)/mmlu/(shard\d+)\.zarr", rehearsal))
    mmlu_models = yaml.safe_load(PAPER.read_text())["datasets"]["mmlu"]["models"]
    assert all(sum(m == model for m, _ in shards) >= 2 for model in mmlu_models), sorted(shards)


@pytest.mark.parametrize(
    ("hub_id", "fields"),
    [
        ("acme/tiny-mistral", {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
                               "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                               "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096,
                               "tie_word_embeddings": False}),
        ("acme/gemma-3-like", {"model_type": "gemma3_text", "num_hidden_layers": 18, "hidden_size": 640,
                               "intermediate_size": 2048, "num_attention_heads": 4, "num_key_value_heads": 1,
                               "head_dim": 256, "vocab_size": 262144, "max_position_embeddings": 32768,
                               "tie_word_embeddings": True, "query_pre_attn_scalar": 256, "sliding_window": 512}),
    ],
)  # fmt: skip
def test_a_model_added_the_documented_way_gets_a_standin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_id: str, fields: dict
) -> None:
    """A hub model of another architecture, added as docs/architecture.md says (its config.json fields beside
    the shipped ones), gets a stand-in of its class that loads through its hub id."""
    import entropy_lens.workflow.plan as planning

    shipped = {**planning.shipped_model_configs(), hub_id: fields}
    monkeypatch.setattr(planning, "shipped_model_configs", lambda: shipped)
    config = {"models": {"new": {"source": hub_id, "family": "new"}}}
    written = cache.write_cache(tmp_path, config)
    assert list(written) == [hub_id]
    _offline(monkeypatch, tmp_path)
    lm = load_model(hub_id, device="cpu")
    assert lm.model.config.model_type == fields["model_type"] and lm.n_layers == fields["num_hidden_layers"] // 4
