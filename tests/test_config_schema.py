"""The config schema itself: every setting says what it is (a comma in a flow mapping once split descriptions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from entropy_lens.workflow.settings import schema as shipped_schema


def properties(node: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every ``(path, spec)`` under a ``properties`` mapping, nested ones included."""
    if isinstance(node, dict):
        for name, spec in node.get("properties", {}).items():
            yield f"{path}.{name}".lstrip("."), spec
            yield from properties(spec, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                yield from properties(node[key], f"{path}[]")


def test_every_setting_has_one_description_and_no_stray_keys():
    schema = shipped_schema()
    found = list(properties(schema))
    assert len(found) > 50
    for path, spec in found:
        assert isinstance(spec, dict), path
        assert isinstance(spec.get("description"), str) and spec["description"].strip(), path
        stray = [key for key, value in spec.items() if value is None]
        assert not stray, f"{path}: keys {stray} with no value (an unquoted comma in a description?)"
