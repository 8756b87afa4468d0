# Lenses fitted to the model beside the logit lens (fitted_lens): per model and kind, translators fitted on
# MMLU questions that no analysed set draws, saved with their provenance, and judged by their held-out KL to
# the model's final distribution per block, with the logit lens measured on the same tokens.


rule prepare_lens_corpus:
    input:
        analysed=analysed_mmlu_tables(),
    output:
        fit="results/datasets/lens_fit.parquet",
        held_out="results/datasets/lens_held_out.parquet",
    log:
        "logs/prepare_lens_corpus.log",
    benchmark:
        "results/benchmarks/prepare_lens_corpus.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        lenses=LENS_CORPUS,
        source=MMLU_SOURCE,
    script:
        "../workflow_scripts/prepare_lens_corpus.py"


rule fit_lens:
    input:
        model="resources/models/{model}",
        fit="results/datasets/lens_fit.parquet",
        held_out="results/datasets/lens_held_out.parquet",
    output:
        translators="results/lenses/{model}/{kind}.safetensors",
        kl="results/lenses/{model}/{kind}_kl.csv",
    log:
        "logs/fit_lens/{model}_{kind}.log",
    benchmark:
        "results/benchmarks/fit_lens/{model}_{kind}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    resources:
        **planned("fit_lens"),
        gpu=1 if GPU else 0,
    params:
        lenses=LENS_FIT,
        batch_size=config["generation"]["batch_size"],
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
    script:
        "../workflow_scripts/fit_lens.py"


rule lens_fit_table:
    input:
        expand("results/lenses/{model}/{kind}_kl.csv", model=LENS_MODELS, kind=LENS_KINDS),
    output:
        csv=report("results/tables/lens_fit.csv", caption="../report/lens_fit.rst", category="9. Fitted lenses"),
        md="results/tables/lens_fit.md",
        figure=report("results/figures/lens_fit.png", caption="../report/lens_fit.rst", category="9. Fitted lenses"),
    log:
        "logs/lens_fit_table.log",
    benchmark:
        "results/benchmarks/lens_fit_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/lens_fit_table.py"


# Profiles under each fitted kind (fitted_lens.profile_datasets): the same prompts and generations as under the logit
# lens, read through the translators; lens_robustness analyses both alike and puts each verdict beside the other.
rule extract_lens_profiles:
    input:
        model="resources/models/{model}",
        table="results/datasets/{dataset}.parquet",
        translators="results/lenses/{model}/{kind}.safetensors",
    output:
        directory("results/lens_profiles/{kind}/{model}/{dataset}.zarr"),
    log:
        "logs/extract_lens_profiles/{model}/{kind}/{dataset}.log",
    benchmark:
        "results/benchmarks/extract_lens_profiles/{model}/{kind}/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    resources:
        **planned("extract_lens_profiles"),
        gpu=1 if GPU else 0,
    params:
        generation=extract_params,
        lens=config["lens"],
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        shard=None,
    script:
        "../workflow_scripts/extract_profiles.py"


rule lens_robustness:
    input:
        logit=[f"results/profiles/{m}/{d}.zarr" for m, d in LENS_PROFILE_PAIRS],
        lens=[f"results/lens_profiles/{k}/{m}/{d}.zarr" for k in LENS_KINDS for m, d in LENS_PROFILE_PAIRS],
        models=sorted({f"resources/models/{m}" for m, _ in LENS_PROFILE_PAIRS}),
    output:
        csv=report(
            "results/tables/lens_robustness.csv", caption="../report/lens_robustness.rst", category="9. Fitted lenses"
        ),
        md="results/tables/lens_robustness.md",
        blocks="results/tables/lens_blocks.csv",
    log:
        "logs/lens_robustness.log",
    benchmark:
        "results/benchmarks/lens_robustness.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        pairs=LENS_PROFILE_PAIRS,
        kinds=LENS_KINDS,
        knn=knn_params,
        labels={
            m: {"family": config["models"][m]["family"], "n_params": config["models"][m]["n_params"]} for m in MODELS
        },
        expected=expected_runs,
        n_boot=config["analysis"]["n_boot"],
        seed=config["analysis"]["bootstrap_seed"],
        grid_points=config["analysis"]["depth_grid"],
    script:
        "../workflow_scripts/lens_robustness.py"
