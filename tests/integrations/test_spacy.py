"""The spaCy component (elmo.integrations.spacy) in real spaCy 3.8 pipelines, on the shipped demo biLM: doc.tensor
equals `elmo embed`, nlp.pipe equals one doc at a time, .vector/.similarity come from ELMo without W007, a saved
pipeline loads in a new process without the model's directory, the entry point works without `import elmo`, and bad
settings are one line each."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest

spacy = pytest.importorskip("spacy")

from elmo.cli import main  # noqa: E402
from elmo.embedding.embed_options import EmbedOptions  # noqa: E402
from elmo.embedding.selection import VectorSelection  # noqa: E402
from elmo.errors import ConfigError, WeightFileError  # noqa: E402
from elmo.formats.published import demo_model_dir, read_registry  # noqa: E402
from elmo.integrations.spacy import DEFAULT_CONFIG, ElmoComponentSettings  # noqa: E402

pytestmark = pytest.mark.engine

TEXTS = [
    "The cat sat on the mat.",
    "Alice  saw a bank\nby the river, then it was dark.",  # a double space and a newline: whitespace tokens
    "Hello world",
    "She went to London and Paris with Holmes because the old man said so.",
    "",
    " \n",
]


def pipeline(**config: object):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "demo", **config})
    return nlp


def cli_vectors(tmp_path: Path, docs: list, *flags: str) -> list[np.ndarray]:
    """`elmo embed <flags> --precision fp32` of each doc's tokens that are not whitespace, as (n, dim)."""
    lines = [" ".join(t.text for t in doc if not t.is_space) for doc in docs]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["-q", "embed", str(tmp_path / "in.txt"), str(out), *flags, "--precision", "fp32",
                 "--model", "demo", "--force"]) == 0
    with h5py.File(out) as f:
        found = [f[str(i)][()] for i in range(len(lines))]
    if flags[-1] == "all":  # (L + 1, n, 2P) -> (n, (L + 1) * 2P), the layers side by side in layer order
        found = [x.transpose(1, 0, 2).reshape(x.shape[1], -1) for x in found]
    return found


@pytest.mark.parametrize("layer", ["average", "top", "all", "0", "mix"])
def test_doc_tensor_equals_the_cli_for_the_same_tokens(tmp_path, layer):
    mix = {"mix_weights": [1, 0, -1], "mix_gamma": 0.5} if layer == "mix" else {}
    nlp = pipeline(layer=layer, **mix)
    docs = [nlp(text) for text in TEXTS[:4]]
    mix_flags = ["--mix-weights", "1,0,-1", "--mix-gamma", "0.5"] if mix else []
    expected = cli_vectors(tmp_path, docs, *mix_flags, "--layer", layer)
    dim = {"all": 3 * 256}.get(layer, 256)  # demo: L = 2, 2P = 256
    for doc, cli in zip(docs, expected, strict=True):
        words = [t.i for t in doc if not t.is_space]
        assert doc.tensor.shape == (len(doc), dim) and doc.tensor.dtype == np.float32
        np.testing.assert_allclose(doc.tensor[words], cli, rtol=0, atol=1e-5)


def test_whitespace_tokens_get_zero_vectors_and_change_no_other_vector():
    nlp = pipeline()
    spaced, plain = nlp("Alice  saw a bank\nby the river."), nlp("Alice saw a bank by the river.")
    space = [t.i for t in spaced if t.is_space]
    assert [spaced[i].text for i in space] == [" ", "\n"]
    assert not spaced.tensor[space].any() and not spaced[space[0]].has_vector
    words = [t.i for t in spaced if not t.is_space]
    np.testing.assert_allclose(spaced.tensor[words], plain.tensor, rtol=0, atol=1e-6)
    np.testing.assert_allclose(spaced.vector, plain.vector, rtol=0, atol=1e-6)  # the average skips whitespace
    only_space = nlp(" \n")
    assert nlp("").tensor.shape == (0, 256) and only_space.tensor.shape == (len(only_space), 256)
    assert not only_space.tensor.any() and not only_space.vector.any() and only_space.similarity(plain) == 0.0


def test_nlp_pipe_batches_through_the_component_and_equals_one_doc_at_a_time(monkeypatch):
    nlp = pipeline(layer="all", batch_size=3)
    one_by_one = [nlp(text).tensor for text in TEXTS]
    embedder = nlp.get_pipe("elmo").embedder
    batches: list[int] = []
    real = embedder.embed_batch
    monkeypatch.setattr(embedder, "embed_batch", lambda sentences: batches.append(len(sentences)) or real(sentences))
    piped = [doc.tensor for doc in nlp.pipe(TEXTS * 3, batch_size=9)]
    # 18 docs in groups of 9: 7 and 5 of them have words, run in model batches of at most 3 sentences
    assert batches == [3, 3, 1, 3, 2]
    for got, want in zip(piped, one_by_one * 3, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)  # float32 rounding of other batch shapes only


def test_vectors_and_similarity_come_from_elmo_without_w007():
    nlp = pipeline()
    nlp.vocab.set_vector("cat", np.ones(300, dtype=np.float32))  # static vectors: spaCy would prefer them
    nlp.add_pipe("zero_tensor_after_elmo", last=True)  # as a later tok2vec would
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # W007 (similarity without vectors) would fail the test
        doc, other = nlp("The cat sat on the mat ."), nlp("A dog ran .")
        assert not doc.tensor.any()  # replaced by the later component; the hooks still read ELMo's vectors
        vectors = doc.user_data[("elmo", "vectors")]
        assert vectors.shape == (7, 256) and vectors.any()
        np.testing.assert_array_equal(doc[1].vector, vectors[1])
        np.testing.assert_allclose(doc.vector, vectors.mean(axis=0), rtol=1e-6)
        np.testing.assert_allclose(doc[1:3].vector, vectors[1:3].mean(axis=0), rtol=1e-6)
        assert doc.has_vector and doc[1:3].has_vector and doc[1].has_vector
        assert doc[1].vector_norm == pytest.approx(float(np.linalg.norm(vectors[1])), rel=1e-6)
        assert doc[1:3].vector_norm == pytest.approx(float(np.linalg.norm(vectors[1:3].mean(axis=0))), rel=1e-5)

        def cosine(a: np.ndarray, b: np.ndarray) -> float:
            return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

        assert doc.similarity(other) == pytest.approx(cosine(doc.vector, other.vector), rel=1e-5)
        assert doc[1].similarity(other[1]) == pytest.approx(cosine(vectors[1], other[1].vector), rel=1e-5)
        assert doc[0:2].similarity(doc[3:6]) == pytest.approx(cosine(doc[0:2].vector, doc[3:6].vector), rel=1e-5)
        assert doc.similarity(doc) == pytest.approx(1.0, abs=1e-6)
        assert -1.0 <= doc[1].similarity(doc[5]) < 1.0  # "cat" and "mat" in one sentence: not identical
        sub = doc[1:4].as_doc()  # keeps the hooks; its tensor is the slice
        assert sub.user_hooks and sub.vector.shape == (256,)


@spacy.Language.component("zero_tensor_after_elmo")
def _zero_tensor(doc):
    doc.tensor = np.zeros_like(doc.tensor)
    return doc


SAVED_AND_BLANK = """
import json, sys
import numpy as np
import spacy
nlp = spacy.load(sys.argv[1])
np.save(sys.argv[2], np.concatenate([nlp(t).tensor for t in json.loads(sys.argv[3])]))
blank = spacy.blank("en")
blank.add_pipe("elmo", config={"model": "demo", "layer": "top"})  # the entry point: no `import elmo` here
print(nlp.pipe_names, nlp.get_pipe("elmo").selection.layer, blank("two words").tensor.shape)
"""


def test_a_saved_pipeline_loads_in_a_new_process_without_the_model_directory(tmp_path):
    model = tmp_path / "my-model"
    shutil.copytree(demo_model_dir(), model)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo", config={"model": str(model), "layer": "all"})
    expected = np.concatenate([nlp(t).tensor for t in TEXTS])
    nlp.to_disk(tmp_path / "pipeline")
    assert (tmp_path / "pipeline" / "elmo" / "bilm" / "model.safetensors").is_file()
    model.rename(tmp_path / "moved")  # the config still names it; the weights travel with the pipeline
    script = textwrap.dedent(SAVED_AND_BLANK)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "pipeline"), str(tmp_path / "got.npy"),
                           json.dumps(TEXTS)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "['sentencizer', 'elmo'] all (2, 256)"
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), expected)


def test_to_bytes_carries_the_weights():
    nlp = pipeline(layer="top")
    expected = nlp("The cat sat .").tensor
    other = spacy.blank("en")
    other.add_pipe("elmo", config={"model": "corpus", "layer": "top"})  # other weights until from_bytes
    other.from_bytes(nlp.to_bytes())
    np.testing.assert_array_equal(other("The cat sat .").tensor, expected)
    with pytest.raises(WeightFileError, match="^spaCy component 'elmo': these bytes are not a saved elmo component$"):
        other.get_pipe("elmo").from_bytes(b"\x93\x01\x02\x03")  # a msgpack list
    with pytest.raises(WeightFileError, match="these bytes are not a saved elmo component$"):
        other.get_pipe("elmo").from_bytes(b"\xc1 not msgpack")


def test_building_any_pipeline_imports_no_torch():
    """spaCy imports every spacy_factories entry point whenever it builds a Language; with torch made
    unimportable (spaCy's thinc then runs without it), a blank pipeline still builds and holds the elmo factory."""
    script = ("import sys; sys.modules['torch'] = None\nimport spacy\nnlp = spacy.blank('en')\n"
              "print('elmo.integrations.spacy' in sys.modules, 'elmo' in spacy.registry.factories)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "True True"), done.stderr


def test_bad_settings_are_one_line_each(tmp_path):
    cases = {
        "layer": ("mean", "spaCy component 'elmo': layer must be one of all, top, average, mix or a layer index 0, "
                  "1, ...; got 'mean'"),
        "precision": ("fp8", "spaCy component 'elmo': precision must be one of auto, fp32, bf16; got 'fp8'"),
        "batch_size": (0, "spaCy component 'elmo': batch_size must be >= 1, got 0"),
    }
    for key, (value, message) in cases.items():
        with pytest.raises(ConfigError) as caught:
            pipeline(**{key: value})
        assert str(caught.value) == message
    with pytest.raises(ConfigError) as caught:
        pipeline(layer="mix")
    assert str(caught.value) == ("spaCy component 'elmo': mix_weights must be given with layer mix: one weight per "
                                 "layer, before the softmax")
    with pytest.raises(ConfigError) as caught:
        pipeline(layer=5)("some text")  # checked against the model once it is loaded
    assert str(caught.value) == ("spaCy component 'elmo': layer 5 is not a layer of the model: it has layers 0 to 2 "
                                 "(0 = the token layer)")
    nlp = pipeline(model="no-such-model")  # loaded lazily: spacy.load calls the factory before from_disk
    for use in (lambda: nlp("some text"), nlp.initialize):
        with pytest.raises(ConfigError) as caught:
            use()
        assert str(caught.value) == (
            "spaCy component 'elmo': no-such-model: no such model: neither a model directory or archive, a shipped "
            f"model (demo, corpus) nor one of the {len(read_registry())} published models (`elmo models` lists them)")
    with pytest.raises(WeightFileError, match=r"no biLM weights in this saved pipeline .* nlp.to_disk\(\)$"):
        pipeline().get_pipe("elmo").from_disk(tmp_path)


def test_the_factory_defaults_are_the_embedders():
    defaults = EmbedOptions()
    selection = VectorSelection()
    assert DEFAULT_CONFIG == {"model": ElmoComponentSettings().model, "layer": "average",
                              "mix_weights": selection.mix_weights, "mix_gamma": selection.mix_gamma,
                              "batch_size": defaults.batch_size, "precision": defaults.precision.value}
