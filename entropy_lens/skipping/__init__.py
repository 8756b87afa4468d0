"""The layer-skip experiment: which blocks can a model do without, and does the entropy change say which?

Modules:
    conditions   skip conditions, eligible blocks per variant, selections, random populations.
    delta_h      the entropy change that chooses the blocks to skip, and the blocks the study's advice protects.
    plan         the skip plan a calibration fixes and the evaluation reads (JSON; no model).
    selection    Delta H at the answer position on calibration questions -> the plan and its stability.
    evaluation   the parts of the experiment on one model (paired design, sweep, sets, drop sets), profiles under skip.
    prefix       scoring skips (fixed, or drawn per question) on the shared intact prefix, each distinct skip once.
    criticality  what skipping each block costs: the per-block map and the rank over blocks.
    comparisons  the study's comparisons: expansion, pruning and random blocks skipped, first minus second.
    corrections  a skip comparison's Holm correction within its claim, and its random-block null.
    readings     what the intact pass shows at every block (NumPy only): the raw material of the pruning criteria.
    recorder     recording those readings from the evaluation's intact pass (torch).
    criteria     the pruning criteria per block, and how well each predicts the measured cost.
    pruning      multi-block drop sets: each criterion's k least critical blocks, and Gromov et al.'s span.
    drop_scores  each criterion's drop set scored against random k-sets.
    exit         the exit curve: where the MMLU answer forms, through the logit lens and a fitted linear lens.

It sits above :mod:`entropy_lens.answers` (it reads answers the same three ways) and below
:mod:`entropy_lens.analysis`; the verdicts on its claims are :mod:`entropy_lens.verdicts.claims.skipping` and
:mod:`~entropy_lens.verdicts.claims.drop_sets`.
"""
