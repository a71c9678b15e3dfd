"""The model-format registry and the model reference: every row of ``MODEL_FORMATS`` recognises, describes and loads
a tiny model of its family (written by the family's own tools where the family has them: TensorFlow for bilm-tf
checkpoints and hub modules); recognition order is the registry's; a ``ModelRef`` is the one value every entry
point resolves (issue #55, items 1 and 2)."""

from __future__ import annotations

import json
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo import batch_to_ids, load_bilm
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.hdf5 import bilm_to_datasets
from elmo.formats.hf_folders import save_hf_folder
from elmo.formats.model_files import save_bilm
from elmo.formats.model_formats import MODEL_FORMATS, LoadRequest, load_path, model_format, read_path_config
from elmo.formats.model_ref import FILES, PATH, PUBLISHED, SHIPPED, ModelRef
from elmo.formats.published import DEMO_DIR, fetch_model
from elmo.serving.service import ModelSpec
from tests.conftest import random_bilm, tiny_config
from tests.formats.bilm_tf_files import write_bilm_tf_dir
from tests.formats.manylangs_files import write_manylangs_model
from tests.formats.test_tf_hub import _write_module

SENTENCES = [["The", "cat", "sat", "."], ["a"]]


@pytest.fixture(scope="module")
def families(tmp_path_factory) -> dict[str, tuple[Path, torch.nn.Module | None]]:
    """Row name -> (a tiny model of that family, the biLM its weights came from; None for ManyLangs, which has its
    own architecture and parity tests in test_manylangs.py)."""
    root = tmp_path_factory.mktemp("families")
    bilm = random_bilm(tiny_config())
    original = save_bilm(bilm, root / "original")
    save_bilm(bilm, root / "native", native=True)
    save_hf_folder(bilm, root / "hf")
    with zipfile.ZipFile(root / "model.zip", "w") as archive:  # NLPL's layout: model.hdf5 + options.json
        archive.write(original / "options.json", "options.json")
        archive.write(original / "weights.hdf5", "model.hdf5")
    write_manylangs_model(root / "manylangs")
    rng = np.random.default_rng(0)
    write_bilm_tf_dir(root / "bilm-tf", bilm, rng.standard_normal((7, 8)), rng.standard_normal(7))
    _write_module(root / "hub", bilm_to_datasets(bilm), bilm.config.to_options(), None, marker=False)
    with tarfile.open(root / "hub.tar.gz", "w:gz") as tar:
        tar.add(root / "hub", arcname="elmo_module")
    return {"original": (original, bilm), "native": (root / "native", bilm), "hf-folder": (root / "hf", bilm),
            "zip": (root / "model.zip", bilm), "manylangs": (root / "manylangs", None),
            "bilm-tf-checkpoint": (root / "bilm-tf", bilm), "tf-hub": (root / "hub", bilm),
            "tf-hub-archive": (root / "hub.tar.gz", bilm)}


def _layers(bilm) -> list[torch.Tensor]:
    with torch.no_grad():
        return bilm(batch_to_ids(SENTENCES)).layers


def test_every_row_has_a_family_here(families):
    assert [f.name for f in MODEL_FORMATS] == ["tf-hub-archive", "tf-hub", "zip", "bilm-tf-checkpoint", "manylangs",
                                               "hf-folder", "native", "original"]
    assert set(families) == {f.name for f in MODEL_FORMATS}


@pytest.mark.slow
@pytest.mark.parametrize("row", [f.name for f in MODEL_FORMATS])
def test_each_row_recognises_reads_the_configuration_and_loads(families, row):
    path, source = families[row]
    assert model_format(path).name == row
    config = read_path_config(path)
    bilm = load_path(path)
    assert bilm.config.lstm == config.lstm and bilm.config.char_cnn == config.char_cnn and not bilm.training
    assert ModelRef.parse(path).format_name() == row and load_bilm(path).config == bilm.config
    if source is not None:  # the same architecture and the same vectors as the biLM the files were written from
        assert config.lstm == source.config.lstm and config.char_cnn.filters == source.config.char_cnn.filters
        for ours, theirs in zip(_layers(bilm), _layers(source), strict=True):
            torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_recognition_order_settles_shared_file_names(families, tmp_path):
    """bilm-tf's directory has options.json like the original: a dump_weights output beside the checkpoint wins
    unless a checkpoint is asked for; ManyLangs and native share config.json; a native folder with a card is an HF
    folder."""
    both = tmp_path / "both"
    both.mkdir()
    for source in (families["bilm-tf-checkpoint"][0], families["original"][0]):
        for file in source.iterdir():
            (both / file.name).write_bytes(file.read_bytes())
    assert model_format(both).name == "original"
    assert model_format(both, LoadRequest(checkpoint="model.ckpt-10000")).name == "bilm-tf-checkpoint"
    torch.testing.assert_close(_layers(load_bilm(both, checkpoint="model.ckpt-10000"))[2], _layers(load_bilm(both))[2],
                               rtol=0, atol=1e-6)
    assert (families["manylangs"][0] / "config.json").is_file() and model_format(families["manylangs"][0]).name \
        == "manylangs"
    assert not (families["native"][0] / "README.md").exists() and (families["hf-folder"][0] / "README.md").is_file()


def test_an_option_a_format_does_not_take_is_one_line(families):
    with pytest.raises(ConfigError, match=r"hub: checkpoint goes with a bilm-tf training directory .*; this is a "
                                          r"TF-Hub module$"):
        load_path(families["tf-hub"][0], LoadRequest(checkpoint="model.ckpt-1"))
    with pytest.raises(ConfigError, match=r"bilm-tf: embedding_file goes with an original model .*; this is a bilm-tf"):
        load_bilm(families["bilm-tf-checkpoint"][0], embedding_file="e.hdf5")


def test_something_that_is_no_model_says_which_formats_were_tried(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    for path, what in ((tmp_path, "a folder"), (tmp_path / "notes.txt", "a file")):
        with pytest.raises(WeightFileError) as caught:
            load_bilm(path)
        message = str(caught.value)
        assert message.startswith(f"{path}: {what}, but not a model in any format read here (tried: ")
        assert all(f.title in message for f in MODEL_FORMATS) and "\n" not in message


# ------------------------------------------------------------------ the model reference


def test_every_spelling_is_one_picklable_reference(families, tmp_path, monkeypatch):
    monkeypatch.chdir(families["native"][0].parent)
    refs = {
        PATH: ModelRef.parse("native"),
        SHIPPED: ModelRef.parse("demo"),
        PUBLISHED: ModelRef.parse("small"),  # a published name: not downloaded to make the reference
        FILES: ModelRef.parse(options_file="original/options.json", weight_file="original/weights.hdf5"),
    }
    assert refs[PATH] == ModelRef(PATH, str(families["native"][0]))  # absolute: another working directory finds it
    assert (refs[PATH].label, refs[PATH].record) == ("native", str(families["native"][0]))
    assert (refs[SHIPPED].label, refs[SHIPPED].record, refs[SHIPPED].path()) == ("demo", "demo", DEMO_DIR)
    assert (refs[PUBLISHED].label, refs[PUBLISHED].record, refs[PUBLISHED].is_local) == ("small", "small", False)
    assert refs[FILES].label == "weights.hdf5" and refs[FILES].options_file == str(families["original"][0] /
                                                                                 "options.json")
    for ref in refs.values():
        assert pickle.loads(pickle.dumps(ref)) == ref  # into Ray actors and Spark workers
        spec = ModelSpec(ref, device="cpu")
        assert ModelSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec  # into elmo serve's workers
    for kind in (PATH, FILES):
        torch.testing.assert_close(_layers(refs[kind].load())[2], _layers(families["native"][1])[2], rtol=0,
                                   atol=1e-6)
    assert ModelRef.parse(refs[PATH]) is refs[PATH]


@pytest.mark.slow
def test_the_shipped_names_load_everywhere_else_does():
    """``load_bilm("demo")`` and ``fetch_model("demo")`` take what ``--model demo`` takes."""
    assert fetch_model("demo") == DEMO_DIR
    assert load_bilm("demo").config == load_bilm(DEMO_DIR).config


@pytest.mark.parametrize(("given", "message"), [
    ({"model": "no-such-model"}, r"^no-such-model: no such model: neither a model directory or archive, a shipped "
                                 r"model \(demo, corpus\) nor one of the \d+ published models \(`elmo models`"),
    ({"model": "some/where"}, r"^some/where: no such model directory or archive$"),
    ({"model": "demo", "options_file": "o.json"}, r"^give either a model or options_file \+ weight_file, not both$"),
    ({"options_file": "o.json"}, r"^options_file and weight_file go together$"),
    ({"checkpoint": "model.ckpt-1"}, r"^a checkpoint is picked in a bilm-tf training directory"),
    ({}, r"^no model given"),
])
def test_a_spelling_that_names_nothing_is_one_line(given, message):
    with pytest.raises(ConfigError, match=message):
        ModelRef.parse(**given)
