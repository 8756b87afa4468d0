"""Figures from analysis results, each written as PNG plus an SVG beside it.

Every ``plot_*`` function takes data (the frames and arrays of :mod:`entropy_lens.analysis`
and :mod:`entropy_lens.answers`) and the PNG path, writes ``path`` and
``path.with_suffix(".svg")``, and returns nothing (an ``.svg`` path writes the SVG alone).
Callers import each figure from its module:

    style      what every figure shares: the canvas, palette, facets, column checks and saving.
    profiles   mean profiles over depth (bands per label, one line per model) and the token heatmap.
    families   family fingerprints: the dendrogram and the PCA and t-SNE embeddings.
    knn        kNN AUC per target and entropy measure.
    expansion  Delta H against the nucleus-size change; adjacent-layer overlap over depth.
    accuracy   MMLU: the letters answered and accuracy.
    skipping   the layer-skip experiment: the criticality map and profiles under skipping.
"""
