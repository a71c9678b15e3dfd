"""The settings of ``elmo serve``: where it listens, how it batches, and the limits that protect it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from elmo.embedding.embed_options import EmbedOptions
from elmo.precision import Precision
from elmo.settings import at_least, check_settings, greater_than, setting
from elmo.shared_settings import INITIAL_STATE, MAX_BATCH_TOKENS, PRECISION

LIMITS = ("max_request_sentences", "max_sentence_tokens", "max_request_tokens", "max_request_bytes", "body_timeout",
          "max_queue", "max_batch_tokens", "max_batch_sentences", "max_wait_ms")
"""The settings ``GET /v1/model`` reports as the service's ``limits``."""

SERVED_STATES = ("zero", "warm")
"""The initial states a service offers: with ``carry`` a sentence's vectors would depend on the requests batched
before it."""


def port_number(value: int) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a TCP port, 0 to 65535 (0: any free port), got {value!r}")
    return value


@dataclass(frozen=True)
class ServeOptions:
    """How the service listens, batches and refuses; every field is a flag of ``elmo serve``."""

    host: str = setting("127.0.0.1", "address to listen on (0.0.0.0: every interface; see the security note "
                        "in docs/serving.md)")
    port: int = setting(8080, "TCP port (0: any free port; the log says which)", check=port_number)
    workers: int = setting(1, "worker processes, each with its own model and batcher, sharing the port",
                           check=at_least(1))
    max_batch_tokens: int = MAX_BATCH_TOKENS.field(4096)
    """Smaller than ``elmo embed``'s: a service answers small requests, and a smaller batch answers sooner."""
    max_batch_sentences: int = setting(64, "most sentences in one model batch", check=at_least(1))
    max_wait_ms: float = setting(5.0, "how long the first queued request waits for others to batch with "
                                 "(0: run at once; requests that arrive while the model runs still merge)",
                                 check=at_least(0))
    separate_requests: bool = setting(False, "run each request on its own: dynamic batching off (for comparisons)",
                                      flag="--no-merge-requests")
    vocab_cache: int = setting(50_000, "keep the token-layer vectors of up to N words across batches (0: off): a "
                               "service sees the same words again and again", metavar="N", check=at_least(0))
    """Unlike ``elmo embed`` (default off) the service caches: small batches of the same frequent words are where the
    token layer's cost shows (docs/benchmarks/serving.md). A word's vector is computed once and reused (equal up to
    float rounding to computing it in each batch)."""
    max_queue: int = setting(64, "most requests waiting for the model; more get 503 with Retry-After",
                             check=at_least(1))
    max_request_sentences: int = setting(256, "most sentences in one request (more: 413)", check=at_least(1))
    max_sentence_tokens: int = setting(512, "most tokens in one sentence (more: 413)", check=at_least(1))
    max_request_tokens: int = setting(8192, "most tokens in one request, all sentences together (more: 413)",
                                      check=at_least(1))
    max_request_bytes: int = setting(1_000_000, "largest request body in bytes (more: 413)", check=at_least(1))
    body_timeout: float = setting(30.0, "seconds a request's body may take to arrive once its headers have (slower: "
                                  "408 and the connection closed)", check=greater_than(0), metavar="SECONDS")
    """A whole-body deadline, not an idle timeout: a client that trickles a byte at a time cannot hold a connection
    (and a graceful stop) open longer than this."""
    access_log: bool = setting(False, "log one line per request")
    page: bool = setting(True, "serve the page that explores the model's vectors at / (its files load without the "
                         "API key; the API calls it makes need it)")
    precision: Precision = PRECISION.field()
    initial_state: str = dataclasses.replace(
        INITIAL_STATE, choices=SERVED_STATES,
        help=f"where each sentence's LSTM state starts: {' or '.join(SERVED_STATES)}, as in `elmo embed` (carry is "
             "not served: a sentence's vectors would depend on the requests batched before it)").field()
    """The shared setting, narrowed to :data:`SERVED_STATES`: its flag offers only what the service does."""

    def __post_init__(self) -> None:
        check_settings(self)

    def embed_options(self) -> EmbedOptions:
        """How the service's model runs: its batches are the service's."""
        return EmbedOptions(precision=self.precision, initial_state=self.initial_state,
                            max_batch_tokens=self.max_batch_tokens, batch_size=self.max_batch_sentences,
                            vocab_cache=self.vocab_cache)
