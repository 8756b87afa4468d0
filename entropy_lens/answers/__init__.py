"""MMLU answers: what a model answers to MMLU, read three ways, and how often it is right.

Modules:
    letters     reading an answer: letters from log-likelihoods or text; the three measures.
    scoring     letter log-likelihoods after each prompt, one forward pass per prompt.
    accuracy    accuracy per model, style and measure, with intervals.

How skipping blocks changes the answers is the layer-skip experiment's layer, :mod:`entropy_lens.skipping`.
"""
