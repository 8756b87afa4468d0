"""`entropy-lens view`: the lens's top-k tokens kept in stores, and the interactive page of one generation."""

import base64
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
from tiny import save_tiny_model, tiny_model, tiny_tokenizer

from entropy_lens import cli
from entropy_lens.lens.decoding import LensSettings, _merge_top, decode_residuals, lens_logits
from entropy_lens.lens.profiles import ProfileBuffers, build_dataset
from entropy_lens.lens.text import extract_profiles
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.plots import view
from entropy_lens.store import combine, schema, storage

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model("llama", tmp_path_factory.mktemp("view") / "tiny-llama", "llama")


def test_merge_top_over_tiles_equals_topk_of_the_whole_row():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 4, generator=gen)  # [V, n], vocabulary-major like a tile
    values, ids = torch.empty(0, 4), torch.empty(0, 4, dtype=torch.long)
    for start in range(0, 50, 7):  # uneven tiles, the last narrower than k
        values, ids = _merge_top(values, ids, logits[start : start + 7], start, k=9)
    want = logits.topk(9, dim=0)
    torch.testing.assert_close(values, want.values)
    assert torch.equal(ids, want.indices)


def test_decoded_top_k_is_the_softmax_of_the_lens_logits():
    lm = tiny_model("gemma2")  # soft-capped: the top-k must be read after the cap
    resid = torch.randn(2, lm.n_layers, lm.model.config.hidden_size, generator=torch.Generator().manual_seed(1))
    sm = decode_residuals(lm, resid, LensSettings(top_k=7))
    probs = torch.softmax(lens_logits(lm, resid.reshape(-1, resid.shape[-1])), -1).topk(7)
    np.testing.assert_array_equal(sm.top_ids.reshape(-1, 7), probs.indices.numpy())
    np.testing.assert_allclose(sm.top_probs.reshape(-1, 7), probs.values.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(sm.top_ids[..., 0], sm.top1_id)
    assert decode_residuals(lm, resid, LensSettings()).top_ids is None  # off by default


@pytest.mark.parametrize("top_k", [-1, 2.5, True])
def test_lens_settings_refuse_a_bad_top_k(top_k):
    with pytest.raises(ValueError, match=r"top_k must be a non-negative integer .*got"):
        LensSettings(top_k=top_k)


def test_config_section_without_top_k_keeps_none():
    assert LensSettings.from_config({"top_p": 0.6, "alphas": [1.0], "budget_mb": 64}).top_k == 0
    assert LensSettings.from_config({"top_p": 0.6, "alphas": [1.0], "budget_mb": 64, "top_k": 4}).top_k == 4


def test_store_keeps_top_k_round_trips_and_combined_stores_drop_it(tmp_path):
    lm = tiny_model("llama")
    ds = extract_profiles(
        lm, ["the cat", "once upon a time"], generation=GenerationSettings(3), lens=LensSettings(top_k=4)
    )
    assert ds[schema.TOP_IDS].dims == (schema.PROMPT, schema.TOKEN, schema.LAYER, schema.TOP_RANK)
    storage.write_profiles(ds, tmp_path / "s.zarr")
    back = storage.open_profiles(tmp_path / "s.zarr").load()
    live = back[schema.TOKEN_ID].values >= 0
    ids, probs = back[schema.TOP_IDS].values[live], back[schema.TOP_PROBS].values[live]
    np.testing.assert_array_equal(ids[..., 0], back[schema.TOP1_ID].values[live])
    assert (np.diff(probs, axis=-1) <= 0).all() and (probs.sum(-1) <= 1 + 1e-6).all()
    assert (back[schema.TOP_IDS].values[~live] == -1).all() and np.isnan(back[schema.TOP_PROBS].values[~live]).all()
    plain = extract_profiles(lm, ["the cat", "once upon a time"], generation=GenerationSettings(3))
    assert schema.TOP_IDS not in plain and schema.TOP_RANK not in plain.coords  # absent unless asked
    both = combine.combine_models({"a": back, "b": plain}, families={"a": "x", "b": "x"}, n_params={"a": 1, "b": 1})
    assert schema.TOP_IDS not in both and schema.TOP_RANK not in both.coords


def test_validator_names_a_top_k_variable_of_the_wrong_dtype():
    lm = tiny_model("llama")
    ds = extract_profiles(lm, ["the cat"], generation=GenerationSettings(2), lens=LensSettings(top_k=2))
    bad = ds.assign({schema.TOP_PROBS: ds[schema.TOP_PROBS].astype("float64")})
    with pytest.raises(ValueError, match="variable 'top_probs' has dtype float64, expected float32"):
        schema.validate_profiles(bad)


WORDS = ("cat", "dog", "sun")


def synthetic_store(top_k: bool = True):
    """One prompt, 3 token slots (the last masked), 4 blocks; the tiny tokenizer's ids of WORDS on top."""
    tok = tiny_tokenizer()
    ids = [tok.convert_tokens_to_ids(w) for w in WORDS]
    buf = ProfileBuffers(1, 3, 4, 1, keep_top=3 if top_k else 0)
    a = buf.arrays
    a[schema.ENTROPY][0, :2] = [[3.0, 2.0, 1.0, 0.5], [2.5, 1.5, 0.25, 0.125]]
    a[schema.RENYI][0, :2, :, 0] = a[schema.ENTROPY][0, :2]
    a[schema.NUCLEUS_SIZE][0, :2] = [[40, 12, 3, 1], [30, 9, 2, 1]]
    a[schema.NUCLEUS_JACCARD][0, :2] = [[0.5, 0.25, 0.75, np.nan]] * 2
    a[schema.TOP1_ID][0, :2] = ids[0]
    a[schema.TOKEN_ID][0, :2] = [ids[0], ids[1]]
    if top_k:
        a[schema.TOP_IDS][0, :2] = ids
        a[schema.TOP_PROBS][0, :2] = [0.5, 0.25, 0.125]
    attrs = {a_: "" for a_ in schema.REQUIRED_ATTRS} | {"vocab_size": 96, "top_p": 0.6, "model_name": "tiny"}
    attrs["schema_version"] = schema.SCHEMA_VERSION
    return build_dataset(a, ["q7"], ["once upon a"], 4, (1.0,), attrs)


def plot_data(page: str) -> list:
    """The traces plotly draws, read back from the page's ``Plotly.newPlot`` call."""
    call = re.search(r'Plotly\.newPlot\(\s*"entropy-view",\s*(\[.*?\]),\s*\{"template"', page, re.S)
    return json.loads(call.group(1))


def array(value) -> np.ndarray:
    """A plotly array back from the page: a list, or plotly's base64 typed array."""
    if isinstance(value, dict):
        shape = tuple(int(n) for n in value.get("shape", "-1").split(","))
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.asarray(value)


def test_view_of_a_store_carries_each_cell_s_top_tokens_and_the_last_block(model_dir, tmp_path, capsys):
    storage.write_profiles(synthetic_store(), tmp_path / "s.zarr")
    out = tmp_path / "page.html"
    argv = ["view", str(tmp_path / "s.zarr"), "--tokenizer", str(model_dir), "--every", "2", "--out", str(out)]
    assert cli.main(argv) == 0
    assert "2 tokens x 3 blocks" in capsys.readouterr().out  # blocks 0, 2 and the last, 3
    page = out.read_text()
    assert "<script src=" not in page and "plotly.js v" in page  # the script is embedded: works offline
    (trace,) = plot_data(page)
    assert trace["type"] == "heatmap" and array(trace["z"]).shape == (3, 2)  # [blocks, tokens]
    assert array(trace["z"])[2].tolist() == [0.5, 0.125]  # the last block's entropies
    hover = trace["hovertext"]
    assert "block 3 of 4 (final)" in hover[2][1] and "entropy 0.125 nats" in hover[2][1]
    assert " 1. cat  50.0%<br> 2. dog  25.0%<br> 3. sun  12.5%" in hover[0][0]
    assert "top-0.6 nucleus 40 tokens · overlap with next 0.50" in hover[0][0]
    assert page.count('class="gen">catdog<') == 1  # the generated text, highlighted after the prompt


def test_view_of_a_store_without_top_k_shows_the_top_1_and_says_so(model_dir, tmp_path):
    storage.write_profiles(synthetic_store(top_k=False), tmp_path / "s.zarr")
    assert (
        cli.main(["view", str(tmp_path / "s.zarr"), "--tokenizer", str(model_dir), "--out", str(tmp_path / "p.html")])
        == 0
    )
    page = (tmp_path / "p.html").read_text()
    assert "lens top-1: cat" in plot_data(page)[0]["hovertext"][0][0] and "lens.top_k: 0" in page


def test_view_generates_afresh_from_model_and_prompt(model_dir, tmp_path):
    out = tmp_path / "fresh.html"
    argv = ["view", "--model", str(model_dir), "--prompt", "the cat saw a", "--max-new-tokens", "3", "--top-k", "4"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    (trace,) = plot_data(out.read_text())
    assert len(array(trace["y"])) == 3 and "(final)" in trace["hovertext"][-1][0]
    assert all(cell.count("%") == 4 for row in trace["hovertext"] for cell in row)  # four tokens on every hover


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "m"], "either a STORE \\(a combined one with --model\\), or --model with --prompt"),
        ([], "either a STORE \\(a combined one with --model\\), or --model with --prompt"),
        (["STORE", "--prompt", "hi"], "either a STORE \\(a combined one with --model\\), or --model with --prompt"),
        (["STORE", "--prompt-id", "nope"], "prompt 'nope' is not in the store; it has 1 prompts: \\['q7'\\]"),
        (["STORE", "--out", "page.png"], "must end in .html"),
        (["STORE", "--every", "0"], "every must be a positive integer"),
    ],
)
def test_view_refuses_bad_input_by_name(model_dir, tmp_path, capsys, extra, message):
    storage.write_profiles(synthetic_store(), tmp_path / "s.zarr")
    argv = ["view", *[str(tmp_path / "s.zarr") if a == "STORE" else a for a in extra], "--tokenizer", str(model_dir)]
    assert cli.main(argv) == 2
    assert re.search(message, capsys.readouterr().err)


def test_view_names_where_it_looked_for_a_tokenizer(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage.write_profiles(synthetic_store(), tmp_path / "s.zarr")
    assert cli.main(["view", "s.zarr", "--cache-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no tokenizer found for the store's model 'tiny'" in err and "pass --tokenizer" in err


def test_view_of_a_combined_store_takes_model_or_says_in_one_line_how_to_choose(model_dir, tmp_path, capsys):
    """results/profiles/tasks.zarr, the obvious path, holds every model: view shows the one --model names (its
    per-model store beside it), and without --model says in one line which models there are and how to choose."""
    per_model = synthetic_store(top_k=False)
    profiles = tmp_path / "results" / "profiles"
    storage.write_profiles(per_model, profiles / "tiny" / "tasks.zarr")
    both = combine.combine_models(
        {"other": per_model, "tiny": per_model}, families={"other": "a", "tiny": "b"}, n_params={"other": 1, "tiny": 1}
    )
    storage.write_profiles(both, profiles / "tasks.zarr", combined=True)
    base = ["view", str(profiles / "tasks.zarr"), "--tokenizer", str(model_dir), "--out", str(tmp_path / "p.html")]
    assert cli.main(base) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("entropy-lens: error: ")
    assert "is a combined store of 2 models (other, tiny); choose one with --model other" in err
    assert cli.main([*base, "--model", "tiny"]) == 0
    assert "2 tokens x 4 blocks" in capsys.readouterr().out
    assert cli.main([*base, "--model", "nope"]) == 2
    assert "holds no model 'nope'; it holds other, tiny" in capsys.readouterr().err
    assert cli.main([*base, "--model", "other"]) == 2  # its per-model store was never written here
    assert f"has no store at {profiles / 'other' / 'tasks.zarr'}" in capsys.readouterr().err
    assert cli.main(["view", str(profiles / "tiny" / "tasks.zarr"), "--model", "tiny", *base[2:]]) == 2
    assert "is the store of one model already; leave out --model tiny" in capsys.readouterr().err


HOVER_AND_SWITCH = """<script>
window.addEventListener("load", function () {
  var gd = document.getElementById("entropy-view");
  Plotly.Fx.hover(gd, {xval: 0, yval: 0});
  var out = document.createElement("pre");
  out.id = "after-switch";
  Plotly.restyle(gd, gd.layout.updatemenus[0].buttons[1].args[0]).then(function () {
    out.textContent = gd.querySelector(".cbtitle").textContent;
    document.body.appendChild(out);
  });
});
</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_page_renders_in_headless_chromium_with_its_hover_data(model_dir, tmp_path):
    storage.write_profiles(synthetic_store(), tmp_path / "s.zarr")
    out = tmp_path / "page.html"
    assert cli.main(["view", str(tmp_path / "s.zarr"), "--tokenizer", str(model_dir), "--out", str(out)]) == 0
    probe = tmp_path / "probe.html"  # the page, plus a hover on its first cell and a press of its second button
    probe.write_text(out.read_text().replace("</body>", HOVER_AND_SWITCH))
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"]
    dom = subprocess.run([*argv, probe.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    assert 'class="heatmaplayer' in dom and "<image" in dom  # plotly drew the heatmap
    hover = re.search(r'<g class="hoverlayer">(.*?)</g></svg>', dom, re.S).group(1)
    text = re.sub(r"<[^>]+>", "", hover)  # the label's lines, run together
    assert "cat (token 0) · block 0 of 4" in text and "entropy 3.000 nats" in text
    assert all(line in text for line in (" 1. cat  50.0%", " 2. dog  25.0%", " 3. sun  12.5%"))
    assert re.search(r'<pre id="after-switch">top-0.6 nucleus \(tokens\)</pre>', dom)


def test_shown_blocks_always_hold_the_last_and_tokens_are_written_safely():
    assert view.shown_blocks(30, 4).tolist() == [0, 4, 8, 12, 16, 20, 24, 28, 29]
    assert view.shown_blocks(3).tolist() == [0, 1, 2]
    assert view.shown("\n") == "\\n" and view.shown("  ") == "··" and view.shown("") == "∅"
    assert view.shown("<b>&") == "&lt;b&gt;&amp;" and view.shown('"x"') == '"x"'  # plotly decodes no &quot;
    assert view.shown("abcdefgh", 4) == "abc…"
