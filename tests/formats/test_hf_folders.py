"""Hugging Face-style folders (config.json + model.safetensors + README.md): `elmo convert --to hf`,
`BiLM.save_pretrained` / `BiLM.from_pretrained`. Weights must come back bit for bit for any float32 values (the
shipped ones are fp16-representable, so random ones are used too), every loader must read the folder, and the
card's front matter must parse as YAML with what a hub needs."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
import yaml
from safetensors import safe_open

from elmo import BiLM, Embedder, load_bilm
from elmo.cli import main as cli_main
from elmo.errors import ConfigError
from elmo.formats.model_card import read_front_matter, split_front_matter, write_front_matter
from elmo.modules.bilm import build_bilm
from tests.conftest import random_bilm, tiny_config
from tests.formats.manylangs_files import write_manylangs_model
from tests.formats.test_archives import nlpl_files, pack

SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["Zürich", "naïve", "café"]]


def _same_weights(a: BiLM, b: BiLM) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert sa[name].dtype == sb[name].dtype and torch.equal(sa[name], sb[name]), name


def _same_vectors(a: BiLM, b: BiLM) -> None:
    for x, y in zip(Embedder(a, precision="fp32").embed_sentences(SENTENCES),
                    Embedder(b, precision="fp32").embed_sentences(SENTENCES)):
        assert x.dtype == np.float32 and np.array_equal(x, y)


def _card(folder) -> tuple[dict, str]:
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])  # what a hub reads
    assert front == split_front_matter(text)[0] == read_front_matter(folder / "README.md")  # our own reader agrees
    return front, text


def _random_float32_bilm(seed: int = 1) -> BiLM:
    bilm = random_bilm(seed=seed)
    values = torch.cat([p.detach().flatten() for p in bilm.parameters()])
    assert not torch.equal(values, values.half().float())  # not fp16-representable: every mantissa bit counts
    return bilm


@pytest.mark.slow
def test_convert_demo_to_hf_loads_everywhere(tmp_path):
    out = tmp_path / "demo-hf"
    assert cli_main(["convert", "--model", "demo", str(out), "--to", "hf"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    front, text = _card(out)
    assert front["library_name"] == "elmo-bilm" and {"elmo", "bilm", "character-level"} <= set(front["tags"])
    assert front["language"] == ["en"] and front["license"] == "apache-2.0"
    demo = load_bilm("demo")
    assert f"| parameters | {sum(p.numel() for p in demo.parameters()):,} (float32) |" in text
    assert "2 layers per direction (forward and backward), 512 cells, projection to 128" in text
    assert "512 filters of widths 1-6 (32 x 1, 32 x 2, 64 x 3, 128 x 4, 128 x 5, 128 x 6)" in text
    assert "| 107.38 | 108.82 | 108.10 | 108.10 |" in text  # the shipped card's held-out perplexity, carried
    assert "BiLM.from_pretrained(" in text and "elmo embed sentences.txt" in text

    for loaded in (load_bilm(out), BiLM.from_pretrained(out), BiLM.from_pretrained(str(out))):
        assert type(loaded) is BiLM and not loaded.training
        _same_weights(demo, loaded)
    _same_vectors(demo, load_bilm(out))

    text_file = tmp_path / "in.txt"  # `--model DIR` of the CLI reads it too
    text_file.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    assert cli_main(["embed", str(text_file), str(tmp_path / "v.hdf5"), "--all", "--model", str(out)]) == 0
    with h5py.File(tmp_path / "v.hdf5", "r") as f:
        for i, expected in enumerate(Embedder(demo, precision="fp32").embed_sentences(SENTENCES)):
            np.testing.assert_allclose(f[str(i)][()], expected, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_converting_a_converted_folder_gives_the_same_card(tmp_path):
    assert cli_main(["convert", "--model", "demo", str(tmp_path / "a"), "--to", "hf"]) == 0
    assert cli_main(["convert", "--model", str(tmp_path / "a"), str(tmp_path / "b"), "--to", "hf"]) == 0
    assert (tmp_path / "a" / "README.md").read_text() == (tmp_path / "b" / "README.md").read_text()
    assert (tmp_path / "b" / "README.md").read_text().count("Demo biLM (shipped with the package)") == 1


def test_random_float32_weights_round_trip_bit_exactly(tmp_path):
    bilm = _random_float32_bilm()
    written = bilm.save_pretrained(tmp_path / "saved")
    assert written == tmp_path / "saved"
    with safe_open(str(written / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float32}
    loaded = BiLM.from_pretrained(written)
    _same_weights(bilm, loaded)
    _same_vectors(bilm, loaded)
    front, text = _card(written)
    assert front["library_name"] == "elmo-bilm" and "language" not in front and "license" not in front
    assert f"| parameters | {sum(p.numel() for p in bilm.parameters()):,} (float32) |" in text

    # the CLI from that folder, again bit-exact; and from the original format's pair of files
    assert cli_main(["convert", "--model", str(written), str(tmp_path / "cli"), "--to", "hf"]) == 0
    _same_weights(bilm, load_bilm(tmp_path / "cli"))
    assert cli_main(["convert", "--model", str(written), str(tmp_path / "h5"), "--to", "hdf5"]) == 0
    pair = ["--options-file", str(tmp_path / "h5" / "options.json"), "--weight-file", str(tmp_path / "h5" /
                                                                                          "weights.hdf5")]
    assert cli_main(["convert", *pair, str(tmp_path / "from-pair"), "--to", "hf"]) == 0
    _same_weights(bilm, load_bilm(tmp_path / "from-pair"))


def test_manylangs_model_round_trips_with_its_lexicon(tmp_path):
    source = write_manylangs_model(tmp_path / "manylangs", seed=3)
    assert cli_main(["convert", "--model", str(source), str(tmp_path / "hf"), "--to", "hf"]) == 0
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "README.md", "config.json", "lexicon.json", "model.safetensors"]
    front, text = _card(tmp_path / "hf")
    assert "elmoformanylangs" in front["tags"] and "ELMoForManyLangs: 8-d word embedding (15 words)" in text
    original = load_bilm(source)
    converted = BiLM.from_pretrained(tmp_path / "hf")
    _same_weights(original, converted)
    _same_vectors(original, converted)
    converted.save_pretrained(tmp_path / "again")
    _same_weights(original, load_bilm(tmp_path / "again"))
    assert load_bilm(tmp_path / "again").token_encoder.lexicon == original.token_encoder.lexicon


def test_word_input_model_round_trips(tmp_path):
    bilm = build_bilm(tiny_config(), token_vocab_size=30)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in bilm.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    bilm.save_pretrained(tmp_path / "words")
    loaded = BiLM.from_pretrained(tmp_path / "words")
    _same_weights(bilm, loaded)
    ids = torch.tensor([[3, 7, 9, 0], [5, 2, 0, 0]])  # (batch, time) token ids, +1 shifted, 0 pads
    with torch.no_grad():
        for x, y in zip(bilm.eval()(ids).layers, loaded(ids).layers):
            assert torch.equal(x, y)
    front, text = _card(tmp_path / "words")
    assert "word-level" in front["tags"] and "token table: 30 token vectors" in text


@pytest.mark.slow
def test_an_existing_folder_is_refused_without_force(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    assert cli_main(["convert", "--model", "demo", str(out), "--to", "hf"]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"{out} exists and is not empty; pass --force to replace it" in error[0]
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]
    bilm = _random_float32_bilm()
    with pytest.raises(ConfigError, match="pass --force"):
        bilm.save_pretrained(out)
    bilm.save_pretrained(out, force=True)  # replaced as a whole: nothing of the old folder is left
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    assert cli_main(["convert", "--model", "demo", str(out), "--to", "hf", "--force"]) == 0
    _same_weights(load_bilm("demo"), load_bilm(out))


def test_card_takes_language_and_description_from_the_registry(tmp_path, monkeypatch):
    """A published model's name: its registry entry gives the card's language; nothing is downloaded (the files
    are already in the cache, as after the first use)."""
    cache = tmp_path / "home" / "models" / "tiny-ru"
    _random_float32_bilm().save_pretrained(cache)
    (cache / "README.md").unlink()
    registry = {"tiny-ru": {"family": "bilm-tf", "language": "Russian", "description": "a tiny Russian test biLM",
                            "source": "here", "files": {name: {"url": f"http://127.0.0.1:9/{name}", "sha256": None}
                                                        for name in ("config.json", "model.safetensors")}},
                "_sources": {"here": "made by the test"}}
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    monkeypatch.setenv("ELMO_MODEL_REGISTRY", str(tmp_path / "registry.json"))
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    assert cli_main(["convert", "--model", "tiny-ru", str(tmp_path / "hf"), "--to", "hf"]) == 0
    front, text = _card(tmp_path / "hf")
    assert front["language"] == ["ru"] and "# ELMo biLM: tiny-ru\n\na tiny Russian test biLM\n" in text
    assert "made by the test" in text and "http://127.0.0.1:9/model.safetensors" in text
    _same_weights(load_bilm(cache), BiLM.from_pretrained("tiny-ru"))


def test_card_records_a_training_runs_numbers(tmp_path):
    source = tmp_path / "model"
    _random_float32_bilm().save_pretrained(source)
    (source / "README.md").unlink()
    history = [{"step": 10, "train_loss": 5.0}, {"step": 20, "valid_forward": 41.25, "valid_backward": 43.5,
                                                 "valid_geometric_mean": 42.36}]
    (source / "history.json").write_text(json.dumps(history))
    (source / "finetune.json").write_text(json.dumps({"model": "demo", "before": {"forward": 90.5},
                                                      "after": {"forward": 60.25}}))
    (source / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\n")
    assert cli_main(["convert", "--model", str(source), str(tmp_path / "hf"), "--to", "hf"]) == 0
    _, text = _card(tmp_path / "hf")
    assert "Held-out perplexity at step 20 (full softmax, the run's own check): forward 41.25, backward 43.50, " \
           "geometric mean 42.36." in text
    assert "Held-out perplexity before fine-tuning: forward 90.50." in text
    assert "Held-out perplexity after fine-tuning: forward 60.25." in text
    assert "Fine-tuned from `demo`" in text and "Softmax vocabulary: 4 words" in text


@pytest.mark.slow
def test_from_pretrained_in_a_new_process_as_a_user_writes_it(tmp_path):
    """`from elmo import BiLM` is all a user imports: the methods work without importing any format module."""
    code = ("from elmo import BiLM, load_bilm; import sys; "
            "BiLM.from_pretrained('demo').save_pretrained(sys.argv[1]); "
            "load_bilm(sys.argv[1]).save_pretrained(sys.argv[2]); print(type(BiLM.from_pretrained(sys.argv[2])))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a"), str(tmp_path / "b")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "<class 'elmo.modules.bilm.BiLM'>"
    _same_weights(load_bilm("demo"), load_bilm(tmp_path / "b"))


def test_front_matter_values_that_need_quotes_parse_back():
    front = {"library_name": "elmo-bilm", "license": "other: see below", "tags": ["elmo", "yes", "a #b"]}
    text = write_front_matter(front) + "body\n"
    assert yaml.safe_load(text.split("---\n")[1]) == front == split_front_matter(text)[0]


def test_an_nlpl_archive_gives_its_corpus_and_language(tmp_path, fixture_dir):
    archive = pack(tmp_path / "195.zip", nlpl_files(fixture_dir))
    assert cli_main(["convert", "--model", str(archive), str(tmp_path / "hf"), "--to", "hf"]) == 0
    front, text = _card(tmp_path / "hf")
    assert front["language"] == ["rus"]  # as the archive's meta.json spells it (ISO 639-3)
    assert "NLPL `meta.json`: NLPL id 195; corpus: Russian National Corpus, rus, not lemmatized" in text
    _same_weights(load_bilm(archive), load_bilm(tmp_path / "hf"))
