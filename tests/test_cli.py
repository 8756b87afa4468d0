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
