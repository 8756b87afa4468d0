"""The ``images`` prompt set: labelled images from a local folder, a file of paths, or the hub.

Sources (the config's ``datasets.images.source``):

* ``folder``: ``path/<class>/<file>``, one subfolder per class (the ImageFolder layout);
* ``list``: a csv / jsonl / parquet file with columns ``path`` (relative to the file's
  folder, or absolute) and ``label``, and optionally ``source``;
* ``hub``: a labelled image split of the Hugging Face hub (default ``frgfm/imagenette``,
  ``320px`` validation: 3,925 photos of 10 ImageNet classes), for paper scale.

Every image is kept as its encoded bytes in the table (``image``), so the table alone
feeds extraction.  ``source`` names what an image was made from: images sharing a source
(crops of one photo, say) stay on one side of every grouped kNN fold; by default each
image is its own source.  ``n_images`` > 0 keeps that many, balanced over labels by a
seeded draw.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens.prompts.datasets import IMAGE, LABEL, PROMPT_ID, PROMPT_TEXT, SOURCE, slug
from entropy_lens.prompts.hub import load_hub_split
from entropy_lens.prompts.sources import check_hub_columns, read_local

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
SOURCES = ("folder", "list", "hub")
HUB_ID = "frgfm/imagenette"
HUB_CONFIG = "320px"
HUB_SPLIT = "validation"
# Images of the default hub split, so that jobs are planned before it is downloaded.
HUB_SIZES = {(HUB_ID, HUB_CONFIG, HUB_SPLIT): 3925}


def folder_records(root: str | os.PathLike) -> pd.DataFrame:
    """``reference, label, path`` of every image under ``root/<class>/``, sorted.

    Raises:
        ValueError: naming the folder when it holds no class subfolder with images.
    """
    base = Path(root)
    if not base.is_dir():
        raise ValueError(f"image folder {str(base)!r} does not exist")
    files = sorted(p for p in base.glob("*/*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise ValueError(f"image folder {str(base)!r} has no <class>/<image> files ({', '.join(IMAGE_SUFFIXES)})")
    return pd.DataFrame(
        {
            PROMPT_TEXT: [p.relative_to(base).as_posix() for p in files],
            LABEL: [p.parent.name for p in files],
            "path": [str(p) for p in files],
        }
    )


def list_records(path: str | os.PathLike) -> pd.DataFrame:
    """``reference, label, path[, source]`` from a file of image paths and labels (paths relative to it)."""
    listing = Path(path)
    columns = {"path": "path", LABEL: "label"}
    try:
        raw = read_local(listing, {**columns, SOURCE: "source"})
    except ValueError as err:
        if "no column 'source'" not in str(err):
            raise
        raw = read_local(listing, columns)
    files = [Path(p) if Path(p).is_absolute() else listing.parent / p for p in raw["path"].astype(str)]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ValueError(f"{listing}: {len(missing)} listed images do not exist, e.g. {missing[0]!r}")
    return raw.assign(**{PROMPT_TEXT: raw["path"].astype(str), LABEL: raw[LABEL].astype(str), "path": files})


def build_images(records: pd.DataFrame, *, n_images: int = 0, seed: int = 0) -> pd.DataFrame:
    """The ``images`` table from records with ``prompt_text``, ``label`` and ``path`` or ``image`` bytes.

    Args:
        records: One row per image; ``source`` defaults to the image's own reference.
        n_images: Images kept, balanced over labels (0: all).
        seed: Seed of that draw.

    Raises:
        ValueError: for fewer images than asked, or two images whose ids collide.
    """
    if not isinstance(n_images, int) or not 0 <= n_images <= len(records):
        raise ValueError(f"n_images must be an integer in 0..{len(records)} (0 = all images), got {n_images!r}")
    picked = balanced_sample(records, n_images, seed) if n_images else records
    images = picked[IMAGE] if IMAGE in picked else picked["path"].map(lambda p: Path(p).read_bytes())
    table = pd.DataFrame(
        {
            PROMPT_ID: [f"images-{slug(str(r))}" for r in picked[PROMPT_TEXT]],
            PROMPT_TEXT: picked[PROMPT_TEXT].astype(str).to_numpy(),
            LABEL: picked[LABEL].astype(str).to_numpy(),
            SOURCE: (picked[SOURCE] if SOURCE in picked else picked[PROMPT_TEXT]).astype(str).to_numpy(),
            IMAGE: [bytes(b) for b in images],
        }
    )
    clash = table[PROMPT_ID].duplicated()
    if clash.any():
        raise ValueError(f"two images give the prompt id {table[PROMPT_ID][clash].iloc[0]!r}; rename one")
    return table


def balanced_sample(records: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows drawn round-robin over labels in a seeded order, in the records' order."""
    order = np.random.default_rng(seed).permutation(len(records))
    shuffled = records.iloc[order]
    rank = shuffled.groupby(LABEL, sort=False).cumcount().to_numpy()
    keep = shuffled.iloc[np.argsort(rank, kind="stable")[:n]]
    return records.loc[records.index.isin(keep.index)]


def load_hub_images(
    hub_id: str = HUB_ID, *, config: str | None = HUB_CONFIG, split: str = HUB_SPLIT, columns: Mapping[str, str]
) -> pd.DataFrame:
    """Records of a labelled hub image split (from the hub, or the datasets cache offline): encoded bytes and
    class names.

    Args:
        hub_id, config, split: The dataset, its configuration and split.
        columns: ``{"image": ..., "label": ...}`` column names in the hub dataset.
    """
    from datasets import Image

    data = load_hub_split(hub_id, config, split)
    check_hub_columns(
        data.features, f"{hub_id} {config or ''} {split}", {columns["image"]: "image", columns["label"]: "label"}
    )
    data = data.cast_column(columns["image"], Image(decode=False))
    names = data.features[columns["label"]].names if hasattr(data.features[columns["label"]], "names") else None
    return pd.DataFrame(
        {
            PROMPT_TEXT: [f"hub:{hub_id}/{split}/{i:06d}" for i in range(len(data))],
            LABEL: [names[v] if names else str(v) for v in data[columns["label"]]],
            IMAGE: [record["bytes"] or Path(record["path"]).read_bytes() for record in data[columns["image"]]],
        }
    )


def image_records(spec: Mapping) -> pd.DataFrame:
    """The records of the configured source (``datasets.images``: ``source``, ``path``, hub fields)."""
    source = spec.get("source", "folder")
    if source in ("folder", "list") and not spec.get("path"):
        raise ValueError(f"datasets.images.source is {source!r} but datasets.images.path is not set")
    if source == "folder":
        return folder_records(spec["path"])
    if source == "list":
        return list_records(spec["path"])
    if source == "hub":
        columns = {"image": spec.get("image_column", "image"), "label": spec.get("label_column", "label")}
        return load_hub_images(
            spec.get("hub_id", HUB_ID),
            config=spec.get("hub_config"),
            split=spec.get("split", HUB_SPLIT),
            columns=columns,
        )
    raise ValueError(f"image source must be one of {SOURCES}, got {source!r}")


def image_count(spec: Mapping) -> int:
    """How many images a ``datasets.images`` section builds, before its table exists.

    Raises:
        ValueError: for a hub split of unknown size with ``n_images`` 0 (set ``n_images``).
    """
    if spec.get("n_images"):
        return int(spec["n_images"])
    if spec.get("source", "folder") != "hub":
        return len(image_records(spec))
    key = (spec.get("hub_id", HUB_ID), spec.get("hub_config", HUB_CONFIG), spec.get("split", HUB_SPLIT))
    if key not in HUB_SIZES:
        raise ValueError(f"the size of hub split {key} is not known offline; set datasets.images.n_images")
    return HUB_SIZES[key]
