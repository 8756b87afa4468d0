"""What every workflow job does first: its log, and a user error's one line on Snakemake's terminal."""

import subprocess
import sys

import pytest

JOB = """
import sys
from types import SimpleNamespace
from entropy_lens.workflow.jobs import setup_logging
setup_logging(SimpleNamespace(log=[sys.argv[1]], rule="prepare_mmlu"))
raise {error}("questions.csv: the file is empty; write a header line\\nmore detail")
"""


@pytest.mark.parametrize(("error", "shown"), [("ValueError", True), ("FileNotFoundError", True), ("KeyError", False)])
def test_a_user_error_is_one_line_on_the_terminal_and_its_traceback_in_the_log(tmp_path, error, shown):
    log = tmp_path / "job.log"
    done = subprocess.run(
        [sys.executable, "-c", JOB.format(error=error), str(log)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    line = "entropy-lens: rule prepare_mmlu: questions.csv: the file is empty; write a header line\n"
    assert done.stderr == (line if shown else "")
    assert "Traceback" in log.read_text() and f"{error}: " in log.read_text()
