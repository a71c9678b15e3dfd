"""Embedding text at scale: reading input lines, batching, the resumable sharded writer, precision, caching.

``elmo.embed`` holds the user-facing :class:`~elmo.embed.Embedder`; the pieces it is built from live here.
"""
