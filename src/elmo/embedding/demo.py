"""The README's demo: embed example sentences, then show that one word gets different vectors in different contexts.

For each ambiguous word (bank, play, ...) every occurrence is embedded in its sentence; each occurrence's
nearest other occurrence (cosine similarity of the ELMo vectors) should share its sense. The token layer, which
sees no context, gives every occurrence the same vector, which is the point of contextual representations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elmo.errors import ConfigError
from elmo.runtime.atomic_files import write_text_atomic

if TYPE_CHECKING:  # the CLI reads DEMO_FILES when it builds its parser: no model code imported for that
    from elmo.embedding.embedder import Embedder
    from elmo.modules.bilm import BiLM

SENTENCES_FILE, EMBEDDINGS_FILE = "sentences.txt", "embeddings.hdf5"
DEMO_FILES = (SENTENCES_FILE, EMBEDDINGS_FILE)
"""What ``elmo demo`` writes into its output directory (and nothing else there)."""

# (word, sense, sentence): written for this demo.
CONTEXTS: list[tuple[str, str, str]] = [
    ("bank", "money", "She deposited the money at the bank on Friday ."),
    ("bank", "money", "The bank raised its interest rates again ."),
    ("bank", "money", "He asked the bank for a loan to buy the house ."),
    ("bank", "river", "They sat on the bank of the river and fished ."),
    ("bank", "river", "The boat drifted toward the muddy bank of the stream ."),
    ("bank", "river", "Flowers grew along the green bank by the water ."),
    ("play", "theatre", "We went to see a play at the theatre last night ."),
    ("play", "theatre", "The play was written by a famous author ."),
    ("play", "theatre", "She acted in a play about an old king ."),
    ("play", "game", "The children play in the garden every morning ."),
    ("play", "game", "Let us play a game of cards after dinner ."),
    ("play", "game", "The boys like to play in the street ."),
    ("light", "lamp", "Please turn on the light in the hall ."),
    ("light", "lamp", "The light of the candle filled the room ."),
    ("light", "weight", "The basket was light enough for a child to carry ."),
    ("light", "weight", "She wore a light summer dress ."),
]


@dataclass
class Neighbour:
    word: str
    sense: str
    sentence: str
    nearest_sense: str
    nearest_sentence: str
    similarity: float


def word_vectors(embedder: Embedder, contexts: list[tuple[str, str, str]], layer: int | None) -> np.ndarray:
    """One vector per context for its target word: a layer index, or None for the mean of all layers."""
    sentences = [sentence.split() for _, _, sentence in contexts]
    vectors = []
    for (word, _, _), tokens, layers in zip(contexts, sentences, embedder.embed_sentences(sentences)):
        position = tokens.index(word)
        chosen = layers.mean(axis=0) if layer is None else layers[layer]  # (n, 2P)
        vectors.append(chosen[position])
    return np.stack(vectors)  # (N, 2P)


def nearest_neighbours(vectors: np.ndarray, contexts: list[tuple[str, str, str]]) -> list[Neighbour]:
    """For each context, the most similar other context of the same word (words used once are skipped)."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T  # (N, N)
    out = []
    for i, (word, sense, sentence) in enumerate(contexts):
        same_word = [j for j, c in enumerate(contexts) if c[0] == word and j != i]
        if not same_word:
            continue
        j = max(same_word, key=lambda k: similarity[i, k])
        out.append(Neighbour(word, sense, sentence, contexts[j][1], contexts[j][2], float(similarity[i, j])))
    return out


def sense_accuracy(neighbours: list[Neighbour]) -> float:
    """Fraction of occurrences whose nearest neighbour has the same sense."""
    return sum(n.sense == n.nearest_sense for n in neighbours) / len(neighbours)


def format_table(neighbours: list[Neighbour]) -> str:
    lines = ["| word | sentence | nearest other use | cosine | same sense |", "|---|---|---|---|---|"]
    for n in neighbours:
        mark = "yes" if n.sense == n.nearest_sense else "no"
        lines.append(f"| {n.word} | {n.sentence} | {n.nearest_sentence} | {n.similarity:.3f} | {mark} |")
    return "\n".join(lines)


def run_demo(bilm: BiLM, output_dir: str | Path, model_name: str = "demo", force: bool = False) -> str:
    """``elmo demo``: embed :data:`CONTEXTS` into ``output_dir`` and return the report (Markdown table included).
    :data:`DEMO_FILES` already in ``output_dir`` are refused unless ``force``; nothing else there is touched."""
    from elmo.embedding.embed_options import OutputOptions
    from elmo.embedding.embedder import Embedder
    from elmo.embedding.file_job import EmbedFileJob

    out_dir = Path(output_dir)
    sentences, embeddings = out_dir / SENTENCES_FILE, out_dir / EMBEDDINGS_FILE
    for path in (sentences, embeddings):
        if not force and os.path.lexists(path):
            raise ConfigError(f"{path} exists; pass --force to replace it")
    embedder = Embedder(bilm, batch_size=16, model_name=model_name)
    write_text_atomic(sentences, "".join(f"{s}\n" for _, _, s in CONTEXTS))
    EmbedFileJob(embedder, OutputOptions(force=True)).run(sentences, embeddings)  # checked above
    token_layer = nearest_neighbours(word_vectors(embedder, CONTEXTS, layer=0), CONTEXTS)
    neighbours = nearest_neighbours(word_vectors(embedder, CONTEXTS, layer=None), CONTEXTS)
    low, high = min(n.similarity for n in token_layer), max(n.similarity for n in token_layer)
    return "\n\n".join([
        f"Embedded {len(CONTEXTS)} sentences into {embeddings} (all layers, keys = line numbers).",
        f"Token layer (no context): every use of a word has the same vector, cosine {low:.3f}-{high:.3f}.",
        "ELMo (mean of all layers): each use's nearest other use of the same word",
        format_table(neighbours),
        f"Nearest neighbour has the same sense for {sense_accuracy(neighbours):.0%} of the uses.",
    ])
