"""``elmo serve`` under load: dynamic batching against one request at a time, closed and open loop, on loopback.

Starts the service (the small configuration, 2x1024_128, random weights written to a temporary directory) in a
subprocess, and drives it from this process with :class:`elmo.client.ElmoClient` (binary answers, ``output=top``,
no retries), each request 1-3 real sentences of 3-50 tokens: the held-out split of the sample corpus the demo biLM
was trained on (A Christmas Carol, ../shared/data/lm/sample, as benchmarks/embed_throughput.py reads it), or, where
that is missing, the demo's own sentences shipped in the package (``elmo.embedding.demo.CONTEXTS``, 16 sentences).
Every phase is bounded in time and in requests:

* closed loop: N clients, each sending its next request when the last one is answered (N = 1, 8, 32);
* open loop: requests sent at a fixed rate whatever the answers do (5, 10, 20 requests/s for 20 s each, then four
  times the rate answered at 32 clients for 40 s, to go beyond capacity and see whether memory keeps growing); a
  request's latency counts from when it was due, so a backlog in the sender shows up;
* baseline: the same service with dynamic batching off (``--no-merge-requests --max-wait-ms 0``), at 1 and at
  32 clients. Both services run side by side, and the closed-loop runs of both are interleaved in rounds, so that
  a change in a shared machine's load hits them alike; a closed-loop row gives the median over the rounds of each
  run's sentences/s and tokens/s, and the ratio at 32 clients is printed per round and as the ratio of medians.

It prints the machine line, one table row per phase (requests, errors and 503s, sentences/s and tokens/s of
answered requests, latency p50/p95/p99 over every request of the phase, the service's resident memory after the
phase and its peak since start), and the issue's three checks: sentences/s at 32 clients against one request at a
time without batching (target >= 3x); p99 at 10 requests/s (target < 1 s); above capacity, the share of 503s and
the service's memory over the phase.

    PYTHONPATH=src .venv/bin/python benchmarks/serve_load.py            # about 5 minutes
    PYTHONPATH=src .venv/bin/python benchmarks/serve_load.py --seconds 2 --rounds 1 --open-seconds 2 \
        --above-seconds 4 --quick                                      # a smoke run, about 30 s
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from embed_throughput import write_random_model
from machine import machine_line

from elmo.client import ElmoClient, ServiceError

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lm" / "sample" / "sample.valid.txt"


def real_sentences(min_len: int = 3, max_len: int = 50) -> tuple[str, list[list[str]]]:
    """(where they come from, the sentences of ``min_len``-``max_len`` tokens)."""
    if SAMPLE.is_file():
        lines = [line.split() for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
        return "the demo biLM's held-out sample (A Christmas Carol)", [s for s in lines if min_len <= len(s) <= max_len]
    from elmo.embedding.demo import CONTEXTS

    return "the demo's sentences (../shared missing)", [sentence.split() for _, _, sentence in CONTEXTS]


def make_requests(sentences: list[list[str]], n: int, seed: int) -> list[list[list[str]]]:
    rng = random.Random(seed)
    return [rng.sample(sentences, rng.randint(1, 3)) for _ in range(n)]


# ---------------------------------------------------------------- the service


class Service:
    def __init__(self, model: Path, threads: int, *flags: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "elmo", "serve", "--model", str(model), "--port", str(self.port), *flags],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        client = ElmoClient(self.url)
        deadline = time.monotonic() + 300
        while not client.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise SystemExit(f"elmo serve did not start:\n{self.log.read()[-3000:]}")
            time.sleep(0.2)

    def memory_mb(self) -> tuple[float, float]:
        """(resident now, peak resident) of the service process, MB."""
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = {line.split(":")[0]: float(line.split()[1]) / 1024 for line in text.splitlines()
                  if line.startswith("Vm")}
        return fields["VmRSS"], fields["VmHWM"]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(120)


# ---------------------------------------------------------------- load


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    sentences: int = 0
    tokens: int = 0
    errors: int = 0
    rejected: int = 0  # 503
    sent: int = 0
    seconds: float = 0.0
    rss_mb: float = 0.0
    peak_mb: float = 0.0
    rss_samples: list[float] = field(default_factory=list)
    runs: list[tuple[float, float]] = field(default_factory=list)  # closed loop: (sentences/s, tokens/s) per round
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, request: list[list[str]], started: float, error: Exception | None) -> None:
        with self.lock:
            self.sent += 1
            if error is None:
                self.latencies.append(time.perf_counter() - started)
                self.sentences += len(request)
                self.tokens += sum(map(len, request))
            elif isinstance(error, ServiceError) and error.status == 503:
                self.rejected += 1
            else:
                self.errors += 1

    def rates(self) -> tuple[float, float]:
        """(sentences/s, tokens/s): the median over the rounds (closed loop), or over the phase (open loop)."""
        if self.runs:
            return statistics.median(r[0] for r in self.runs), statistics.median(r[1] for r in self.runs)
        return self.sentences / self.seconds, self.tokens / self.seconds

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def send(client: ElmoClient, phase: Phase, request: list[list[str]], started: float) -> None:
    try:
        client.embed(request, output="top")
        phase.record(request, started, None)
    except Exception as e:  # noqa: BLE001 - every failure is counted, none stops the run
        phase.record(request, started, e)


def closed_loop(service: Service, phase: Phase, clients: int, requests: list, seconds: float) -> float:
    """``clients`` clients for ``seconds`` (or until ``requests`` run out), added to ``phase``; returns this run's
    sentences/s."""
    client = ElmoClient(service.url, retries=0)
    deadline = time.perf_counter() + seconds
    next_request = iter(requests)
    lock = threading.Lock()
    sentences_before, tokens_before = phase.sentences, phase.tokens

    def one_client() -> None:
        while time.perf_counter() < deadline:
            with lock:
                request = next(next_request, None)
            if request is None:
                return
            send(client, phase, request, time.perf_counter())

    start = time.perf_counter()
    threads = [threading.Thread(target=one_client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    phase.seconds += elapsed
    phase.rss_mb, phase.peak_mb = service.memory_mb()
    phase.runs.append(((phase.sentences - sentences_before) / elapsed, (phase.tokens - tokens_before) / elapsed))
    return phase.runs[-1][0]


def open_loop(service: Service, name: str, rate: float, requests: list, seconds: float) -> Phase:
    """``rate`` requests/s for ``seconds`` (or until ``requests`` run out); latency from each request's due time.
    The service's resident memory is sampled at the start and about once a second."""
    phase = Phase(name)
    client = ElmoClient(service.url, retries=0)
    count = min(len(requests), int(rate * seconds))
    phase.rss_samples.append(service.memory_mb()[0])  # at the start, then about once a second
    start = time.perf_counter()
    with ThreadPoolExecutor(512) as pool:
        for i in range(count):
            due = start + i / rate
            while (wait := due - time.perf_counter()) > 0:
                time.sleep(min(wait, 0.5))
                if int(time.perf_counter() - start) >= len(phase.rss_samples):
                    phase.rss_samples.append(service.memory_mb()[0])
            pool.submit(send, client, phase, requests[i], due)
    phase.seconds = time.perf_counter() - start
    phase.rss_mb, phase.peak_mb = service.memory_mb()
    return phase


# ---------------------------------------------------------------- report


def row(phase: Phase) -> str:
    ok = len(phase.latencies)
    label, load = phase.name.split(": ", 1)
    sentences_per_s, tokens_per_s = phase.rates()
    return (f"| {label} | {load} | {phase.sent} | {phase.errors + phase.rejected} ({phase.rejected} x 503) "
            f"| {sentences_per_s:,.1f} | {tokens_per_s:,.0f} "
            f"| {ok / phase.seconds:,.1f} | {1000 * phase.percentile(50):,.0f} | {1000 * phase.percentile(95):,.0f} "
            f"| {1000 * phase.percentile(99):,.0f} | {phase.rss_mb:,.0f} / {phase.peak_mb:,.0f} |")


HEADER = ("| service | load | requests | failed | sentences/s | tokens/s | answered/s | p50 ms | p95 ms | p99 ms "
          "| RSS after / peak MB |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each closed-loop run")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the closed-loop runs, interleaved")
    parser.add_argument("--open-seconds", type=float, default=20.0, help="length of each open-loop phase")
    parser.add_argument("--above-seconds", type=float, default=40.0, help="length of the phase above capacity")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the service")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="closed-loop client counts")
    parser.add_argument("--rates", type=float, nargs="+", default=[5, 10, 20], help="open-loop requests/s")
    parser.add_argument("--max-requests", type=int, default=3000, help="most requests in one phase (the phase "
                        "above capacity: ten times as many)")
    parser.add_argument("--quick", action="store_true", help="skip the 8-client and 5 and 20 requests/s phases")
    parser.add_argument("--service-flags", default="", help="more flags for both services, e.g. '--vocab-cache 0'")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.rates = [1, 32], [10]
    print(machine_line())
    print("command: " + " ".join(["benchmarks/serve_load.py", *sys.argv[1:]]))
    source, sentences = real_sentences()
    print(f"small configuration (2x1024_128), random weights; services with {args.threads} torch threads"
          f"{' and ' + args.service_flags if args.service_flags else ''}; requests of 1-3 sentences "
          f"({len(sentences):,} of 3-50 tokens from {source}), output=top, binary answers; sentences/s and tokens/s "
          f"of closed-loop rows: median of the rounds; each service first embeds every sentence once (its "
          f"token-layer cache warm); closed loop: {args.rounds} interleaved rounds of {args.seconds:g} s runs, the "
          f"same requests for every run of a round; open loop: {args.open_seconds:g} s a rate, above capacity "
          f"{args.above_seconds:g} s; at most "
          f"{args.max_requests} requests a run\n\n{HEADER}", flush=True)
    closed = [("batching off", 1), ("batching off", 32), *(("dynamic batching", n) for n in args.clients)]
    results = {f"{label}: closed loop, {n} clients": Phase(f"{label}: closed loop, {n} clients") for label, n in closed}
    # each round runs the two sides of the ratio back to back, so that they see the same load of the machine
    run_order = [("batching off", 1), ("dynamic batching", 32),
                 *(c for c in closed if c not in (("batching off", 1), ("dynamic batching", 32)))]
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = write_random_model("small", Path(tmp) / "small")
        services = {"batching off": Service(model, args.threads, "--no-merge-requests", "--max-wait-ms", "0",
                                            *args.service_flags.split()),
                    "dynamic batching": Service(model, args.threads, *args.service_flags.split())}
        try:
            for service in services.values():  # every word in the token-layer cache of both: a service up a while
                ElmoClient(service.url, max_sentences=64).embed(sentences, output="top")
            for seed in range(args.rounds):  # interleaved: a change in the machine's load hits every run alike
                rates = {}
                requests = make_requests(sentences, args.max_requests, seed)  # the same load for every run of a round
                for label, n in run_order:
                    rates[label, n] = closed_loop(services[label], results[f"{label}: closed loop, {n} clients"], n,
                                                  requests, args.seconds)
                ratios.append(rates["dynamic batching", 32] / rates["batching off", 1])
            seed = args.rounds
            for phase in results.values():
                print(row(phase), flush=True)
            on = services["dynamic batching"]
            at_32 = results["dynamic batching: closed loop, 32 clients"]
            capacity = len(at_32.latencies) / at_32.seconds
            # above capacity: merged rounds grow with the queue, so open loop holds up to about twice the rate
            # that 32 closed-loop clients reach; four times it is well beyond
            above = round(max(4 * capacity, 2 * max(args.rates)))
            for rate, seconds, most in [*((r, args.open_seconds, args.max_requests) for r in args.rates),
                                        (above, args.above_seconds, 10 * args.max_requests)]:
                seed += 1
                phase = open_loop(on, f"dynamic batching: open loop, {rate:g} requests/s", rate,
                                  make_requests(sentences, most, seed), seconds)
                results[phase.name] = phase
                print(row(phase), flush=True)
        finally:
            for label, service in services.items():
                status = service.stop()
                if status != 0:
                    print(f"{label}: elmo serve exited with {status} after SIGTERM")
    summary(results, ratios)


def quarter_peaks(samples: list[float]) -> list[float]:
    """The largest sample in each quarter of ``samples`` (a memory that stops growing: equal late quarters)."""
    n = len(samples)
    return [max(samples[n * k // 4: max(n * (k + 1) // 4, n * k // 4 + 1)]) for k in range(4)]


def summary(results: dict[str, Phase], ratios: list[float]) -> None:
    base_rate = results["batching off: closed loop, 1 clients"].rates()[0]
    print()
    for name in ("batching off: closed loop, 32 clients", "dynamic batching: closed loop, 32 clients"):
        print(f"{name}: {results[name].rates()[0] / base_rate:.2f}x the sentences/s of one request at a time "
              "without batching (medians of the rounds; target for dynamic batching: >= 3x)")
    print(f"dynamic batching at 32 clients against one request at a time, per round: "
          f"{', '.join(f'{r:.2f}x' for r in ratios)} (median {statistics.median(ratios):.2f}x)")
    below = list(results.values())[:-1]
    failed, sent = sum(p.errors + p.rejected for p in below), sum(p.sent for p in below)
    print(f"below capacity (every phase but the last): {failed} of {sent} requests failed "
          f"({100 * failed / max(1, sent):.2f}%)")
    at_10 = next((p for n, p in results.items() if n.endswith("open loop, 10 requests/s")), None)
    if at_10 is not None:
        print(f"open loop, 10 requests/s: p99 {1000 * at_10.percentile(99):,.0f} ms (target < 1000 ms), "
              f"{at_10.errors + at_10.rejected} of {at_10.sent} failed")
    above = list(results.values())[-1]
    samples = above.rss_samples or [above.rss_mb]
    quarters = quarter_peaks(samples)
    print(f"above capacity ({above.name.split(', ')[-1]} for {above.seconds:.0f} s): {above.rejected} of "
          f"{above.sent} answered 503 ({100 * above.rejected / max(1, above.sent):.0f}%), {above.errors} other "
          f"failures, p99 of the answered {1000 * above.percentile(99):,.0f} ms; service RSS {samples[0]:,.0f} MB at "
          f"the start, most in each quarter of the phase {', '.join(f'{q:,.0f}' for q in quarters)} MB "
          f"({len(samples)} samples, one a second), {above.rss_mb:,.0f} MB at the end, {above.peak_mb:,.0f} MB peak "
          "since the service started")


if __name__ == "__main__":
    main()
