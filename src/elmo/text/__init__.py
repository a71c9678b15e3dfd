"""From a user's text to what the model reads: the one reader of tokenised sentences (``sentences.py``, over plain
text, CoNLL-U, FASTA and JSONL/Parquet records), vocabularies, and tokens to character ids (bilm-tf's bytes:
``char_encoding.py``; ELMoForManyLangs' lexicons: ``manylangs_vocab.py``)."""
