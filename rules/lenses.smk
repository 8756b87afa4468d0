# Lenses fitted to the model beside the logit lens (fitted_lens): per model and kind, translators fitted on
# MMLU questions that no analysed set draws, saved with their provenance, and judged by their held-out KL to
# the model's final distribution per block, with the logit lens measured on the same tokens.


rule prepare_lens_corpus:
    input:
        analysed=analysed_mmlu_tables(),
    output:
        fit="results/datasets/lens_fit.parquet",
        held_out="results/datasets/lens_held_out.parquet",
    params:
        lenses=LENS_CORPUS,
        source=MMLU_SOURCE,
    log:
        "logs/prepare_lens_corpus.log",
    benchmark:
        "results/benchmarks/prepare_lens_corpus.tsv"
    conda:
        "../envs/entropy-lens.yaml"
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
    params:
        lenses=LENS_FIT,
        batch_size=config["generation"]["batch_size"],
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
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
