"""benchmarks/roofline.py: its profile sees every matrix product the embedder runs, on every thread, in the phase it
belongs to (the FLOPs it books equal what benchmarks/flops.py counts for the same batch), and the script runs."""

from __future__ import annotations

import sys
from collections import defaultdict

import pytest
import torch

from tests.benchmarks.scripts import REPO, run_benchmark

sys.path.insert(0, str(REPO / "benchmarks"))

from flops import dense_word_macs, our_lstm_macs, token_layer_macs  # noqa: E402
from roofline import Phase, corpus_sentences, timed_phases  # noqa: E402

from elmo.config import NAMED_CONFIGS  # noqa: E402
from elmo.embedding.embedder import Embedder  # noqa: E402
from elmo.modules.bilm import build_bilm  # noqa: E402
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids  # noqa: E402

CORPUS = REPO.parent / "shared" / "data" / "lm" / "sample" / "sample.valid.txt"


@pytest.mark.skipif(not CORPUS.is_file(), reason="the shared sample corpus is not beside the repo")
@pytest.mark.parametrize("threads", [1, 2])
def test_the_profile_books_every_product_to_its_phase(threads):
    """One batch of real sentences through the small architecture: the LSTM phases hold exactly the LSTMs' FLOPs
    (both directions, on their own threads when two cores are given: the first layer's input half per distinct word,
    the rest at the real positions), the token phases exactly the char CNN's, highway's and projection's over the
    batch's distinct words; nothing is left unclassified."""
    config = NAMED_CONFIGS["small"]()
    torch.manual_seed(0)
    bilm = build_bilm(config).eval()
    sentences = corpus_sentences(12)
    embedder = Embedder(bilm, precision="fp32", device="cpu")
    phases: dict[str, Phase] = defaultdict(Phase)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with timed_phases(phases, config):
            embedder.embed_batch(sentences)
    finally:
        torch.set_num_threads(previous)
    rows = [[BOS_TOKEN, *s, EOS_TOKEN] for s in sentences]
    words = list(dict.fromkeys(w for row in rows for w in row))
    ids = torch.from_numpy(shifted_char_ids(words, config.char_cnn.max_characters_per_token))
    lstm = 2 * our_lstm_macs(bilm, sum(map(len, rows)), len(words))  # the first layer's input half once per word
    dense = 2 * len(words) * dense_word_macs(bilm.token_encoder)
    cnn_per_position = 2 * config.char_cnn.embedding_dim * max(w for w, _ in config.char_cnn.filters) * \
        config.char_cnn.n_filters
    flops = {name: phase.flops for name, phase in phases.items() if phase.flops}
    assert "other products" not in flops
    assert sum(flops[name] for name in flops if name.startswith("LSTM")) == lstm
    assert flops["highway"] + flops["token projection"] == dense
    # the char CNN runs a chunk of words to the end of its longest word: at least each word's own positions
    # (flops.py's count), at most every position
    assert 2 * token_layer_macs(bilm.token_encoder, ids) - dense <= flops["char CNN"]
    assert flops["char CNN"] <= len(words) * ids.shape[1] * cnn_per_position
    assert {"LSTM recurrent step", "LSTM input half", "LSTM projection", "LSTM cell and step glue",
            "other torch calls"} <= set(phases)


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_file(), reason="the shared sample corpus is not beside the repo")
def test_the_script_prints_the_peak_and_the_phase_table():
    done = run_benchmark("roofline.py", "--config", "small", "--sentences", "8", "--runs", "1", "--precision", "fp32",
                         "--threads", "1", "--peaks", "profiled", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("machine: ") and any(line.startswith("CPU flags: ") for line in lines)
    assert any(line.startswith("| one product on 1 thread |") and "| not measured |" in line
               for line in lines)  # --peaks profiled: bf16's peak is left out
    phases = [line.split(" | ")[0].lstrip("| ") for line in lines if line.startswith("| LSTM")]
    assert {"LSTM recurrent step", "LSTM input half", "LSTM projection"} <= set(phases)
    assert any("of the 1-thread fp32 peak" in line for line in lines)
