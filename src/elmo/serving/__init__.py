"""``elmo serve``: an HTTP embedding service that batches concurrent requests dynamically (docs/serving.md).

``serve_options`` (the settings), ``requests`` (checking a request body) and ``remote`` (``elmo embed --server``)
need nothing beyond the package; ``app`` and ``service`` need the ``serve`` extra (Starlette and uvicorn:
``pip install "elmo-bilm[serve]"``). The client is :mod:`elmo.client` (standard library and numpy only).
"""
