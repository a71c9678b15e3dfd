"""Contextual nearest neighbours of one word's uses (the paper's Table 4): for each use of the word in a corpus,
the other tokens of the corpus whose vectors in a chosen layer (default the top) are closest by cosine, with their
sentences; beside them the token layer's neighbours, which are the same for every use (the token layer sees only
the word's characters), listed once, among the corpus's distinct other words.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import islice

import numpy as np

from elmo.embedding.embedder import Embedder
from elmo.errors import ElmoError, InputFileError
from elmo.probing.activations import compute_activations
from elmo.runtime.text_files import display_name
from elmo.text.sentences import read_sentences


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _marked(tokens: list[str], position: int) -> str:
    return " ".join(f"[{t}]" if i == position else t for i, t in enumerate(tokens))


def word_neighbours(
    embedder: Embedder,
    sentences: list[list[str]],
    word: str,
    layer: int = -1,
    k: int = 5,
    max_uses: int | None = None,
) -> dict:
    """The ``k`` nearest other tokens of each use of ``word`` (exact match) in ``layer``, and its token-layer
    neighbours; a JSON-ready dict (sentences shown with the token in brackets)."""
    if not 0 < k:
        raise ElmoError(f"--k must be >= 1, got {k}")
    uses = [(i, j) for i, s in enumerate(sentences) for j, t in enumerate(s) if t == word]
    if not uses:
        raise ElmoError(f"{word!r} does not occur in the corpus ({len(sentences)} sentences)")
    uses = uses[:max_uses]
    layers = embedder.num_layers
    if not -layers <= layer < layers:
        raise ElmoError(f"--layer {layer}: the model has layers 0 to {layers - 1}")
    acts = compute_activations(embedder, sentences)
    contextual = _unit(acts.layer(layer))  # (N, 2P)
    where = {(int(s), int(p)): row for row, (s, p) in enumerate(acts.tokens)}
    result_uses = []
    for s, p in uses:
        row = where[(s, p)]
        similarity = contextual @ contextual[row]  # (N,)
        similarity[row] = -np.inf
        nearest = np.argsort(-similarity, kind="stable")[:k]
        result_uses.append({
            "sentence": s, "position": p, "text": _marked(sentences[s], p),
            "neighbours": [{
                "token": sentences[int(acts.tokens[n, 0])][int(acts.tokens[n, 1])],
                "sentence": int(acts.tokens[n, 0]), "position": int(acts.tokens[n, 1]),
                "cosine": round(float(similarity[n]), 4),
                "text": _marked(sentences[int(acts.tokens[n, 0])], int(acts.tokens[n, 1])),
            } for n in nearest],
        })
    types: dict[str, int] = {}
    for row, (s, p) in enumerate(acts.tokens):
        types.setdefault(sentences[int(s)][int(p)], row)
    others = [w for w in types if w != word]
    token_layer = _unit(acts.layer(0)[[types[w] for w in others]]) if others else np.zeros((0, 1))
    query = _unit(acts.layer(0)[types[word]])
    similarity = token_layer @ query if others else np.zeros(0)
    nearest = np.argsort(-similarity, kind="stable")[:k]
    return {
        "word": word, "layer": layer % layers, "uses_in_corpus": len([1 for s in sentences for t in s if t == word]),
        "uses": result_uses,
        "token_layer": [{"token": others[n], "cosine": round(float(similarity[n]), 4)} for n in nearest],
    }


def read_corpus(
    path: str | os.PathLike, input_format: str = "text", max_sentences: int | None = None
) -> list[list[str]]:
    """The first ``max_sentences`` non-empty sentences of a text (one per line) or CoNLL-U file."""
    lines: Iterator = (line.tokens for line in read_sentences(path, input_format, what="input file") if line.tokens)
    sentences = list(islice(lines, max_sentences))
    if not sentences:
        raise InputFileError(f"{display_name(path)}: no sentences")
    return sentences


def format_neighbours(result: dict) -> str:
    """The text ``elmo neighbours`` prints."""
    out = [f"{result['word']!r}: {result['uses_in_corpus']} uses in the corpus; nearest tokens by layer "
           f"{result['layer']} (cosine), each use:"]
    for use in result["uses"]:
        out.append(f"\n  {use['text']}")
        out.extend(f"    {n['cosine']:.3f}  {n['token']:<12}  {n['text']}" for n in use["neighbours"])
    out.append("\ntoken layer (layer 0, the same for every use): "
               + ", ".join(f"{n['token']} {n['cosine']:.3f}" for n in result["token_layer"]))
    return "\n".join(out)
