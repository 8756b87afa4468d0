"""MMLU answers and the layer-skip experiment: what the model answers, and how skipping changes it.

Modules:
    letters     reading an answer: letters from log-likelihoods or text; the three measures.
    scoring     letter log-likelihoods after each prompt, one forward pass per prompt.
    accuracy     accuracy per model, style and measure, with intervals.
    conditions   skip conditions, eligible blocks per variant, selections, random populations.
    plan         the skip plan a calibration fixes and the evaluation reads (JSON; no model).
    selection    Delta H at the answer position on calibration questions -> the plan and its stability.
    skipping     scoring one model under every skip (shared intact prefix), and profiles under skip.
    criticality  what skipping each block costs: the per-block map and the rank over blocks.
    comparisons  the study's comparisons: expansion, pruning and random blocks skipped, first minus second.
    delta_h      the entropy change that chooses the blocks to skip, and the blocks the study's advice protects.
    corrections  a skip comparison's Holm correction within its claim, and its random-block null.
    readings     what the intact pass shows at every block (NumPy only): the raw material of the pruning criteria.
    recorder     recording those readings from the sweep's intact pass (torch).
    criteria     the pruning criteria per block, and how well each predicts the measured cost.
    pruning      multi-block drop sets: each criterion's k least critical blocks, and Gromov et al.'s span.
    drop_scores  each criterion's drop set scored against random k-sets.
    exit         the exit curve: where the MMLU answer forms, through the logit lens and a fitted linear lens.
"""
