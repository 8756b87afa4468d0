# The causal test: skip the k layers of largest entropy increase (expansion), of largest
# decrease (pruning), or random layers, and score MMLU by letter log-likelihood (raw and
# calibrated). The layers are picked on calibration questions disjoint from the evaluated ones.


rule prepare_layer_skip:
    output:
        calibration="results/datasets/layer_skip_calibration.parquet",
        evaluation="results/datasets/layer_skip_eval.parquet",
    params:
        skip=SKIP_QUESTIONS,
        source=MMLU_SOURCE,
    log:
        "logs/prepare_layer_skip.log",
    benchmark:
        "results/benchmarks/prepare_layer_skip.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/prepare_layer_skip.py"


rule layer_skip_select:
    input:
        model="resources/models/{model}",
        calibration="results/datasets/layer_skip_calibration.parquet",
    output:
        conditions="results/layer_skip/{model}/conditions.json",
        protected="results/layer_skip/{model}/protected_layers.json",
    params:
        skip=SKIP_SELECT,
        lens=config["lens"],
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        chat_template=chat_template_of,
    log:
        "logs/layer_skip_select/{model}.log",
    benchmark:
        "results/benchmarks/layer_skip_select/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: 2
    resources:
        **planned("layer_skip_select"),
        gpu=1 if GPU else 0,
    script:
        "../workflow_scripts/layer_skip_select.py"


rule layer_skip_eval:
    input:
        model="resources/models/{model}",
        evaluation="results/datasets/layer_skip_eval.parquet",
        conditions="results/layer_skip/{model}/conditions.json",
    output:
        correct="results/layer_skip/{model}/correct.parquet",
        profiles="results/layer_skip/{model}/profiles.csv",
    params:
        profile_prompts=config["layer_skip"]["profile_prompts"],
        lens=config["lens"],
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        chat_template=chat_template_of,
        batch_size=config["generation"]["batch_size"],
    log:
        "logs/layer_skip_eval/{model}.log",
    benchmark:
        "results/benchmarks/layer_skip_eval/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: 2
    resources:
        **planned("layer_skip_eval"),
        gpu=1 if GPU else 0,
    script:
        "../workflow_scripts/layer_skip_eval.py"


rule layer_skip_table:
    input:
        expand("results/layer_skip/{model}/correct.parquet", model=SKIP_MODELS),
    output:
        csv=report("results/tables/layer_skip.csv", caption="../report/layer_skip.rst", category="8. Layer skipping"),
        md="results/tables/layer_skip.md",
        differences="results/tables/layer_skip_differences.csv",
        differences_md="results/tables/layer_skip_differences.md",
    params:
        models=SKIP_MODELS,
        n_boot=config["layer_skip"]["n_boot"],
        seed=config["layer_skip"]["seed"],
    log:
        "logs/layer_skip_table.log",
    benchmark:
        "results/benchmarks/layer_skip_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/layer_skip_table.py"


rule plot_layer_skip:
    input:
        accuracy="results/tables/layer_skip.csv",
        profiles="results/layer_skip/{model}/profiles.csv",
    output:
        accuracy=report(
            "results/figures/layer_skip_{model}.png",
            caption="../report/layer_skip.rst",
            category="8. Layer skipping",
            labels={"model": "{model}", "figure": "accuracy"},
        ),
        accuracy_svg="results/figures/layer_skip_{model}.svg",
        profiles=report(
            "results/figures/layer_skip_profiles_{model}.png",
            caption="../report/layer_skip_profiles.rst",
            category="8. Layer skipping",
            labels={"model": "{model}", "figure": "profiles"},
        ),
        profiles_svg="results/figures/layer_skip_profiles_{model}.svg",
    log:
        "logs/plot_layer_skip/{model}.log",
    benchmark:
        "results/benchmarks/plot_layer_skip/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_layer_skip.py"
