"""ELMoForManyLangs model directories with seeded random weights, written in the original's own layout: config.json
naming the model config, char.dic/word.dic as its trainer prints them (``token<TAB>id``), and the two state dicts
torch.save'd under the original module names and shapes (``legacy=True``: the pre-1.6 pickle format the 2018
releases use)."""

from __future__ import annotations

import json
import string
from collections import OrderedDict
from pathlib import Path

import torch

REAL_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]

CHARS = list(string.ascii_lowercase) + list("ZüéïàçÉ中文日本語字") + ["\xa0", "\u200b"]
"""The characters of the test lexicon. The original reader strips the NBSP line down to its id, so that entry
becomes U+3000; U+200B is not whitespace and stays."""
WORDS = ["the", "cat", "sat", "on", "mat", "café", "naïve", "Zürich", "中文", "日本語", "w" * 48]


def char_lexicon() -> dict[str, int]:
    """As the original trainer builds it: the characters in order of appearance, then the six specials."""
    lexicon = {c: i for i, c in enumerate(CHARS)}
    for special in ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]:
        lexicon[special] = len(lexicon)
    return lexicon


def word_lexicon() -> dict[str, int]:
    lexicon: dict[str, int] = {}
    for special in ["<oov>", "<bos>", "<eos>", "<pad>"]:
        lexicon[special] = len(lexicon)
    for word in WORDS:
        lexicon[word] = len(lexicon)
    return lexicon


def model_config(dim: int, projection_dim: int, filters: list[list[int]], n_highway: int, word_dim: int,
                 char_dim: int) -> dict:
    return {
        "encoder": {"name": "elmo", "projection_dim": projection_dim, "cell_clip": 3, "proj_clip": 3, "dim": dim,
                    "n_layers": 2},
        "token_embedder": {"name": "cnn", "activation": "relu", "filters": filters, "n_highway": n_highway,
                           "word_dim": word_dim, "char_dim": char_dim, "max_characters_per_token": 50},
        "classifier": {"name": "sampled_softmax", "n_samples": 8192},
        "dropout": 0.1,
    }


def write_manylangs_model(
    directory: Path, *, dim: int = 48, projection_dim: int = 16, filters: list[list[int]] | None = None,
    n_highway: int = 2, word_dim: int = 8, char_dim: int = 6, seed: int = 0, legacy: bool = False,
    config_name: str = "cnn_50_100_512_4096_sample.json", write_model_config: bool = True, write_weights: bool = True,
) -> Path:
    """Write a model directory; sizes default to a small model, ``REAL_FILTERS`` + 4096/512 give the real one."""
    filters = filters or [[1, 4], [2, 8], [3, 16]]
    directory.mkdir(parents=True, exist_ok=True)
    config = model_config(dim, projection_dim, filters, n_highway, word_dim, char_dim)
    if write_model_config:
        (directory / config_name).write_text(json.dumps(config, indent=1))
    (directory / "config.json").write_text(json.dumps({"config_path": config_name, "model": str(directory),
                                                       "seed": seed, "max_sent_len": 20}))
    chars, words = char_lexicon(), word_lexicon()
    for name, lexicon in (("char.dic", chars), ("word.dic", words)):
        with open(directory / name, "w", encoding="utf-8", newline="\n") as f:
            for token, index in lexicon.items():
                print(f"{token}\t{index}", file=f)  # the original trainer's writer
    if not write_weights:
        return directory
    generator = torch.Generator().manual_seed(seed)

    def uniform(*shape: int, scale: float) -> torch.Tensor:
        return (torch.rand(*shape, generator=generator) * 2 - 1) * scale

    def table(rows: int, width: int) -> torch.Tensor:
        x = uniform(rows, width, scale=0.25)
        return x / x.norm(dim=1, keepdim=True)  # the original's EmbeddingLayer(normalize=True)

    token: dict[str, torch.Tensor] = {"word_emb_layer.embedding.weight": table(len(words), word_dim),
                                      "char_emb_layer.embedding.weight": table(len(chars), char_dim)}
    for i, (width, num) in enumerate(filters):
        token[f"convolutions.{i}.weight"] = uniform(num, char_dim, width, scale=(char_dim * width) ** -0.5)
        token[f"convolutions.{i}.bias"] = uniform(num, scale=0.1)
    n_filters = sum(n for _, n in filters)
    for i in range(n_highway):
        token[f"highways._layers.{i}.weight"] = uniform(2 * n_filters, n_filters, scale=n_filters ** -0.5)
        token[f"highways._layers.{i}.bias"] = uniform(2 * n_filters, scale=0.1)
    token["projection.weight"] = uniform(projection_dim, word_dim + n_filters, scale=(word_dim + n_filters) ** -0.5)
    token["projection.bias"] = uniform(projection_dim, scale=0.1)
    encoder: dict[str, torch.Tensor] = {}
    for layer in range(2):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}."
            encoder[prefix + "input_linearity.weight"] = uniform(4 * dim, projection_dim, scale=projection_dim ** -0.5)
            encoder[prefix + "state_linearity.weight"] = uniform(4 * dim, projection_dim, scale=projection_dim ** -0.5)
            bias = uniform(4 * dim, scale=0.1)
            bias[dim : 2 * dim] += 1.0  # the forget gate's offset, as the original initialises it
            encoder[prefix + "state_linearity.bias"] = bias
            encoder[prefix + "state_projection.weight"] = uniform(projection_dim, dim, scale=dim ** -0.5)
    save = {"_use_new_zipfile_serialization": False} if legacy else {}
    torch.save(OrderedDict(token), directory / "token_embedder.pkl", **save)  # what state_dict() returns
    torch.save(OrderedDict(encoder), directory / "encoder.pkl", **save)
    return directory
