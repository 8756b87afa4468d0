"""A new user's first steps: every command the README and the guides show works as typed in a fresh shell (a
``make`` target, or a tool by its path in ``.venv/bin``: a fresh shell has no venv on its PATH), ``.gitignore``
keeps every results folder out of git, and the Snakemake workflow catalog finds what it looks for."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import yaml
from workflow_tiny import REPO

from entropy_lens import cli

DOCS = ("README.md", "docs/guide.md", "docs/cluster_and_dvc.md", "config/README.md")
VENV = ".venv/bin/"
# Commands of the system a user types as they are (the cluster's own tools, git, the shell's builtins).
SYSTEM = frozenset(
    {"git", "cd", "export", "source", "sudo", "sinfo", "squeue", "scontrol", "ls", "du", "mkdir", "cp", "tmux"}
)
# Tools that live in .venv/bin only: typed bare in a fresh shell, each gives "command not found".
VENV_TOOLS = frozenset({"entropy-lens", "snakemake", "dvc", "pytest", "python", "pip", "hf", "ruff", "snakefmt"})
# A fresh login shell: no venv on the PATH.
FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def bash_commands(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, command) of every command in the ```bash blocks of a Markdown file: comments dropped,
    continued lines joined, ``a && b`` split."""
    block, pending, start = False, "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            block = line.strip() == "```bash" and not block
            continue
        if not block:
            continue
        text = pending + _uncommented(line).strip()
        start = start or number
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        for part in filter(None, (p.strip() for p in text.split("&&"))):
            yield start, part
        pending, start = "", 0


def _uncommented(line: str) -> str:
    """``line`` without a ``#`` comment outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if char in "\"'" and (not quote or quote == char):
            quote = "" if quote else char
        elif char == "#" and not quote and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _words(command: str) -> list[str]:
    words = shlex.split(command)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value before the command
        words = words[1:]
    return words


def _shown() -> list[tuple[str, int, list[str]]]:
    return [(doc, n, _words(cmd)) for doc in DOCS for n, cmd in bash_commands(REPO / doc) if _words(cmd)]


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.MULTILINE))


def fresh_shell(command: str) -> subprocess.CompletedProcess[str]:
    """``command`` in bash with a login shell's PATH and nothing of this process's environment, in the repo."""
    env = {"PATH": FRESH_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    return subprocess.run(
        ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_command_shown_starts_with_something_a_fresh_shell_finds():
    shown = _shown()
    assert len(shown) > 40, "the docs' bash blocks were not found"
    wrong = []
    for doc, number, words in shown:
        program = words[0]
        if program == "sudo":
            program = words[1]
        if program in VENV_TOOLS:
            wrong.append(f"{doc}:{number}: {program} (not on a fresh shell's PATH: {VENV}{program})")
        elif program.startswith((VENV, "scripts/")) and not (REPO / program).is_file():
            wrong.append(f"{doc}:{number}: {program} does not exist")
        elif not (program in SYSTEM or program == "make" or program.startswith((VENV, "scripts/"))):
            wrong.append(f"{doc}:{number}: {program} is no make target, {VENV} tool or script")
    assert not wrong, "\n".join(wrong)


def test_every_make_command_shown_is_a_target():
    targets = make_targets()
    unknown = [
        f"{doc}:{number}: make {word}"
        for doc, number, words in _shown()
        if words[0] == "make"
        for word in words[1:]
        if "=" not in word and word not in targets
    ]
    assert not unknown, "\n".join(unknown)


def test_every_entropy_lens_command_shown_parses():
    """Each ``.venv/bin/entropy-lens ...`` line's arguments, read by the CLI's own parser (nothing runs)."""
    parser = cli._parser()
    bad = []
    for doc, number, words in _shown():
        if words[0] == f"{VENV}entropy-lens":
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                bad.append(f"{doc}:{number}: {shlex.join(words)}")
    assert not bad, "\n".join(bad)


def test_every_snakemake_command_shown_parses():
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    bad = []
    for doc, number, words in _shown():
        if words[0] == f"{VENV}snakemake":
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                bad.append(f"{doc}:{number}: {shlex.join(words)}")
    assert not bad, "\n".join(bad)


def test_the_tools_shown_run_from_a_fresh_shell():
    """Every ``.venv/bin`` tool the docs show starts from a shell whose PATH has no venv (``--help``), and every
    ``make`` target they show resolves there (``make -n``)."""
    tools = sorted({words[0] for _, _, words in _shown() if words[0].startswith(VENV)})
    assert f"{VENV}entropy-lens" in tools and f"{VENV}snakemake" in tools
    for tool in tools:
        done = fresh_shell(f"{tool} --help")
        assert done.returncode == 0, f"{tool} --help in a fresh shell: {done.stderr[-2000:]}"
    targets = sorted({w for _, _, words in _shown() if words[0] == "make" for w in words[1:] if "=" not in w})
    done = fresh_shell(f"make -n {' '.join(targets)}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert fresh_shell("entropy-lens --help").returncode == 127  # the failure the docs no longer invite


def test_gitignore_keeps_every_results_folder_the_rules_write_out_of_git(tmp_path):
    """Every folder under results/ that a rule writes, and what a run leaves beside them, is ignored: after a run,
    `git status` shows nothing of it and `git add -A` commits none of it."""
    rules = "".join(p.read_text(encoding="utf-8") for p in (REPO / "rules").glob("*.smk"))
    folders = sorted(set(re.findall(r"\"(results/[a-z_]+)/", rules)))
    assert "results/lens_profiles" in folders and "results/profiles" in folders
    (tmp_path / ".gitignore").write_text((REPO / ".gitignore").read_text())
    written = [f"{folder}/x/file" for folder in folders] + ["logs/x.log", "report.html", "view.html"]
    for path in written:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    subprocess.run(["git", "init", "--quiet"], cwd=tmp_path, check=True)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, capture_output=True, text=True
    )
    assert status.stdout.split() == ["??", ".gitignore"]


def test_the_workflow_catalog_finds_its_metadata_and_the_config_readme():
    """The Snakemake workflow catalog reads .snakemake-workflow-catalog.yml (usage: which configs, which
    profiles) and config/README.md; the config files it names exist."""
    catalog = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())
    usage = catalog["usage"]
    assert {"mandatory-flags", "report", "software-stack-deployment"} <= set(usage)
    assert usage["report"] is True and "desc" in usage["mandatory-flags"]
    readme = (REPO / "config" / "README.md").read_text()
    for config in ("config.yaml", "config/study.yaml", "config/paper.yaml", "config/rehearsal.yaml"):
        assert (REPO / config).is_file() and f"`{config}`" in readme, config
