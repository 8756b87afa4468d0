"""Write tiny random-init stand-ins of a config's hub models and hub datasets into a local Hugging Face cache.

    python scripts/rehearsal_cache.py OUT [--configfile config/paper.yaml]

Every ``models.*.source`` of the config that is a hub id (``org/name``) becomes a model of the same
transformers class, built from the architecture fields shipped in ``entropy_lens/data/model_configs.json``
(the real config.json's fields: tied embeddings, soft-caps, sliding windows, fused projections come with the
class and its config) with every width shrunk to a few dozen units and every depth to a quarter (at least
four blocks). It is saved in the hub cache's layout (``OUT/hub/models--org--name/snapshots/<rev>/``,
``refs/main``), so ``from_pretrained("org/name")`` finds it with ``HF_HUB_CACHE=OUT/hub`` and
``HF_HUB_OFFLINE=1``. The hub datasets the prompt builders read (TinyStories, cais/mmlu, Imagenette) are
written with their real columns and types into the datasets library's cache (``OUT/datasets``, for
``HF_DATASETS_CACHE``), which ``load_dataset`` reads offline. The weights are random: every number a run
on them produces means nothing; the run proves only that each job executes.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

REVISION = "0" * 40  # the snapshot folder; a stand-in is never a real commit
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 32, 4, 2, 8, 64
MIN_LAYERS = 4
VOCAB_SIZE = 384  # byte-level BPE: 256 bytes, 4 specials, merges learned from the stand-in texts
MAX_PARAMS = 2_000_000
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<bos>{{ m['role'] }}\n{{ m['content'] }}<eos>{% endfor %}"
    "{% if add_generation_prompt %}<bos>assistant\n{% endif %}"
)
# Shrunk per architecture: widths, depth, experts, image size; what the class implies stays.
_WIDTHS = {
    "gpt2": {"n_embd": HIDDEN, "n_head": HEADS},
    "vit": {"hidden_size": HIDDEN, "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
            "image_size": 32, "patch_size": 8},
}  # fmt: skip
_DEPTH_KEYS = ("num_hidden_layers", "n_layer")
# Llama 3.1+/3.2 stretch RoPE to 131,072 positions with the llama3 scaling (their config.json's rope_scaling).
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}  # fmt: skip
SLIDING_WINDOW = 16  # short enough that the stand-ins' prompts cross it

STORY_SUBJECTS = ("girl", "boy", "dog", "cat", "bird", "bear", "frog", "duck", "robot", "dragon")
STORY_PLACES = ("park", "forest", "garden", "river", "house", "beach")
MMLU_SPLITS = ("test", "validation", "dev")
MMLU_SUBJECTS = ("anatomy", "astronomy", "college_physics", "high_school_geography")
IMAGENETTE_LABELS = ("tench", "English springer", "cassette player", "chain saw", "church", "French horn",
                     "garbage truck", "gas pump", "golf ball", "parachute")  # fmt: skip


def repo_folder(root: Path, kind: str, repo_id: str) -> Path:
    """``root/{kind}s--org--name``: where the hub cache keeps a repository (``kind`` model or dataset)."""
    return root / f"{kind}s--{repo_id.replace('/', '--')}"


def snapshot(root: Path, repo_id: str) -> Path:
    """The snapshot folder of a model repository, ``refs/main`` pointing to it (both created)."""
    repo = repo_folder(root, "model", repo_id)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    folder = repo / "snapshots" / REVISION
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def story_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` seeded TinyStories-like stories of 40-90 words, each ending a sentence."""
    rng = np.random.default_rng(seed)
    stories = []
    for _ in range(n):
        who, where = rng.choice(STORY_SUBJECTS), rng.choice(STORY_PLACES)
        sentences = [f"Once upon a time, there was a little {who} who lived near a {where}."]
        while sum(len(s.split()) for s in sentences) < int(rng.integers(40, 90)):
            friend = rng.choice(STORY_SUBJECTS)
            sentences.append(
                f"One day, the {who} met a {friend} in the {rng.choice(STORY_PLACES)} and they played all day."
                if rng.random() < 0.5
                else f"The {who} was {rng.choice(['happy', 'sad', 'brave', 'tired'])}, so the {friend} said hello."
            )
        stories.append(" ".join(sentences))
    return stories


def mmlu_rows(n_per_subject: int, seed: int) -> dict[str, list]:
    """Columns of cais/mmlu (``question``, ``subject``, ``choices``, ``answer``) for seeded questions."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"question": [], "subject": [], "choices": [], "answer": []}
    for subject in MMLU_SUBJECTS:
        for i in range(n_per_subject):
            a, b = (int(v) for v in rng.integers(2, 50, size=2))
            rows["question"].append(f"In {subject.replace('_', ' ')}, question {i}: what is {a} plus {b}?")
            rows["subject"].append(subject)
            rows["choices"].append([str(a + b + d) for d in rng.permutation([0, 1, 2, 3])])
            rows["answer"].append(rows["choices"][-1].index(str(a + b)))
    return rows


def image_png(label: int, seed: int, size: int = 48) -> bytes:
    """A PNG whose stripe period and colour depend on the class, with seeded noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:size, :size]
    wave = ((x + label * y) // (2 + label % 5)) % 2
    colour = np.array([(label * 37 % 255), (label * 91 % 255), (label * 53 % 255)]) / 255.0
    pixels = np.clip(wave[..., None] * (0.3 + 0.7 * colour) + rng.normal(0, 0.08, (size, size, 3)), 0, 1)
    buffer = io.BytesIO()
    Image.fromarray((pixels * 255).astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def tokenizer(corpus: list[str]):
    """A byte-level BPE tokenizer of :data:`VOCAB_SIZE` tokens trained on ``corpus``, BOS first, with a chat
    template: every text encodes (no unknown token), in about a third as many tokens as bytes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    bos = core.token_to_id("<bos>")
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", bos)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def standin_config(fields: dict, tok):
    """The config of a stand-in: the shipped architecture fields of a model, every width and depth shrunk.

    Raises:
        ValueError: for a ``model_type`` transformers does not know.
    """
    from transformers import AutoConfig

    fields = dict(fields)
    kind = fields.pop("model_type")
    for key in _DEPTH_KEYS:
        if key in fields:
            fields[key] = max(MIN_LAYERS, round(fields[key] / 4))
    if kind in _WIDTHS:
        fields.update(_WIDTHS[kind])
    else:
        # heads x head_dim = hidden (OLMoE's q/k norms span the hidden size); multi-head attention stays
        # multi-head (key-value heads = heads), grouped-query attention stays grouped
        mha = fields.get("num_key_value_heads", fields.get("num_attention_heads")) == fields.get("num_attention_heads")
        fields.update(hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_attention_heads=HEADS,
                      num_key_value_heads=HEADS if mha else KV_HEADS, head_dim=HEAD_DIM)  # fmt: skip
        fields.update({k: HEAD_DIM for k in ("query_pre_attn_scalar",) if k in fields})
        fields.update({k: SLIDING_WINDOW for k in ("sliding_window",) if fields.get(k)})
        if fields.get("num_experts"):
            fields.update(num_experts=4, num_experts_per_tok=2)
        if (
            kind == "llama"
            and fields.get("max_position_embeddings", 0) > LLAMA3_ROPE["original_max_position_embeddings"]
        ):
            fields["rope_parameters"] = dict(LLAMA3_ROPE)
    if kind != "vit":
        fields.update(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)  # fmt: skip
    else:
        fields["id2label"] = {i: f"imagenet class {i}" for i in range(fields.pop("num_labels", 1000))}
        fields["architectures"] = ["ViTForImageClassification"]
    config = AutoConfig.for_model(kind, **fields)
    config.initializer_range = 0.2  # spread logits so that entropies vary
    return config


def write_model(root: Path, repo_id: str, fields: dict, tok, seed: int = 0) -> Path:
    """Build and save the stand-in of ``repo_id`` into the hub cache ``root``; returns its snapshot."""
    import torch
    import transformers

    config = standin_config(fields, tok)
    torch.manual_seed(seed)
    if config.model_type == "vit":
        model = transformers.AutoModelForImageClassification.from_config(config)
        preprocessor = transformers.ViTImageProcessorPil(size={"height": config.image_size, "width": config.image_size})
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
        preprocessor = tok
    n_params = sum(p.numel() for p in model.parameters())
    if n_params > MAX_PARAMS:
        raise ValueError(f"the stand-in of {repo_id} has {n_params} parameters: a width key of its config was ignored")
    folder = snapshot(root, repo_id)
    model.save_pretrained(folder)
    preprocessor.save_pretrained(folder)
    return folder


def write_dataset(root: Path, repo_id: str, config_name: str, splits: dict, features) -> Path:
    """Write ``splits`` ({name: columns}) of ``repo_id``'s ``config_name`` into the datasets cache ``root``,
    in the layout ``load_dataset(repo_id, config_name)`` reads offline (``namespace___name/config/0.0.0/hash``)."""
    from datasets import Dataset
    from datasets.naming import camelcase_to_snakecase
    from datasets.packaged_modules.parquet.parquet import Parquet

    namespace, name = repo_id.split("/")
    target = root / f"{namespace}___{camelcase_to_snakecase(name)}" / config_name / "0.0.0" / REVISION[:16]
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for split, columns in splits.items():
            files[split] = [str(Path(tmp) / f"{split}.parquet")]
            Dataset.from_dict(columns, features=features).to_parquet(files[split][0])
        builder = Parquet(cache_dir=str(Path(tmp) / "cache"), dataset_name=name, config_name=config_name,
                          data_files=files, features=features, hash=REVISION[:16])  # fmt: skip
        builder.download_and_prepare()
        built = Path(builder.cache_dir)
        info = json.loads((built / "dataset_info.json").read_text())
        info["config_name"] = config_name  # the cache reader matches it against the folder's name
        (built / "dataset_info.json").write_text(json.dumps(info))
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(built, target, ignore=shutil.ignore_patterns("*.lock"))
    return target


def write_datasets(root: Path, n_stories: int = 64, n_per_subject: int = 8, n_images: int = 4) -> list[Path]:
    """The stand-ins of roneneldan/TinyStories, cais/mmlu (``all``) and frgfm/imagenette (``320px``)."""
    from datasets import ClassLabel, Features, Image, List, Value

    stories = Features({"text": Value("string")})
    mmlu = Features({"question": Value("string"), "subject": Value("string"), "choices": List(Value("string")),
                     "answer": ClassLabel(names=["A", "B", "C", "D"])})  # fmt: skip
    images = Features({"image": Image(), "label": ClassLabel(names=list(IMAGENETTE_LABELS))})

    def image_split(seed: int) -> dict:
        labels = [c for c in range(len(IMAGENETTE_LABELS)) for _ in range(n_images)]
        return {"image": [{"bytes": image_png(c, seed + i), "path": None} for i, c in enumerate(labels)],
                "label": labels}  # fmt: skip

    return [
        write_dataset(root, "roneneldan/TinyStories", "default",
                      {"train": {"text": story_texts(n_stories, 1)}, "validation": {"text": story_texts(n_stories, 0)}},
                      stories),
        write_dataset(root, "cais/mmlu", "all",
                      {s: mmlu_rows(n_per_subject, seed) for seed, s in enumerate(MMLU_SPLITS)}, mmlu),
        write_dataset(root, "frgfm/imagenette", "320px",
                      {"train": image_split(1000), "validation": image_split(0)}, images),
    ]  # fmt: skip


def hub_models(config: dict) -> dict[str, dict]:
    """``{hub id: shipped architecture fields}`` of every model of ``config`` named by hub id.

    Raises:
        ValueError: naming a hub id whose fields are not shipped (add them to model_configs.json).
    """
    from entropy_lens.workflow.plan import shipped_model_configs

    shipped = shipped_model_configs()
    sources = {
        spec["source"] for spec in config.get("models", {}).values() if str(spec.get("source", "")).count("/") == 1
    }
    missing = sorted(s for s in sources if s not in shipped and not Path(s).exists())
    if missing:
        raise ValueError(
            f"no architecture fields for {missing}: add their config.json fields to "
            "entropy_lens/data/model_configs.json"
        )
    return {s: shipped[s] for s in sorted(sources) if s in shipped}


def write_cache(out: Path, config: dict) -> dict[str, Path]:
    """Every stand-in of ``config`` under ``out/hub`` and the datasets under ``out/datasets``."""
    texts = [*story_texts(256, 7), " ".join(mmlu_rows(4, 7)["question"])]
    tok = tokenizer(texts)
    written = {repo: write_model(out / "hub", repo, fields, tok) for repo, fields in hub_models(config).items()}
    write_datasets(out / "datasets")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the cache folder: hub/ for HF_HUB_CACHE, datasets/ for HF_DATASETS_CACHE")
    parser.add_argument("--configfile", default="config/paper.yaml", help="the config whose models to stand in for")
    args = parser.parse_args(argv)
    config = yaml.safe_load(Path(args.configfile).read_text())
    written = write_cache(Path(args.out), config)
    sys.stdout.write(f"{len(written)} model stand-ins and 3 datasets in {args.out} (random weights)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
