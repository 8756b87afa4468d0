# Analyses of the combined stores: tables (CSV + Markdown) and figures for the report.


rule plot_mean_profiles:
    input:
        "results/profiles/{dataset}.zarr",
    output:
        png=report(
            "results/figures/mean_profiles_{dataset}.png",
            caption="../report/mean_profiles.rst",
            category=section("Entropy profiles"),
            labels={"dataset": "{dataset}"},
        ),
        svg="results/figures/mean_profiles_{dataset}.svg",
    log:
        "logs/plot_mean_profiles/{dataset}.log",
    benchmark:
        "results/benchmarks/plot_mean_profiles/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_mean_profiles.py"


rule mmlu_accuracy:
    input:
        expand("results/scores/{model}/mmlu.parquet", model=MMLU_MODELS),
    output:
        csv=report(
            "results/tables/mmlu_accuracy.csv",
            caption="../report/mmlu_accuracy.rst",
            category=section("MMLU"),
        ),
        md="results/tables/mmlu_accuracy.md",
        png=report("results/figures/mmlu_letters.png", caption="../report/mmlu_letters.rst", category=section("MMLU")),
        svg="results/figures/mmlu_letters.svg",
    log:
        "logs/mmlu_accuracy.log",
    benchmark:
        "results/benchmarks/mmlu_accuracy.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/mmlu_accuracy.py"


rule knn_auc:
    input:
        unpack(combined_stores),
    output:
        csv=report("results/tables/knn_auc.csv", caption="../report/knn_auc.rst", category=section("kNN separability")),
        md="results/tables/knn_auc.md",
        png=report("results/figures/knn_auc.png", caption="../report/knn_auc.rst", category=section("kNN separability")),
        svg="results/figures/knn_auc.svg",
        equivalence_csv="results/tables/renyi_equivalence.csv",
        equivalence_md="results/tables/renyi_equivalence.md",
        heldout_csv="results/tables/family_heldout.csv",
        heldout_md="results/tables/family_heldout.md",
        heldout_normalized_csv="results/tables/family_heldout_normalized.csv",
        heldout_normalized_md="results/tables/family_heldout_normalized.md",
        permutation="results/tables/knn_permutation.csv",
    log:
        "logs/knn_auc.log",
    benchmark:
        "results/benchmarks/knn_auc.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        knn=knn_params,
    script:
        "../workflow_scripts/knn_auc.py"


rule knn_baselines:
    input:
        unpack(combined_stores),
        scores=expand("results/scores/{model}/mmlu.parquet", model=MMLU_MODELS),
    output:
        csv="results/tables/knn_baselines.csv",
        md="results/tables/knn_baselines.md",
    log:
        "logs/knn_baselines.log",
    benchmark:
        "results/benchmarks/knn_baselines.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        knn=knn_params,
    script:
        "../workflow_scripts/knn_baselines.py"


rule expansion_stats:
    input:
        "results/profiles/{dataset}.zarr",
    output:
        spearman="results/tables/expansion_{dataset}.csv",
        spearman_md="results/tables/expansion_{dataset}.md",
        overlap="results/tables/overlap_{dataset}.csv",
        overlap_md="results/tables/overlap_{dataset}.md",
        png=report(
            "results/figures/expansion_{dataset}.png",
            caption="../report/expansion.rst",
            category=section("Expansion and pruning"),
            labels={"dataset": "{dataset}", "figure": "expansion"},
        ),
        svg="results/figures/expansion_{dataset}.svg",
        overlap_depth="results/tables/overlap_depth_{dataset}.csv",
        overlap_depth_md="results/tables/overlap_depth_{dataset}.md",
        overlap_png=report(
            "results/figures/overlap_{dataset}.png",
            caption="../report/overlap.rst",
            category=section("Expansion and pruning"),
            labels={"dataset": "{dataset}", "figure": "overlap"},
        ),
        overlap_svg="results/figures/overlap_{dataset}.svg",
        planted="results/tables/expansion_planted_{dataset}.csv",
    log:
        "logs/expansion_stats/{dataset}.log",
    benchmark:
        "results/benchmarks/expansion_stats/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        seed=config["analysis"]["bootstrap_seed"],
        n_boot=config["analysis"]["n_boot"],
    script:
        "../workflow_scripts/expansion_stats.py"


rule family_shapes:
    input:
        unpack(combined_stores),
    output:
        csv=report(
            "results/tables/family_shapes.csv",
            caption="../report/family_shapes.rst",
            category=section("Family fingerprints"),
        ),
        md="results/tables/family_shapes.md",
    log:
        "logs/family_shapes.log",
    benchmark:
        "results/benchmarks/family_shapes.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        seed=config["analysis"]["bootstrap_seed"],
        n_boot=config["analysis"]["n_boot"],
    script:
        "../workflow_scripts/family_shapes.py"


rule routing_entropy:
    input:
        unpack(combined_stores),
    output:
        summary=report(
            "results/tables/routing_entropy.csv",
            caption="../report/routing.rst",
            category=section("Expansion and pruning"),
        ),
        summary_md="results/tables/routing_entropy.md",
        layers="results/tables/routing_layers.csv",
        layers_md="results/tables/routing_layers.md",
    log:
        "logs/routing_entropy.log",
    benchmark:
        "results/benchmarks/routing_entropy.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        seed=config["analysis"]["bootstrap_seed"],
        n_boot=config["analysis"]["n_boot"],
    script:
        "../workflow_scripts/routing_entropy.py"


rule family_fingerprints:
    input:
        "results/profiles/blank.zarr",
    output:
        distances="results/tables/family_distances.csv",
        clustering=report(
            "results/tables/family_clustering.csv",
            caption="../report/families.rst",
            category=section("Family fingerprints"),
        ),
        clustering_md="results/tables/family_clustering.md",
        size_pairs="results/tables/family_size_pairs.csv",
        pairs=report(
            "results/tables/family_pairs.csv",
            caption="../report/families.rst",
            category=section("Family fingerprints"),
        ),
        pairs_md="results/tables/family_pairs.md",
        shapes="results/tables/profile_shapes.csv",
        dendrogram=report(
            "results/figures/dendrogram.png", caption="../report/families.rst", category=section("Family fingerprints")
        ),
        dendrogram_svg="results/figures/dendrogram.svg",
        pca=report(
            "results/figures/embedding_pca.png",
            caption="../report/families.rst",
            category=section("Family fingerprints"),
        ),
        pca_svg="results/figures/embedding_pca.svg",
        tsne=report(
            "results/figures/embedding_tsne.png",
            caption="../report/families.rst",
            category=section("Family fingerprints"),
        ),
        tsne_svg="results/figures/embedding_tsne.svg",
    log:
        "logs/family_fingerprints.log",
    benchmark:
        "results/benchmarks/family_fingerprints.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        grid_points=config["analysis"]["depth_grid"],
        seed=config["analysis"]["bootstrap_seed"],
        n_boot=config["analysis"]["n_boot"],
    script:
        "../workflow_scripts/family_fingerprints.py"


rule plot_profile_bands:
    input:
        "results/profiles/{dataset}.zarr",
    output:
        png=report(
            "results/figures/profile_bands_{dataset}.png",
            caption="../report/profile_bands.rst",
            category=section("Entropy profiles"),
            labels={"dataset": "{dataset}", "figure": "bands"},
        ),
        svg="results/figures/profile_bands_{dataset}.svg",
    log:
        "logs/plot_profile_bands/{dataset}.log",
    benchmark:
        "results/benchmarks/plot_profile_bands/{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        label=band_label,
    script:
        "../workflow_scripts/plot_profile_bands.py"


rule plot_heatmap:
    input:
        store="results/profiles/{model}/{dataset}.zarr",
        model="resources/models/{model}",
    output:
        png=report(
            "results/figures/heatmap_{model}_{dataset}.png",
            caption="../report/heatmap.rst",
            category=section("Entropy profiles"),
            labels={"model": "{model}", "dataset": "{dataset}", "figure": "heatmap"},
        ),
        svg="results/figures/heatmap_{model}_{dataset}.svg",
    log:
        "logs/plot_heatmap/{model}_{dataset}.log",
    benchmark:
        "results/benchmarks/plot_heatmap/{model}_{dataset}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_heatmap.py"


rule paper_table:
    input:
        unpack(paper_inputs),
    output:
        md=report(
            "results/tables/paper_comparison.md",
            caption="../report/paper.rst",
            category=section("Verdicts"),
            labels={"table": "all claims"},
        ),
        csv="results/tables/paper_comparison.csv",
        verdicts_md=report(
            "results/tables/verdicts.md",
            caption="../report/verdicts.rst",
            category=section("Verdicts"),
            labels={"table": "headline"},
        ),
        verdicts_csv="results/tables/verdicts.csv",
        verdicts_html="results/tables/verdicts.html",
        verdicts_txt="results/tables/verdicts.txt",
        nulls_csv="results/tables/nulls.csv",
        nulls_md=report(
            "results/tables/nulls.md",
            caption="../report/nulls.rst",
            category=section("Verdicts"),
            labels={"table": "nulls"},
        ),
    log:
        "logs/paper_table.log",
    benchmark:
        "results/benchmarks/paper_table.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        expected=expected_runs,
        rehearsal=config["rehearsal"],
    script:
        "../workflow_scripts/paper_table.py"


rule run_timings:
    input:
        result_outputs(),
    output:
        csv=report("results/tables/run_timings.csv", caption="../report/run_timings.rst", category=section("Run")),
        md="results/tables/run_timings.md",
    log:
        "logs/run_timings.log",
    benchmark:
        "results/benchmarks/run_timings.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        folder="results/benchmarks",
    script:
        "../workflow_scripts/run_timings.py"


# The plan that sized the jobs' requests beside what they measured (Snakemake benchmark files): one row per
# planned model job, its ratios predicted / measured; a job without a benchmark keeps NaN. The job reads the config
# at run time, as the jobs' resources do, and takes none of it as a param: a plan or memory setting sizes requests
# and changes no result, so it reruns this table only with the jobs it reports on.
rule plan_vs_run:
    input:
        result_outputs(),
        tables=plan_tables(),
        models=expand("resources/models/{model}", model=MODELS),
    output:
        csv=report("results/tables/plan_vs_run.csv", caption="../report/plan_vs_run.rst", category=section("Run")),
        md="results/tables/plan_vs_run.md",
    log:
        "logs/plan_vs_run.log",
    conda:
        "../envs/entropy-lens.yaml"
    params:
        benchmarks="results/benchmarks",
        logs="logs",  # each job's log ends with its exact peak memory
    script:
        "../workflow_scripts/plan_vs_run.py"
