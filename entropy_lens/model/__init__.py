"""Model access: which models exist, how they load, how they run, and temporary surgery on them.

Modules:
    registry    the embedded models and what a configured model source names (no torch).
    lens_model  LensModel: a frozen model and the lens parts found from what its architecture exposes.
    loading     loading (registry, hub, folder, GGUF), device and dtype, materializing registry models.
    generation  batched, KV-cached generation handing each step's residuals to a callback.
    hooks       forward hooks undone on exit: recording residuals, skipping blocks.
    devices     one GPU per job, claimed with a lock file.
    twin        a model's random-init twin: its config and tokenizer, every weight drawn from a fixed seed.
"""
