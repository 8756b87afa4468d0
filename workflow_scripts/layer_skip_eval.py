"""Rule layer_skip_eval: each question's answer under the paired design (the selected blocks and one random
block drawn per question), every block skipped alone on the sweep's questions and every k >= 2 set, what the
intact pass shows at every block (the pruning criteria's readings), and the drop set each criterion chooses from
those readings scored beside one random set of its size per question."""

from entropy_lens.core.tables import write_csv
from entropy_lens.lens.translators import Translators
from entropy_lens.prompts.datasets import read_table
from entropy_lens.skipping.evaluation import evaluate_drop_sets, evaluate_skips
from entropy_lens.skipping.plan import read_plan
from entropy_lens.skipping.readings import readings_frames
from entropy_lens.skipping.recorder import ReadingRecorder
from entropy_lens.workflow.jobs import job_model, lens_settings, setup_logging

setup_logging(snakemake)
params, out = snakemake.params, snakemake.output
drop = params.drops

table = read_table(snakemake.input.evaluation, "mmlu")
fitted = dict(snakemake.input.items()).get("lens")  # the linear lens, where one is fitted: ΔH read through it too
with job_model(snakemake) as lm:
    recorder = ReadingRecorder(lm, len(table), translators=Translators.load(fitted) if fitted else None)
    correct, profiles = evaluate_skips(
        lm,
        table,
        read_plan(snakemake.input.plan),
        lens=lens_settings(snakemake),
        batch_size=params.batch_size,
        chat_template=params.chat_template,
        profile_prompts=params.skip["profile_prompts"],
        sweep_questions=params.skip["sweep_questions"],
        set_questions=params.skip["set_questions"],
        variants=params.skip["variants"],
        seed=params.skip["seed"],
        observe=recorder,
    )
    record = recorder.result(table["question_id"].astype(str).tolist())
    drops = evaluate_drop_sets(
        lm,
        table,
        record,
        variants=drop["variants"],
        shares=drop["drop_shares"] if drop["drop_questions"] > 0 else [],
        n_questions=max(drop["drop_questions"], 1),
        seed=drop["seed"],
        batch_size=params.batch_size,
        chat_template=params.chat_template,
    )
drops.assign(model=snakemake.wildcards.model).to_parquet(out.drops, index=False)
correct.assign(model=snakemake.wildcards.model).to_parquet(out.correct, index=False)
write_csv(profiles, out.profiles)
readings, angles = readings_frames(record)
readings.to_parquet(out.readings, index=False)
angles.to_parquet(out.angles, index=False)
