# Entropy-Lens: per-layer entropy profiles of LLMs through the logit lens.
#   snakemake --cores all                              embedded default (config.yaml)
#   snakemake --configfile config/paper.yaml --profile profiles/slurm   paper scale
#   snakemake --report report.html --report-metadata report/metadata.yaml   the report, verdicts first
from snakemake.utils import min_version

min_version("9.0")


# The embedded default applies only when no --configfile is given: a paper-scale
# config replaces it instead of being merged into it.
if not config:

    configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"


wildcard_constraints:
    model=choice_pattern(MODELS),
    dataset=choice_pattern(DATASETS),
    kind=choice_pattern(LENS_KINDS),


include: "rules/models.smk"
include: "rules/datasets.smk"
include: "rules/extract.smk"
include: "rules/analysis.smk"
include: "rules/layer_skip.smk"
include: "rules/lenses.smk"
include: "rules/twins.smk"
include: "rules/manifest.smk"


rule all:
    default_target: True
    input:
        final_outputs(),


onstart:
    warn_scaled_threads()


onsuccess:
    print_verdicts()
