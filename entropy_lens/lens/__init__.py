"""The logit lens: what is read from a running model, and the profile dataset it makes.

Modules:
    metrics     pure functions and streamed tile sums from logits to entropies, nucleus sets, overlaps.
    logit_lens  LensSettings, per-layer decoding in memory-budgeted tiles, extract_profiles.
    extract     profiling a prompt table (or one shard of it), labelled with its columns.
"""
