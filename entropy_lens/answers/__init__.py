"""MMLU answers and the layer-skip experiment: what the model answers, and how skipping changes it.

Modules:
    letters     reading an answer: letters from log-likelihoods or text; the three measures.
    scoring     letter log-likelihoods after each prompt, one forward pass per prompt.
    accuracy    accuracy per model, style and measure, and per skip condition, with intervals.
    conditions  which layers to skip, chosen from a mean entropy-change profile.
    skipping    the experiment: answers and profiles of one model under every skip condition.
"""
