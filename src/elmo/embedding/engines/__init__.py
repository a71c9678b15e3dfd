"""Where a file job's chunks run: each engine is one class that keeps
:class:`~elmo.embedding.chunks.ChunkEngine` (``local.py``: here, one chunk after another; ``ray.py``: on a pool of
Ray actors). Every engine's workers call :func:`~elmo.embedding.chunks.embed_chunk`, so the files are the same."""
