"""``elmo.integrations.flair.ELMoEmbeddings`` in the real Flair (pinned 0.15.1 by the test extra): the vectors of
``elmo embed``, a tagger trained with Flair's ``ModelTrainer``, saved and loaded again in a new process that never
imports ``elmo.integrations.flair`` (after the biLM directory it was trained from is gone), inside
``StackedEmbeddings``, and the one-line errors of bad arguments."""

from __future__ import annotations

import inspect
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from flair.data import Dictionary, Sentence
from flair.datasets import ColumnCorpus
from flair.embeddings import OneHotEmbeddings, StackedEmbeddings
from flair.embeddings.base import load_embeddings
from flair.models import SequenceTagger
from flair.trainers import ModelTrainer

from elmo.errors import ConfigError, ElmoError
from elmo.integrations.flair import ELMoEmbeddings

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "src" / "elmo" / "pretrained" / "demo"
SUBPROCESS_ENV = dict(os.environ, USE_TF="0", PYTHONPATH=str(REPO / "src"))
"""USE_TF=0: Flair imports transformers, which would import the installed TensorFlow (4 s) for nothing."""

LINES = [
    "The cat sat on the mat .",
    "Holmes saw Alice in London , then Paris .",
    "naïve café — déjà vu !",
    "a",
    "Pneumonoultramicroscopicsilicovolcanoconiosis-and-then-some-more-letters is long",
    "It was the best of times , it was the worst of times , it was the age of wisdom .",
]


def token_vectors(sentence: Sentence, names: list[str]) -> np.ndarray:
    """(n, D): the vectors Flair hands a tagger for ``sentence``."""
    return torch.stack([token.get_embedding(names) for token in sentence]).detach().cpu().numpy()


LAYERS = {  # the settings of ELMoEmbeddings -> the same choice as `elmo embed` flags
    "all": ({"layer": "all"}, ["--all"]),
    "top": ({"layer": "top"}, ["--top"]),
    "average": ({"layer": "average"}, ["--average"]),
    "1": ({"layer": 1}, ["--layer", "1"]),
    "mix": ({"layer": "mix", "mix_weights": [1, 0, -1], "mix_gamma": 0.5},
            ["--layer", "mix", "--mix-weights", "1,0,-1", "--mix-gamma", "0.5"]),
}

CLI = """
import json, sys
from elmo.cli import main  # what the `elmo` console script runs
text, folder, flags = sys.argv[1:]
sys.exit(max(main(["embed", text, f"{folder}/{name}.hdf5", *given, "--precision", "fp32", "--model", "demo"])
             for name, given in json.loads(flags).items()))
"""


def test_token_vectors_equal_elmo_embed_for_every_layer(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    flags = json.dumps({name: given for name, (_, given) in LAYERS.items()})
    cli = subprocess.Popen([sys.executable, "-c", CLI, str(text), str(tmp_path), flags], env=SUBPROCESS_ENV,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # one process: every command
    embedded = {}
    for name, (settings, _) in LAYERS.items():
        embeddings = ELMoEmbeddings("demo", batch_size=2, **settings)  # several batches in one call
        sentences = [Sentence(line.split()) for line in LINES]  # Flair's tokens = the CLI's whitespace tokens
        embeddings.embed(sentences)
        embedded[name] = embeddings, sentences
    stdout, _ = cli.communicate(timeout=300)
    assert cli.returncode == 0, stdout.decode()
    for name, (embeddings, sentences) in embedded.items():
        with h5py.File(tmp_path / f"{name}.hdf5", "r") as f:
            for i, sentence in enumerate(sentences):
                expected = f[str(i)][()]  # all: (L + 1, n, 2P); the others: (n, 2P)
                if name == "all":  # one vector per token: each token's layers joined in layer order
                    assert embeddings.embedding_length == expected.shape[0] * expected.shape[2] == 3 * 256
                    expected = expected.transpose(1, 0, 2).reshape(expected.shape[1], -1)
                got = token_vectors(sentence, [embeddings.name])
                assert got.shape == expected.shape == (len(sentence), embeddings.embedding_length)
                np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


# ------------------------------------------------------------------ a tagger, trained, saved, loaded elsewhere

WORDS = "the a cat dog sat ran to on under mat tree big saw London Paris Alice Holmes , . and then it was".split()
TAGS = {"London": "S-LOC", "Paris": "S-LOC", "Alice": "S-PER", "Holmes": "S-PER"}


def write_corpus(folder: Path) -> ColumnCorpus:
    rng = random.Random(0)
    folder.mkdir()
    for split, n in (("train", 24), ("test", 6)):
        sentences = [[rng.choice(WORDS) for _ in range(rng.randint(3, 10))] for _ in range(n)]
        blocks = ["\n".join(f"{w} {TAGS.get(w, 'O')}" for w in s) for s in sentences]
        (folder / f"{split}.txt").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    # no dev set: the trainer then keeps the epoch of least training loss as best-model.pt, so it always writes
    # one and loads it back (from_params) before testing
    return ColumnCorpus(folder, {0: "text", 1: "ner"}, train_file="train.txt", test_file="test.txt",
                        sample_missing_splits=False)


def predictions(tagger: SequenceTagger, lines: list[str]) -> list[list[list]]:
    """Per token: the predicted tag and every tag's score (so that equal labels are not a coincidence)."""
    sentences = [Sentence(line.split()) for line in lines]
    tagger.predict(sentences, label_name="predicted", return_probabilities_for_all_classes=True,
                   force_token_predictions=True)
    return [[[token.get_label("predicted").value, [[label.value, float(label.score)] for label in
                                                    token.get_tags_proba_dist("predicted")]] for token in s]
            for s in sentences]


NEW_PROCESS = """
import json, sys
from flair.data import Sentence
from flair.models import SequenceTagger
assert "elmo.integrations.flair" not in sys.modules
""" + inspect.getsource(predictions) + """
taggers = [SequenceTagger.load(path) for path in sys.argv[2:]]
assert "elmo.integrations.flair" in sys.modules  # imported by unpickling the tagger files, which registered the class
print(json.dumps([predictions(tagger, json.loads(sys.argv[1])) for tagger in taggers]))
"""


def assert_same_predictions(got: list, expected: list) -> None:
    for sentence_got, sentence_expected in zip(got, expected, strict=True):
        assert [tag for tag, _ in sentence_got] == [tag for tag, _ in sentence_expected]  # identical labels
        for (_, scores_got), (_, scores_expected) in zip(sentence_got, sentence_expected, strict=True):
            assert [v for v, _ in scores_got] == [v for v, _ in scores_expected]
            np.testing.assert_allclose([s for _, s in scores_got], [s for _, s in scores_expected], atol=1e-5)


def test_a_trained_tagger_loads_in_a_new_process_after_its_bilm_moved(tmp_path):
    bilm = tmp_path / "bilm"
    shutil.copytree(DEMO, bilm)
    corpus = write_corpus(tmp_path / "data")
    tags = corpus.make_label_dictionary("ner", add_unk=False)
    stack = StackedEmbeddings([  # renames its members ("0-elmo-bilm-top"); the name must survive the round trip
        ELMoEmbeddings(str(bilm), layer="top"), OneHotEmbeddings.from_corpus(corpus, min_freq=1, embedding_length=8)])
    lines = [" ".join(token.text for token in s) for s in corpus.test] + LINES
    paths, expected = [], []
    for k, embeddings in enumerate([ELMoEmbeddings(str(bilm)), stack]):
        tagger = SequenceTagger(hidden_size=8, embeddings=embeddings, tag_dictionary=tags, tag_type="ner")
        ModelTrainer(tagger, corpus).train(tmp_path / f"run{k}", max_epochs=1, mini_batch_size=8,
                                           learning_rate=0.5, create_file_logs=False)
        assert (tmp_path / f"run{k}" / "best-model.pt").is_file()
        tagger.save(tmp_path / f"tagger{k}.pt")
        paths.append(str(tmp_path / f"tagger{k}.pt"))
        expected.append(predictions(tagger, lines))
    shutil.rmtree(bilm)  # the tagger files hold the biLM's weights: its directory is not needed any more

    done = subprocess.run([sys.executable, "-c", NEW_PROCESS, json.dumps(lines), *paths], cwd=REPO,
                          env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for tagger_got, tagger_expected in zip(got, expected, strict=True):
        assert_same_predictions(tagger_got, tagger_expected)


# ------------------------------------------------------------------ inside a stack, saved parameters


def test_in_a_stack_the_elmo_part_is_the_elmo_vector_and_the_name_survives_saving():
    elmo = ELMoEmbeddings("demo", layer="average")
    alone = [Sentence(line.split()) for line in LINES]
    elmo.embed(alone)
    dictionary = Dictionary()
    for word in sorted({w for line in LINES for w in line.split()}):
        dictionary.add_item(word)
    stack = StackedEmbeddings([ELMoEmbeddings("demo", layer="average"), OneHotEmbeddings(dictionary,
                                                                                           embedding_length=4)])
    assert stack.embedding_length == 256 + 4
    assert stack.get_names()[0] == "0-elmo-demo-average"
    reloaded = load_embeddings(stack.save_embeddings(use_state_dict=True))  # what a saved model does
    assert reloaded.get_names()[0] == "0-elmo-demo-average"  # (Flair's own OneHotEmbeddings loses its "1-")
    for embeddings in (stack, reloaded):
        sentences = [Sentence(line.split()) for line in LINES]
        embeddings.embed(sentences)
        for s, a in zip(sentences, alone):
            vectors = token_vectors(s, embeddings.get_names())  # (n, 256 + 4): the members in stack order
            np.testing.assert_array_equal(vectors[:, :256], token_vectors(a, [elmo.name]))


def test_its_settings_are_saved_and_come_back():
    elmo = ELMoEmbeddings("demo", layer="mix", mix_weights=[1, 0, -1], mix_gamma=0.5, batch_size=2)
    reloaded = load_embeddings(elmo.save_embeddings(use_state_dict=True))
    assert (reloaded.name, reloaded.selection, reloaded.embed_options) == (elmo.name, elmo.selection,
                                                                           elmo.embed_options)
    assert elmo.name == "elmo-demo-mix" and elmo.embedding_length == 256
    first, again = [Sentence(LINES[1].split())], [Sentence(LINES[1].split())]
    elmo.embed(first)
    reloaded.embed(again)
    np.testing.assert_array_equal(token_vectors(first[0], [elmo.name]), token_vectors(again[0], [reloaded.name]))


def test_rebuilt_from_parameters_without_weights_it_refuses_to_embed():
    params = ELMoEmbeddings("demo").save_embeddings(use_state_dict=False)  # no state dict: random weights
    with pytest.raises(ElmoError, match="without its weights"):
        load_embeddings(params).embed([Sentence("a b".split())])


# ------------------------------------------------------------------ bad arguments: one line each


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"model": "no-such-model"}, ["ELMoEmbeddings: no-such-model: no such model", "demo", "elmo models"]),
    ({"model": "/moved/away/bilm"}, ["ELMoEmbeddings: /moved/away/bilm: no such model directory or archive"]),
    ({"layer": "mean"}, ["ELMoEmbeddings: layer", "all, top, average, mix", "'mean'"]),
    ({"layer": 3}, ["ELMoEmbeddings: layer 3 is not a layer of the model", "0 to 2"]),
    ({"layer": "mix"}, ["ELMoEmbeddings: mix_weights must be given with layer mix"]),
    ({"pool": "mean"}, ["ELMoEmbeddings: pool is not a setting of a token embedding", "layer, mix_weights"]),
    ({"output": "all"}, ["ELMoEmbeddings: unknown setting 'output'"]),
    ({"precision": "fp8"}, ["ELMoEmbeddings: precision", "fp8"]),
    ({"batch_size": 0}, ["ELMoEmbeddings: batch_size", "0"]),
])
def test_bad_arguments_are_one_line_naming_the_value(kwargs, words):
    with pytest.raises(ConfigError) as error:
        ELMoEmbeddings(**kwargs)
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message
