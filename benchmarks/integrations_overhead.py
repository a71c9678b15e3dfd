"""What each integration costs on top of the direct call: the same sentences through a tool's API vs
``Embedder.embed_sentences``, in one process, on the same model, at fp32.

Each row is one function below (``ROWS``): it gets the model spelling and the tokenised sentences and returns a
callable that embeds them all once through that integration. The direct call is the baseline row. Rounds are
interleaved (every row once per round, so a change in the machine's load hits all of them), after one warm-up call
per row; the table gives each row's median seconds, sentences/s and the ratio of medians to the direct call (the
issue's target: within 1.2x).

    PYTHONPATH=src nice .venv/bin/python benchmarks/integrations_overhead.py                # 2,000 sentences, demo
    PYTHONPATH=src nice .venv/bin/python benchmarks/integrations_overhead.py --only spacy --model original

The sentences are real text (the first lines of the shared Brown held-out file, already tokenised), so every
integration gets the same tokens: a row may add its tool's own tokenising as a separate row. "peak MB" is the most
resident memory a row's call added over what the process held when the call began (sampled every millisecond):
what the call's outputs and working buffers cost (the direct row drops each sentence's layers as it comes; a tool
keeps its vectors on its documents).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from machine import machine_line

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "lm" / "brown" / "brown.valid.txt"
Run = Callable[[], None]


def real_sentences(n: int) -> list[list[str]]:
    """The first ``n`` non-empty lines of Brown's held-out text (whitespace-tokenised, as they come)."""
    lines = (line.split() for line in CORPUS.read_text(encoding="utf-8").splitlines())
    picked = [tokens for tokens in lines if tokens]
    if len(picked) < n:
        raise SystemExit(f"only {len(picked)} sentences in {CORPUS}")
    return picked[:n]


def load_model(model: str):
    from elmo.formats.model_files import load_bilm

    return load_bilm(model)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(run: Run) -> tuple[float, int]:
    """Seconds of one call, and the most resident memory (bytes) it added over its start."""
    before = rss_bytes()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return seconds, max(peak[0], rss_bytes()) - before


# ------------------------------------------------------------------ one function per row


def direct(model: str, sentences: list[list[str]]) -> Run:
    """The baseline: ``Embedder.embed_sentences`` over the token lists (every layer, as the integrations get)."""
    from elmo.embedding.embedder import Embedder

    embedder = Embedder(load_model(model))
    return lambda: [None for _ in embedder.embed_sentences(sentences)]


def spacy_docs(model: str, sentences: list[list[str]]) -> Run:
    """spaCy: a blank English pipeline with the ``elmo`` component (output average, fp32), ``nlp.pipe`` over
    pre-tokenised ``Doc``s (the same tokens as the direct call, made once, outside the timing), all in one group:
    the component's own cost (token texts out, doc.tensor and the hooks in) on top of the model's."""
    import spacy
    from spacy.tokens import Doc

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": model})
    docs = [Doc(nlp.vocab, words=s) for s in sentences]
    return lambda: [None for _ in nlp.pipe(docs, batch_size=len(docs))]


def spacy_text(model: str, sentences: list[list[str]]) -> Run:
    """spaCy from text, its tokenizer included (tokens may differ a little from the direct call's: for scale)."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": model})
    texts = [" ".join(s) for s in sentences]
    return lambda: [None for _ in nlp.pipe(texts, batch_size=len(texts))]


def flair_sentences(model: str, sentences: list[list[str]]) -> Run:
    """Flair: ``ELMoEmbeddings(model)`` (output all, fp32: each token gets its (L + 1) * 2P vector) over pre-tokenised
    ``Sentence``s, all handed over in one ``embed`` call, as a tagger's ``predict`` with a big mini-batch does.
    Includes setting every token's vector; each run then clears them (so the next run embeds again; counted)."""
    from flair.data import Sentence

    from elmo.integrations.flair import ELMoEmbeddings

    embeddings = ELMoEmbeddings(model)
    flair_input = [Sentence(s) for s in sentences]

    def run() -> None:
        embeddings.embed(flair_input)
        for sentence in flair_input:
            sentence.clear_embeddings()

    return run


ROWS: dict[str, Callable[[str, list[list[str]]], Run]] = {
    "direct (Embedder.embed_sentences)": direct,
    "spacy (nlp.pipe over Docs)": spacy_docs,
    "spacy (nlp.pipe over text)": spacy_text,
    "flair (ELMoEmbeddings.embed over Sentences)": flair_sentences,
}
BASELINE = "direct (Embedder.embed_sentences)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="demo", help="any --model spelling (default: the shipped demo)")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the table gives medians")
    parser.add_argument("--only", action="append", default=[],
                        help="rows whose name contains this (repeatable); the baseline always runs")
    args = parser.parse_args()
    sentences = real_sentences(args.sentences)
    names = [n for n in ROWS if n == BASELINE or not args.only or any(o in n for o in args.only)]
    runs = {name: ROWS[name](args.model, sentences) for name in names}
    for run in runs.values():  # warm-up: first-batch allocations, lazily loaded weights
        run()
    times: dict[str, list[float]] = {name: [] for name in names}
    peaks: dict[str, int] = dict.fromkeys(names, 0)
    for _ in range(args.rounds):
        for name, run in runs.items():
            seconds, added = timed(run)
            times[name].append(seconds)
            peaks[name] = max(peaks[name], added)
    print(machine_line())
    tokens = sum(len(s) for s in sentences)
    print(f"model {args.model}, {len(sentences)} sentences ({tokens} tokens), median of {args.rounds} rounds\n")
    base = statistics.median(times[BASELINE])
    print("| row | median s | sentences/s | ratio to direct | peak MB |\n|---|---|---|---|---|")
    for name in names:
        median = statistics.median(times[name])
        print(f"| {name} | {median:.3f} | {len(sentences) / median:,.0f} | {median / base:.3f}x | "
              f"{peaks[name] / 2**20:,.0f} |")


if __name__ == "__main__":
    main()
