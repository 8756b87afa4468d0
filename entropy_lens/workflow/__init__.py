"""What the workflow needs around the science: planning jobs, starting them, and reading their traces.

Modules:
    plan     the cost plan of every GPU job from model shapes alone, and its calibration.
    jobs     what every workflow job does first: log to its file, claim a device, load the model.
    locks    Snakemake's working-directory lock, and a safe way back after a hard kill.
    timings  Snakemake benchmark files summarized per rule.
    settings the workflow config: overlays, the shipped schema with its defaults, cross-checks.
    fetch    the hub models and datasets a config reads, what the cache lacks of them, and downloading them.
    tables   the CSV + Markdown pair every analysis writes.
"""
