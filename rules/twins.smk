# Random-init twins (config twins; docs/verdicts.md, "Beyond the twin"): each model profiled on a twin dataset gets a
# twin, its own config.json and tokenizer with every weight drawn anew from twins.seed, profiled on the same prompts
# with the same generation and lens settings. The twins' stores stay under results/profiles/twins/, apart from the
# trained models' combined stores, so no pooled analysis (family separability, held out, fingerprints) reads a twin
# beside a trained model; twin_readings (rules/analysis.smk) reads both. The twins are not versioned (DVC): the
# seed and the model's config rebuild the same bytes.


rule twin_model:
    input:
        "resources/models/{model}",
    output:
        directory("resources/twins/{model}"),
    log:
        "logs/twin_model/{model}.log",
    benchmark:
        "results/benchmarks/twin_model/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    resources:
        mem_mb=config["compute"]["mem_mb"],
    params:
        seed=config["twins"]["seed"],
    script:
        "../workflow_scripts/twin_model.py"


# The same job as extract_profiles on the twin (one job per pair, also in a sharded run): the twin generates its
# own tokens from the same prompts, under the same settings.
rule extract_twin_profiles:
    input:
        model="resources/twins/{model}",
        table="results/datasets/{dataset}.parquet",
    output:
        directory("results/profiles/twins/{model}/{dataset}.zarr"),
    log:
        "logs/extract_twin_profiles/{model}/{dataset}.log",
    benchmark:
        "results/benchmarks/extract_twin_profiles/{model}/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    resources:
        **planned("extract_twin_profiles"),
        gpu=1 if GPU else 0,
    params:
        generation=extract_params,
        lens=LENS,
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        shard=None,
    script:
        "../workflow_scripts/extract_profiles.py"


rule combine_twin_profiles:
    input:
        stores=twin_stores,
        scores=[],
    output:
        directory("results/profiles/twins/{dataset}.zarr"),
    log:
        "logs/combine_twin_profiles/{dataset}.log",
    benchmark:
        "results/benchmarks/combine_twin_profiles/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        models=twin_dataset_models,
        labels=twin_labels,
    script:
        "../workflow_scripts/combine_profiles.py"


# Every learned-structure claim read on the twins beside the trained models, trained - twin paired over the claim's
# unit: the twin table, a second null the paper table reads.
rule twin_readings:
    input:
        trained=expand("results/profiles/{dataset}.zarr", dataset=TWIN_DATASETS),
        twins=expand("results/profiles/twins/{dataset}.zarr", dataset=TWIN_DATASETS),
    output:
        csv="results/tables/twins.csv",
        md="results/tables/twins.md",
    log:
        "logs/twin_readings.log",
    benchmark:
        "results/benchmarks/twin_readings.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        datasets=TWIN_DATASETS,
        twin_seed=config["twins"]["seed"],
        mmlu=MMLU,
        knn=knn_params,
        n_boot=config["analysis"]["n_boot"],
        seed=config["analysis"]["bootstrap_seed"],
        grid_points=config["analysis"]["depth_grid"],
    script:
        "../workflow_scripts/twin_readings.py"
