"""Embedding text: the contract every embedder keeps (:mod:`~elmo.embedding.contract`), the local
:class:`~elmo.embedding.embedder.Embedder`, and the resumable, sharded file job of ``elmo embed``
(:mod:`~elmo.embedding.file_job`) with its batch planning, part files, token table dump and demo."""
