"""The embedding pipeline (``--pipeline``): the same vectors bit for bit as one batch at a time, in batch order, with
bounded reused host buffers, and a clean stop whichever stage fails, when the consumer stops early, and on a stop
request."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from elmo.embedding.contract import embed_unordered
from elmo.embedding.embedder import PIPELINE_DEPTH, Embedder
from elmo.embedding.pipeline import THREAD_PREFIX, BatchPipeline, HostBuffers, bucket_of, pipelined
from elmo.errors import Interrupted
from elmo.formats.model_files import load_bilm
from elmo.runtime.interrupts import stop_on_signals

WORDS = "the a cat dog sat on mat , . ran quickly über naïve 東京 x y z".split()


def _batches() -> list[list[list[str]]]:
    """Batches of different shapes: sizes 1-9 sentences, lengths 1-40 tokens, one longer than a 64-position window
    (it runs a window at a time), an empty sentence and a repeated batch (the vocabulary cache hits)."""
    rng = np.random.default_rng(58)
    batches = [[list(rng.choice(WORDS, size=int(rng.integers(1, 40)))) for _ in range(int(rng.integers(1, 10)))]
               for _ in range(8)]
    batches.insert(3, [list(rng.choice(WORDS, size=90)), ["x"], []])
    return batches + [batches[0]]


def _pipeline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


@pytest.fixture(scope="module")
def demo():
    return load_bilm("demo")


@pytest.mark.parametrize("initial_state", ["zero", "carry"])
def test_the_pipeline_gives_the_vectors_of_one_batch_at_a_time_bit_for_bit(demo, initial_state):
    options = {"vocab_cache": 20, "sequence_window": 64, "initial_state": initial_state}
    off = Embedder(demo, device="cpu", pipeline="off", **options)
    on = Embedder(demo, device="cpu", pipeline="on", **options)
    batches = _batches()
    expected = [off.embed_batch(batch) for batch in batches]
    got = list(on.embed_batches(batches))
    assert [[x.shape for x in batch] for batch in got] == [[x.shape for x in batch] for batch in expected]
    assert all(np.array_equal(a, b) for want, have in zip(expected, got, strict=True)
               for a, b in zip(want, have, strict=True))
    assert on.pipeline_stats.batches == len(batches) and on.pipeline_stats.busy_s > 0
    assert on.host_buffers.lent == 0 and not _pipeline_threads()
    assert all(np.array_equal(a, b) for a, b in zip(off.embed_sentences(sum(batches, [])),
                                                    on.embed_sentences(sum(batches, [])), strict=True))


def test_auto_is_on_with_cuda_only():
    assert [pipelined(choice, "cpu") for choice in ("auto", "on", "off")] == [False, True, False]
    assert [pipelined(choice, "cuda") for choice in ("auto", "on", "off")] == [True, True, False]


def _slow(seconds: float):
    def stage(x):
        time.sleep(seconds)
        return x
    return stage


def test_results_come_in_batch_order_whichever_stage_is_slow():
    for prepare, run, collect in [(_slow(0.01), _slow(0), _slow(0)), (_slow(0), _slow(0.01), _slow(0)),
                                  (_slow(0), _slow(0), lambda x: time.sleep(0.02 * (x % 3 == 0)) or x)]:
        assert list(BatchPipeline(prepare, run, collect, depth=2)(range(20))) == list(range(20))
    assert not _pipeline_threads()


def test_one_buffer_per_bucket_reused_and_a_view_of_the_shape_asked():
    buffers = HostBuffers("cpu", limit=3)
    shapes = [(2, 3, 5, 4), (2, 3, 6, 4), (1, 3, 40, 4), (2, 3, 5, 4), (1, 1, 1, 1), (4, 3, 10, 4)]
    for shape in shapes:
        lent = buffers.lend(shape)
        assert lent.tensor.shape == shape and lent.array.shape == shape and not buffers.pinned
        lent.array[...] = 1.5
        lent.give_back()
        lent.give_back()  # once only
    buckets = {bucket_of(int(np.prod(s))) for s in shapes}
    assert buckets == {128, 256, 512, 1} and buffers.allocations == len(buckets)
    assert buffers.reuses == len(shapes) - len(buckets) and buffers.lent == 0
    assert buffers.allocated_bytes == 4 * sum(buckets)


def test_a_lender_waits_while_limit_buffers_are_lent():
    buffers = HostBuffers("cpu", limit=2)
    held = [buffers.lend((8,)), buffers.lend((8,))]
    got = []
    waiter = threading.Thread(target=lambda: got.append(buffers.lend((8,))))
    waiter.start()
    time.sleep(0.1)
    assert not got and buffers.lent == 2  # blocked
    held[0].give_back()
    waiter.join(5)
    assert len(got) == 1 and buffers.most_lent == 2 and buffers.allocations == 2 and buffers.reuses == 1


def test_a_pipeline_never_lends_more_than_depth_plus_one_buffers():
    """A slow collect lets the run stage get ahead until the lender blocks it."""
    buffers = HostBuffers("cpu", limit=PIPELINE_DEPTH + 1)
    sizes = [7, 30, 7, 7, 100, 30, 7, 7, 7, 100, 7, 30]

    def collect(lent):
        time.sleep(0.02)
        try:
            return float(lent.ready().sum())
        finally:
            lent.give_back()

    def run(n):
        lent = buffers.lend((n,))
        lent.array[...] = n
        return lent

    pipeline = BatchPipeline(lambda n: n, run, collect, release=lambda lent: lent.give_back(), depth=PIPELINE_DEPTH)
    assert list(pipeline(sizes)) == [float(n * n) for n in sizes]
    assert buffers.most_lent == PIPELINE_DEPTH + 1 and buffers.lent == 0
    assert buffers.allocations <= (PIPELINE_DEPTH + 1) * len({bucket_of(n) for n in sizes}) < len(sizes)


class Boom(Exception):
    pass


@pytest.mark.parametrize("where", ["prepare", "run", "collect", "batches"])
def test_an_exception_in_any_stage_reaches_the_caller_as_itself_and_no_thread_is_left(where):
    buffers = HostBuffers("cpu", limit=3)

    def fails(stage: str, i: int) -> None:
        if where == stage and i == 4:
            raise Boom("batch 4")

    def batches():
        for i in range(10):
            fails("batches", i)
            yield i

    def prepare(i):
        fails("prepare", i)
        return i

    def run(i):
        fails("run", i)
        return i, buffers.lend((4,))  # a run batch holds a buffer, as the embedder's do

    def collect(ran):
        i, lent = ran
        lent.give_back()  # a collect gives its buffer back, also when it fails
        fails("collect", i)
        return i

    pipeline = BatchPipeline(prepare, run, collect, release=lambda ran: ran[1].give_back(), depth=2)
    got = []
    with pytest.raises(Boom, match="batch 4"):
        for result in pipeline(batches()):
            got.append(result)
    assert got == [0, 1, 2, 3]  # the batches before it, in order
    assert not _pipeline_threads() and buffers.lent == 0


def test_closing_early_or_an_exception_in_the_consumer_stops_and_joins_the_threads(demo):
    embedder = Embedder(demo, device="cpu", pipeline="on")
    batches = _batches()
    results = embedder.embed_batches(batches)
    first = next(results)
    assert len(first) == len(batches[0]) and _pipeline_threads()
    results.close()
    assert not _pipeline_threads() and embedder.host_buffers.lent == 0

    def consume():
        for _ in embedder.embed_batches(batches):
            raise Boom("consumer")

    with pytest.raises(Boom, match="consumer"):
        consume()
    assert not _pipeline_threads() and embedder.host_buffers.lent == 0

    sentences = sum(batches, [])
    results = embed_unordered(embedder, sentences)
    next(results)
    results.close()  # the file job's chunk, given up: the inner pipeline closes too
    assert not _pipeline_threads() and embedder.host_buffers.lent == 0


def test_a_bad_sentence_is_named_and_stops_the_pipeline(demo):
    embedder = Embedder(demo, device="cpu", pipeline="on")
    with pytest.raises(TypeError, match="^Embedder.embed_batches, sentence 1: got the str 'a b'"):
        list(embedder.embed_batches([[["x"]], [["y"], "a b"], [["z"]]]))
    assert not _pipeline_threads() and embedder.host_buffers.lent == 0


def test_a_stop_request_stops_the_pipeline_before_the_next_batch(demo):
    embedder = Embedder(demo, device="cpu", pipeline="on")
    batches = _batches()
    got = []
    with stop_on_signals("embedding"), pytest.raises(Interrupted, match="embedding stopped by SIGINT"):
        for layers in embedder.embed_batches(batches):
            got.append(layers)
            if len(got) == 1:
                signal.raise_signal(signal.SIGINT)  # recorded; the pipeline raises before its next run
    assert 1 <= len(got) < len(batches)
    assert not _pipeline_threads() and embedder.host_buffers.lent == 0
