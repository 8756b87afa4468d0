# The causal test: the blocks of largest entropy increase (expansion) and decrease (pruning), through the logit
# lens and a fitted linear lens where one is fitted, each against one random set drawn per question (paired),
# and every block skipped alone on a subset (the criticality map); score MMLU by letter log-likelihood (raw and
# calibrated). The blocks are picked at the answer position on calibration questions disjoint from the evaluated
# ones, before anything is scored.


rule prepare_layer_skip:
    output:
        calibration="results/datasets/layer_skip_calibration.parquet",
        evaluation="results/datasets/layer_skip_eval.parquet",
    log:
        "logs/prepare_layer_skip.log",
    benchmark:
        "results/benchmarks/prepare_layer_skip.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        skip=SKIP_QUESTIONS,
        source=MMLU_SOURCE,
    script:
        "../workflow_scripts/prepare_layer_skip.py"


rule layer_skip_select:
    input:
        unpack(skip_lens),
        model="resources/models/{model}",
        calibration="results/datasets/layer_skip_calibration.parquet",
    output:
        plan="results/layer_skip/{model}/plan.json",
        delta_h="results/layer_skip/{model}/delta_h.csv",
        stability="results/layer_skip/{model}/stability.csv",
        protected="results/layer_skip/{model}/protected_layers.json",
    log:
        "logs/layer_skip_select/{model}.log",
    benchmark:
        "results/benchmarks/layer_skip_select/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    resources:
        **planned("layer_skip_select"),
        gpu=1 if GPU else 0,
    params:
        skip=SKIP_SELECT,
        lens=LENS,
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        chat_template=chat_template_of,
    script:
        "../workflow_scripts/layer_skip_select.py"


rule layer_skip_eval:
    input:
        unpack(skip_lens),
        model="resources/models/{model}",
        evaluation="results/datasets/layer_skip_eval.parquet",
        plan="results/layer_skip/{model}/plan.json",
    output:
        correct="results/layer_skip/{model}/correct.parquet",
        profiles="results/layer_skip/{model}/profiles.csv",
        readings="results/layer_skip/{model}/readings.parquet",
        angles="results/layer_skip/{model}/angles.parquet",
        drops="results/layer_skip/{model}/drops.parquet",
    log:
        "logs/layer_skip_eval/{model}.log",
    benchmark:
        "results/benchmarks/layer_skip_eval/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    resources:
        **planned("layer_skip_eval"),
        gpu=1 if GPU else 0,
    params:
        skip=SKIP_EVAL,
        drops=SKIP_DROPS,
        lens=LENS,
        device=config["compute"]["device"],
        dtype=config["compute"]["dtype"],
        chat_template=chat_template_of,
        batch_size=config["generation"]["batch_size"],
    script:
        "../workflow_scripts/layer_skip_eval.py"


rule layer_skip_table:
    input:
        correct=expand("results/layer_skip/{model}/correct.parquet", model=SKIP_MODELS),
        plans=expand("results/layer_skip/{model}/plan.json", model=SKIP_MODELS),
        delta_h=expand("results/layer_skip/{model}/delta_h.csv", model=SKIP_MODELS),
        stability=expand("results/layer_skip/{model}/stability.csv", model=SKIP_MODELS),
    output:
        csv=report(
            "results/tables/layer_skip.csv", caption="../report/layer_skip.rst", category=section("Layer skipping")
        ),
        md="results/tables/layer_skip.md",
        skip_map=report(
            "results/tables/skip_map.csv", caption="../report/skip_map.rst", category=section("Layer skipping")
        ),
        skip_map_md="results/tables/skip_map.md",
        comparisons="results/tables/layer_skip_comparisons.csv",
        comparisons_md="results/tables/layer_skip_comparisons.md",
        spearman="results/tables/layer_skip_spearman.csv",
        spearman_md="results/tables/layer_skip_spearman.md",
        stability="results/tables/layer_skip_stability.csv",
        stability_md="results/tables/layer_skip_stability.md",
    log:
        "logs/layer_skip_table.log",
    benchmark:
        "results/benchmarks/layer_skip_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        n_boot=config["layer_skip"]["n_boot"],
        seed=config["layer_skip"]["seed"],
    script:
        "../workflow_scripts/layer_skip_table.py"


rule plot_layer_skip:
    input:
        unpack(skip_schedule),
        skip_map="results/tables/skip_map.csv",
        profiles="results/layer_skip/{model}/profiles.csv",
    output:
        skip_map=report(
            "results/figures/skip_map_{model}.png",
            caption="../report/skip_map.rst",
            category=section("Layer skipping"),
            labels={"model": "{model}", "figure": "criticality map"},
        ),
        skip_map_svg="results/figures/skip_map_{model}.svg",
        profiles=report(
            "results/figures/layer_skip_profiles_{model}.png",
            caption="../report/layer_skip_profiles.rst",
            category=section("Layer skipping"),
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


# Which blocks can you drop? Each pruning criterion per block (ΔH, Block Influence, angular distance,
# position), read off the sweep's intact pass, and the Spearman of each with the measured cost; the k-block
# drop set each chooses (and Gromov's span) scored against random k-sets.
rule skip_criteria_table:
    input:
        correct=expand("results/layer_skip/{model}/correct.parquet", model=SKIP_MODELS),
        readings=expand("results/layer_skip/{model}/readings.parquet", model=SKIP_MODELS),
        angles=expand("results/layer_skip/{model}/angles.parquet", model=SKIP_MODELS),
        drops=expand("results/layer_skip/{model}/drops.parquet", model=SKIP_MODELS),
        evaluation="results/datasets/layer_skip_eval.parquet",
    output:
        criteria=report(
            "results/tables/skip_criteria.csv",
            caption="../report/skip_criteria.rst",
            category=section("Layer skipping"),
        ),
        criteria_md="results/tables/skip_criteria.md",
        spearman="results/tables/skip_criteria_spearman.csv",
        spearman_md="results/tables/skip_criteria_spearman.md",
        exit_curve="results/tables/skip_exit.csv",
        exit_curve_md="results/tables/skip_exit.md",
        exit_threshold="results/tables/skip_exit_threshold.csv",
        exit_threshold_md="results/tables/skip_exit_threshold.md",
        drop_sets="results/tables/skip_drop_sets.csv",
        drop_sets_md="results/tables/skip_drop_sets.md",
        drop_scores=report(
            "results/tables/skip_drop_scores.csv",
            caption="../report/skip_drop_scores.rst",
            category=section("Layer skipping"),
        ),
        drop_scores_md="results/tables/skip_drop_scores.md",
    log:
        "logs/skip_criteria_table.log",
    benchmark:
        "results/benchmarks/skip_criteria_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        variants=config["layer_skip"]["variants"],
        drop_shares=config["layer_skip"]["drop_shares"],
        n_boot=config["layer_skip"]["n_boot"],
        seed=config["layer_skip"]["seed"],
    script:
        "../workflow_scripts/skip_criteria_table.py"


rule plot_skip_criteria:
    input:
        skip_map="results/tables/skip_map.csv",
        criteria="results/tables/skip_criteria.csv",
        exit_curve="results/tables/skip_exit.csv",
    output:
        criteria=report(
            "results/figures/skip_criteria_{model}.png",
            caption="../report/skip_criteria.rst",
            category=section("Layer skipping"),
            labels={"model": "{model}", "figure": "pruning criteria"},
        ),
        exit_curve=report(
            "results/figures/skip_exit_{model}.png",
            caption="../report/skip_exit.rst",
            category=section("Layer skipping"),
            labels={"model": "{model}", "figure": "exit curve"},
        ),
    log:
        "logs/plot_skip_criteria/{model}.log",
    benchmark:
        "results/benchmarks/plot_skip_criteria/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_skip_criteria.py"
