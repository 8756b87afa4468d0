"""The cost plan: shapes from shipped configs, hand-checked arithmetic, the config adapter, the CLI, benchmarks."""

import dataclasses
import json
import logging
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from tiny import MOE_ARCHS, N_EXPERTS, N_LAYERS, TOP_K, tiny_config, tiny_tokenizer
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageClassification
from workflow_tiny import REPO

from entropy_lens import cli
from entropy_lens.model.vision import is_image_classifier
from entropy_lens.workflow import plan, timings
from entropy_lens.workflow.plan import shapes
from entropy_lens.workflow.settings import load_config

PAPER = REPO / "config" / "paper.yaml"
VIT = "vit-base-patch16-224"
DEFAULT = REPO / "config.yaml"
# A llama-type model small enough to count by hand.
TINY = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "vocab_size": 10,
    "max_position_embeddings": 64,
    "tie_word_embeddings": False,
}
IMAGE_FIELDS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "image_size", "patch_size", "num_labels")
ARCHITECTURE_FIELDS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "vocab_size",
    "max_position_embeddings",
)


def load(path: Path) -> dict:
    return load_config(path)


def meta_params(fields: dict) -> int:
    """Parameters of the real transformers model of these fields (a causal LM or an image classifier),
    built without memory."""
    config = AutoConfig.for_model(**fields)
    auto = AutoModelForImageClassification if is_image_classifier(config) else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.fixture
def offline(monkeypatch):
    """Planning must never reach for the hub: any AutoConfig fallback fails loudly."""

    def refuse(source):
        raise OSError(f"offline: would have fetched {source}")

    monkeypatch.setattr(shapes, "_auto_config", refuse)


# Shapes ---------------------------------------------------------------------------------------------------------


def test_tiny_shape_counts_by_hand_and_as_transformers_does():
    shape = plan.shape_from_fields(TINY)
    # per layer: q 8x8 + k,v 8x4 each + o 8x8 = 192; gated MLP 3 x 8 x 16 = 384; two norms 16
    assert shape.layer_params == 192 + 384 + 16
    assert shape.non_embedding_params == 2 * 592 + 8
    assert shape.n_params == 1192 + 2 * 10 * 8 == meta_params(TINY)
    assert shape.kv_bytes_per_token(4) == 2 * 2 * 1 * 4 * 4


@pytest.mark.parametrize("source", sorted(plan.shipped_model_configs()))
def test_every_shipped_config_loads_and_counts_exactly(source):
    fields = plan.shipped_model_configs()[source]
    config = AutoConfig.for_model(**fields)
    assert config.model_type == fields["model_type"]
    if is_image_classifier(config):
        assert all(getattr(config, name) for name in IMAGE_FIELDS)
        assert plan.shape_from_fields(fields).n_params == meta_params(fields)
        return
    assert all(getattr(config, name) for name in ARCHITECTURE_FIELDS)
    assert "tie_word_embeddings" in fields
    if fields["model_type"] == "gemma2":
        assert {"attn_logit_softcapping", "final_logit_softcapping", "sliding_window"} <= set(fields)
    shape = plan.shape_from_fields(fields)
    assert shape.n_params == meta_params(fields)
    assert shape.head_dim * shape.n_heads >= shape.hidden_size // 2


def test_paper_parameter_counts_match_the_shipped_shapes():
    for name, spec in yaml.safe_load(PAPER.read_text())["models"].items():
        counted = plan.model_shape(spec["source"]).n_params
        assert counted == pytest.approx(spec["n_params"], rel=0.01), name


def test_registry_models_are_shipped():
    from entropy_lens import REGISTRY

    assert set(REGISTRY) <= set(plan.shipped_model_configs())


def test_unshipped_model_falls_back_to_its_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    assert plan.model_shape("my-org/unknown", folder=tmp_path) == plan.shape_from_fields(TINY)


def test_a_materialized_folder_says_what_the_job_loads_before_the_shipped_config(tmp_path):
    """The registry's Qwen2.5-Coder-1.5B GGUF carries its own output matrix (untied, as shipped); a folder
    whose config.json ties them is what that job would load, so the folder wins."""
    shipped = plan.shipped_model_configs()["qwen2.5-coder-1.5b"]
    (tmp_path / "config.json").write_text(json.dumps({**shipped, "tie_word_embeddings": True}))
    untied, tied = plan.model_shape("qwen2.5-coder-1.5b"), plan.model_shape("qwen2.5-coder-1.5b", folder=tmp_path)
    assert tied.tied_embeddings and not untied.tied_embeddings
    assert untied.n_params == 1_777_088_000  # the materialized copy's 7.1 GB float32 file
    assert untied.n_params - tied.n_params == shipped["vocab_size"] * shipped["hidden_size"]


def test_unknown_model_without_config_names_the_model_and_the_fix(offline):
    with pytest.raises(ValueError, match=r"model 'mystery' \(source 'nobody/nothing'\) has no shipped config"):
        plan.model_shape("nobody/nothing", name="mystery")


def test_shape_rejects_missing_fields():
    with pytest.raises(ValueError, match=r"lacks \['hidden_size'\]"):
        plan.shape_from_fields({k: v for k, v in TINY.items() if k != "hidden_size"})


# Arithmetic -----------------------------------------------------------------------------------------------------

# Slow round numbers so every term of the time is visible: 1e6 FLOP/s, 1e6 B/s, 1 us per logit.
SLOW = plan.PlanSettings(cpu_gflops=1e-3, cpu_bf16_gflops=1e-3, cpu_gbps=1e-3, cpu_metric_ns=1000.0,
                         cpu_step_us=100.0, overhead_s=10.0, io_gbps=1e-3, cpu_overhead_mb=1.0)  # fmt: skip
RUN = plan.RunSettings(device="cpu", dtype="float32", lens_budget_mb=16)


def tiny_job(prompts=4, tokens=5, new=3, batch=2, fields=TINY, alphas=3) -> plan.Job:
    work = plan.Workload(prompts, tokens, tokens, new, batch, alphas)
    return plan.Job(plan.EXTRACT, "tiny", "tasks", 0, 1, plan.shape_from_fields(fields), (work,))


def test_extraction_arithmetic_by_hand():
    job = plan.plan_job(tiny_job(), RUN, SLOW)
    # forward: 2 x 1192 params x 4 x (5 prompt + 2 decode) tokens; head 2 x 8 x 10 x 4 prompts x 3 steps;
    # attention 4 x H 2 x hd 4 x L 2 x contexts (15 prefill + 2 x 5 + 3 decode) x 4 prompts
    assert job.forward_flops == 2 * 1192 * 28 + 160 * 12 + 4 * 2 * 4 * 2 * 28 * 4 == 75_840
    assert job.lens_flops == 160 * 2 * 12  # 2 d V, per layer, per generated token per prompt
    flops_s = (75_840 + 3_840) / 1e6
    # 6 forward passes stream 1352 x 4 bytes of weights; decode tokens read the KV cache: 4 x 2 x 6.5 tokens x 64 B
    stream_s = (6 * 1352 * 4 + 4 * 2 * 6.5 * 64) / 1e6
    metric_s, step_s = 2 * 12 * 10 * 1e-6, 2 * 6 * 100e-6
    assert job.compute_s == pytest.approx(flops_s + stream_s + metric_s + step_s)
    store = 2 * 4 * (4 * 3 * 2) * (4 + 3)  # float32 buffers of N x T x L x (4 + A) values, held twice
    assert job.store_bytes == store
    assert job.fixed_s == pytest.approx(10.0 + (1352 * 4 + store / 2) / 1e6)
    assert job.weights_bytes == 1352 * 4
    assert job.kv_bytes == 64 * 2 * (5 + 3)
    assert job.lens_bytes == 16 * 2**20 + 2 * 2 * 8 * 4
    activations = 2 * 5 * (4 * 8 + 3 * 16) * 4 + 2 * 2 * 10 * 4
    assert job.activation_bytes == activations
    tokenizer = 31 * 2**20 + 1062 * 10  # a base and a share per vocabulary entry
    assert plan.tokenizer_bytes(plan.shape_from_fields(TINY)) == tokenizer
    assert (
        job.host_peak_bytes
        == job.device_peak_bytes
        == 5408 + 1024 + activations + job.lens_bytes + store + 2**20 + tokenizer
    )
    assert job.est_s == pytest.approx(job.fixed_s + job.compute_s)
    assert job.fits_context


def test_scoring_runs_one_pass_without_cache_or_lens():
    work = plan.Workload(4, 5, 5, 0, 2)
    job = plan.plan_job(dataclasses.replace(tiny_job(), workloads=(work,)), RUN, SLOW)
    assert job.forward_flops == 2 * 1192 * 4 * 5 + 160 * 4 + 4 * 2 * 4 * 2 * 15 * 4
    assert job.lens_flops == job.kv_bytes == job.lens_bytes == job.store_bytes == 0


def test_bfloat16_runs_at_its_own_rate_and_threads_share_matmuls_and_metrics():
    bf16 = plan.plan_job(tiny_job(), dataclasses.replace(RUN, dtype="bfloat16"), SLOW)
    f32 = plan.plan_job(tiny_job(), RUN, SLOW)
    flops = f32.forward_flops + f32.lens_flops
    assert f32.terms[:2] == (flops, 0.0) and bf16.terms[:2] == (0.0, flops)
    fast = dataclasses.replace(SLOW, cpu_bf16_gflops=4e-3)  # 16-bit matmuls 4x the float32 rate
    assert plan.plan_job(tiny_job(), dataclasses.replace(RUN, dtype="bfloat16"), fast).compute_s == pytest.approx(
        bf16.compute_s - flops / 1e6 * 0.75
    )
    two = plan.plan_job(tiny_job(), dataclasses.replace(RUN, threads=2), SLOW)
    streamed_s, metric_s, step_s = f32.terms[2] / 1e6, f32.terms[3] * 1e-6, f32.terms[4] * 100e-6
    assert two.compute_s == pytest.approx(flops / 1e6 / 2 + streamed_s + metric_s / 2 + step_s)
    with pytest.raises(ValueError, match="threads must be a positive integer, got 0"):
        plan.RunSettings(device="cpu", threads=0)


def test_lens_metrics_cost_per_logit_grows_with_the_vocabulary_by_the_exponent():
    """At the reference vocabulary (65,536) the exponent changes nothing; at 4x it, the metric seconds grow
    4 ** 0.5 = 2x with exponent 0.5 and nothing else does."""
    wide = dict(TINY, vocab_size=4 * 65_536)
    at_ref = dict(TINY, vocab_size=65_536)
    steep = dataclasses.replace(SLOW, cpu_metric_vocab_exponent=0.5)
    for fields, factor in ((at_ref, 1.0), (wide, 2.0)):
        flat_job = plan.plan_job(tiny_job(fields=fields), RUN, SLOW)
        steep_job = plan.plan_job(tiny_job(fields=fields), RUN, steep)
        assert flat_job.terms == steep_job.terms and steep_job.vocab_size == fields["vocab_size"]
        metric_s = flat_job.terms[3] * 1000e-9
        assert steep_job.compute_s - flat_job.compute_s == pytest.approx(metric_s * (factor - 1))
        assert plan.predicted_s(steep_job, steep, RUN) == pytest.approx(steep_job.est_s)
    assert SLOW.rates(RUN).metric_ns_at(65_536) == 1000.0
    assert steep.rates(plan.RunSettings("cuda")).metric_vocab_exponent == 0.0  # the CUDA exponent is its own
    with pytest.raises(ValueError, match=r"cpu_metric_vocab_exponent must be a non-negative number, got -0\.1"):
        plan.PlanSettings(cpu_metric_vocab_exponent=-0.1)


def test_loading_in_another_dtype_holds_the_float32_file_and_the_converted_copy():
    """Measured on this machine: Qwen2.5-Coder-0.5B (630 M parameters) loaded in bfloat16 peaked at 4.0 GB
    over a 0.24 GB interpreter; in float32 the weights map the file and the load adds nothing."""
    assert plan.loading_bytes(630_000_000, 2) == 630_000_000 * 6
    assert plan.loading_bytes(630_000_000, 4) == 630_000_000 * 4
    big = dict(TINY, hidden_size=256, intermediate_size=512, vocab_size=32_000)
    job = plan.plan_job(tiny_job(fields=big), dataclasses.replace(RUN, dtype="bfloat16"), SLOW)
    shape = plan.shape_from_fields(big)
    n, tokenizer = shape.n_params, plan.tokenizer_bytes(shape)
    assert job.host_peak_bytes == max(6 * n, 2 * n + job.kv_bytes + job.activation_bytes + job.lens_bytes
                                      + job.store_bytes) + 2**20 + tokenizer  # fmt: skip
    assert job.host_peak_bytes == 6 * n + 2**20 + tokenizer  # loading is the peak of this small workload


def test_cuda_requests_host_memory_for_loading_and_buffers():
    cuda = plan.RunSettings(device="cuda", dtype="auto", lens_budget_mb=16)
    job = plan.plan_job(tiny_job(), cuda, SLOW)
    assert job.weights_bytes == 1352 * 2  # bf16
    loading = 1352 * (4 + 2)  # the float32 file and the bf16 copy, on the host before moving to the GPU
    tokenizer = plan.tokenizer_bytes(plan.shape_from_fields(TINY))  # on the host, beside the runtime
    assert job.host_peak_bytes == max(loading, job.store_bytes) + SLOW.cuda_host_overhead_mb * 2**20 + tokenizer
    assert job.device_peak_bytes > job.weights_bytes + job.kv_bytes + job.lens_bytes


def test_context_overflow_is_flagged():
    job = plan.plan_job(tiny_job(tokens=62, new=3), RUN, SLOW)
    assert not job.fits_context


def test_more_prompts_cost_more_time_and_memory():
    small, large = (plan.plan_job(tiny_job(prompts=n), RUN, plan.PlanSettings()) for n in (100, 1000))
    assert large.est_s > small.est_s and large.forward_flops > small.forward_flops
    assert large.host_peak_bytes > small.host_peak_bytes


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bigger_model_costs_more_time_and_memory(device):
    run = plan.RunSettings(device=device, dtype="auto", lens_budget_mb=512)
    configs = plan.shipped_model_configs()
    small, big = (
        plan.plan_job(tiny_job(500, 100, 16, 8, configs[source]), run, plan.PlanSettings())
        for source in ("google/gemma-2-2b-it", "google/gemma-2-9b-it")
    )
    assert big.est_s > small.est_s
    assert big.host_peak_bytes > small.host_peak_bytes and big.device_peak_bytes > small.device_peak_bytes


def test_cluster_request_applies_safety_margin_attempt_and_floors():
    settings = plan.PlanSettings(safety=2.0, mem_margin=2.0, min_runtime_min=5, min_mem_mb=100)
    job = dataclasses.replace(plan.plan_job(tiny_job(), RUN, settings), fixed_s=600.0, compute_s=0.0,
                              host_peak_bytes=300 * 2**20)  # fmt: skip
    assert plan.cluster_request(job, settings) == plan.ClusterRequest(runtime=20, mem_mb=600)
    assert plan.cluster_request(job, settings, attempt=2) == plan.ClusterRequest(runtime=40, mem_mb=1200)
    tiny = dataclasses.replace(job, fixed_s=1.0, host_peak_bytes=1)
    assert plan.cluster_request(tiny, settings) == plan.ClusterRequest(runtime=5, mem_mb=100)
    with pytest.raises(ValueError, match="attempt must be a positive integer"):
        plan.cluster_request(job, settings, attempt=0)
    # memory has its own margin: the time estimate's safety does not inflate the memory request
    margin = dataclasses.replace(settings, mem_margin=1.3)
    assert plan.cluster_request(job, margin) == plan.ClusterRequest(runtime=20, mem_mb=390)


def test_settings_reject_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match=r"unknown plan settings \['gpu_tflops'\]"):
        plan.settings_from_config({"gpu_tflops": 3})
    with pytest.raises(ValueError, match="plan setting safety must be a non-negative number"):
        plan.PlanSettings(safety=-1)
    with pytest.raises(ValueError, match="safety and mem_margin >= 1"):
        plan.PlanSettings(safety=0.5)
    with pytest.raises(ValueError, match=r"mem_margin >= 1; got \{'safety': 1.5, 'mem_margin': 0.9\}"):
        plan.PlanSettings(mem_margin=0.9)
    assert plan.settings_from_config({"cpu_gflops": 12.5}).cpu_gflops == 12.5


# Prompt lengths and shards --------------------------------------------------------------------------------------


def test_shards_split_prompts_and_keep_the_work():
    stats = plan.PromptStats(25, 10.0, 20, "estimate")
    assert [s.prompts for s in stats.shards(10)] == [10, 10, 5]
    assert stats.shards(0) == [stats] and stats.shards(25) == [stats]
    counted = plan.PromptStats.from_lengths([1, 2, 3, 4, 5], "tokenizer")
    parts = counted.shards(2)
    assert [(p.prompts, p.mean_tokens, p.max_tokens) for p in parts] == [(2, 1.5, 2), (2, 3.5, 4), (1, 5.0, 5)]


def test_sharded_config_plans_one_job_per_shard_with_the_same_flops(offline):
    config = load(DEFAULT)
    whole = plan.plan_from_config(config)
    sharded = plan.plan_from_config({**config, "compute": {**config["compute"], "prompts_per_job": 10}})
    tasks = [j for j in sharded.jobs if j.rule == plan.EXTRACT and j.model == "smollm2-135m" and j.dataset == "tasks"]
    n = whole.job(plan.EXTRACT, "smollm2-135m", "tasks").prompts
    assert [j.shard for j in tasks] == list(range(math.ceil(n / 10))) and {j.n_shards for j in tasks} == {len(tasks)}
    assert sum(j.prompts for j in tasks) == n
    assert sum(j.forward_flops for j in tasks) == pytest.approx(
        whole.job(plan.EXTRACT, "smollm2-135m", "tasks").forward_flops
    )
    assert sharded.request(plan.EXTRACT, "smollm2-135m", "tasks", shard=len(tasks) - 1).runtime >= 1


def test_estimates_follow_the_config():
    settings = plan.PlanSettings()
    mmlu = {"n_questions": 0, "styles": ["base", "instruct"], "n_shot": 0}
    assert plan.estimated_stats("mmlu", mmlu, settings, chat=False).prompts == 2 * plan.MMLU_QUESTIONS
    assert plan.estimated_stats("tasks", {"n_stories": 3, "max_words": 90}, settings, chat=False).prompts == 72
    assert plan.estimated_stats("formats", {"n_topics": 0}, settings, chat=False).prompts == 3 * 210
    blank = plan.estimated_stats("blank", {"n_samples": 5}, settings, chat=True)
    assert (blank.prompts, blank.mean_tokens, blank.max_tokens) == (5, 1.0, 1)
    raw, chat = (plan.estimated_stats("formats", {"n_topics": 4}, settings, chat=c) for c in (False, True))
    assert chat.mean_tokens == pytest.approx(raw.mean_tokens + settings.chat_template_tokens)
    few, many = (plan.estimated_stats("mmlu", {**mmlu, "n_questions": n}, settings, chat=False) for n in (8, 0))
    assert few.max_tokens < many.max_tokens
    with pytest.raises(ValueError, match="unknown dataset 'poems'"):
        plan.estimated_stats("poems", {}, settings, chat=False)


def test_tables_and_tokenizers_replace_estimates(tmp_path, offline):
    tok = tiny_tokenizer()
    tok.save_pretrained(tmp_path / "smollm2-135m")
    prompts = ["the cat ran", "once upon a time there was a dog", "a", "the sun", "a poem", "why"]
    pd.DataFrame({"prompt_text": prompts}).to_parquet(tmp_path / "formats.parquet")
    config = load(DEFAULT)
    config["datasets"] = {"formats": {**config["datasets"]["formats"], "models": [], "n_topics": 2}}  # 6 prompts
    config["layer_skip"]["enabled"] = False
    tables = {"formats": tmp_path / "formats.parquet"}
    counted = plan.plan_from_config(config, tables=tables, model_dirs={"smollm2-135m": tmp_path / "smollm2-135m"})
    job = counted.job(plan.EXTRACT, "smollm2-135m", "formats")
    rendered = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
                for p in prompts]  # fmt: skip
    lengths = [len(ids) for ids in tok(rendered, add_special_tokens=False)["input_ids"]]
    assert (job.token_source, job.prompts, job.max_prompt_tokens) == ("tokenizer", 6, max(lengths))
    assert job.mean_prompt_tokens == pytest.approx(sum(lengths) / 6)
    by_chars = plan.plan_from_config(config, tables=tables).job(plan.EXTRACT, "gemma3-270m", "formats")
    assert by_chars.token_source == "characters" and by_chars.prompts == 6


def test_a_table_of_another_config_is_not_read_as_this_ones(tmp_path, caplog):
    """The prompt count, hence the shards, comes from the config as rules/common.smk counts them."""
    pd.DataFrame({"prompt_text": ["a"] * 72}).to_parquet(tmp_path / "mmlu.parquet")  # a 24-question set in 3 styles
    config = load(DEFAULT)
    config["datasets"]["mmlu"]["n_questions"] = 100
    config["compute"]["prompts_per_job"] = 64
    with caplog.at_level(logging.WARNING, logger="entropy_lens.workflow.plan"):
        jobs = plan.plan_from_config(config, tables={"mmlu": tmp_path / "mmlu.parquet"}).jobs
    mmlu = [j for j in jobs if j.rule == plan.EXTRACT and j.dataset == "mmlu"]
    assert {(j.n_shards, j.token_source) for j in mmlu} == {(5, "estimate")}  # ceil(300 / 64)
    assert sum(j.prompts for j in mmlu) == 300 * len(plan.dataset_models(config)["mmlu"])
    assert "holds 72 prompts but the config builds 300: it was built under another config" in caplog.text


def test_token_counter_mirrors_extraction_encoding(tmp_path):
    tiny_tokenizer().save_pretrained(tmp_path)
    raw = plan.token_counter(tmp_path, chat_template=False)
    assert raw(["the cat", "", "a dog ran"]) == [3, 1, 4]  # BOS added; the blank prompt is BOS alone
    assert plan.token_counter(tmp_path / "missing", chat_template=False) is None


# The config adapter ---------------------------------------------------------------------------------------------


def test_paper_config_plans_every_model_and_dataset_offline(offline):
    config = load(PAPER)
    result = plan.plan_from_config(config)
    models, instruct = list(config["datasets"]["tasks"]["models"]), config["datasets"]["mmlu"]["models"]
    assert len(models) == 14 and len(instruct) == 10 and not any(m.startswith("gpt2") for m in instruct)
    assert list(config["models"]) == sorted([*models, VIT])  # name order, whatever the file's
    pairs = {(j.model, j.dataset) for j in result.jobs if j.rule == plan.EXTRACT}
    text = {(m, d) for m in models for d in ("tasks", "formats", "blank")} | {(m, "mmlu") for m in instruct}
    assert pairs == text | {(VIT, "images")}
    for rule in (plan.SKIP_SELECT, plan.SKIP_EVAL):
        assert sorted(j.model for j in result.jobs if j.rule == rule) == sorted(instruct)
    shards = [j for j in result.jobs if j.rule == plan.EXTRACT and j.model == "gemma-2-9b-it" and j.dataset == "mmlu"]
    size = config["compute"]["prompts_per_job"]
    assert len(shards) == -(-3 * plan.MMLU_QUESTIONS // size) and shards[0].prompts == size
    assert sum(j.prompts for j in shards) == 3 * plan.MMLU_QUESTIONS and shards[0].new_tokens == 32
    nine_b = result.job(plan.EXTRACT, "gemma-2-9b-it", "mmlu", shard=1)
    assert nine_b.est_s > result.job(plan.EXTRACT, "gpt2-small", "blank").est_s * 10
    assert nine_b.weights_bytes == plan.model_shape("google/gemma-2-9b-it").n_params * 2
    assert all(j.fits_context for j in result.jobs)  # GPT-2 (1,024 tokens) is left out of MMLU
    request = result.request(plan.EXTRACT, "gemma-2-9b-it", "mmlu", shard=1)
    assert request.mem_mb > result.request(plan.EXTRACT, "gpt2-small", "blank").mem_mb
    totals = result.totals()
    # extraction (3 text sets, sharded MMLU, the image set), skipping, 2 lens kinds fitted and 3 sets read under each,
    # and each text model's twin on the 3 text sets
    jobs = 14 * 3 + 10 * len(shards) + 10 * 2 + 1 + 14 * 2 + 14 * 2 * 3 + 14 * 3
    assert totals.loc["all", "jobs"] == len(result.jobs) == jobs
    lens_sets = {j.dataset for j in result.jobs if j.rule == plan.EXTRACT_LENS}
    assert lens_sets == {f"{kind}/{d}" for kind in ("linear", "tuned") for d in ("tasks", "formats", "blank")}
    twins = {(j.model, j.dataset) for j in result.jobs if j.rule == plan.EXTRACT_TWIN}
    assert twins == {(m, d) for m in models for d in ("tasks", "formats", "blank")}
    assert totals.loc["all", "est_s"] == pytest.approx(sum(j.est_s for j in result.jobs))


@pytest.mark.parametrize("arch", MOE_ARCHS)
def test_moe_shapes_count_every_expert_and_run_the_active_ones(arch):
    fields = tiny_config(arch, tiny_tokenizer()).to_dict()
    shape = plan.shape_from_fields(fields)
    assert shape.n_params == meta_params(fields)
    assert shape.n_experts == N_EXPERTS and shape.experts_per_token == TOP_K
    assert shape.moe_layers == (N_LAYERS - 1 if arch == "qwen2_moe" else N_LAYERS)
    one_expert = shape.moe_layer_params(1) - shape.moe_layer_params(0)
    idle = shape.moe_layers * (N_EXPERTS - TOP_K) * one_expert  # the experts a token does not use
    assert shape.non_embedding_params - shape.active_non_embedding_params == idle > 0


def test_paper_moe_and_vit_jobs_use_active_flops_and_total_memory(offline):
    result = plan.plan_from_config(load(PAPER))
    olmoe = plan.model_shape("allenai/OLMoE-1B-7B-0924-Instruct")
    assert olmoe.n_params == pytest.approx(6.92e9, rel=0.01)  # OLMoE paper: 6.9B total, 1.3B active
    assert olmoe.active_non_embedding_params + 2 * 50304 * 2048 == pytest.approx(1.28e9, rel=0.01)
    blank = result.job(plan.EXTRACT, "olmoe-1b-7b-instruct", "blank")
    assert blank.weights_bytes == olmoe.n_params * 2  # every expert is in memory
    # Its 8 active experts of width 1024 cost what one dense MLP of width 8192 does (plus the router).
    dense = dataclasses.replace(olmoe, n_experts=0, experts_per_token=0, moe_layers=0, intermediate_size=8 * 1024)
    work = plan.Workload(100, 1.0, 1, 32, 32, 3)
    costs = [plan.workload_cost(s, work, result.run, result.settings.rates(result.run)) for s in (olmoe, dense)]
    assert costs[0].forward_flops == pytest.approx(costs[1].forward_flops, rel=0.01)
    vit = result.job(plan.EXTRACT, VIT, "images")
    assert vit.prompts == 3925 and vit.new_tokens == 1 and vit.mean_prompt_tokens == 196 and vit.fits_context
    assert plan.model_shape("google/vit-base-patch16-224").n_params == 86_567_656  # ViT-B/16, ImageNet-1k head


def test_run_models_leave_out_the_overlaid_defaults():
    merged = load_config(DEFAULT, PAPER)
    paper = list(load(PAPER)["models"])
    assert set(merged["models"]) - set(paper) == {"smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b"}
    assert plan.run_models(merged) == sorted(paper)  # the default's models are in the config, not in the run
    default = load(DEFAULT)
    assert plan.run_models(default) == sorted(default["models"])  # blank profiles every model
    default["datasets"]["blank"]["models"] = default["datasets"]["mmlu"]["models"] = ["gemma3-270m"]
    assert plan.run_models(default) == ["gemma3-270m", "smollm2-135m"]  # smollm2 writes the stories
    default["datasets"]["tasks"]["source"] = "hub"
    assert plan.run_models(default) == ["gemma3-270m", "smollm2-135m"]  # still profiled on tasks and formats
    default["datasets"]["tasks"]["enabled"] = default["datasets"]["formats"]["enabled"] = False
    default["fitted_lens"]["enabled"] = False
    assert plan.run_models(default) == ["gemma3-270m"]


def test_dataset_and_skip_model_lists_limit_the_jobs(offline):
    config = load(DEFAULT)
    config["datasets"]["blank"]["models"] = ["gemma3-270m"]
    config["layer_skip"].update(enabled=True, models=["smollm2-135m"])
    result = plan.plan_from_config(config)
    assert [j.model for j in result.jobs if j.dataset == "blank" and j.rule == plan.EXTRACT] == ["gemma3-270m"]
    assert [j.model for j in result.jobs if j.rule == plan.EXTRACT_TWIN] == ["gemma3-270m"]  # its twin's
    assert [j.model for j in result.jobs if j.rule == plan.SKIP_EVAL] == ["smollm2-135m"]
    assert plan.dataset_models(config)["blank"] == ["gemma3-270m"] and plan.skip_models(config) == ["smollm2-135m"]
    config["layer_skip"]["enabled"] = False
    assert plan.skip_models(config) == []
    config["datasets"]["formats"]["models"] = ["gemma3-270m", "gpt-5"]
    with pytest.raises(ValueError, match=r"datasets.formats.models names \['gpt-5'\], which are not configured models"):
        plan.plan_from_config(config)


def test_each_twin_is_planned_as_its_model_on_the_twin_datasets(offline):
    """twins: one extraction per model of each enabled twin dataset, costed as the model's own extraction of it;
    a twin dataset an overlay turned off plans nothing, and twins off plan none."""
    config = load(DEFAULT)
    config["twins"] = {"enabled": True, "seed": 0, "datasets": ["blank", "formats"]}
    result = plan.plan_from_config(config)
    twins = [(j.model, j.dataset) for j in result.jobs if j.rule == plan.EXTRACT_TWIN]
    assert twins == [(m, "blank") for m in config["models"]] + [("smollm2-135m", "formats")]
    assert plan.twin_pairs(config) == sorted(twins, key=lambda pair: pair[1] != "blank")
    for model, dataset in twins:
        twin, own = result.job(plan.EXTRACT_TWIN, model, dataset), result.job(plan.EXTRACT, model, dataset)
        assert (twin.prompts, twin.new_tokens, twin.mean_prompt_tokens) == (
            own.prompts,
            own.new_tokens,
            own.mean_prompt_tokens,
        )
        assert twin.est_s == pytest.approx(own.est_s) and twin.host_peak_bytes == own.host_peak_bytes
    assert result.resources(plan.EXTRACT_TWIN)["mem_mb"](SimpleNamespace(model="smollm2-135m", dataset="blank")) > 0
    config["datasets"]["formats"]["enabled"] = False
    assert plan.twin_pairs(config) == [(m, "blank") for m in config["models"]]
    config["twins"]["enabled"] = False
    assert plan.twin_pairs(config) == [] and plan.twin_models(config) == []
    assert not [j for j in plan.plan_from_config(config).jobs if j.rule == plan.EXTRACT_TWIN]


def test_missing_config_key_is_named():
    with pytest.raises(ValueError, match=r"config lacks compute; load it with workflow.settings.load_config"):
        plan.plan_from_config({"models": {}, "datasets": {}, "lens": {"budget_mb": 16}})


def test_resources_read_the_wildcards(offline):
    config = load(DEFAULT)
    config["layer_skip"]["enabled"] = True
    result = plan.plan_from_config(config)
    resources = result.resources(plan.EXTRACT)
    wildcards = SimpleNamespace(model="smollm2-135m", dataset="mmlu")
    expected = result.request(plan.EXTRACT, "smollm2-135m", "mmlu", attempt=2)
    assert resources["runtime"](wildcards, 2) == expected.runtime
    assert resources["mem_mb"](wildcards, 2) == expected.mem_mb
    assert result.resources(plan.SKIP_EVAL)["mem_mb"](SimpleNamespace(model="gemma3-270m")) > 0
    with pytest.raises(ValueError, match="no planned job extract_profiles/gpt-5"):
        result.request(plan.EXTRACT, "gpt-5", "mmlu")


# Predicted against measured -------------------------------------------------------------------------------------


def write_benchmark(path: Path, seconds: float, rss: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\tmax_vms\n{seconds}\t0:00:00\t{rss}\t0\n")


TRUE_RATES = {
    "overhead_s": 6.0,
    "cpu_gflops": 120.0,
    "cpu_gbps": 40.0,
    "cpu_metric_ns": 9.0,
    "cpu_step_us": 30.0,
    "cpu_metric_vocab_exponent": 0.43,
}


# Run-to-run spread of measured job times (lognormal sigma): each job's benchmark is its time on the
# true device times exp(N(0, sigma)), drawn with a fixed seed.
TIMING_NOISE = 0.05


def _measure_with(result, truth, tmp_path, noise=0.0, seed=0):
    """Write a benchmark file per planned job, timed as the device described by ``truth`` would run it,
    with lognormal ``noise``; return the comparison table and the noise-free times."""
    settings = dataclasses.replace(result.settings, **truth)
    patterns = {rule: str(tmp_path / rule / "{model}" / "{dataset}.tsv") for rule in plan.RULES}
    exact = np.array([plan.predicted_s(job, settings, result.run) for job in result.jobs])
    measured = exact * np.exp(np.random.default_rng(seed).normal(0.0, noise, exact.size))
    for job, seconds in zip(result.jobs, measured, strict=True):
        write_benchmark(tmp_path / job.rule / job.model / f"{job.dataset}.tsv", seconds, 1000.0)
    return plan.compare_benchmarks(result, patterns), exact


# The 15 model jobs the calibration tests time: the default config with layer skipping on both small models.
CALIBRATION_SKIP = {
    "enabled": True,
    "models": ["smollm2-135m", "gemma3-270m"],
    "eval_questions": 24,
    "set_questions": 24,
    "ks": [1, 2],
}


def _calibration_plan() -> plan.Plan:
    config = load(DEFAULT)
    config["layer_skip"].update(CALIBRATION_SKIP)
    return plan.plan_from_config(config)


def test_calibration_recovers_the_device_that_produced_the_timings(tmp_path, offline):
    result = _calibration_plan()
    table, exact = _measure_with(result, TRUE_RATES, tmp_path, noise=TIMING_NOISE)
    assert len(table) == len(result.jobs) and table["mem_ratio"].notna().all()
    fitted = plan.calibrate(result, table)
    # The terms that carry the time come back within the noise; bandwidth and per-layer steps weigh
    # too little in these 15 jobs to be told from noise, so only their effect on the fit is checked.
    for key in ("overhead_s", "cpu_gflops"):
        assert getattr(fitted, key) == pytest.approx(TRUE_RATES[key], rel=2 * TIMING_NOISE), key
    assert fitted.cuda_gflops == result.settings.cuda_gflops  # only the measured device changes
    # The fit averages the noise out: its times lie nearer the noise-free ones than the measurements do.
    predicted = np.array([plan.predicted_s(job, fitted, result.run) for job in result.jobs])
    fit_error, noise_error = np.abs(predicted / exact - 1), np.abs(table["measured_s"].to_numpy() / exact - 1)
    assert fit_error.max() < 1.5 * TIMING_NOISE and np.median(fit_error) < np.median(noise_error)
    loo = plan.leave_one_out(result, table)
    assert len(loo) == len(result.jobs) and loo.between(1 / (1 + 4 * TIMING_NOISE), 1 + 4 * TIMING_NOISE).all()


def test_noise_free_calibration_recovers_all_five_rates_and_the_vocabulary_exponent(tmp_path, offline):
    """Timings made by a known device, without noise: every one of the five terms comes back, and how the
    metrics' cost grows with the vocabulary (the three default models have 49 k, 152 k and 262 k entries; an
    exponent off the search grid, so the refinement is what finds it). A fit of the overhead and FLOP rate
    alone, or of any four, or at another exponent, leaves a residual and misses the others."""
    result = _calibration_plan()
    assert len({job.vocab_size for job in result.jobs}) == 3
    table, _ = _measure_with(result, TRUE_RATES, tmp_path, noise=0.0)
    fitted = plan.calibrate(result, table)
    for key, value in TRUE_RATES.items():
        assert getattr(fitted, key) == pytest.approx(value, rel=1e-3), key


def test_one_vocabulary_cannot_fit_the_exponent_and_keeps_its_setting(tmp_path, offline):
    """Jobs of one model only: the exponent and the metric rate cannot be told apart, so the exponent stays."""
    result = _calibration_plan()
    one = dataclasses.replace(result, jobs=[job for job in result.jobs if job.model == "smollm2-135m"])
    table, _ = _measure_with(one, TRUE_RATES, tmp_path, noise=0.0)
    fitted = plan.calibrate(one, table)
    assert fitted.cpu_metric_vocab_exponent == result.settings.cpu_metric_vocab_exponent


def test_one_fit_over_two_runs_knows_both_dtypes_and_rates_per_thread(tmp_path, offline):
    """A float32 run on one thread and a bfloat16 run on two, timed by one known device: the joint fit
    recovers the float32 and the 16-bit matmul rates per thread (and the rest); a fit on the float32 run
    alone keeps the 16-bit rate it was given."""
    truth = {**TRUE_RATES, "cpu_bf16_gflops": 300.0}
    f32 = _calibration_plan()
    config = load(DEFAULT)
    config["layer_skip"].update(CALIBRATION_SKIP)
    config["compute"].update(dtype="bfloat16", threads=2)
    bf16 = plan.plan_from_config(config)
    assert bf16.run.threads == 2 and bf16.run.dtype_bytes == 2
    tables = [_measure_with(result, truth, tmp_path / name)[0] for name, result in (("a", f32), ("b", bf16))]
    fitted = plan.calibrate(f32, tables[0], [(bf16, tables[1])])
    for key, value in truth.items():
        assert getattr(fitted, key) == pytest.approx(value, rel=1e-3), key
    alone = plan.calibrate(f32, tables[0])
    assert alone.cpu_bf16_gflops == f32.settings.cpu_bf16_gflops and alone.cpu_gflops == pytest.approx(120.0)
    with pytest.raises(ValueError, match=r"one device at a time, got \['cpu', 'cuda'\]"):
        plan.calibrate(f32, tables[0], [(dataclasses.replace(bf16, run=plan.RunSettings("cuda")), tables[1])])


def test_calibration_needs_enough_jobs_and_benchmark_files_must_be_snakemakes(tmp_path, offline):
    result = plan.plan_from_config(load(DEFAULT))
    table = _measure_with(result, TRUE_RATES, tmp_path)[0].iloc[:4]
    with pytest.raises(ValueError, match="4 measured jobs cannot fit 5 cost terms"):
        plan.calibrate(result, table)
    (tmp_path / "bad.tsv").write_text("seconds\n3\n")
    with pytest.raises(ValueError, match="is not a Snakemake benchmark file"):
        timings.read_benchmark(tmp_path / "bad.tsv")


# The CLI --------------------------------------------------------------------------------------------------------


def test_cli_plans_the_paper_config_with_totals(tmp_path, capsys, offline):
    argv = ["plan", "--configfile", str(PAPER), "--results", str(tmp_path), "--models", str(tmp_path)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "job                   model" in printed and "extract_profiles      gemma-2-9b-it" in printed
    assert printed.count("  total ") == 15 and "TOTAL all models: 327 jobs" in printed
    assert "longer than the model's context" not in printed


def test_cli_compares_with_benchmarks_it_finds(tmp_path, capsys, offline):
    result = plan.plan_from_config(load(DEFAULT))
    job = result.job(plan.EXTRACT, "gemma3-270m", "blank")
    write_benchmark(tmp_path / "benchmarks" / "extract_profiles" / "gemma3-270m" / "blank.tsv", job.est_s * 2, 900)
    argv = ["plan", "--configfile", str(DEFAULT), "--results", str(tmp_path), "--models", str(tmp_path)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert (
        "predicted vs measured" in printed and "predicted/measured time: median 0.50, 0.50-0.50 over 1 jobs" in printed
    )
    assert "no calibration: 1 measured jobs cannot fit 5 cost terms" in printed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DEFAULT.read_text().replace("device: cpu", "device: tpu"), "compute.device: 'tpu' is not one of"),
        ("models: [unclosed\n", "is not valid YAML"),
        ("- just a list\n", "must hold a mapping"),
    ],
)
def test_cli_reports_a_bad_config_with_status_2(tmp_path, capsys, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert cli.main(["plan", "--configfile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("entropy-lens: error:") and message in err


def test_cli_names_a_model_it_cannot_shape(tmp_path, capsys, offline):
    config = yaml.safe_load(DEFAULT.read_text())
    config["models"]["mystery"] = {"source": "nobody/nothing", "family": "x"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert cli.main(["plan", "--configfile", str(path), "--results", str(tmp_path)]) == 2
    assert "model 'mystery' (source 'nobody/nothing') has no shipped config" in capsys.readouterr().err


def test_plan_inputs_are_where_the_workflow_writes_them():
    config = load_config(DEFAULT)
    tables, model_dirs = plan.plan_inputs(config, "out", "models")
    assert sorted(tables) == sorted(["tasks", "formats", "mmlu", "blank", "lens_fit", "lens_held_out"])
    assert tables["mmlu"] == Path("out/datasets/mmlu.parquet")
    assert model_dirs == {m: Path("models") / m for m in config["models"]}
    config["layer_skip"]["enabled"] = True
    assert {"layer_skip_calibration", "layer_skip_eval"} < set(plan.plan_inputs(config)[0])
    config["layer_skip"]["enabled"] = False
    config["fitted_lens"]["enabled"] = False
    config["datasets"]["tasks"]["enabled"] = False
    tables, _ = plan.plan_inputs(config)
    assert sorted(tables) == ["blank", "formats", "mmlu"]
    assert tables["blank"] == Path("results/datasets/blank.parquet")


def test_tokenizer_memory_is_within_55_mib_of_the_measured_tokenizers():
    """RSS after AutoTokenizer on this machine: SmolLM2 (49,152 entries) +108 MiB, Qwen2.5 (151,936; the
    config's vocabulary 151,936) +131 MiB, Gemma-3 (262,144) +322 MiB; an image classifier has none."""
    for vocab, measured in ((49_152, 108), (151_936, 131), (262_144, 322)):
        shape = plan.shape_from_fields(dict(TINY, vocab_size=vocab))
        assert abs(plan.tokenizer_bytes(shape) / 2**20 - measured) <= 55
    assert plan.tokenizer_bytes(dataclasses.replace(plan.shape_from_fields(TINY), image_tokens=5)) == 0


def test_fitted_lenses_are_planned_per_kind_with_the_normal_equations_held():
    config = load_config(DEFAULT)
    config["fitted_lens"].update(kinds=["linear", "tuned"], steps=10)
    jobs = {job.dataset: job for job in plan.jobs_from_config(config) if job.rule == plan.FIT_LENS}
    assert sorted(jobs) == ["linear", "tuned"] and {job.model for job in jobs.values()} == {"smollm2-135m"}
    d, blocks = 576, 29  # SmolLM2-135M: 30 blocks of width 576
    assert jobs["linear"].held_bytes == 8 * blocks * (d + 1) * (2 * d + 1) and jobs["tuned"].held_bytes == 0
    corpus, judged = jobs["linear"].workloads
    # one batch's block outputs at every (padded) position, float32, twice (recorded, stacked), and one block's
    # float64 rows with the final block's
    padded = config["generation"]["batch_size"] * max(corpus.max_prompt_tokens, judged.max_prompt_tokens)
    recorded = 2 * padded * 30 * d * 4 + 2 * padded * (d + 1) * 8
    assert jobs["linear"].recorded_bytes == jobs["tuned"].recorded_bytes == recorded
    assert (corpus.prompts, corpus.new_tokens, corpus.n_alphas) == (32, 0, 0)  # a forward pass, no lens
    # the logit lens and the linear lens at each of its 3 curve sizes (8, 16, 32 prompts) read the judged rows
    assert (judged.prompts, judged.new_tokens, judged.repeats, judged.lens_rows) == (20, 8, 4, 20 * 8 * 4)
    assert jobs["tuned"].workloads[1].repeats == 2  # a tuned lens has one size
    (*_, training) = jobs["tuned"].workloads
    assert training.repeats == 30 and training.prompts == config["generation"]["batch_size"]
    # float64 normal equations: summed on the device over every corpus token, solved by Cholesky on the host at
    # each curve size
    tokens, n = 32 * corpus.mean_prompt_tokens, d + 1
    summed, solved = 2 * tokens * blocks * n * (2 * d + 1), 3 * blocks * (n**3 / 3 + 2 * n * n * d)
    assert jobs["linear"].device_f64_flops == pytest.approx(summed)
    assert jobs["linear"].host_f64_flops == pytest.approx(solved)
    assert jobs["tuned"].device_f64_flops == jobs["tuned"].host_f64_flops == 0
    planned = plan.plan_from_config(config)
    linear = planned.job(plan.FIT_LENS, "smollm2-135m", "linear")
    lens = 2 * d * 49152 * 30 * 20 * 8 * 4  # 2 d V per block per judged row, four readings
    assert linear.lens_flops == pytest.approx(lens + summed + solved)
    rates, run = planned.settings, plan.run_from_config(config)  # the rates as scaled to this host
    # float64 at half the float32 rate: on a CPU run, sums and solves alike in the calibrated float32 term
    without = plan.plan_job(dataclasses.replace(jobs["linear"], device_f64_flops=0.0, host_f64_flops=0.0), run, rates)
    assert linear.compute_s - without.compute_s == pytest.approx(2 * (summed + solved) / (rates.cpu_gflops * 1e9))
    assert linear.terms[0] - without.terms[0] == pytest.approx(2 * (summed + solved)) and linear.host_s == 0
    gpu = dataclasses.replace(run, device="cuda")
    on_gpu = plan.plan_job(jobs["linear"], gpu, rates)
    assert on_gpu.host_s == pytest.approx(2 * solved / (rates.cpu_gflops * gpu.threads * 1e9))  # solved on the host
    assert on_gpu.fixed_s == pytest.approx(rates.overhead_s + on_gpu.io_s + on_gpu.host_s)
    assert plan.predicted_s(on_gpu, rates, gpu) == pytest.approx(on_gpu.est_s)
    assert planned.job(plan.FIT_LENS, "smollm2-135m", "tuned").est_s > linear.est_s
    config["fitted_lens"]["fit_prompts"] = 1  # fewer tokens than coefficients: an eigendecomposition
    (one,) = [job for job in plan.jobs_from_config(config) if job.rule == plan.FIT_LENS and job.dataset == "linear"]
    assert one.host_f64_flops == pytest.approx(blocks * 9 * n**3)
    config["fitted_lens"]["enabled"] = False
    assert not [job for job in plan.jobs_from_config(config) if job.rule == plan.FIT_LENS]


def test_the_memory_ratio_reads_the_exact_peak_a_jobs_log_ends_with(tmp_path, offline):
    """Snakemake samples memory and can miss a short peak (a dtype conversion while loading); a job's log ends
    with its own peak (VmHWM), and the comparison prefers it, keeping the sampled figure beside it."""
    result = _calibration_plan()
    job = result.jobs[0]
    patterns = {rule: str(tmp_path / "bench" / rule / "{model}" / "{dataset}.tsv") for rule in plan.RULES}
    logs = {rule: str(tmp_path / "logs" / rule / "{model}" / "{dataset}.log") for rule in plan.RULES}
    write_benchmark(Path(patterns[job.rule].format(model=job.model, dataset=job.dataset)), 10.0, 1000.0)
    log = Path(logs[job.rule].format(model=job.model, dataset=job.dataset))
    log.parent.mkdir(parents=True)
    log.write_text("loading\n" + timings.PEAK_LINE.format(mb=4000.0) + "\n")
    row = plan.compare_benchmarks(result, patterns, logs).iloc[0]
    assert (row["measured_rss_mb"], row["peak_rss_mb"]) == (1000.0, 4000.0)
    assert row["mem_ratio"] == pytest.approx(job.host_peak_bytes / 2**20 / 4000.0)
    log.write_text("a job killed before its end logs no peak\n")
    row = plan.compare_benchmarks(result, patterns, logs).iloc[0]
    assert math.isnan(row["peak_rss_mb"]) and row["mem_ratio"] == pytest.approx(job.host_peak_bytes / 2**20 / 1000.0)
    assert math.isnan(timings.read_peak(tmp_path / "absent.log"))
    (tmp_path / "self.log").write_text(timings.peak_line() + "\n")  # this process's own high-water mark
    assert timings.read_peak(tmp_path / "self.log") > 50


def test_a_jobs_peak_is_its_own_not_the_parent_it_was_forked_from():
    """A process exec'd straight from a fork (as Snakemake starts a script) inherits the parent's resident size in
    getrusage's ru_maxrss; VmHWM counts only the job's own memory."""
    import subprocess
    import sys

    held = np.ones(400 * 2**20 // 8)  # 400 MB touched in this (parent) process
    code = "from entropy_lens.workflow.timings import peak_mb; import resource; "
    code += "print(peak_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, inherited = map(float, child.stdout.split())
    assert inherited >= held.nbytes / 2**20 and 0 < own < inherited - 300
    assert timings.peak_mb() >= held.nbytes / 2**20


def test_the_slurm_profile_and_the_rules_agree_with_the_plan_on_its_model_jobs():
    """The rules the plan sizes are the rules that take its resources and a GPU, and the SLURM profile names
    each where it says which jobs ask for the plan's memory and which hold a GPU."""
    rules = "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "rules").glob("*.smk")))
    assert set(re.findall(r'\*\*planned\("(\w+)"\),\n\s+gpu=1 if GPU else 0', rules)) == set(plan.RULES)
    assert len(re.findall(r"\*\*planned\(", rules)) == len(plan.RULES)
    profile = (REPO / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8")
    lists = re.findall(
        r"^# The model jobs \(([^)]*)\)|^# The rules that hold a GPU[^:]*: ([^.]*)\.", profile, re.S | re.M
    )
    assert len(lists) == 2
    for listed in ("".join(groups) for groups in lists):
        assert {name.strip() for name in re.split(r",|\n#", listed) if name.strip()} == set(plan.RULES), listed


def test_the_drop_sets_add_their_passes_to_the_skip_evaluation(offline):
    from entropy_lens.workflow.plan.model_jobs import drop_ks, drop_passes_of, paired_passes

    assert drop_ks(28, [0.12, 0.25]) == [3, 7] and drop_ks(4, [0.12, 0.25]) == [1] and drop_ks(2, [0.9]) == []
    assert drop_passes_of(28, 7, 2) == math.ceil(1 + 2 * (7 / 8 + 3.5))
    assert paired_passes(28, 1, 4, 2) == math.ceil(1 + 4 * 2 / 3 + 2 * 0.5)
    config = load(DEFAULT)
    config["layer_skip"].update(enabled=True, models=["smollm2-135m"], drop_questions=0)
    without = plan.plan_from_config(config).job(plan.SKIP_EVAL, "smollm2-135m", "")
    config["layer_skip"]["drop_questions"] = 8
    with_drops = plan.plan_from_config(config).job(plan.SKIP_EVAL, "smollm2-135m", "")
    assert with_drops.forward_flops > without.forward_flops and with_drops.est_s > without.est_s


@pytest.mark.parametrize(("has_units", "device", "bytes_"), [(False, "cpu", 4), (True, "cpu", 2), (False, "cuda", 2)])
def test_the_plan_runs_bfloat16_where_fast_in_the_dtype_the_host_loads(monkeypatch, has_units, device, bytes_):
    from entropy_lens.model import loading
    from entropy_lens.workflow.plan.config import run_from_config

    monkeypatch.setattr(loading, "cpu_has_bf16_matmul", lambda: has_units)
    config = load(DEFAULT)
    config["compute"].update(dtype="bfloat16_where_fast", device=device)
    assert run_from_config(config).dtype_bytes == bytes_
