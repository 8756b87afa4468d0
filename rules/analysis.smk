# Analyses of the combined stores: tables (CSV + Markdown) and figures for the report.


rule plot_mean_profiles:
    input:
        "results/profiles/{dataset}.zarr",
    output:
        png=report(
            "results/figures/mean_profiles_{dataset}.png",
            caption="../report/mean_profiles.rst",
            category="Entropy profiles",
            labels={"dataset": "{dataset}"},
        ),
        svg="results/figures/mean_profiles_{dataset}.svg",
    log:
        "logs/plot_mean_profiles/{dataset}.log",
    script:
        "../workflow_scripts/plot_mean_profiles.py"


rule mmlu_accuracy:
    input:
        expand("results/scores/{model}/mmlu.parquet", model=MODELS),
    output:
        csv=report(
            "results/tables/mmlu_accuracy.csv",
            caption="../report/mmlu_accuracy.rst",
            category="MMLU",
        ),
        md="results/tables/mmlu_accuracy.md",
    log:
        "logs/mmlu_accuracy.log",
    script:
        "../workflow_scripts/mmlu_accuracy.py"
