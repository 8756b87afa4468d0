"""The entropy-lens command line, called as main(argv)."""

import pytest
from tiny import save_tiny_model

from entropy_lens import cli
from entropy_lens.store import storage


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli") / "tiny-llama"
    return save_tiny_model("llama", folder, "llama")


def test_profile_prints_text_table_and_writes_store(model_dir, tmp_path, capsys):
    out = tmp_path / "p.zarr"
    argv = [
        "profile",
        "--model",
        str(model_dir),
        "--prompt",
        "the cat",
        "--prompt",
        "a dog ran",
        "--max-new-tokens",
        "3",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "[p0000] the cat" in printed and "[p0001] a dog ran" in printed
    assert "mean entropy over depth" in printed and "layer  depth  H [nats]" in printed
    assert printed.count("\n      2   1.00") == 2  # last layer row of each prompt, depth 1.00
    ds = storage.open_profiles(out)
    assert ds.sizes["prompt"] == 2 and ds.sizes["token"] == 3
    assert ds.attrs["model_family"] == "llama"


def test_models_lists_the_registry(capsys):
    assert cli.main(["models"]) == 0
    printed = capsys.readouterr().out
    assert "smollm2-135m" in printed and "pip install" in printed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--top-p", "1.5"], "top_p must lie in"),
        (["--max-new-tokens", "0"], "max_new_tokens must be a positive integer"),
        (["--out", "profile.nc"], "--out must name a .zarr store"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(model_dir, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    argv = ["profile", "--model", str(model_dir), "--prompt", "the cat", *extra]
    if "--out" not in extra:
        argv += ["--out", "p.zarr"]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_unknown_model_lists_the_registry(capsys):
    assert cli.main(["profile", "--model", "gpt-5", "--prompt", "x"]) == 2
    assert "smollm2-135m" in capsys.readouterr().err


def test_sparkline_scales_and_marks_missing():
    assert cli.sparkline([0.0, 0.5, 1.0, float("nan")], 0.0, 1.0) == "▁▅█ "


def _skip_map_csv(folder):
    from test_criticality import COSTS, DELTA_H, _plan, _sweep

    from entropy_lens.skipping.criticality import skip_map

    table = skip_map(_sweep(COSTS), _plan(DELTA_H), n_boot=200)
    (folder / "tables").mkdir(parents=True)
    table.to_csv(folder / "tables" / "skip_map.csv", index=False)
    return table


def test_skip_map_prints_each_block_and_what_is_safe(tmp_path, capsys):
    table = _skip_map_csv(tmp_path / "results")
    assert cli.main(["skip-map", "--results", str(tmp_path / "results")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("m: every block skipped alone, 200 MMLU questions, calibrated letters")
    rows = [line for line in printed.splitlines() if line[:5].strip().isdigit()]
    assert len(rows) == len(table) == 8
    block5 = next(line for line in rows if line.split()[0] == "5")
    assert "costly" in block5 and "expansion (no final)" in block5
    assert f"{table.set_index('layer').loc[5, 'd_logprob']:+.3f}" in block5
    safe = [str(v) for v in table.loc[table["reading"] == "safe", "layer"]]
    assert f"safe to skip (a drop of 5 points ruled out): {', '.join(safe)};" in printed
    assert max(len(line) for line in rows) <= 140


def test_skip_map_names_what_is_missing(tmp_path, capsys):
    assert cli.main(["skip-map", "--results", str(tmp_path)]) == 2
    assert "no criticality map at" in capsys.readouterr().err
    _skip_map_csv(tmp_path / "r")
    assert cli.main(["skip-map", "--results", str(tmp_path / "r"), "--model", "nope"]) == 2
    assert "model 'nope' has no criticality map" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_unlock_where_there_is_no_workflow_says_so(tmp_path, capsys, where):
    directory = tmp_path / "nowhere" if where == "missing" else tmp_path
    assert cli.main(["unlock", "--directory", str(directory)]) == 2
    err = capsys.readouterr().err
    assert f"no workflow at {str(directory)!r}: it holds no Snakefile and no .snakemake folder" in err


def test_unlock_of_a_workflow_without_a_lock_is_quiet(tmp_path, capsys):
    (tmp_path / ".snakemake").mkdir()
    assert cli.main(["unlock", "--directory", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""
