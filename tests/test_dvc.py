"""DVC versioning of the workflow's artifacts: push, pull in a fresh clone, and Snakemake agrees.

The tiny config of the real workflow runs once (module fixture) in a git + DVC repository laid out
like this one: its `.dvc/config` (default remote `../entropy-lens-dvc-remote`, a folder beside the
checkout), its `dvc.yaml` (plots only) and the `.gitignore` patterns that let git commit
`results/*.dvc`. `scripts/dvc_sync.sh push` sends the artifacts to that folder. Each test clones the
repository beside the original (so the clone finds the same default remote) and pulls, from the
folder or from an S3 remote served by moto's standalone server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from workflow_tiny import (
    ARTIFACTS,
    CHANGE,
    CHANGE_RERUNS,
    MISSING_OBJECT,
    REPO,
    TARGETS,
    VENV_BIN,
    edit_config,
    file_contents,
    jobs_in,
    nothing_to_do,
    prepare_workdir,
    run,
    run_snakemake,
    snakemake_args,
    snakemake_cmd,
    start,
    tool_env,
)

from entropy_lens.store.manifest import MANIFEST, write_manifest

pytestmark = pytest.mark.slow

logger = logging.getLogger(__name__)

DVC = str(VENV_BIN / "dvc")
MOTO_SERVER = VENV_BIN / "moto_server"
# Moves artifacts through DVC (dvc add + push; pull + snakemake --touch); run in the working directory.
SYNC = ("bash", str(REPO / "scripts" / "dvc_sync.sh"))  # bash: works without the executable bit
# The default remote of the repository's .dvc/config, a folder next to the checkout.
DEFAULT_REMOTE = "local-folder"
DEFAULT_REMOTE_DIR = "entropy-lens-dvc-remote"
S3_REMOTE = "s3"
S3_BUCKET = "team-artifacts"
# moto accepts any credentials; the AWS SDK only needs some to sign requests.
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
# Without this botocore retries a refused connection for about 10 s before DVC reports it.
NO_RETRY_ENV = {"AWS_MAX_ATTEMPTS": "1"}
STEP_TIMEOUT = 480  # beside another test worker on 2 cores
SERVER_START_SECONDS = 30
# What a checkout of this repository must ignore: each artifact folder by name, never a wildcard such
# as `/results/*`. DVC prunes every folder for which git reports a pattern match (scmrepo reports one
# for `results/` itself under `/results/*`, even with `!/results/*.dvc`), and then finds none of the
# .dvc files inside: `dvc pull` says "Everything is up to date" and fetches nothing.
GITIGNORE = "".join(f"/{artifact}/\n" for artifact in ARTIFACTS) + ".snakemake/\nlogs/\n/dvc_plots/\n"


@dataclass(frozen=True)
class PushedRepo:
    """A repository whose workflow ran and whose artifacts are on its default DVC remote."""

    path: Path
    remote: Path
    contents: dict[str, bytes]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _timed(label: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    began = time.perf_counter()
    result = run(cmd, cwd=cwd, env=env, timeout=STEP_TIMEOUT)
    logger.warning("%s took %.1f s", label, time.perf_counter() - began)
    return result


def _remote_object(remote_root: Path, digest: str) -> Path:
    """Where DVC 3 keeps the object with MD5 `digest` on a local remote."""
    return remote_root / "files" / "md5" / digest[:2] / digest[2:]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _clone(pushed: PushedRepo, name: str, env: dict[str, str]) -> Path:
    """A git clone beside the original, so that `../entropy-lens-dvc-remote` is the same folder."""
    dest = pushed.path.parent / name
    run(["git", "clone", "--quiet", str(pushed.path), str(dest)], cwd=pushed.path.parent, env=env, timeout=60)
    return dest


def _pull(clone: Path, env: dict[str, str], *dvc_args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [*SYNC, "pull", *dvc_args, "--", *snakemake_args(clone, *TARGETS)]
    return run(cmd, cwd=clone, env=env, timeout=STEP_TIMEOUT, check=check)


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return tool_env()


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> PushedRepo:
    """Run the workflow in a new git + DVC repository, push its artifacts and commit the .dvc files."""
    root = tmp_path_factory.mktemp("dvc")
    repo = prepare_workdir(root / "origin")
    (repo / ".gitignore").write_text(GITIGNORE)
    run(["git", "init", "--quiet"], cwd=repo, env=env, timeout=60)
    run([DVC, "init", "--quiet"], cwd=repo, env=env, timeout=60)
    shutil.copy2(REPO / ".dvc" / "config", repo / ".dvc" / "config")
    shutil.copy2(REPO / "dvc.yaml", repo / "dvc.yaml")
    _timed("workflow (tiny config, DVC targets)", snakemake_cmd(repo, *TARGETS, "--cores", "2"), repo, env)
    push = _timed("dvc add + push (local remote)", [*SYNC, "push"], repo, env)
    assert f"tracking {' '.join(ARTIFACTS)}" in push.stdout
    assert nothing_to_do(repo, *TARGETS, env=env), "dvc add must leave the workspace files as Snakemake wrote them"
    run(["git", "add", "--all"], cwd=repo, env=env, timeout=60)
    run(["git", "commit", "--quiet", "-m", "workflow results"], cwd=repo, env=env, timeout=60)
    tracked = run(["git", "ls-files", "*.dvc"], cwd=repo, env=env, timeout=60).stdout.split()
    assert sorted(tracked) == sorted(f"{a}.dvc" for a in ARTIFACTS)
    return PushedRepo(path=repo, remote=root / DEFAULT_REMOTE_DIR, contents=file_contents(repo, ARTIFACTS))


@pytest.fixture
def moto_endpoint(tmp_path: Path) -> Iterator[str]:
    """moto's standalone S3 server on a free loopback port, with one empty bucket."""
    if not MOTO_SERVER.exists():
        pytest.skip(f"moto_server not found next to {VENV_BIN / 'python'}; pip install 'moto[server]'")
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = (tmp_path / "moto.log").open("w")
    server = start([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)], cwd=tmp_path, stdout=log)
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
            region_name=S3_ENV["AWS_DEFAULT_REGION"],
        )
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            try:
                client.create_bucket(Bucket=S3_BUCKET)
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def test_repository_gitignore_lets_dvc_track_artifacts(tmp_path: Path, env: dict[str, str]) -> None:
    """With this repository's .gitignore, `dvc add` tracks every artifact folder and git sees only .dvc files."""
    shutil.copy2(REPO / ".gitignore", tmp_path / ".gitignore")
    run(["git", "init", "--quiet"], cwd=tmp_path, env=env, timeout=60)
    run([DVC, "init", "--quiet"], cwd=tmp_path, env=env, timeout=60)
    for artifact in ARTIFACTS:
        (tmp_path / artifact).mkdir(parents=True)
        (tmp_path / artifact / "file").write_text(artifact)
    added = run([DVC, "add", *ARTIFACTS], cwd=tmp_path, env=env, timeout=60, check=False)
    assert added.returncode == 0, f".gitignore must name each artifact folder, as GITIGNORE does:\n{added.stdout}"
    listed = run([DVC, "list", "--dvc-only", "--recursive", "."], cwd=tmp_path, env=env, timeout=60).stdout.split()
    assert sorted(listed) == sorted(f"{a}/file" for a in ARTIFACTS), "DVC must find every .dvc file"
    status = run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path, env=env, timeout=60)
    untracked = {line[3:] for line in status.stdout.splitlines() if line.startswith("?? ")}
    assert untracked == {".gitignore", *(f"{a}.dvc" for a in ARTIFACTS)}


def test_push_prints_the_exact_git_add_of_what_it_wrote(tmp_path: Path, env: dict[str, str]) -> None:
    """`make push` ends with the `git add` its files need: typed as printed, it leaves git clean. A results folder
    .gitignore does not name (a new rule's) makes `dvc add` write results/.gitignore, which the line includes."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy2(REPO / ".gitignore", repo / ".gitignore")
    run(["git", "init", "--quiet"], cwd=repo, env=env, timeout=60)
    run([DVC, "init", "--quiet"], cwd=repo, env=env, timeout=60)
    run([DVC, "remote", "add", "-d", "here", str(tmp_path / "remote")], cwd=repo, env=env, timeout=60)
    run(["git", "add", "--all"], cwd=repo, env=env, timeout=60)
    run(["git", "commit", "--quiet", "-m", "init"], cwd=repo, env=env, timeout=60)
    for artifact in ("results/tables", "results/new_rule_output"):
        (repo / artifact).mkdir(parents=True)
        (repo / artifact / "file.csv").write_text(f"{artifact}\n")
    push = run([*SYNC, "push"], cwd=repo, env=env, timeout=STEP_TIMEOUT)
    printed = push.stdout.strip().splitlines()[-1].split("now commit what dvc add wrote: ", 1)[1]
    assert printed.startswith("git add ") and "results/.gitignore" in printed and "results/tables.dvc" in printed
    run(["bash", "-c", printed], cwd=repo, env=env, timeout=60)
    status = run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, env=env, timeout=60)
    assert status.stdout == ""
    again = run([*SYNC, "push"], cwd=repo, env=env, timeout=STEP_TIMEOUT)
    assert "nothing new to commit" in again.stdout


def test_local_round_trip_leaves_nothing_to_do(pushed: PushedRepo, env: dict[str, str]) -> None:
    assert (pushed.remote / "files" / "md5").is_dir(), "the default remote is the folder beside the checkout"
    clone = _clone(pushed, "clone_round_trip", env)
    assert file_contents(clone, ARTIFACTS) == {}, "artifacts must come from DVC, not git"
    _timed(
        "dvc pull + snakemake --touch (local remote)",
        [*SYNC, "pull", "--", *snakemake_args(clone, *TARGETS)],
        clone,
        env,
    )
    assert file_contents(clone, ARTIFACTS) == pushed.contents
    assert nothing_to_do(clone, *TARGETS, env=env)
    status = run([DVC, "status"], cwd=clone, env=env, timeout=60)
    assert "up to date" in status.stdout
    # dvc.yaml's plots point at the pulled figures.
    plots = json.loads(run([DVC, "plots", "show", "--json"], cwd=clone, env=env, timeout=60).stdout)
    assert not plots.get("errors")
    figures = {p for p in pushed.contents if p.startswith("results/figures/")}
    assert figures and figures <= set(plots["data"])
    # entropy-lens verify reads what was pulled against DVC's own manifests: whole, then one table truncated.
    # The run made TARGETS, not rule all: the manifest lists what it pushed (a full run writes its own).
    write_manifest(clone / "results" / MANIFEST, [p for p in pushed.contents if p.startswith("results/")])
    verify = [str(VENV_BIN / "entropy-lens"), "verify", "results"]
    whole = run(verify, cwd=clone, env=env, timeout=STEP_TIMEOUT)
    hashed = int(re.search(r"(\d+) files against DVC hashes", whole.stdout).group(1))
    assert whole.stdout.rstrip().endswith("all whole")
    assert hashed >= len([p for p in pushed.contents if p.startswith("results/")])  # every pulled file
    table = clone / MISSING_OBJECT
    table.write_bytes(table.read_bytes()[:-2])
    damaged = run(verify, cwd=clone, env=env, timeout=STEP_TIMEOUT, check=False)
    assert damaged.returncode == 1 and f"DAMAGED results/tables/{table.name}: MD5 " in damaged.stdout


def test_pull_without_touch_would_rerun(pushed: PushedRepo, env: dict[str, str]) -> None:
    """Why the touch step exists: mtimes after a plain `dvc pull` do not follow the DAG."""
    clone = _clone(pushed, "clone_no_touch", env)
    run([DVC, "pull", "--quiet"], cwd=clone, env=env, timeout=STEP_TIMEOUT)
    # Make the restore order adversarial and deterministic: the first artifact (the models) becomes the newest.
    first = clone / ARTIFACTS[0]
    now = time.time() + 5
    for path in [first, *first.rglob("*")]:
        os.utime(path, (now, now))
    assert not nothing_to_do(clone, *TARGETS, env=env)
    run_snakemake(clone, *TARGETS, "--touch", "--forceall", "--cores", "1", env=env, timeout=120)
    assert nothing_to_do(clone, *TARGETS, env=env)


def test_config_change_reruns_only_affected_rules(pushed: PushedRepo, env: dict[str, str]) -> None:
    clone = _clone(pushed, "clone_change", env)
    _pull(clone, env)
    edit_config(clone, CHANGE)
    dry = run_snakemake(clone, *TARGETS, "-n", env=env, timeout=120)
    assert jobs_in(dry.stdout) == CHANGE_RERUNS
    before = {p: (clone / p).stat().st_mtime_ns for p in file_contents(clone, ARTIFACTS)}
    real = run_snakemake(clone, *TARGETS, "--cores", "2", env=env, timeout=STEP_TIMEOUT)
    assert jobs_in(real.stdout) == CHANGE_RERUNS
    after = file_contents(clone, ARTIFACTS)
    changed = {p for p in before if (clone / p).stat().st_mtime_ns != before[p]}
    assert changed, "the affected rules must rewrite their outputs"
    assert all(pushed.contents[p] == after[p] for p in before if p not in changed)
    assert nothing_to_do(clone, *TARGETS, env=env)


def test_missing_object_is_named_and_fixed_pull_completes(
    pushed: PushedRepo, tmp_path: Path, env: dict[str, str]
) -> None:
    remote = tmp_path / "damaged_remote"
    shutil.copytree(pushed.remote, remote)
    lost = _remote_object(remote, _md5(pushed.path / MISSING_OBJECT))
    saved = tmp_path / "saved_object"
    shutil.move(lost, saved)
    clone = _clone(pushed, "clone_missing", env)
    run([DVC, "remote", "modify", "--local", DEFAULT_REMOTE, "url", str(remote)], cwd=clone, env=env, timeout=60)

    failed = _pull(clone, env, check=False)
    assert failed.returncode != 0
    assert MISSING_OBJECT in failed.stdout
    lost_artifact = next(a for a in ARTIFACTS if MISSING_OBJECT.startswith(a + "/"))
    arrived = {p: c for p, c in pushed.contents.items() if not p.startswith(lost_artifact + "/")}
    assert file_contents(clone, ARTIFACTS) == arrived, "the other artifacts must be checked out"

    shutil.move(saved, lost)
    _pull(clone, env)
    assert file_contents(clone, ARTIFACTS) == pushed.contents
    assert nothing_to_do(clone, *TARGETS, env=env)


def test_s3_round_trip(pushed: PushedRepo, moto_endpoint: str, env: dict[str, str]) -> None:
    s3_env = {**env, **S3_ENV}
    url = f"s3://{S3_BUCKET}/entropy-lens"

    def add_s3_remote(repo: Path) -> None:
        # --local: the endpoint is this test's; a team commits its remote without --local.
        run([DVC, "remote", "add", "--local", S3_REMOTE, url], cwd=repo, env=s3_env, timeout=60)
        run(
            [DVC, "remote", "modify", "--local", S3_REMOTE, "endpointurl", moto_endpoint],
            cwd=repo,
            env=s3_env,
            timeout=60,
        )

    add_s3_remote(pushed.path)
    try:
        _timed("dvc push (S3 on moto)", [DVC, "push", "-r", S3_REMOTE], pushed.path, s3_env)
    finally:
        run([DVC, "remote", "remove", "--local", S3_REMOTE], cwd=pushed.path, env=s3_env, timeout=60)
    clone = _clone(pushed, "clone_s3", s3_env)
    add_s3_remote(clone)
    began = time.perf_counter()
    _pull(clone, s3_env, "-r", S3_REMOTE)
    logger.warning("dvc pull + snakemake --touch (S3 on moto) took %.1f s", time.perf_counter() - began)
    assert file_contents(clone, ARTIFACTS) == pushed.contents
    assert nothing_to_do(clone, *TARGETS, env=s3_env)


def test_unreachable_remote_is_named(pushed: PushedRepo, env: dict[str, str]) -> None:
    s3_env = {**env, **S3_ENV, **NO_RETRY_ENV}
    endpoint = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    clone = _clone(pushed, "clone_unreachable", s3_env)
    run([DVC, "remote", "add", "--local", S3_REMOTE, f"s3://{S3_BUCKET}/x"], cwd=clone, env=s3_env, timeout=60)
    run([DVC, "remote", "modify", "--local", S3_REMOTE, "endpointurl", endpoint], cwd=clone, env=s3_env, timeout=60)
    failed = _pull(clone, s3_env, "-r", S3_REMOTE, check=False)
    assert failed.returncode != 0
    assert "Could not connect to the endpoint URL" in failed.stdout
    assert endpoint in failed.stdout
    assert MISSING_OBJECT in failed.stdout
