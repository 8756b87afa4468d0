"""The report's captions: each renders (Jinja, as Snakemake fills it) to reStructuredText that docutils reads
without a warning or an error (a message would be printed by `make report` and shown in the caption)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import docutils.core
import jinja2
import pytest

CAPTIONS = sorted((Path(__file__).parent.parent / "report").glob("*.rst"))
MESSAGE = re.compile(r"\((WARNING|ERROR|SEVERE)/[234]\)")
# What a caption may read from Snakemake's namespace.
SNAKEMAKE = SimpleNamespace(
    wildcards=SimpleNamespace(dataset="blank", model="smollm2-135m"), config={"models": {"a": {}, "b": {}}}
)


def messages(text: str) -> list[str]:
    """What docutils reports at level WARNING or above while reading ``text`` (parsed and transformed, as the
    report's writer reads it: undefined substitutions are found by a transform), as `make report` prints it."""
    stream = io.StringIO()
    overrides = {"report_level": 2, "halt_level": 5, "warning_stream": stream}
    docutils.core.publish_doctree(text, settings_overrides=overrides)
    return [line for line in stream.getvalue().splitlines() if MESSAGE.search(line)]


def test_a_caption_with_a_stray_substitution_is_caught():
    assert any("Undefined substitution" in m for m in messages("Jaccard |A ∩ B| / |A ∪ B|."))
    assert messages(r"Jaccard \|A ∩ B\| / \|A ∪ B\|.") == []


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_every_caption_reads_without_a_message(caption, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the report is made in the run's folder: a raw directive reads its tables there
    (tmp_path / "results" / "tables").mkdir(parents=True)
    (tmp_path / "results" / "tables" / "verdicts.html").write_text("<table></table>\n")
    text = jinja2.Template(caption.read_text()).render(snakemake=SNAKEMAKE)
    assert messages(text) == []
