# Each configured model, materialized once as safetensors + tokenizer: extraction jobs
# never parse a GGUF or reach the hub again, and the folder can be versioned.


rule materialize_model:
    output:
        directory("resources/models/{model}"),
    log:
        "logs/materialize_model/{model}.log",
    benchmark:
        "results/benchmarks/materialize_model/{model}.tsv"
    conda:
        "../envs/entropy-lens.yaml"
    resources:
        mem_mb=config["compute"]["mem_mb"],
    params:
        model=model_params,
        source_sha256=source_digest,
    script:
        "../workflow_scripts/materialize_model.py"
