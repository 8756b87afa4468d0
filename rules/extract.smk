# One extraction job per (model, dataset) pair the config asks for, each writing its own store atomically;
# with compute.prompts_per_job > 0 one job per shard (its own store, rerun alone when killed), and
# gather_shards joins a pair's shards into the same per-model store.
# The stores' chunk layout (config storage) is no param of any rule here: each job reads it from the config
# when it writes (workflow.jobs.store_layout), so changing the layout reruns no extraction.


rule extract_profiles:
    input:
        model="resources/models/{model}",
        table="results/datasets/{dataset}.parquet",
    output:
        directory(f"results/profiles/{EXTRACT_JOB}.zarr"),
    log:
        f"logs/extract_profiles/{EXTRACT_JOB}.log",
    benchmark:
        f"results/benchmarks/extract_profiles/{EXTRACT_JOB}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    resources:
        **planned("extract_profiles"),
        gpu=1 if GPU else 0,
    params:
        generation=extract_params,
        lens=config["lens"],
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        shard=shard_spec,
    script:
        "../workflow_scripts/extract_profiles.py"


if SHARD_SIZE:

    rule gather_shards:
        input:
            shards=shard_stores,
            table="results/datasets/{dataset}.parquet",
        output:
            directory("results/profiles/{model}/{dataset}.zarr"),
        log:
            "logs/gather_shards/{model}/{dataset}.log",
        benchmark:
            "results/benchmarks/gather_shards/{model}/{dataset}.tsv"
        conda:
            "../envs/entropy-lens.yaml"
        script:
            "../workflow_scripts/gather_shards.py"


rule score_mmlu:
    input:
        model="resources/models/{model}",
        table="results/datasets/mmlu.parquet",
        profiles="results/profiles/{model}/mmlu.zarr",
    output:
        "results/scores/{model}/mmlu.parquet",
    log:
        "logs/score_mmlu/{model}.log",
    benchmark:
        "results/benchmarks/score_mmlu/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/score_mmlu.py"


rule combine_profiles:
    input:
        stores=per_model_stores,
        scores=per_model_scores,
    output:
        directory("results/profiles/{dataset}.zarr"),
    log:
        "logs/combine_profiles/{dataset}.log",
    benchmark:
        "results/benchmarks/combine_profiles/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        models=dataset_models,
        labels=model_labels,
    script:
        "../workflow_scripts/combine_profiles.py"
