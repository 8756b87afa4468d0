"""Prompt sets: the prompt-table contract and the builders of the study's datasets.

Modules:
    datasets  the table contract (columns per kind, validation, parquet I/O) and the formats / blank builders.
    tasks     TinyStories tasks x phrasings x templates, intact and word-scrambled.
    stories   story sources: the TinyStories hub split, the user's file, or an embedded model writing stories.
    mmlu      MMLU question sources and the three prompt styles.
    sources   reading a user's jsonl / parquet / csv file.
    counts    how many prompts a dataset's config section builds, before its table exists.
    hub       hub dataset splits: whether the datasets cache holds one; read offline when it does.

Nothing here loads a model except :func:`entropy_lens.prompts.stories.generate_stories`.
"""
