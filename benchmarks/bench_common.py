"""What the benchmarks share: children's-story prompts of a given length, and a float64 top-p reference.

Imported by ``bench_lens.py`` and ``bench_extract.py`` (which also runs ``bench_lens``'s report), so
that imports among the benchmarks run one way: ``bench_common`` <- ``bench_lens`` <- ``bench_extract``.
"""

from __future__ import annotations

import random

import torch

from entropy_lens.lens import nucleus

SENTENCES = (
    "Once upon a time, there was a little girl named {name} who loved to play in the {place}.",
    "Every morning {name} looked at the {thing} and smiled, because it reminded her of her mom.",
    "One day, a big {animal} came to the {place} and wanted to play with the {thing}.",
    "{name} was scared at first, but then she saw that the {animal} was friendly and kind.",
    "They played together all day long, laughing and running around the {place}.",
    "When the sun went down, the {animal} said goodbye and promised to come back tomorrow.",
    "{name} went home and told her dad all about her new friend and the shiny {thing}.",
    "Her dad hugged her and said that sharing is the best way to make a friend happy.",
    "The next day it rained, so {name} stayed inside and drew a picture of the {animal}.",
    "She gave the picture to her friend, and the {animal} was so happy that it danced.",
)
NAMES = ("Lily", "Tom", "Mia", "Ben", "Sue", "Max", "Anna", "Sam")
PLACES = ("park", "garden", "forest", "yard", "beach", "meadow")
THINGS = ("ball", "kite", "flower", "red box", "toy car", "blue hat")
ANIMALS = ("dog", "cat", "bear", "bird", "frog", "rabbit")


def story_prompts(tokenizer, n: int, n_tokens: int, seed: int) -> list[str]:
    """``n`` children's-story prompts of about ``n_tokens`` tokens each."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n):
        fill = dict(
            name=rng.choice(NAMES), place=rng.choice(PLACES), thing=rng.choice(THINGS), animal=rng.choice(ANIMALS)
        )
        text = ""
        while len(tokenizer(text)["input_ids"]) < n_tokens:
            text += rng.choice(SENTENCES).format(**fill) + " "
        prompts.append(text.strip())
    return prompts


@torch.inference_mode()
def float64_nucleus_size(lm, resid_row: torch.Tensor, top_p: float) -> int:
    """Top-p set size of one ``[d]`` residual from float64 logits and a full sort."""
    normed = lm.final_norm(resid_row[None]).double()
    logits = normed @ lm.unembed.weight.double().T
    bias = getattr(lm.unembed, "bias", None)
    logits = logits if bias is None else logits + bias.double()
    if lm.softcap:
        logits = lm.softcap * torch.tanh(logits / lm.softcap)
    probs = torch.softmax(logits[0], -1).sort(descending=True).values
    return int((probs.cumsum(0) < top_p - nucleus.MASS_TOL).sum()) + 1
