"""Precompute the token layer for a whole vocabulary (the original ``dump_token_embeddings``).

A biLM run from word ids over this table gives the same activations as the char CNN for in-vocabulary words,
and skips the CNN at inference.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from elmo.formats.hdf5 import write_hdf5_atomic
from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.text.char_encoding import batch_to_ids
from elmo.text.vocab import Vocabulary


@torch.inference_mode()
def token_embedding_table(bilm: BiLM, vocab: Vocabulary, batch_size: int = 1024) -> np.ndarray:
    """(V, P) float32: the char-CNN output of every vocabulary word, in vocabulary order."""
    encoder = bilm.token_encoder
    if not isinstance(encoder, CharCNNEncoder):
        raise ValueError("token_embedding_table needs a character-input biLM")
    width = encoder.config.max_characters_per_token
    device = next(encoder.parameters()).device
    rows = []
    for start in range(0, len(vocab), batch_size):
        words = vocab.words[start : start + batch_size]
        ids = batch_to_ids([[w] for w in words], width).to(device)  # (n, 1, W)
        rows.append(encoder(ids)[:, 0].float().cpu().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, encoder.output_dim), dtype=np.float32)


def dump_token_embeddings(
    bilm: BiLM, vocab_path: str | os.PathLike, output_path: str | os.PathLike, batch_size: int = 1024
) -> int:
    """Write dataset ``embedding`` (V, P) for the vocabulary file; returns V."""
    vocab = Vocabulary.from_file(vocab_path)
    table = token_embedding_table(bilm, vocab, batch_size)
    write_hdf5_atomic(output_path, {"embedding": table})
    return len(vocab)
