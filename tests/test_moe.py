"""The lens and routing entropy on tiny random mixture-of-experts decoders (Mixtral, Qwen2/3-MoE, OLMoE)."""

import math

import numpy as np
import pytest
import torch
import xarray as xr
from reference import reference
from tiny import DENSE_QWEN2_MOE_LAYER, MAX_PARAMS, MOE_ARCHS, N_EXPERTS, N_LAYERS, TOP_K, save_tiny_model, tiny_model

from entropy_lens import extract_profiles, load_model
from entropy_lens.lens import decoding
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.model.generation import GenerationSettings, generate
from entropy_lens.model.routing import find_routers, record_routing, routing_metrics
from entropy_lens.store import schema, storage
from entropy_lens.store.combine import combine_models

PROMPTS = ["once upon a time there was a little girl", "the cat", "how many words are in the story"]
TOKENS = 4
# bf16 keeps 8 significant bits; over 3 tiny blocks entropies move by hundredths of a nat (as for dense models).
BF16_MAX_NATS = 0.05


def dense_layers(arch: str) -> set[int]:
    return {DENSE_QWEN2_MOE_LAYER} if arch == "qwen2_moe" else set()


@pytest.fixture(scope="module", params=MOE_ARCHS)
def moe_run(request):
    lm = tiny_model(request.param)
    ds = extract_profiles(lm, PROMPTS, generation=GenerationSettings(TOKENS), prompting=PromptSettings(batch_size=3))
    return request.param, lm, ds


def test_tiny_moe_models_are_tiny_and_their_routers_are_found(moe_run):
    arch, lm, _ = moe_run
    assert sum(p.numel() for p in lm.model.parameters()) < MAX_PARAMS
    routers = find_routers(lm.blocks, lm.model.config)
    assert len(routers) == N_LAYERS
    assert {i for i, r in enumerate(routers) if r is None} == dense_layers(arch)
    assert all(r.top_k == TOP_K and r.n_experts == N_EXPERTS for r in routers if r is not None)


def test_dense_models_have_no_router():
    lm = tiny_model("llama")
    assert find_routers(lm.blocks, lm.model.config) == [None] * N_LAYERS
    ds = extract_profiles(lm, PROMPTS[:1], generation=GenerationSettings(2))
    assert schema.ROUTING_ENTROPY not in ds and schema.EXPERT_RANK not in ds.dims


def test_last_layer_equals_model_logits(moe_run):
    _, lm, _ = moe_run
    seen = []

    def on_step(step, resid, logits, alive):
        seen.append((decoding.lens_logits(lm, resid[:, -1]), logits))

    batch = [lm.tokenizer(p)["input_ids"] for p in PROMPTS]
    generate(lm, batch, GenerationSettings(3), on_step)
    for lens_last, real in seen:
        torch.testing.assert_close(lens_last, real, atol=1e-5, rtol=1e-5)


def test_store_carries_routing_entropy_nan_on_dense_layers(moe_run, tmp_path):
    arch, _, ds = moe_run
    schema.validate_profiles(ds)
    routing = ds[schema.ROUTING_ENTROPY].values  # [P, T, L]
    assert ds[schema.ROUTING_EXPERTS].dims == (schema.PROMPT, schema.TOKEN, schema.LAYER, schema.EXPERT_RANK)
    assert ds.sizes[schema.EXPERT_RANK] == TOP_K
    valid = ds.token_id.values >= 0  # [P, T]
    for layer in range(N_LAYERS):
        cells = routing[..., layer][valid]
        if layer in dense_layers(arch):
            assert np.isnan(cells).all()
            assert (ds[schema.ROUTING_EXPERTS].values[..., layer, :][valid] == -1).all()
        else:
            assert np.isfinite(cells).all()
            assert (cells >= 0).all() and (cells <= math.log(N_EXPERTS) + 1e-5).all()
            experts = ds[schema.ROUTING_EXPERTS].values[..., layer, :][valid]  # [n, K]
            assert ((experts >= 0) & (experts < N_EXPERTS)).all()
            assert (experts[:, 0] != experts[:, 1]).all()
    back = storage.open_profiles(storage.write_profiles(ds, tmp_path / "moe.zarr")).load()
    xr.testing.assert_identical(back, ds)


def test_every_layer_matches_float64_reference(moe_run):
    """Every layer, not only the last: the hidden state after each block, normed and projected by hand."""
    _, lm, ds = moe_run
    for i, prompt in enumerate(PROMPTS):
        generated = [t for t in ds.token_id.values[i].tolist() if t >= 0]
        ref = reference(lm, prompt, generated, float(ds.attrs["top_p"]), torch.float32)
        row = ds.isel(prompt=i, token=slice(0, len(generated)))
        np.testing.assert_allclose(row.entropy.values, ref["entropy"], atol=1e-4)
        np.testing.assert_array_equal(row.nucleus_size.values, ref["nucleus_size"])
        np.testing.assert_array_equal(row.top1_id.values, ref["top1"])


def _moe_inputs(blocks) -> tuple[list[torch.Tensor], list]:
    """Record what each block's post-attention norm hands its MLP (the router's input), by its own hook."""
    seen: list[torch.Tensor] = []
    handles = [
        block.post_attention_layernorm.register_forward_hook(lambda _m, _a, out: seen.append(out.detach()))
        for block in blocks
    ]
    return seen, handles


def _gate_weight(block) -> torch.Tensor | None:
    """The ``[E, d]`` router weight of a block's MLP, found by shape (``None`` on a dense block)."""
    weights = [w for name, w in block.mlp.named_parameters() if name == "gate.weight" and w.shape[0] == N_EXPERTS]
    return weights[0] if weights else None


@pytest.mark.parametrize("arch", MOE_ARCHS)
def test_routing_matches_router_logits_computed_by_hand(arch):
    """Against router logits computed here from the MLP's input and the gate's weight, in float64.

    Independent of how the library finds and hooks the router: the input is read at the block's
    post-attention norm, the product and softmax are done here.
    """
    lm = tiny_model(arch)
    routers = find_routers(lm.blocks, lm.model.config)
    ids = torch.tensor([lm.tokenizer(PROMPTS[0])["input_ids"]])
    seen, handles = _moe_inputs(lm.blocks)
    try:
        with torch.inference_mode(), record_routing(routers) as slots:
            lm.model(input_ids=ids)
            entropy, experts = routing_metrics(slots, routers)
    finally:
        for handle in handles:
            handle.remove()
    assert len(seen) == N_LAYERS
    for layer, (block, router) in enumerate(zip(lm.blocks, routers, strict=True)):
        weight = _gate_weight(block)
        if router is None:
            assert weight is None and layer in dense_layers(arch)
            assert np.isnan(entropy[0, layer]) and (experts[0, layer] == -1).all()
            continue
        logits = seen[layer][0, -1].double() @ weight.double().T  # the last position, as the lens reads
        probs = torch.softmax(logits, -1)
        assert entropy[0, layer] == pytest.approx(float(-(probs * probs.log()).sum()), abs=1e-5)
        assert experts[0, layer].tolist() == probs.topk(router.top_k).indices.tolist()


def test_batching_does_not_change_results(moe_run):
    _, lm, together = moe_run
    alone = [
        extract_profiles(
            lm, [p], generation=GenerationSettings(TOKENS), prompting=PromptSettings(batch_size=1), prompt_ids=[pid]
        )
        for p, pid in zip(PROMPTS, together.prompt.values, strict=True)
    ]
    merged = xr.concat(alone, dim="prompt")
    np.testing.assert_array_equal(together.token_id.values, merged.token_id.values)
    for var in ("entropy", "renyi", schema.ROUTING_ENTROPY):
        np.testing.assert_allclose(together[var].values, merged[var].values, atol=1e-4)
    np.testing.assert_array_equal(together.nucleus_size.values, merged.nucleus_size.values)
    np.testing.assert_array_equal(together[schema.ROUTING_EXPERTS].values, merged[schema.ROUTING_EXPERTS].values)


@pytest.mark.parametrize("arch", MOE_ARCHS)
def test_bf16_path_tracks_float32(arch, tmp_path):
    folder = save_tiny_model(arch, tmp_path / arch, arch)
    f32 = extract_profiles(
        load_model(folder, device="cpu", dtype="float32"), PROMPTS, generation=GenerationSettings(TOKENS)
    )
    b16_model = load_model(folder, device="cpu", dtype="bfloat16")
    b16 = extract_profiles(b16_model, PROMPTS, generation=GenerationSettings(TOKENS))
    assert b16_model.dtype == torch.bfloat16 and b16.attrs["dtype"] == "bfloat16"
    assert b16.entropy.dtype == np.float32 and b16[schema.ROUTING_ENTROPY].dtype == np.float32
    assert np.nanmax(np.abs(b16.entropy.values - f32.entropy.values)) < BF16_MAX_NATS
    assert np.nanmax(np.abs(b16[schema.ROUTING_ENTROPY].values - f32[schema.ROUTING_ENTROPY].values)) < BF16_MAX_NATS


def test_combined_store_fills_routing_for_dense_models():
    moe = extract_profiles(tiny_model("olmoe"), PROMPTS, generation=GenerationSettings(2))
    dense = extract_profiles(tiny_model("llama"), PROMPTS, generation=GenerationSettings(2))
    labels = {"families": {"moe": "olmoe", "dense": "llama"}, "n_params": {"moe": 1, "dense": 1}}
    combined = combine_models({"moe": moe, "dense": dense}, **labels)
    schema.validate_profiles(combined, combined=True)
    assert np.isnan(combined[schema.ROUTING_ENTROPY].sel(model="dense").values).all()
    assert (combined[schema.ROUTING_EXPERTS].sel(model="dense").values == -1).all()
    np.testing.assert_array_equal(combined[schema.ROUTING_ENTROPY].sel(model="moe").values, moe.routing_entropy.values)


def test_a_store_with_half_the_routing_variables_is_refused():
    ds = extract_profiles(tiny_model("olmoe"), PROMPTS[:1], generation=GenerationSettings(2))
    with pytest.raises(ValueError, match="routing variables come together"):
        schema.validate_profiles(ds.drop_vars(schema.ROUTING_EXPERTS))
