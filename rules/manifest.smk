# The list of what this configuration's run writes under results/, written last (every artifact it lists is
# its input) with the sha256 of every table, prompt set, lens and figure as the run wrote them: `entropy-lens
# verify` names every one that is missing or changed since, and refuses a folder without it (no results folder).


localrules:
    results_manifest,


rule results_manifest:
    input:
        manifest_outputs(),
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
