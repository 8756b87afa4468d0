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


def test_a_job_without_a_model_does_not_import_torch(tmp_path):
    """Every job calls setup_logging; gathering shards or drawing a figure must not pay torch's import."""
    code = (
        "import sys\nfrom types import SimpleNamespace\nfrom entropy_lens.workflow.jobs import setup_logging\n"
        "setup_logging(SimpleNamespace(log=[sys.argv[1]], rule='gather_shards'))\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "job.log")], capture_output=True, text=True)
    assert done.returncode == 0, (tmp_path / "job.log").read_text()
    assert done.stdout.split() == ["False", "False"]
