"""The logit lens: what is read from a running model, and the profile dataset it makes.

Modules:
    entropy     Shannon and Renyi entropies of rows of logits.
    nucleus     top-p sets: the exact search over full rows, bitsets, adjacent-row overlaps.
    stream      the same metrics from logits that arrive one vocabulary tile at a time.
    metrics     every metric of full rows at once (entropy and nucleus from one log-softmax).
    decoding    LensSettings, per-layer decoding in memory-budgeted tiles, log-probabilities of given tokens.
    translators lenses fitted to the model as artifacts: per-block affine maps, saved and loaded.
    fitting     fitting a lens: the corpus's residuals, linear least squares (also at nested prefixes), tuned by KL.
    held_out    what a lens reads on held-out prompts: KL to the model's final distribution and its entropy.
    encoding    prompt texts as token ids (chat template, the empty prompt, the context window).
    profiles    output buffers, the one provenance builder and the profile dataset (text and images).
    text        extract_profiles: generate from each prompt and record every new token's profile.
    choices     answer choices read off the model's own next-token distribution.
    vision      the entropy profile over classes of every image.
    extract     profiling a prompt table (or one shard of it), labelled with its columns.
"""
