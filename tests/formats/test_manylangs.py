"""ELMoForManyLangs models against the original code (PyPI elmoformanylangs 0.0.4.post2, the test-only oracle):
the same vectors from the same files, in a directory or a zip, through the Python API and `elmo embed`; the
native conversion; one-line errors for damaged or mismatched files."""

from __future__ import annotations

import json
import logging
import pickle
import zipfile
from contextlib import contextmanager
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo.cli import main as cli_main
from elmo.config import BiLMConfig
from elmo.embedding.embedder import Embedder
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.manylangs import is_manylangs, load_manylangs
from elmo.formats.model_files import load_bilm, read_model_config, save_bilm
from elmo.formats.model_formats import recognise
from tests.formats.manylangs_files import REAL_FILTERS, char_lexicon, word_lexicon, write_manylangs_model

pytestmark = pytest.mark.oracle

oracle_package = pytest.importorskip("elmoformanylangs", reason="the test extra installs the oracle")

SENTENCES = [
    ["Zürich", "café", "naïve", "déjà", "vu", "the", "cat", "sat", "on", "the", "mat", "."],  # accents
    ["中文", "日本語", "字", "x"],  # CJK
    ["snow☃man", "ŋ", "qué"],  # characters outside the lexicon
    ["blorptastic", "cat"],  # an unknown word
    ["a" * 30 + "b" * 30, "w" * 50, "the"],  # longer than 48 characters; the second one's first 48 are a word
    ["<bos>", "cat", "a\u3000b", "a\xa0b", "\u200b"],  # a literal boundary token; the reader's whitespace entry
    ["sat"],
]


@contextmanager
def _quiet_oracle():
    logger = logging.getLogger("elmoformanylangs")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def oracle_embed(directory: Path, sentences: list[list[str]], monkeypatch, output_layer: int = -2) -> list:
    """The original Embedder: a fresh instance (fresh LSTM state), everything in one batch (so its unseeded batch
    shuffle has nothing to shuffle), on the CPU. Its LSTM init (block_orthogonal: QR decompositions, ~20 s at the
    real size) is skipped: load_model overwrites every weight."""
    import elmoformanylangs.modules.lstm_cell_with_projection as original_cell

    monkeypatch.setattr(original_cell, "block_orthogonal", lambda *args, **kwargs: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with _quiet_oracle(), torch.no_grad():
        oracle = oracle_package.Embedder(str(directory), batch_size=len(sentences))
        return oracle.sents2elmo(sentences, output_layer=output_layer)


def max_differences(ours: list[np.ndarray], reference: list[np.ndarray]) -> list[float]:
    """Per layer, the largest |ours - reference| over all sentences."""
    assert [o.shape for o in ours] == [r.shape for r in reference]
    return [max(float(np.abs(o[layer] - r[layer]).max()) for o, r in zip(ours, reference))
            for layer in range(reference[0].shape[0])]


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    return write_manylangs_model(tmp_path_factory.mktemp("manylangs") / "small", legacy=True)


# ------------------------------------------------------------------ parity with the original


def test_dictionaries_and_ids_are_the_originals(small_model, monkeypatch):
    """The original's readers and its create_one_batch (the swapped word markers, 48-character cut, <bos>/<eos>,
    <oov> for unknown characters and words) against our lexicon, token by token."""
    from elmoformanylangs.elmo import read_list
    from elmoformanylangs.frontend import create_one_batch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with _quiet_oracle():
        oracle = oracle_package.Embedder(str(small_model))
    lexicon = load_bilm(small_model).token_encoder.lexicon
    assert lexicon.chars == oracle.char_lexicon and lexicon.words == oracle.word_lexicon
    assert "\u3000" in lexicon.chars and "\xa0" not in lexicon.chars  # the reader's whitespace fallback
    rows, _ = read_list(SENTENCES, 50)
    words, chars, lengths, _ = create_one_batch(rows, oracle.word_lexicon, oracle.char_lexicon, oracle.config,
                                                sort=False)
    for b, sentence in enumerate(SENTENCES):
        ids = lexicon.token_ids(["<bos>", *sentence, "<eos>"])
        assert lengths[b] == len(ids)
        np.testing.assert_array_equal(ids[:, 0] - 1, words[b, : len(ids)].numpy())
        np.testing.assert_array_equal(ids[:, 1:] - 1, chars[b, : len(ids)].numpy())
    first = lexicon.token_ids(["cat"])[0] - 1
    assert first[1] == lexicon.chars["<eow>"] and first[5] == lexicon.chars["<bow>"]  # the swap, as the code has it


def test_small_model_matches_the_original(small_model, monkeypatch):
    reference = oracle_embed(small_model, SENTENCES, monkeypatch)
    bilm = load_bilm(small_model)
    ours = list(Embedder(bilm, device="cpu", precision="fp32").embed_sentences(SENTENCES))
    assert max(max_differences(ours, reference)) <= 1e-6
    # the Embedder's batches are sorted and cut its own way; one sentence alone gives the same vectors
    alone = Embedder(bilm, device="cpu", precision="fp32").embed_sentence(SENTENCES[1])
    assert float(np.abs(alone - reference[1]).max()) <= 1e-6


@pytest.mark.slow
def test_real_size_model_matches_the_original(tmp_path, monkeypatch):
    """The published architecture (2048 filters, 4096 cells, 512 projection) with random weights (~35 s on two
    busy cores: 370 MB of pickles written and read twice, and the original's step-by-step LSTM)."""
    directory = write_manylangs_model(tmp_path / "real", dim=4096, projection_dim=512, filters=REAL_FILTERS,
                                      word_dim=100, char_dim=50, seed=1)
    reference = oracle_embed(directory, SENTENCES, monkeypatch)
    ours = list(Embedder(load_bilm(directory), device="cpu", precision="fp32").embed_sentences(SENTENCES))
    differences = max_differences(ours, reference)
    assert max(differences) <= 1e-6, differences


def test_the_originals_average_is_our_average(small_model, tmp_path, monkeypatch):
    """The original's default output (output_layer=-1) is the plain mean of its 3 layers: our --average."""
    reference = oracle_embed(small_model, SENTENCES[:3], monkeypatch, output_layer=-1)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES[:3]) + "\n", encoding="utf-8")
    assert cli_main(["embed", str(text), str(tmp_path / "avg.hdf5"), "--average", "--model", str(small_model),
                    "--precision", "fp32"]) == 0
    with h5py.File(tmp_path / "avg.hdf5", "r") as f:
        for i, expected in enumerate(reference):
            assert float(np.abs(f[str(i)][...] - expected).max()) <= 1e-6


def test_embed_all_top_average_and_determinism(small_model, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES[:4]) + "\n\n", encoding="utf-8")
    outputs = {}
    for flag in ("--all", "--top", "--average"):
        out = tmp_path / f"{flag[2:]}.hdf5"
        assert cli_main(["embed", str(text), str(out), flag, "--model", str(small_model), "--batch-size", "2"]) == 0
        with h5py.File(out, "r") as f:
            outputs[flag] = {k: f[k][...] for k in f if k != "sentence_to_index"}
    again = list(Embedder(load_bilm(small_model), device="cpu", batch_size=2).embed_sentences(SENTENCES[:4]))
    for i, layers in enumerate(again):
        np.testing.assert_array_equal(outputs["--all"][str(i)], layers)  # stateless: same vectors every run
        np.testing.assert_array_equal(outputs["--top"][str(i)], layers[-1])
        np.testing.assert_array_equal(outputs["--average"][str(i)], layers.mean(axis=0))
    assert outputs["--all"]["4"].shape == (3, 0, 32)


# ------------------------------------------------------------------ zip archives, native conversion


def test_zipped_model_loads_identically(small_model, tmp_path):
    archive = tmp_path / "136.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(small_model.iterdir()):
            z.write(path, f"de.model/{path.name}")
    with zipfile.ZipFile(archive) as z:
        root = zipfile.Path(z, "de.model/")
        assert is_manylangs(root)
        zipped = load_manylangs(root)
    direct = load_manylangs(small_model)
    assert zipped.token_encoder.lexicon == direct.token_encoder.lexicon
    for (name, x), (_, y) in zip(zipped.state_dict().items(), direct.state_dict().items()):
        assert torch.equal(x, y), name
    a = list(Embedder(zipped, device="cpu").embed_sentences(SENTENCES))
    b = list(Embedder(direct, device="cpu").embed_sentences(SENTENCES))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_convert_to_native_round_trip(small_model, tmp_path):
    out = tmp_path / "native"
    assert cli_main(["convert", "--model", str(small_model), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "lexicon.json", "model.safetensors"]
    converted, original = load_bilm(out), load_bilm(small_model)
    assert converted.config == original.config == read_model_config(out) == read_model_config(small_model)
    assert converted.token_encoder.lexicon == original.token_encoder.lexicon
    for (name, x), (_, y) in zip(converted.state_dict().items(), original.state_dict().items()):
        assert torch.equal(x, y), name
    for x, y in zip(Embedder(converted, device="cpu").embed_sentences(SENTENCES),
                    Embedder(original, device="cpu").embed_sentences(SENTENCES)):
        np.testing.assert_array_equal(x, y)
    options = json.loads((out / "config.json").read_text())["options"]
    assert BiLMConfig.from_options(options) == original.config


def test_convert_to_hdf5_is_refused(small_model, tmp_path, capsys):
    assert cli_main(["convert", "--model", str(small_model), str(tmp_path / "h"), "--to", "hdf5"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "convert it --to native" in err
    assert not (tmp_path / "h").exists()
    with pytest.raises(ConfigError):
        save_bilm(load_bilm(small_model), tmp_path / "h2")


def test_detection_and_config(small_model):
    assert recognise(small_model).name == "manylangs" and is_manylangs(small_model)
    config = read_model_config(small_model)
    assert config.manylangs is not None and config.char_cnn is None
    assert (config.manylangs.n_characters, config.manylangs.n_words) == (len(char_lexicon()), len(word_lexicon()))
    assert config.forget_bias == 0.0 and config.lstm.use_skip_connections


def test_bundled_model_config_is_used_when_the_directory_lacks_it(tmp_path, monkeypatch):
    """The releases name cnn_50_100_512_4096_sample.json without shipping it; the original has it bundled."""
    directory = write_manylangs_model(tmp_path / "m", dim=4096, projection_dim=512, filters=REAL_FILTERS,
                                      word_dim=100, char_dim=50, write_model_config=False, write_weights=False)
    config = read_model_config(directory)
    assert config.lstm.dim == 4096 and config.manylangs.filters == [tuple(f) for f in REAL_FILTERS]
    (directory / "config.json").write_text(json.dumps({"config_path": "/elsewhere/other.json"}))
    with pytest.raises(ConfigError, match="'/elsewhere/other.json' is neither in the model directory"):
        read_model_config(directory)


# ------------------------------------------------------------------ damaged and mismatched files


def _copy(model: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    target.mkdir()
    for path in model.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


@pytest.mark.parametrize("name,what", [("char.dic", "char"), ("word.dic", "word")])
def test_dictionary_that_does_not_fit_its_embedding(small_model, tmp_path, name, what, capsys):
    """The Chinese releases' problem (ELMoForManyLangs issues #76, #103)."""
    directory = _copy(small_model, tmp_path)
    lines = (directory / name).read_text(encoding="utf-8").splitlines()
    rows = len(lines)
    (directory / name).write_text("\n".join(lines[:4] + lines[5:]) + "\n", encoding="utf-8")  # a plain entry
    message = (f"{directory / name} has {rows - 1} entries but the {what} embedding in "
               f"{directory / 'token_embedder.pkl'} has {rows} rows")
    with pytest.raises(WeightFileError, match="entries but the") as error:
        load_bilm(directory)
    assert message in str(error.value)
    assert cli_main(["convert", "--model", str(directory), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_missing_special_entry(small_model, tmp_path):
    directory = _copy(small_model, tmp_path)
    lines = (directory / "char.dic").read_text(encoding="utf-8").splitlines()
    (directory / "char.dic").write_text("\n".join(line for line in lines if not line.startswith("<bow>")) + "\n",
                                        encoding="utf-8")
    with pytest.raises(ConfigError, match=r"char.dic: no entry for '<bow>'"):
        load_bilm(directory)


def test_unreadable_dictionary_line(small_model, tmp_path):
    directory = _copy(small_model, tmp_path)
    with open(directory / "word.dic", "a", encoding="utf-8") as f:
        f.write("extra\tseven\n")
    with pytest.raises(ConfigError, match=r"word.dic, line 16: the id 'seven' is not an integer"):
        load_bilm(directory)


class NotATensor:
    pass


@pytest.mark.parametrize("damage", ["truncated", "not a pickle", "foreign object", "int tensor", "nan", "shape"])
def test_damaged_pickles(small_model, tmp_path, damage, capsys):
    directory = _copy(small_model, tmp_path)
    target = directory / "encoder.pkl"
    state = torch.load(target, weights_only=True)
    if damage == "truncated":
        target.write_bytes(target.read_bytes()[:500])
        expected = "encoder.pkl: not a readable weights-only torch file"
    elif damage == "not a pickle":
        target.write_text("hello")
        expected = "encoder.pkl: not a readable weights-only torch file"
    elif damage == "foreign object":
        torch.save({"x": NotATensor()}, target)  # unpickling it would import and build a class: refused
        expected = "encoder.pkl: not a readable weights-only torch file"
    elif damage == "int tensor":
        state["forward_layer_0.state_linearity.bias"] = state["forward_layer_0.state_linearity.bias"].long()
        torch.save(state, target)
        expected = "tensor 'forward_layer_0.state_linearity.bias' has dtype torch.int64, expected a float dtype"
    elif damage == "nan":
        state["backward_layer_1.state_projection.weight"][0, 0] = float("nan")
        torch.save(state, target)
        expected = "tensor 'backward_layer_1.state_projection.weight' contains NaN or Inf values"
    else:
        state["forward_layer_1.input_linearity.weight"] = torch.zeros(3, 16)
        torch.save(state, target)
        expected = ("tensor 'forward_layer_1.input_linearity.weight' has shape (3, 16), the model config expects "
                    "(192, 16)")
    with pytest.raises(WeightFileError) as error:
        load_bilm(directory)
    assert expected in str(error.value) and "\n" not in str(error.value)
    assert cli_main(["convert", "--model", str(directory), str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickle_with_code_is_never_run(small_model, tmp_path):
    class Boom:
        def __reduce__(self):
            return (Path.touch, (tmp_path / "ran",))

    directory = _copy(small_model, tmp_path)
    (directory / "token_embedder.pkl").write_bytes(pickle.dumps(Boom()))
    with pytest.raises(WeightFileError, match="token_embedder.pkl: not a readable weights-only torch file"):
        load_bilm(directory)
    assert not (tmp_path / "ran").exists()
