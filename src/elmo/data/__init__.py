"""Training data: corpus shards, vocabulary building, and row packing for truncated BPTT."""

from elmo.data.batching import LMBatch, PackerState, RowPacker, windows_to_batch
from elmo.data.corpus import SentencePosition, SentenceStream, expand_shards, read_sentences
from elmo.data.vocab_counts import count_words, vocabulary_from_counts

__all__ = [
    "LMBatch",
    "PackerState",
    "RowPacker",
    "SentencePosition",
    "SentenceStream",
    "count_words",
    "expand_shards",
    "read_sentences",
    "vocabulary_from_counts",
    "windows_to_batch",
]
