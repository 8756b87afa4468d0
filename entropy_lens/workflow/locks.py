"""Snakemake's working-directory lock, and a safe way back after a hard kill.

A run locks its working directory (``.snakemake/locks``) and removes the lock when it
ends, also on Ctrl-C.  A hard kill (SIGKILL, the OOM killer, a dropped session) leaves the
lock behind, and the next run stops at "Directory cannot be locked".  The lock is stale
only when no Snakemake process, nor a job it started, still runs in that directory:
:func:`release_stale_lock` removes it then, and refuses, naming the processes, otherwise.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

LOCK_DIR = Path(".snakemake") / "locks"
# A process belongs to a run when its command line names Snakemake (the scheduler, or a job
# script Snakemake wrote under .snakemake/scripts).
MARKERS = ("snakemake",)


def lock_files(directory: str | os.PathLike = ".") -> list[Path]:
    """The lock files of the working directory ``directory``."""
    folder = Path(directory) / LOCK_DIR
    return sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []


def live_runs(directory: str | os.PathLike = ".") -> list[psutil.Process]:
    """Processes of a Snakemake run working in ``directory``.

    This process and its ancestors are left out: ``make run`` calls the unlock step from a
    shell whose command line also names the Snakemake run it is about to start.
    """
    target = Path(directory).resolve()
    me = psutil.Process()
    own = {me.pid, *(p.pid for p in me.parents())}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid in own:
            continue
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if any(m in cmdline for m in MARKERS) and _works_in(proc, cmdline, target):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _works_in(proc: psutil.Process, cmdline: str, target: Path) -> bool:
    """Whether ``proc`` runs in ``target``: its current directory, or ``--directory target``."""
    if Path(proc.cwd()).resolve() == target:
        return True
    args = cmdline.split()
    for flag in ("--directory", "-d"):
        if flag in args[:-1] and Path(args[args.index(flag) + 1]).resolve() == target:
            return True
    return False


def release_stale_lock(directory: str | os.PathLike = ".") -> list[Path]:
    """Remove the directory's Snakemake lock if no run holds it.

    Returns:
        The lock files removed (empty when there was no lock).

    Raises:
        FileNotFoundError: when ``directory`` holds no workflow (no Snakefile, no ``.snakemake`` folder).
        RuntimeError: naming the live processes when a run still works in ``directory``.
    """
    folder = Path(directory)
    if not (folder / "Snakefile").is_file() and not (folder / LOCK_DIR.parent).is_dir():
        raise FileNotFoundError(
            f"no workflow at {str(directory)!r}: it holds no Snakefile and no .snakemake folder; give --directory "
            "the working directory a run used"
        )
    files = lock_files(directory)
    if not files:
        return []
    live = live_runs(directory)
    if live:
        names = ", ".join(f"pid {p.pid} ({' '.join(p.info['cmdline'] or [])[:80]})" for p in live)
        raise RuntimeError(f"a Snakemake run still works in {str(directory)!r}: {names}; wait for it or stop it first")
    for path in files:
        path.unlink()
    logger.warning("removed the stale lock of %s left by a killed run (%d files)", directory, len(files))
    return files
