# The causal test: skip the k layers of largest entropy increase (expansion), of largest
# decrease (pruning), or random layers, and score MMLU by letter log-likelihood. The
# layers are picked on calibration questions disjoint from the evaluated ones.


rule prepare_layer_skip:
    output:
        calibration="results/datasets/layer_skip_calibration.parquet",
        evaluation="results/datasets/layer_skip_eval.parquet",
    params:
        skip=config["layer_skip"],
        source=config["datasets"].get("mmlu", {}),
    log:
        "logs/prepare_layer_skip.log",
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
        skip=config["layer_skip"],
        lens=lens_params,
        compute=compute_params,
        chat_template=chat_template_of,
    log:
        "logs/layer_skip_select/{model}.log",
    conda:
        "../envs/entropy-lens.yaml"
    threads: 2
    resources:
        mem_mb=config["compute"]["mem_mb"],
        gpu=1 if GPU else 0,
    script:
        "../workflow_scripts/layer_skip_select.py"


rule layer_skip_eval:
    input:
        model="resources/models/{model}",
        evaluation="results/datasets/layer_skip_eval.parquet",
        conditions="results/layer_skip/{model}/conditions.json",
    output:
        accuracy="results/layer_skip/{model}/accuracy.csv",
        profiles="results/layer_skip/{model}/profiles.csv",
    params:
        skip=config["layer_skip"],
        lens=lens_params,
        compute=compute_params,
        chat_template=chat_template_of,
        family=family_of,
        batch_size=config["generation"]["batch_size"],
    log:
        "logs/layer_skip_eval/{model}.log",
    conda:
        "../envs/entropy-lens.yaml"
    threads: 2
    resources:
        mem_mb=config["compute"]["mem_mb"],
        gpu=1 if GPU else 0,
    script:
        "../workflow_scripts/layer_skip_eval.py"


rule plot_layer_skip:
    input:
        accuracy="results/layer_skip/{model}/accuracy.csv",
        profiles="results/layer_skip/{model}/profiles.csv",
    output:
        accuracy=report(
            "results/figures/layer_skip_{model}.png",
            caption="../report/layer_skip.rst",
            category="Layer skipping",
            labels={"model": "{model}", "figure": "accuracy"},
        ),
        profiles=report(
            "results/figures/layer_skip_profiles_{model}.png",
            caption="../report/layer_skip_profiles.rst",
            category="Layer skipping",
            labels={"model": "{model}", "figure": "profiles"},
        ),
    log:
        "logs/plot_layer_skip/{model}.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_layer_skip.py"


rule layer_skip_table:
    input:
        expand("results/layer_skip/{model}/accuracy.csv", model=MODELS),
    output:
        csv=report("results/tables/layer_skip.csv", caption="../report/layer_skip.rst", category="Layer skipping"),
        md="results/tables/layer_skip.md",
    log:
        "logs/layer_skip_table.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/layer_skip_table.py"
