"""A Python client for ``elmo serve`` (standard library and numpy only)::

    from elmo.client import ElmoClient

    client = ElmoClient("http://127.0.0.1:8080")           # api_key=..., else $ELMO_API_KEY if set
    layers = client.embed([["The", "bank", "."], "whitespace tokenised text"])   # [(L + 1, n, 2P), ...]
    top = client.embed(sentences, output="top", dtype="float16")               # [(n, 2P), ...]

It asks for the binary answer (``Accept: application/x-npy``: one .npy file per sentence, concatenated in request
order; docs/serving.md), splits long lists into requests of at most ``max_sentences``, and waits and retries when
the service answers 503 (queue full) with ``Retry-After``. Any other refusal raises :class:`ServiceError` with the
service's message.
"""

from __future__ import annotations

import io
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence

import numpy as np

from elmo.errors import ElmoError

NPY = "application/x-npy"
API_KEY_ENV = "ELMO_API_KEY"


class ServiceError(ElmoError):
    """The service refused a request: ``status`` is the HTTP status, the message the service's own."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def decode_npy(body: bytes) -> list[np.ndarray]:
    """The binary answer of ``POST /v1/embed``: concatenated .npy files -> their arrays, in order."""
    stream = io.BytesIO(body)
    arrays = []
    while stream.tell() < len(body):
        arrays.append(np.lib.format.read_array(stream, allow_pickle=False))
    return arrays


class ElmoClient:
    """Talks to one ``elmo serve`` at ``url`` (e.g. ``http://127.0.0.1:8080``).

    Args:
        api_key: sent as ``Authorization: Bearer KEY``; default ``$ELMO_API_KEY`` when set.
        timeout: seconds to wait for one answer.
        max_sentences: most sentences per request (the service's default limit is 256).
        retries: how many times a 503 (queue full) is retried after its ``Retry-After``; 0: raise at once.
    """

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 300.0, max_sentences: int = 64,
                 retries: int = 5) -> None:
        if not url.startswith(("http://", "https://")):
            raise ElmoError(f"{url}: the service URL must start with http:// or https://")
        self.url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self.timeout = timeout
        self.max_sentences = max_sentences
        self.retries = retries

    def embed(self, sentences: Iterable[Sequence[str] | str], output: str = "all",
              dtype: str = "float32", **selection: object) -> list[np.ndarray]:
        """One array per sentence (a token list, or a string split on whitespace), shaped as ``elmo embed``
        stores it: ``all`` (L + 1, n, 2P), ``top`` or ``average`` (n, 2P); ``selection`` adds the request's other
        fields (``pool="mean"``, ``layer=2`` in place of ``output``, ``mix_weights=[...]``, ``mix_gamma``:
        docs/serving.md), e.g. one (2P,) vector per sentence with ``pool="mean", output="average"``."""
        if isinstance(sentences, str):
            raise TypeError(f"ElmoClient.embed: got the str {sentences[:40]!r} where a list of sentences is "
                            "expected; pass [text]")
        sentences = [s if isinstance(s, str) else list(s) for s in sentences]
        which = {} if "layer" in selection else {"output": output}  # layer=...: the newer name of output
        arrays: list[np.ndarray] = []
        for start in range(0, len(sentences), self.max_sentences):
            body = json.dumps({"sentences": sentences[start: start + self.max_sentences], **which,
                               "dtype": dtype, **selection}).encode()
            arrays += decode_npy(self._request("POST", "/v1/embed", body, accept=NPY))
        return arrays

    def model(self) -> dict:
        """The served model: name, num_layers (L + 1), output_dim (2P), precision, and the service's limits."""
        return json.loads(self._request("GET", "/v1/model"))

    def ready(self) -> bool:
        """Whether the model is loaded and warm (``/readyz``); False while it warms up or if it cannot be reached."""
        try:
            self._request("GET", "/readyz", retry=False)
            return True
        except ElmoError:
            return False

    def _request(self, method: str, path: str, body: bytes | None = None, accept: str = "application/json",
                 retry: bool = True) -> bytes:
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return response.read()
            except urllib.error.HTTPError as e:
                wait = e.headers.get("Retry-After", "")
                if e.code == 503 and retry and attempt < self.retries and wait.isdigit():
                    time.sleep(int(wait))
                    continue
                raise ServiceError(f"{self.url}{path}: {e.code} {_message(e)}", e.code) from None
            except urllib.error.URLError as e:
                raise ElmoError(f"{self.url}: cannot reach the service ({e.reason})") from None
            except (TimeoutError, ConnectionError) as e:
                raise ElmoError(f"{self.url}{path}: the connection failed ({e})") from None
        raise AssertionError("unreachable")


def _message(e: urllib.error.HTTPError) -> str:
    text = e.read().decode("utf-8", "replace")
    try:
        return json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        return text.strip() or e.reason
