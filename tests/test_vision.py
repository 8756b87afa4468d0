"""The lens on tiny random image classifiers (ViT, DeiT, BEiT) and the ``images`` prompt set."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
import transformers
import xarray as xr
from tiny import (
    IMAGE_SIZE,
    N_CLASSES,
    N_LAYERS,
    PATTERNS,
    VISION_ARCHS,
    pattern_image,
    save_tiny_vision_model,
    tiny_model,
    tiny_vision_model,
    write_image_folder,
)

from entropy_lens import extract_profiles, load_model
from entropy_lens.lens.decoding import LensSettings, lens_logits
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.entropy import shannon_entropy
from entropy_lens.lens.extract import Shard, extract_table
from entropy_lens.lens.vision import classify_with_readouts, extract_image_profiles, pixel_values
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.loading import materialize_model
from entropy_lens.model.vision import CLS, MEAN, find_vision_parts
from entropy_lens.prompts.counts import prompt_count
from entropy_lens.prompts.datasets import IMAGE, LABEL, SOURCE, read_table, validate_table, write_table
from entropy_lens.prompts.images import build_images, folder_records, image_count, list_records
from entropy_lens.store import schema, storage

IMAGES = [pattern_image(p, seed) for seed in range(3) for p in PATTERNS]  # 9 images, 3 per pattern
READOUTS = {"vit": CLS, "deit": CLS, "beit": MEAN}


@pytest.fixture(scope="module", params=VISION_ARCHS)
def vision_run(request):
    lm = tiny_vision_model(request.param)
    return request.param, lm, extract_image_profiles(lm, IMAGES, batch_size=4)


def test_tiny_classifiers_are_tiny_and_read_as_their_heads_do(vision_run):
    arch, lm, _ = vision_run
    assert lm.readout == READOUTS[arch]
    assert lm.n_layers == N_LAYERS and lm.vocab_size == N_CLASSES
    assert lm.softcap is None


def test_last_layer_equals_the_models_own_logits(vision_run):
    _, lm, ds = vision_run
    resid, logits = classify_with_readouts(lm, pixel_values(lm, IMAGES))
    torch.testing.assert_close(lens_logits(lm, resid[:, -1]), logits, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(ds.entropy.values[:, 0, -1], shannon_entropy(logits).numpy(), atol=1e-5)
    np.testing.assert_array_equal(ds.token_id.values[:, 0], logits.argmax(-1).numpy())


def _readout_by_hand(hidden: torch.Tensor, readout: str) -> torch.Tensor:
    """The vector the head reads: the CLS token (position 0) or the mean of the patch tokens."""
    return hidden[:, 0] if readout == CLS else hidden[:, 1:].mean(1)


def test_every_layer_reads_the_token_its_head_reads(vision_run):
    """Every block, not only the last: its output from ``output_hidden_states``, read out here, through the lens."""
    _, lm, ds = vision_run
    with torch.inference_mode():
        out = lm.model(pixel_values=pixel_values(lm, IMAGES), output_hidden_states=True)
    hidden = out.hidden_states[1:]  # after each block, before the final norm (encoders append pre-norm states)
    assert len(hidden) == N_LAYERS
    for layer, states in enumerate(hidden):
        logits = lens_logits(lm, _readout_by_hand(states, lm.readout))
        np.testing.assert_allclose(ds.entropy.values[:, 0, layer], shannon_entropy(logits).numpy(), atol=1e-5)
        np.testing.assert_array_equal(ds.top1_id.values[:, 0, layer], logits.argmax(-1).numpy())


def test_image_store_follows_the_text_contract(vision_run, tmp_path):
    _, _, ds = vision_run
    schema.validate_profiles(ds)
    assert ds.sizes[schema.TOKEN] == 1 and ds.sizes[schema.LAYER] == N_LAYERS
    assert ds.attrs["modality"] == "image" and ds.attrs["vocab_size"] == N_CLASSES
    entropy = ds.entropy.values
    assert np.isfinite(entropy).all() and (entropy >= 0).all() and (entropy <= math.log(N_CLASSES) + 1e-5).all()
    assert ((ds.nucleus_size.values >= 1) & (ds.nucleus_size.values <= N_CLASSES)).all()
    np.testing.assert_allclose(ds.renyi.sel(alpha=1.0).values, entropy, atol=1e-4)
    assert np.isnan(ds.nucleus_jaccard.values[..., -1]).all() and np.isfinite(ds.nucleus_jaccard.values[..., :-1]).all()
    assert np.ptp(entropy) > 0.05  # random init spread enough to tell images and blocks apart
    back = storage.open_profiles(storage.write_profiles(ds, tmp_path / "images.zarr")).load()
    xr.testing.assert_identical(back, ds)


def test_image_store_has_the_text_stores_provenance(vision_run):
    """One provenance builder: a text store's attrs, in order, then the image's modality and read-out."""
    arch, _, ds = vision_run
    text = extract_profiles(tiny_model(), ["the cat"], generation=GenerationSettings(1))
    assert list(ds.attrs) == [*text.attrs, "modality", "readout"]
    one_pass = {"max_new_tokens": 1, "do_sample": False, "temperature": 1.0, "seed": 0, "chat_template": False}
    assert {key: ds.attrs[key] for key in one_pass} == one_pass and ds.attrs["softcap"] is None
    assert ds.attrs["readout"] == READOUTS[arch]


def test_batching_does_not_change_results(vision_run):
    _, lm, together = vision_run
    alone = extract_image_profiles(lm, IMAGES, batch_size=1)
    for var in ("entropy", "renyi", "nucleus_jaccard"):
        np.testing.assert_allclose(together[var].values, alone[var].values, atol=1e-4)
    np.testing.assert_array_equal(together.nucleus_size.values, alone.nucleus_size.values)
    np.testing.assert_array_equal(together.token_id.values, alone.token_id.values)


def test_a_saved_classifier_loads_materializes_and_runs_in_bf16(tmp_path):
    folder = save_tiny_vision_model("vit", tmp_path / "vit", "vit")
    copy = materialize_model(str(folder), tmp_path / "copy")
    f32 = load_model(copy, device="cpu", dtype="float32")
    assert f32.readout == CLS and f32.family == "vit"
    b16 = load_model(copy, device="cpu", dtype="bfloat16")
    a, b = extract_image_profiles(f32, IMAGES), extract_image_profiles(b16, IMAGES)
    assert b.attrs["dtype"] == "bfloat16" and b.entropy.dtype == np.float32
    assert np.abs(a.entropy.values - b.entropy.values).max() < 0.05


def test_a_head_reading_two_tokens_is_refused():
    config = transformers.Dinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=IMAGE_SIZE,
        patch_size=8, num_labels=N_CLASSES,
    )  # fmt: skip
    with pytest.raises(ValueError, match="head reads 64 features"):
        find_vision_parts(transformers.Dinov2ForImageClassification(config))


def test_text_and_image_models_refuse_the_other_input():
    with pytest.raises(ValueError, match="is an image classifier"):
        extract_profiles(tiny_vision_model("vit"), ["the cat"], generation=GenerationSettings(2))
    with pytest.raises(ValueError, match="is a causal LM, not an image classifier"):
        extract_image_profiles(tiny_model("llama"), IMAGES)


# --------------------------------------------------------------------------- the images prompt set


@pytest.fixture
def image_folder(tmp_path):
    return write_image_folder(tmp_path / "images", per_class=4)


def test_folder_builds_a_labelled_table(image_folder, tmp_path):
    table = build_images(folder_records(image_folder))
    validate_table(table, "images")
    assert len(table) == 12 and sorted(table[LABEL].unique()) == sorted(PATTERNS)
    assert table[SOURCE].is_unique  # each image is its own source
    assert table["prompt_text"].iloc[0] == "checker/checker_0.png"
    back = read_table(write_table(table, tmp_path / "images.parquet", "images"), "images")
    assert back[IMAGE].iloc[0] == (image_folder / "checker" / "checker_0.png").read_bytes()
    assert (
        image_count({"source": "folder", "path": str(image_folder)})
        == 12
        == prompt_count("images", {"source": "folder", "path": str(image_folder)})
    )


def test_n_images_is_balanced_over_labels(image_folder):
    table = build_images(folder_records(image_folder), n_images=6, seed=3)
    assert table[LABEL].value_counts().tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match=r"n_images must be an integer in 0\.\.12"):
        build_images(folder_records(image_folder), n_images=13)


def test_a_list_file_gives_paths_labels_and_repeated_sources(image_folder):
    rows = [
        {"path": f"images/{p}/{p}_{i}.png", "label": p, "source": f"{p}-photo{i // 2}"}
        for p in PATTERNS
        for i in range(4)
    ]
    listing = image_folder.parent / "images.csv"
    pd.DataFrame(rows).to_csv(listing, index=False)
    table = build_images(list_records(listing))
    assert table[SOURCE].nunique() == 6 and len(table) == 12
    pd.DataFrame([{"path": "images/none.png", "label": "x"}]).to_csv(listing, index=False)
    with pytest.raises(ValueError, match="1 listed images do not exist"):
        list_records(listing)


def test_a_folder_without_images_is_refused(tmp_path):
    (tmp_path / "empty" / "cats").mkdir(parents=True)
    with pytest.raises(ValueError, match="has no <class>/<image> files"):
        folder_records(tmp_path / "empty")


def test_extract_table_labels_the_image_store_and_shards_it(image_folder):
    lm = tiny_vision_model("vit")
    table = build_images(folder_records(image_folder))
    settings = dict(generation=GenerationSettings(1), lens=LensSettings(), prompting=PromptSettings(4))
    ds = extract_table(lm, table, "images", **settings)
    assert list(ds[LABEL].values) == table[LABEL].tolist() and IMAGE not in ds.coords
    assert ds.attrs["dataset"] == "images"
    shard = extract_table(lm, table, "images", **settings, shard=Shard(1, 4))
    xr.testing.assert_allclose(shard.entropy, ds.entropy.isel(prompt=slice(4, 8)))
