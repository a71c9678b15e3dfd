"""The page of ``elmo serve`` that shows what a model does (``GET /``): plain HTML, CSS and JavaScript modules shipped
in the package (``serving/page/``), no build step, nothing loaded from anywhere else. The page computes every view
(cosine heatmap, nearest other occurrences per layer, PCA of one word's occurrences, the model card) from the
service's own JSON API, so what it shows is what any client gets.

The files load without the API key: they hold nothing about the model. The page asks the user for the key and sends
it with each API call, keeping it in the browser tab only (sessionStorage). Every file is sent with a
Content-Security-Policy that allows scripts and styles from this origin only (no inline code), connections to this
origin only, and no framing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from elmo.embedding.demo import CONTEXTS

PAGE_DIR = Path(__file__).with_name("page")
INDEX = "index.html"
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
               ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".json": "application/json"}
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}
SETUP = "/page/setup.json"


@dataclass(frozen=True)
class PageFile:
    body: bytes
    media_type: str


def page_files(api_key_required: bool) -> dict[str, PageFile]:
    """URL path -> file: the page at ``/``, each other file of ``page/`` at ``/page/NAME``, and :data:`SETUP`:
    whether the API wants a key (so the page asks before its first call) and the example sentences of
    ``elmo demo`` (the same words in both places)."""
    files = {}
    for path in sorted(PAGE_DIR.iterdir()):
        if path.is_file() and path.suffix in MEDIA_TYPES:
            url = "/" if path.name == INDEX else f"/page/{path.name}"
            files[url] = PageFile(path.read_bytes(), MEDIA_TYPES[path.suffix])
    examples: dict[str, list[str]] = {}
    for word, _, sentence in CONTEXTS:
        examples.setdefault(word, []).append(sentence)
    setup = {"api_key_required": api_key_required, "examples": examples}
    files[SETUP] = PageFile(json.dumps(setup).encode(), MEDIA_TYPES[".json"])
    return files
