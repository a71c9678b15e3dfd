"""Embedding text at scale: the :class:`~elmo.embedding.embedder.Embedder`, the input reader, batch planning, the
resumable sharded writer, the token-layer cache, the token table dump and the demo."""
