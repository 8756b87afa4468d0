"""The Snakemake report of a run, read at 1,400 px in headless Chromium: its sections numbered in order without a
gap, and the verdict table beside the menu, not under it."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from workflow_tiny import REPO, copy_workdir, edit_config, run_snakemake

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
WIDTH = 1400
# After the page has drawn: how far right of the menu the verdict table's first column starts (negative: under it).
MEASURE = """<script>
window.addEventListener("load", function () {
  setTimeout(function () {
    var menu = document.querySelector("nav"), first = document.querySelector("table.verdicts th");
    var out = document.createElement("pre");
    out.id = "layout";
    var gap = first ? first.getBoundingClientRect().left - menu.getBoundingClientRect().right : NaN;
    out.textContent = first ? Math.round(gap) : "none";
    document.body.appendChild(out);
  }, 2000);
});
</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_the_report_at_1400_px_numbers_its_sections_in_order_and_shows_the_claim_column(tiny_run, tmp_path):
    """A run without layer skipping (as the default): its sections are 1 to 8, none skipped, and the verdict
    table's first column (the claim) starts right of the menu."""
    workdir = copy_workdir(tiny_run, tmp_path / "wf")
    edit_config(workdir, {"layer_skip": {"enabled": False}})
    report = workdir / "report.html"
    metadata = REPO / "report" / "metadata.yaml"
    run_snakemake(workdir, "--report", str(report), "--report-metadata", str(metadata), timeout=600)
    page = report.read_text(encoding="utf-8")
    head, _, _ = page.rpartition("</body>")
    (tmp_path / "probe.html").write_text(head + MEASURE, encoding="utf-8")
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},1000"]
    argv += ["--virtual-time-budget=15000", "--dump-dom", (tmp_path / "probe.html").as_uri()]
    dom = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=True).stdout
    menu = re.sub(r"<[^>]+>", "\n", re.search(r"<nav.*</nav>", dom, re.S).group(0))  # the menu and its breadcrumb
    sections = re.findall(r"^\s*(\d+)\. ([A-Za-z][\w -]+?)\s*$", menu, flags=re.M)
    assert [int(n) for n, _ in sections] == list(range(1, len(sections) + 1)), sections
    names = [name for _, name in sections]
    assert len(names) == 8 and names[0] == "Verdicts" and "Layer skipping" not in names
    gap = re.search(r'<pre id="layout">(-?\d+|none)</pre>', dom).group(1)
    assert gap != "none" and int(gap) >= 0, f"the verdict table starts {gap} px right of the menu (under it if < 0)"
