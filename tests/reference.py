"""Lens metrics decoded by hand, in float64, from a model's own ``output_hidden_states``.

Shared by the dense (test_lens) and mixture-of-experts (test_moe) tests: every layer but the last is
the hidden state after its block through the final norm and head; the last is the model's own logits
(Hugging Face's last hidden state is already normed).
"""

import copy
import math

import numpy as np
import torch

from entropy_lens.model.lens_model import LensModel


def reference(
    lm: LensModel, prompt: str, generated: list[int], top_p: float, dtype: torch.dtype = torch.float64
) -> dict[str, np.ndarray]:
    """Float64 metrics decoded by hand from ``output_hidden_states`` of a no-cache forward.

    ``dtype`` is the forward's (MoE expert kernels take no float64); the metrics are float64 either way.
    """
    model = copy.deepcopy(lm.model).to(dtype)
    ids = lm.tokenizer(prompt)["input_ids"]
    full = torch.tensor([ids + generated[:-1]])
    with torch.no_grad():
        out = model(input_ids=full, output_hidden_states=True)
    norm = model.get_decoder().norm if hasattr(model.get_decoder(), "norm") else None
    norm = norm or getattr(model.get_decoder(), "ln_f", None) or model.get_decoder().final_layer_norm
    head = model.get_output_embeddings()
    positions = torch.arange(len(ids) - 1, len(ids) - 1 + len(generated))
    rows = []
    for layer in range(lm.n_layers):
        if layer < lm.n_layers - 1:
            logits = head(norm(out.hidden_states[layer + 1][0, positions]))
            if lm.softcap:
                logits = lm.softcap * torch.tanh(logits / lm.softcap)
        else:  # Hugging Face's last hidden state is already normed: use the real logits
            logits = out.logits[0, positions]
        rows.append(logits)
    logits = torch.stack(rows, dim=1)  # [T, L, V]
    probs = torch.softmax(logits.double(), -1)
    sorted_p, order = probs.sort(-1, descending=True)
    size = (sorted_p.cumsum(-1) < top_p - 1e-6).sum(-1) + 1
    member = torch.zeros_like(probs, dtype=torch.bool).scatter_(
        -1, order, torch.arange(probs.shape[-1]) < size[..., None]
    )
    inter = (member[:, :-1] & member[:, 1:]).sum(-1).double()
    union = (member[:, :-1] | member[:, 1:]).sum(-1).double()
    jac = torch.cat([inter / union, torch.full((len(generated), 1), math.nan, dtype=torch.float64)], 1)
    return {
        "entropy": (-(probs * probs.log()).sum(-1)).numpy(),
        "renyi_half": (2 * torch.log(probs.sqrt().sum(-1))).numpy(),  # alpha 0.5
        "renyi_five": (torch.log((probs**5).sum(-1)) / -4).numpy(),  # alpha 5
        "min_entropy": (-probs.max(-1).values.log()).numpy(),
        "nucleus_size": size.numpy(),
        "jaccard": jac.numpy(),
        "top1": probs.argmax(-1).numpy(),
    }
