"""The package's version, which every store's provenance records (kept in ``core`` so that ``store`` can read it)."""

__version__ = "0.1.0"
