# Lenses fitted to the model beside the logit lens (fitted_lens): per model and kind, translators fitted on
# MMLU questions that no analysed set draws, saved with their provenance, and judged by their held-out KL to
# the model's final distribution per block, with the logit lens measured on the same tokens; the linear lens at
# each nested prefix of its corpus (the learning curve), and each lens's entropy on those tokens (the schedule).


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
        readings="results/lenses/{model}/{kind}_readings.parquet",
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
        kl=expand("results/lenses/{model}/{kind}_kl.csv", model=LENS_MODELS, kind=LENS_KINDS),
        readings=expand("results/lenses/{model}/{kind}_readings.parquet", model=LENS_MODELS, kind=LENS_KINDS),
    output:
        csv=report("results/tables/lens_fit.csv", caption="../report/lens_fit.rst", category=section("Fitted lenses")),
        md="results/tables/lens_fit.md",
        figure=report(
            "results/figures/lens_fit.png", caption="../report/lens_fit.rst", category=section("Fitted lenses")
        ),
        curve="results/tables/lens_fit_curve.csv",
        curve_md="results/tables/lens_fit_curve.md",
        plateau=report(
            "results/tables/lens_fit_plateau.csv",
            caption="../report/lens_curve.rst",
            category=section("Fitted lenses"),
        ),
        plateau_md="results/tables/lens_fit_plateau.md",
        curve_figure=report(
            "results/figures/lens_fit_curve.png", caption="../report/lens_curve.rst", category=section("Fitted lenses")
        ),
    log:
        "logs/lens_fit_table.log",
    benchmark:
        "results/benchmarks/lens_fit_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        jobs=[(m, k) for m in LENS_MODELS for k in LENS_KINDS],
        n_boot=config["fitted_lens"]["n_boot"],
        seed=config["fitted_lens"]["seed"],
    script:
        "../workflow_scripts/lens_fit_table.py"


# The entropy schedule under both lenses, per model: ΔH per block under the logit lens and each fitted
# kind beside its held-out KL, on the same held-out tokens; which blocks are under the KL bar, the blocks each lens
# selects, and their agreement against a block-permutation null. results/lenses/{model}/schedule.csv is the
# per-block contract other analyses read (entropy_lens.analysis.schedule.SCHEDULE_COLUMNS).
rule lens_schedule:
    input:
        expand("results/lenses/{{model}}/{kind}_readings.parquet", kind=LENS_KINDS),
    output:
        schedule="results/lenses/{model}/schedule.csv",
        choices="results/lenses/{model}/schedule_choices.csv",
        agreement="results/lenses/{model}/schedule_agreement.csv",
    log:
        "logs/lens_schedule/{model}.log",
    benchmark:
        "results/benchmarks/lens_schedule/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        n_boot=config["fitted_lens"]["n_boot"],
        seed=config["fitted_lens"]["seed"],
        variants=config["layer_skip"]["variants"],
    script:
        "../workflow_scripts/lens_schedule.py"


rule lens_schedule_table:
    input:
        schedule=expand("results/lenses/{model}/schedule.csv", model=LENS_MODELS),
        choices=expand("results/lenses/{model}/schedule_choices.csv", model=LENS_MODELS),
        agreement=expand("results/lenses/{model}/schedule_agreement.csv", model=LENS_MODELS),
    output:
        csv=report(
            "results/tables/lens_schedule.csv",
            caption="../report/lens_schedule.rst",
            category=section("Fitted lenses"),
        ),
        md="results/tables/lens_schedule.md",
        choices="results/tables/lens_schedule_choices.csv",
        choices_md="results/tables/lens_schedule_choices.md",
        agreement=report(
            "results/tables/lens_schedule_agreement.csv",
            caption="../report/lens_schedule.rst",
            category=section("Fitted lenses"),
        ),
        agreement_md="results/tables/lens_schedule_agreement.md",
        figure=report(
            "results/figures/lens_schedule.png",
            caption="../report/lens_schedule.rst",
            category=section("Fitted lenses"),
        ),
    log:
        "logs/lens_schedule_table.log",
    benchmark:
        "results/benchmarks/lens_schedule_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/lens_schedule_table.py"


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
        lens=LENS,
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
            "results/tables/lens_robustness.csv",
            caption="../report/lens_robustness.rst",
            category=section("Fitted lenses"),
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
