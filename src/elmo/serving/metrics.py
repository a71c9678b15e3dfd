"""The service's counters, gauges and histograms, written in the Prometheus text format (``GET /metrics``).

Written out here rather than through ``prometheus_client``: a dozen series in one process (each worker process
reports its own) do not need a dependency. Histograms are cumulative, with ``_bucket{le=...}``, ``_sum`` and
``_count`` as Prometheus expects.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from elmo.serving.requests import REASONS

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


class Histogram:
    def __init__(self, name: str, help: str, buckets: tuple[float, ...]) -> None:
        self.name, self.help, self.buckets = name, help, buckets
        self.counts = [0] * (len(buckets) + 1)  # the last: +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.sum += value

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        total = 0
        for bound, count in zip([*map(_number, self.buckets), "+Inf"], self.counts):
            total += count
            out.append(f'{self.name}_bucket{{le="{bound}"}} {total}')
        out += [f"{self.name}_sum {_number(self.sum)}", f"{self.name}_count {total}"]
        return out


class Metrics:
    """What ``/metrics`` reports; updated on the event loop only (no locks needed)."""

    def __init__(self) -> None:
        self.responses: Counter[tuple[str, int]] = Counter()  # (path, status) -> count
        self.bad_requests: Counter[str] = Counter({reason: 0 for reason in REASONS})  # refused bodies by reason
        self.sentences = 0
        self.tokens = 0
        self.batches = 0
        self.cancelled_requests = 0
        self.skipped_sentences = 0
        self.queue_requests = 0
        self.queue_sentences = 0
        self.ready = 0
        self.batch_sentences = Histogram("elmo_batch_sentences", "sentences per model batch", SIZE_BUCKETS)
        self.batch_tokens = Histogram("elmo_batch_tokens", "padded tokens per model batch (boundaries included)",
                                      SIZE_BUCKETS)
        self.round_requests = Histogram("elmo_round_requests", "requests merged into one round of batches",
                                        SIZE_BUCKETS)
        self.batch_seconds = Histogram("elmo_batch_seconds", "model time per batch (its sum over the elapsed time: "
                                       "how busy the model thread is)", LATENCY_BUCKETS)
        self.latency = Histogram("elmo_request_latency_seconds", "POST /v1/embed: from the body read to the "
                                 "answer ready, answered requests only", LATENCY_BUCKETS)
        self.queue_wait = Histogram("elmo_queue_wait_seconds", "time a request waited before its round started",
                                    LATENCY_BUCKETS)

    def text(self) -> str:
        lines = ["# HELP elmo_requests_total HTTP responses by path and status code",
                 "# TYPE elmo_requests_total counter"]
        lines += [f'elmo_requests_total{{path="{path}",code="{status}"}} {count}'
                  for (path, status), count in sorted(self.responses.items())]
        lines += ["# HELP elmo_bad_requests_total POST /v1/embed bodies refused with 400 or 413, by reason",
                  "# TYPE elmo_bad_requests_total counter"]
        lines += [f'elmo_bad_requests_total{{reason="{reason}"}} {count}'
                  for reason, count in sorted(self.bad_requests.items())]
        for name, kind, help, value in (
            ("elmo_sentences_total", "counter", "sentences embedded", self.sentences),
            ("elmo_tokens_total", "counter", "tokens embedded", self.tokens),
            ("elmo_batches_total", "counter", "model batches run", self.batches),
            ("elmo_cancelled_requests_total", "counter", "requests whose client went away before the answer",
             self.cancelled_requests),
            ("elmo_skipped_sentences_total", "counter", "sentences not run because their client went away",
             self.skipped_sentences),
            ("elmo_queue_requests", "gauge", "requests waiting for the model", self.queue_requests),
            ("elmo_queue_sentences", "gauge", "sentences waiting for the model", self.queue_sentences),
            ("elmo_ready", "gauge", "1 when the model is loaded and warm (0 again once SIGTERM or SIGINT came)",
             self.ready),
        ):
            lines += [f"# HELP {name} {help}", f"# TYPE {name} {kind}", f"{name} {value}"]
        for histogram in (self.batch_sentences, self.batch_tokens, self.batch_seconds, self.round_requests,
                          self.latency, self.queue_wait):
            lines += histogram.lines()
        return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
