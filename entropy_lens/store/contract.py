"""The store contract in words: ``docs/store_contract.md``, written from :mod:`entropy_lens.store.schema`.

The document is generated, never edited: ``python scripts/store_contract.py`` rewrites it, and a test
fails when it differs from what the schema says.
"""

from __future__ import annotations

import inspect

from entropy_lens.store import schema

TITLE = "# Store contract"
GENERATED = (
    "Generated from `entropy_lens/store/schema.py` by `python scripts/store_contract.py`; do not edit. "
    f"Schema version {schema.SCHEMA_VERSION}."
)
SECTIONS = (
    ("Variables (every store)", schema.VARIABLES),
    ("Optional variables (per-model stores, where the job reads them)", schema.OPTIONAL_VARIABLES),
    (
        "Cross-prompt variables (text extraction, with the `partner` coordinate; combined stores fill them)",
        schema.CROSS_VARIABLES,
    ),
    (
        "Routing variables (mixture-of-experts models; combined stores fill them for dense ones)",
        schema.ROUTING_VARIABLES,
    ),
    ("Scores (combined MMLU stores)", schema.SCORE_VARIABLES),
)


def _table(variables: dict[str, schema.VariableSpec]) -> list[str]:
    lines = ["| variable | dims | dtype | unit | meaning |", "|---|---|---|---|---|"]
    for name, spec in variables.items():
        lines.append(f"| `{name}` | {', '.join(spec.dims)} | {spec.dtype} | {spec.units} | {spec.description} |")
    return lines


def contract_markdown() -> str:
    """The store contract as Markdown: the schema's own description, then every variable and attribute."""
    lines = [TITLE, "", GENERATED, "", "```text", inspect.cleandoc(schema.__doc__ or ""), "```"]
    for title, variables in SECTIONS:
        lines += ["", f"## {title}", "", *_table(variables)]
    lines += ["", "In combined stores every variable gains a leading `model` dim.", ""]
    lines += ["## Attributes", "", "Per-model stores carry:", ""]
    lines += [", ".join(f"`{a}`" for a in schema.REQUIRED_ATTRS), "", "Combined stores carry:", ""]
    lines += [", ".join(f"`{a}`" for a in schema.COMBINED_ATTRS), ""]
    lines += [f"Masked integer slots hold {schema.MASKED_INT}; masked float slots hold NaN.", ""]
    return "\n".join(lines)
