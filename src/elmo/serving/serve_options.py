"""The settings of ``elmo serve``: where it listens, how it batches, and the limits that protect it."""

from __future__ import annotations

from dataclasses import dataclass

from elmo.settings import check_at_least, setting


@dataclass(frozen=True)
class ServeOptions:
    """How the service listens, batches and refuses; every field is a flag of ``elmo serve``."""

    host: str = setting("127.0.0.1", "address to listen on (0.0.0.0: every interface; see the security note "
                        "in docs/serving.md)")
    port: int = setting(8080, "TCP port")
    workers: int = setting(1, "worker processes, each with its own model and batcher, sharing the port")
    max_batch_tokens: int = setting(4096, "most padded tokens (sentence boundaries included) in one model batch")
    max_batch_sentences: int = setting(64, "most sentences in one model batch")
    max_wait_ms: float = setting(5.0, "how long the first queued request waits for others to batch with "
                                 "(0: run at once; requests that arrive while the model runs still merge)")
    separate_requests: bool = setting(False, "run each request on its own: dynamic batching off (for comparisons)",
                                      flag="--no-merge-requests")
    vocab_cache: int = setting(50_000, "keep the token-layer vectors of up to N words across batches (0: off): a "
                               "service sees the same words again and again", metavar="N")
    """Unlike ``elmo embed`` (default off) the service caches: it cut the time of 2-sentence batches to 0.42
    (docs/benchmarks/serving.md). A word's vector is computed once and reused (equal up to float rounding
    to computing it in each batch)."""
    max_queue: int = setting(64, "most requests waiting for the model; more get 503 with Retry-After")
    max_request_sentences: int = setting(256, "most sentences in one request (more: 413)")
    max_sentence_tokens: int = setting(512, "most tokens in one sentence (more: 413)")
    max_request_tokens: int = setting(8192, "most tokens in one request, all sentences together (more: 413)")
    max_request_bytes: int = setting(1_000_000, "largest request body in bytes (more: 413)")
    access_log: bool = setting(False, "log one line per request")

    def __post_init__(self) -> None:
        check_at_least(self, 0, "port", "max_wait_ms", "vocab_cache")
        check_at_least(self, 1, "workers", "max_batch_tokens", "max_batch_sentences", "max_queue",
                       "max_request_sentences", "max_sentence_tokens", "max_request_tokens", "max_request_bytes")
