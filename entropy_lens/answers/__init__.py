"""MMLU answers and the layer-skip experiment: what the model answers, and how skipping changes it.

Modules:
    letters     reading an answer: letters from log-likelihoods or text; the three measures.
    scoring     letter log-likelihoods after each prompt, one forward pass per prompt.
    accuracy     accuracy per model, style and measure, with intervals.
    conditions   skip conditions, eligible blocks per variant, selections, random populations.
    plan         the skip plan a calibration fixes and the evaluation reads (JSON; no model).
    selection    Delta H at the answer position on calibration questions -> the plan and its stability.
    skipping     scoring one model under every skip (shared intact prefix), and profiles under skip.
    criticality  what skipping costs: the per-block map, the study's comparisons, the rank over blocks.
"""
