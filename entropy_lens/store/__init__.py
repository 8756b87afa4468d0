"""The data contract of profile stores and the only code that reads or writes them.

Modules:
    schema   names of dims, variables, units and attrs; validate_profiles; provenance attrs.
    storage  the only module that touches Zarr: atomic writes, lazy schema-checked reads.
    combine  per-model stores -> one store per dataset (model dim, NaN-padded layers); shards -> one store; a
             combined store's model -> its per-model store beside it.
"""
