"""``elmo.allennlp`` against AllenNLP's own ELMo code (the ``simple-elmo-pytorch`` test oracle), side by side.

Models: a random-weight biLM saved as options.json + weights.hdf5, and bilm-tf's test fixture with residual
connections switched on (AllenNLP refuses biLMs without them; the fixture as it is is checked against the
TensorFlow outputs instead). AllenNLP's ``ElmoEmbedder`` lives in ``allennlp/commands/elmo.py``, which the oracle
does not ship: ``AllenNLPEmbedder`` below does what it does, on the oracle's biLM.
"""

from __future__ import annotations

import io
import json
import sys
import types
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import h5py
import numpy as np
import pytest
import simple_elmo_pytorch
import simple_elmo_pytorch.models.scalar_mix
import simple_elmo_pytorch.nn.util as oracle_util
import torch
from simple_elmo_pytorch import ElmoBiLmSentence
from simple_elmo_pytorch import batch_to_ids as allennlp_batch_to_ids
from simple_elmo_pytorch.nn.util import remove_sentence_boundaries

from elmo import allennlp
from elmo.errors import ConfigError, InputFileError
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm

pytestmark = pytest.mark.oracle

ATOL = 1e-5
SENTENCES = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Hi"],
    [],
    ["über", "naïve", "東京", "x" * 60, "y", "z", "a", "b"],
    ["Another", "."],
]


@pytest.fixture(autouse=True)
def _restore_allennlp_helpers(monkeypatch):
    """The oracle commented out three AllenNLP helpers that its layer norm and word cache still call: put back
    AllenNLP's (epsilon 1e-13 for float32; ids (..., T) flattened to (N, T) around the embedding lookup)."""
    util = types.SimpleNamespace(tiny_value_of_dtype=lambda dtype: 1e-13)
    monkeypatch.setattr(simple_elmo_pytorch.models.scalar_mix, "util", util, raising=False)
    monkeypatch.setattr(oracle_util, "combine_initial_dims",
                        lambda x: x if x.dim() <= 2 else x.view(-1, x.size(-1)), raising=False)
    monkeypatch.setattr(oracle_util, "uncombine_initial_dims",
                        lambda x, size: x if len(size) <= 2 else x.view(*size, x.size(-1)), raising=False)


@pytest.fixture(scope="module", params=["random", "fixture-residual"])
def model(request, tmp_path_factory, fixture_dir) -> tuple[str, str]:
    """(options_file, weight_file) as str, as AllenNLP scripts pass them."""
    directory = tmp_path_factory.mktemp(request.param)
    if request.param == "random":
        save_bilm(random_bilm(seed=3), directory)
        return str(directory / "options.json"), str(directory / "weights.hdf5")
    options = json.loads((fixture_dir / "options.json").read_text())
    options["lstm"]["use_skip_connections"] = True
    (directory / "options.json").write_text(json.dumps(options))
    return str(directory / "options.json"), str(fixture_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> tuple[str, str]:
    directory = save_bilm(random_bilm(seed=3), tmp_path_factory.mktemp("random"))
    return str(directory / "options.json"), str(directory / "weights.hdf5")


def _assert_same(ours: dict, theirs: dict) -> None:
    assert set(ours) == {"elmo_representations", "mask"}
    assert isinstance(ours["elmo_representations"], list)
    assert len(ours["elmo_representations"]) == len(theirs["elmo_representations"])
    for a, b in zip(ours["elmo_representations"], theirs["elmo_representations"]):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    assert ours["mask"].dtype == torch.bool
    assert torch.equal(ours["mask"], theirs["mask"])


def test_batch_to_ids_is_allennlps():
    assert torch.equal(allennlp.batch_to_ids(SENTENCES), allennlp_batch_to_ids(SENTENCES))


@pytest.mark.parametrize(
    "options",
    [
        {"num_output_representations": 2},
        {"num_output_representations": 1, "do_layer_norm": True},
        {"num_output_representations": 2, "scalar_mix_parameters": [-1.0, 2.0, 0.5]},
        {"num_output_representations": 1, "scalar_mix_parameters": [-9e10, -9e10, 1.0]},
        {"num_output_representations": 1, "keep_sentence_boundaries": True},
        {"num_output_representations": 1, "keep_sentence_boundaries": True, "do_layer_norm": True},
    ],
    ids=["two-mixes", "layer-norm", "fixed-weights", "top-only", "boundaries", "boundaries-layer-norm"],
)
def test_elmo_equals_a_fresh_allennlp_elmo(model, options):
    theirs = simple_elmo_pytorch.Elmo(*model, dropout=0.0, **options).eval()
    ours = allennlp.Elmo(*model, dropout=0.0, **options).eval()
    ids = allennlp.batch_to_ids(SENTENCES)
    _assert_same(ours(ids), theirs(ids))
    assert ours.get_output_dim() == theirs.get_output_dim()


def test_stateful_elmo_carries_states_like_allennlp(model):
    """Batches of changing size, empty sentences among them: each call continues AllenNLP's carried states."""
    theirs = simple_elmo_pytorch.Elmo(*model, 1, dropout=0.0).eval()
    ours = allennlp.Elmo(*model, 1, dropout=0.0, stateful=True).eval()
    stateless = allennlp.Elmo(*model, 1, dropout=0.0).eval()
    batches = [SENTENCES, SENTENCES[:2], [["a", "b", "c"]] * 7, SENTENCES[::-1], [[]], SENTENCES]
    with torch.no_grad():
        for i, batch in enumerate(batches):
            ids = allennlp.batch_to_ids(batch)
            expected = theirs(ids)
            _assert_same(ours(ids), expected)
            if i == 0:
                _assert_same(stateless(ids), expected)
        # AllenNLP's states now make the same batch come out differently; the default (stateless) does not
        assert not torch.allclose(expected["elmo_representations"][0], stateless(ids)["elmo_representations"][0])
        ours.reset_states()
        _assert_same(ours(allennlp.batch_to_ids(batches[0])), stateless(allennlp.batch_to_ids(batches[0])))


def test_elmo_gradients_and_higher_dimensional_inputs(model):
    """(..., T, 50) inputs come back as (..., T, D); requires_grad fine-tunes the biLM; dropout is active in
    training mode."""
    theirs = simple_elmo_pytorch.Elmo(*model, 1, dropout=0.0, requires_grad=True)
    ours = allennlp.Elmo(*model, 1, dropout=0.0, requires_grad=True)
    ids = torch.stack([allennlp.batch_to_ids(SENTENCES), allennlp.batch_to_ids(SENTENCES[::-1])])  # (2, B, T, 50)
    out = ours(ids)
    _assert_same(out, theirs(ids))
    assert out["mask"].shape == ids.shape[:-1]
    out["elmo_representations"][0].sum().backward()
    trained = [p for p in ours.parameters() if p.grad is not None]
    assert len(trained) == len(list(ours.parameters())) and all(p.requires_grad for p in trained)
    dropped = allennlp.Elmo(*model, 1, dropout=0.5).train()(ids)["elmo_representations"][0]
    assert (dropped == 0).float().mean() > 0.3


def test_vocab_to_cache_with_word_inputs(model):
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", *sorted({w for s in SENTENCES for w in s})]
    index = {w: i for i, w in enumerate(vocab)}
    word_ids = torch.zeros(len(SENTENCES), max(map(len, SENTENCES)), dtype=torch.long)
    for b, sentence in enumerate(SENTENCES):
        word_ids[b, : len(sentence)] = torch.tensor([index[w] for w in sentence], dtype=torch.long)
    chars = allennlp.batch_to_ids(SENTENCES)
    theirs = simple_elmo_pytorch.Elmo(*model, 2, dropout=0.0, vocab_to_cache=vocab).eval()
    ours = allennlp.Elmo(*model, 2, dropout=0.0, vocab_to_cache=vocab).eval()
    _assert_same(ours(chars, word_ids), theirs(chars, word_ids))
    _assert_same(ours(chars, word_ids), allennlp.Elmo(*model, 2, dropout=0.0).eval()(chars))
    outside = word_ids.clone()
    outside[0, 0] = len(vocab)  # not cached: both fall back to the characters
    theirs._elmo_lstm._elmo_lstm.reset_states()  # AllenNLP's second call would start from the first one's states
    _assert_same(ours(chars, outside), theirs(chars, outside))


def test_module_argument(model):
    bilm = ElmoBiLmSentence(*model)
    theirs = simple_elmo_pytorch.Elmo(None, None, 1, dropout=0.0, module=bilm).eval()
    ours = allennlp.Elmo(None, None, 1, dropout=0.0, module=bilm).eval()
    ids = allennlp.batch_to_ids(SENTENCES)
    bilm._elmo_lstm.reset_states()
    expected = theirs(ids)
    bilm._elmo_lstm.reset_states()
    _assert_same(ours(ids), expected)
    assert ours.get_output_dim() == theirs.get_output_dim()
    with pytest.raises(ConfigError, match="don't provide options_file or weight_file with module"):
        allennlp.Elmo(model[0], None, 1, module=bilm)


class AllenNLPEmbedder:
    """What ``allennlp.commands.elmo.ElmoEmbedder`` computes, on the oracle's biLM (stateful, as AllenNLP's)."""

    def __init__(self, options_file: str, weight_file: str, cuda_device: int = -1) -> None:
        self.elmo_bilm = ElmoBiLmSentence(options_file, weight_file)

    def embed_batch(self, batch: list[list[str]]) -> list[np.ndarray]:
        empty = np.zeros((self.elmo_bilm.num_layers, 0, self.elmo_bilm.get_output_dim()))
        if batch == [[]]:
            return [empty]
        with torch.no_grad():
            out = self.elmo_bilm(allennlp_batch_to_ids(batch))
        stripped = [remove_sentence_boundaries(x, out["mask"]) for x in out["activations"]]
        layers = torch.stack([x for x, _ in stripped], dim=1)  # (B, L+1, T, D)
        lengths = stripped[0][1].sum(1).tolist()
        return [layers[b, :, :n].numpy() if n else empty for b, n in enumerate(lengths)]

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        return self.embed_batch([sentence])[0]

    def embed_sentences(self, sentences, batch_size: int = 64) -> Iterator[np.ndarray]:
        iterator = iter(sentences)
        while batch := list(islice(iterator, batch_size)):
            yield from self.embed_batch(batch)

    def reset(self) -> None:
        self.elmo_bilm._elmo_lstm.reset_states()


def _assert_arrays(ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert isinstance(a, np.ndarray) and a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=0)


def test_embedder_equals_a_fresh_allennlp_embedder(model):
    ours = allennlp.ElmoEmbedder(*model)
    reference = AllenNLPEmbedder(*model)
    layers = ours.embed_sentence(SENTENCES[0])
    assert layers.shape == (3, len(SENTENCES[0]), ours._embedder.output_dim) and layers.dtype == np.float32
    _assert_arrays([layers], [reference.embed_sentence(SENTENCES[0])])
    for batch in (SENTENCES, [[]], SENTENCES[1:2]):
        reference.reset()
        _assert_arrays(ours.embed_batch(batch), reference.embed_batch(batch))
    assert [x.shape for x in ours.embed_batch([[], []])] == [(3, 0, ours._embedder.output_dim)] * 2  # AllenNLP fails
    expected = []
    for start in range(0, 2 * len(SENTENCES), 3):  # every batch of AllenNLP's from zero states
        reference.reset()
        expected += reference.embed_batch((SENTENCES * 2)[start : start + 3])
    _assert_arrays(list(ours.embed_sentences(SENTENCES * 2, batch_size=3)), expected)
    activations, mask = ours.batch_to_embeddings(SENTENCES)
    assert activations.shape == (len(SENTENCES), 3, mask.shape[1], ours._embedder.output_dim)
    assert mask.sum(1).tolist() == [len(s) for s in SENTENCES]


def test_stateful_embedder_carries_states_like_allennlp(model):
    ours = allennlp.ElmoEmbedder(*model, stateful=True)
    reference = AllenNLPEmbedder(*model)
    _assert_arrays(ours.embed_batch(SENTENCES), reference.embed_batch(SENTENCES))
    _assert_arrays([ours.embed_sentence(["One", "more"])], [reference.embed_sentence(["One", "more"])])
    for batch in ([[]], [[], ["x"]], SENTENCES[::-1]):
        _assert_arrays(ours.embed_batch(batch), reference.embed_batch(batch))
    sentences = SENTENCES * 3 + [[]]  # the last batch is a lone empty sentence: AllenNLP runs no model there
    _assert_arrays(list(ours.embed_sentences(sentences, 4)), list(reference.embed_sentences(sentences, 4)))


def test_stateful_elmo_and_embedder_match_bilm_tf(fixture_dir, fixture_sentences, fixture_expected):
    """bilm-tf's fixture as it is (no residual connections, which AllenNLP refuses): its TensorFlow outputs,
    10 batches of 3 with carried states."""
    files = str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5")
    elmo = allennlp.Elmo(*files, 1, dropout=0.0, scalar_mix_parameters=[-9e10, -9e10, 1.0], stateful=True)
    embedder = allennlp.ElmoEmbedder(*files, stateful=True)
    with torch.no_grad():
        for i in range(10):
            batch = [fixture_sentences[k][i] for k in range(3)]
            top = elmo(allennlp.batch_to_ids(batch))["elmo_representations"][0]
            for k, layers in enumerate(embedder.embed_batch(batch)):
                n = len(batch[k])
                np.testing.assert_allclose(top[k, :n].numpy(), fixture_expected[k][i], atol=ATOL, rtol=0)
                np.testing.assert_allclose(layers[-1], fixture_expected[k][i], atol=ATOL, rtol=0)


def _read_hdf5(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        return {k: (json.loads(f[k].asstr()[0]) if k == "sentence_to_index" else f[k][...]) for k in f}


@pytest.mark.parametrize("output_format", ["all", "top", "average"])
@pytest.mark.parametrize("keys", ["index", "sentence", "forget"])
def test_embed_file_writes_allennlps_hdf5(tmp_path, model, output_format, keys):
    lines = [" ".join(s) for s in SENTENCES if s] + ["  padded\twith   spaces  "]
    handle = io.StringIO("".join(line + "\n" for line in lines))
    ours = allennlp.ElmoEmbedder(*model)
    out = tmp_path / "out.hdf5"
    ours.embed_file(handle, out, output_format, batch_size=2, forget_sentences=keys == "forget",
                    use_sentence_keys=keys == "sentence")
    assert handle.closed
    written = _read_hdf5(out)
    reference = AllenNLPEmbedder(*model)
    sentences = [line.strip() for line in lines]
    names = sentences if keys == "sentence" else [str(i) for i in range(len(lines))]
    expected: dict = {}
    for name, sentence in zip(names, sentences):
        reference.reset()
        layers = reference.embed_sentence(sentence.split())
        expected[name] = {"all": layers, "top": layers[-1], "average": np.average(layers, axis=0)}[output_format]
    if keys == "index":
        expected["sentence_to_index"] = dict(zip(sentences, names))
    assert sorted(written) == sorted(expected)
    assert written.pop("sentence_to_index", None) == expected.pop("sentence_to_index", None)
    for name, array in expected.items():
        assert written[name].dtype == np.float32
        np.testing.assert_allclose(written[name], array, atol=ATOL, rtol=0)


def test_embed_file_refuses_what_allennlp_refuses(tmp_path, random_model):
    ours = allennlp.ElmoEmbedder(*random_model)
    out = tmp_path / "out.hdf5"
    with pytest.raises(InputFileError, match=r"^sentences.txt, line 2: empty line \(1 in all\); remove them$"):
        handle = io.StringIO("a b\n\nc\n")
        handle.name = "sentences.txt"
        ours.embed_file(handle, out)
    with pytest.raises(InputFileError, match=r"line 3: cannot use the sentence as a key: it repeats line 1"):
        ours.embed_file(io.StringIO("a b\nc\na b\n"), out, use_sentence_keys=True)
    with pytest.raises(ValueError, match="output_format must be one of all, top, average"):
        ours.embed_file(io.StringIO("a\n"), out, "mean")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_published_model_urls_resolve_to_the_model_cache(tmp_path, monkeypatch):
    home = tmp_path / "home"
    save_bilm(random_bilm(seed=3), home / "models" / "small")
    monkeypatch.setenv("ELMO_HOME", str(home))
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    url = "https://allennlp.s3.amazonaws.com/models/elmo/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway"
    files = url + "_options.json", url + "_weights.hdf5"  # AllenNLP's newer host; the registry has the older one
    sentence = ["a", "b"]
    np.testing.assert_array_equal(
        allennlp.ElmoEmbedder(*files).embed_sentence(sentence),
        allennlp.ElmoEmbedder(str(home / "models/small/options.json"), str(home / "models/small/weights.hdf5"))
        .embed_sentence(sentence),
    )
    with pytest.raises(ConfigError, match="not a file of a published model; download it and pass its path"):
        allennlp.Elmo("https://example.com/my_options.json", files[1], 1)


def test_a_str_is_refused_where_tokens_belong(random_model):
    ours = allennlp.ElmoEmbedder(*random_model)
    with pytest.raises(TypeError, match=r"ElmoEmbedder.embed_sentence: got the str 'The cat sat .' where a list"):
        ours.embed_sentence("The cat sat .")
    with pytest.raises(TypeError, match=r"ElmoEmbedder.embed_batch, sentence 1: got the str 'a b'"):
        ours.embed_batch([["x"], "a b"])
    with pytest.raises(TypeError, match=r"ElmoEmbedder.embed_sentences, sentence 0: got the str"):
        list(ours.embed_sentences(["a b"]))
    with pytest.raises(TypeError, match=r"batch_to_ids, sentence 0: got the str 'a b c'"):
        allennlp.batch_to_ids(["a b c"])


SCRIPT_FOR_ALLENNLP = """
from allennlp.modules.elmo import Elmo, batch_to_ids
from allennlp.commands.elmo import ElmoEmbedder

elmo = Elmo(options_file, weight_file, 2, dropout=0)
sentences = [["First", "sentence", "."], ["Another", "."]]
character_ids = batch_to_ids(sentences)
embeddings = elmo(character_ids)
representations = embeddings["elmo_representations"]   # 2 tensors (2, 3, D)
mask = embeddings["mask"]
dim = elmo.get_output_dim()

embedder = ElmoEmbedder(options_file, weight_file)
vectors = embedder.embed_sentence(["I", "ate", "an", "apple", "."])   # (3, 5, D)
"""


def test_a_script_written_for_allennlp_runs_with_only_the_import_changed(model, monkeypatch):
    allennlp_modules = types.ModuleType("allennlp.modules.elmo")
    allennlp_modules.Elmo, allennlp_modules.batch_to_ids = simple_elmo_pytorch.Elmo, allennlp_batch_to_ids
    allennlp_commands = types.ModuleType("allennlp.commands.elmo")
    allennlp_commands.ElmoEmbedder = AllenNLPEmbedder
    for name, module in [("allennlp", types.ModuleType("allennlp")), ("allennlp.modules", types.ModuleType("x")),
                         ("allennlp.commands", types.ModuleType("x")), ("allennlp.modules.elmo", allennlp_modules),
                         ("allennlp.commands.elmo", allennlp_commands)]:
        monkeypatch.setitem(sys.modules, name, module)
    theirs = {"options_file": model[0], "weight_file": model[1]}
    exec(SCRIPT_FOR_ALLENNLP, theirs)

    switched = SCRIPT_FOR_ALLENNLP.replace("from allennlp.modules.elmo import", "from elmo.allennlp import")
    switched = switched.replace("from allennlp.commands.elmo import", "from elmo.allennlp import")
    assert sum(a != b for a, b in zip(SCRIPT_FOR_ALLENNLP.splitlines(), switched.splitlines())) == 2
    ours = {"options_file": model[0], "weight_file": model[1]}
    exec(switched, ours)

    _assert_same(ours["embeddings"], {k: theirs["embeddings"][k] for k in ("elmo_representations", "mask")})
    assert ours["dim"] == theirs["dim"]
    np.testing.assert_allclose(ours["vectors"], theirs["vectors"], atol=ATOL, rtol=0)
