"""Family fingerprints: blank-prompt profiles compared across models at normalized depth.

``profiles`` (mean profiles per model and sample) -> ``clustering`` (family or size?), ``shapes``
(rise, refine, drift), ``scales`` and ``gaps`` -> ``pairs`` (same-family pairs: size as resolution,
family not size) -> ``fingerprints`` (all of it on one store).  Import each module by its full path;
this file re-exports nothing.
"""
