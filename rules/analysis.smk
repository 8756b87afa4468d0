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
    conda:
        "../envs/entropy-lens.yaml"
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
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/mmlu_accuracy.py"


rule knn_auc:
    input:
        unpack(combined_stores),
    output:
        csv=report("results/tables/knn_auc.csv", caption="../report/knn_auc.rst", category="kNN separability"),
        md="results/tables/knn_auc.md",
        png=report("results/figures/knn_auc.png", caption="../report/knn_auc.rst", category="kNN separability"),
    params:
        knn=knn_params,
    log:
        "logs/knn_auc.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/knn_auc.py"


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
            category="Expansion and pruning",
            labels={"dataset": "{dataset}"},
        ),
    params:
        seed=config["analysis"]["knn"]["seed"],
    log:
        "logs/expansion_stats/{dataset}.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/expansion_stats.py"


rule family_fingerprints:
    input:
        "results/profiles/blank.zarr",
    output:
        distances="results/tables/family_distances.csv",
        clustering=report(
            "results/tables/family_clustering.csv", caption="../report/families.rst", category="Family fingerprints"
        ),
        clustering_md="results/tables/family_clustering.md",
        size_pairs="results/tables/family_size_pairs.csv",
        shapes="results/tables/profile_shapes.csv",
        dendrogram=report(
            "results/figures/dendrogram.png", caption="../report/families.rst", category="Family fingerprints"
        ),
        pca=report("results/figures/embedding_pca.png", caption="../report/families.rst", category="Family fingerprints"),
        tsne=report(
            "results/figures/embedding_tsne.png", caption="../report/families.rst", category="Family fingerprints"
        ),
    params:
        grid_points=config["analysis"]["depth_grid"],
        seed=config["analysis"]["knn"]["seed"],
    log:
        "logs/family_fingerprints.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/family_fingerprints.py"


rule plot_profile_bands:
    input:
        "results/profiles/{dataset}.zarr",
    output:
        report(
            "results/figures/profile_bands_{dataset}.png",
            caption="../report/profile_bands.rst",
            category="Entropy profiles",
            labels={"dataset": "{dataset}", "figure": "bands"},
        ),
    params:
        label=band_label,
    log:
        "logs/plot_profile_bands/{dataset}.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_profile_bands.py"


rule plot_heatmap:
    input:
        store="results/profiles/{model}/{dataset}.zarr",
        model="resources/models/{model}",
    output:
        report(
            "results/figures/heatmap_{model}_{dataset}.png",
            caption="../report/heatmap.rst",
            category="Entropy profiles",
            labels={"model": "{model}", "dataset": "{dataset}", "figure": "heatmap"},
        ),
    log:
        "logs/plot_heatmap/{model}_{dataset}.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/plot_heatmap.py"


rule paper_table:
    input:
        unpack(paper_inputs),
    output:
        md=report("results/tables/paper_comparison.md", caption="../report/paper.rst", category="Paper comparison"),
        csv="results/tables/paper_comparison.csv",
    log:
        "logs/paper_table.log",
    conda:
        "../envs/entropy-lens.yaml"
    script:
        "../workflow_scripts/paper_table.py"
