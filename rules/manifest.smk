# The list of what this configuration's run writes under results/: `entropy-lens verify` names every one
# that is missing, and refuses a folder without it (no results folder).


localrules:
    results_manifest,


rule results_manifest:
    output:
        "results/tables/manifest.json",
    log:
        "logs/results_manifest.log",
    conda:
        "../envs/entropy-lens.yaml"
    params:
        outputs=manifest_outputs(),
    script:
        "../workflow_scripts/results_manifest.py"
