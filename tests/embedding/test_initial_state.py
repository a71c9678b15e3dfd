"""Initial-state modes of the Embedder and ``elmo embed``: zero, carry (the original's stateful mode) and warm."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo.cli import main as cli_main
from elmo.embedding.embed_options import EmbedOptions
from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import load_bilm, save_bilm
from elmo.formats.warm_state import WARM_STATE_FILE, model_warm_state, warm_text
from elmo.modules.bilm import StatefulBiLM
from elmo.settings import SettingError
from tests.conftest import random_bilm
from tests.embedding.test_embedder import _read_all, _sentences, _write_text


def _embedder(bilm=None, **options) -> Embedder:
    return Embedder(bilm or random_bilm(), device="cpu", precision="fp32", **options)


@pytest.mark.slow
def test_warm_state_is_the_carried_state_after_the_shipped_text():
    bilm = random_bilm()
    h, c = model_warm_state(bilm)
    assert h.shape == (2, 2, 1, 8) and c.shape == (2, 2, 1, 12) and h.dtype == c.dtype == torch.float32
    assert float(c.abs().max()) > 0.1  # not the zero state
    stateful = _embedder(bilm, initial_state="carry", batch_size=1)  # the original's mode, one row, text in order
    list(stateful.embed_sentences(warm_text()))
    carried = stateful._stateful
    assert isinstance(carried, StatefulBiLM)
    torch.testing.assert_close(h, carried._h, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(c, carried._c, rtol=1e-6, atol=1e-6)
    again = model_warm_state(random_bilm())  # deterministic: the same model gives the same state
    assert torch.equal(h, again[0]) and torch.equal(c, again[1])


def test_warm_vectors_do_not_depend_on_the_batch():
    sentences = _sentences(40, seed=3)
    warm = _embedder(initial_state="warm")
    together = list(warm.embed_sentences(sentences))
    alone = [warm.embed_sentence(s) for s in sentences]
    small = list(_embedder(initial_state="warm", batch_size=3, max_batch_tokens=20).embed_sentences(sentences))
    for a, b, s in zip(together, alone, small):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, s, rtol=1e-5, atol=1e-6)
    zero = list(_embedder().embed_sentences(sentences))
    assert all(np.array_equal(a[0], z[0]) for a, z in zip(together, zero))  # the token layer has no state
    assert min(float(np.abs(a[1:] - z[1:]).max()) for a, z in zip(together, zero)) > 1e-3
    assert warm.options.sentences_per_batch == 256  # batched like zero


def test_carry_runs_batches_in_input_order_and_carries_their_states():
    sentences = _sentences(12, seed=4)
    bilm = random_bilm()
    carry = list(_embedder(bilm, initial_state="carry", batch_size=5).embed_sentences(sentences))
    by_hand = _embedder(bilm, initial_state="carry")
    expected = [x for start in range(0, 12, 5) for x in by_hand.embed_batch(sentences[start:start + 5])]
    assert all(np.array_equal(a, b) for a, b in zip(carry, expected))
    fresh = _embedder(bilm).embed_batch(sentences[5:10])  # the second batch from zeros differs
    assert not np.allclose(fresh[0][1:], carry[5][1:])
    assert EmbedOptions(initial_state="carry").stateful and not EmbedOptions().stateful
    assert EmbedOptions(initial_state="carry").sentences_per_batch == 64
    with pytest.raises(SettingError, match="must be one of"):
        EmbedOptions(initial_state="hot")


@pytest.mark.parametrize("native", [True, False])
def test_stored_warm_state_goes_with_the_model_in_either_format(tmp_path, native):
    model = save_bilm(random_bilm(), tmp_path / "model", native=native)
    assert cli_main(["warm-state", "--model", str(model)]) == 0
    loaded = load_bilm(model)
    computed = model_warm_state(random_bilm())
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(loaded.warm_state, computed))
    # the embedder starts from the stored numbers, not from a new computation
    marked = (loaded.warm_state[0] + 0.5, loaded.warm_state[1])
    from elmo.formats.warm_state import write_warm_state

    write_warm_state(model, loaded, marked)
    assert torch.equal(_embedder(load_bilm(model), initial_state="warm").warm_state[0], marked[0])
    converted = save_bilm(load_bilm(model), tmp_path / "converted", native=not native)  # convert keeps it
    assert torch.equal(load_bilm(converted).warm_state[0], marked[0])


def test_elmo_embed_initial_state_warm_matches_the_python_api(tmp_path):
    model = save_bilm(random_bilm(), tmp_path / "model", native=True)
    sentences = _sentences(9, seed=5)
    text = _write_text(tmp_path / "in.txt", sentences)
    assert cli_main(["embed", str(text), str(tmp_path / "out.hdf5"), "--all", "--model", str(model),
                     "--initial-state", "warm", "--precision", "fp32"]) == 0
    written = _read_all(tmp_path / "out.hdf5")
    expected = list(_embedder(load_bilm(model), initial_state="warm").embed_sentences(sentences))
    for i, layers in enumerate(expected):
        np.testing.assert_allclose(written[str(i)], layers, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("damage, message", [
    (lambda path, model: path.write_bytes(path.read_bytes()[:40]), "not a readable safetensors file"),
    (lambda path, model: _rewrite(path, model, h=torch.zeros(2, 2, 1, 9)), "'h' has shape (2, 2, 1, 9), this model's"),
    (lambda path, model: _rewrite(path, model, c=torch.full((2, 2, 1, 12), float("nan"))), "'c' must hold finite"),
    (lambda path, model: _rewrite(path, random_bilm(seed=1)), "computed for other weights"),
])
def test_a_damaged_warm_state_file_is_one_line_naming_it(tmp_path, capsys, damage, message):
    model = save_bilm(random_bilm(), tmp_path / "model", native=True)
    assert cli_main(["warm-state", "--model", str(model)]) == 0
    damage(model / WARM_STATE_FILE, model)
    text = _write_text(tmp_path / "in.txt", [["a", "b"]])
    capsys.readouterr()
    assert cli_main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", str(model)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(model / WARM_STATE_FILE) in error and message in error
    assert cli_main(["warm-state", "--model", str(model), "--force"]) == 0  # the fix the message names works
    assert cli_main(["embed", str(text), str(tmp_path / "out.hdf5"), "--top", "--model", str(model)]) == 0


def _rewrite(path, model_dir, **tensors):
    """Store a warm state with some tensors replaced (or computed for another model when ``model_dir`` is a biLM)."""
    from safetensors.torch import save_file

    from elmo.formats.warm_state import WARM_STATE_FORMAT, weights_fingerprint

    bilm = model_dir if not hasattr(model_dir, "is_dir") else load_bilm(model_dir, warm_state=False)
    h, c = model_warm_state(bilm)
    save_file({"h": tensors.get("h", h), "c": tensors.get("c", c)}, path,
              metadata={"format": WARM_STATE_FORMAT, "weights": weights_fingerprint(bilm)})
