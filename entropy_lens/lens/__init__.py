"""The logit lens: what is read from a running model, and the profile dataset it makes.

Modules:
    entropy     Shannon and Renyi entropies of rows of logits.
    nucleus     top-p sets: the exact search over full rows, bitsets, adjacent-row overlaps.
    stream      the same metrics from logits that arrive one vocabulary tile at a time.
    metrics     every metric of full rows at once (entropy and nucleus from one log-softmax).
    logit_lens  LensSettings, per-layer decoding in memory-budgeted tiles, extract_profiles.
    extract     profiling a prompt table (or one shard of it), labelled with its columns.
"""
