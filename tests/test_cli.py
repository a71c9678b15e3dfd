"""The ``elmo embed`` contract and CLI error handling (one line, no traceback, non-zero exit)."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

from elmo.cli import main as cli_main
from elmo.formats.model_files import save_bilm
from tests.conftest import random_bilm

LINES = ["The bank raised rates .", "", "He sat on the river bank ."]


@pytest.fixture()
def model_dir(tmp_path):
    return save_bilm(random_bilm(), tmp_path / "model")


@pytest.fixture()
def text_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _embed(text_file, out, model_dir, *flags) -> dict[str, np.ndarray]:
    assert cli_main(["embed", str(text_file), str(out), "--model", str(model_dir), *flags]) == 0
    with h5py.File(out, "r") as f:
        return {k: f[k][...] for k in f}


def test_all_top_average_shapes_and_sentence_index(tmp_path, text_file, model_dir):
    all_layers = _embed(text_file, tmp_path / "all.hdf5", model_dir, "--all")
    assert all_layers["0"].shape == (3, 5, 16) and all_layers["1"].shape == (3, 0, 16)
    assert all_layers["2"].shape == (3, 7, 16)
    assert json.loads(all_layers["sentence_to_index"][0]) == {line: str(i) for i, line in enumerate(LINES)}
    top = _embed(text_file, tmp_path / "top.hdf5", model_dir, "--top")
    average = _embed(text_file, tmp_path / "avg.hdf5", model_dir, "--average", "--batch-size", "1")
    for key in ("0", "2"):
        np.testing.assert_array_equal(top[key], all_layers[key][-1])
        np.testing.assert_allclose(average[key], all_layers[key].mean(0), rtol=1e-5, atol=1e-6)


def test_sentence_keys_and_forget_sentences(tmp_path, text_file, model_dir):
    text_file.write_text("a b\nc d e\n", encoding="utf-8")
    keyed = _embed(text_file, tmp_path / "k.hdf5", model_dir, "--top", "--use-sentence-keys", "--forget-sentences")
    assert sorted(keyed) == ["a b", "c d e"]


def test_missing_input_and_model_errors(tmp_path, text_file, model_dir, capsys):
    assert cli_main(["embed", str(tmp_path / "nope.txt"), str(tmp_path / "o.hdf5"), "--top", "--model",
                     str(model_dir)]) == 1
    assert "nope.txt: no such input file" in capsys.readouterr().err
    assert cli_main(["embed", str(text_file), str(tmp_path / "o.hdf5"), "--top", "--model",
                     str(tmp_path / "nomodel")]) == 1
    assert "nomodel: no such model directory or archive" in capsys.readouterr().err


@pytest.mark.slow
def test_mismatched_options_error_without_traceback(tmp_path, text_file, fixture_dir):
    options = json.loads((fixture_dir / "options.json").read_text())
    options["lstm"]["projection_dim"] = 32
    (tmp_path / "options.json").write_text(json.dumps(options))
    result = subprocess.run(
        [sys.executable, "-m", "elmo", "embed", str(text_file), str(tmp_path / "o.hdf5"), "--top",
         "--options-file", str(tmp_path / "options.json"), "--weight-file", str(fixture_dir / "lm_weights.hdf5")],
        capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "dataset 'CNN_proj/W_proj' has shape (124, 16), the options expect (124, 32)" in result.stderr


def test_training_flags_and_their_defaults_come_from_train_config(capsys):
    from elmo.settings import flag_of, setting_of, settings_of
    from elmo.training.train_config import TrainConfig

    with pytest.raises(SystemExit):
        cli_main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for field in settings_of(TrainConfig):
        keys_only = setting_of(field).flag == ""  # a key only a file sets (the original's n_tokens_vocab, ...)
        assert (flag_of(TrainConfig, field.name) in text) != keys_only
    negatives = TrainConfig.n_negative_samples_batch
    assert f"--negatives NEGATIVES sampled-softmax negatives per batch (default: the preset's " \
        f"n_negative_samples_batch, else {negatives})" in text
    assert "--variational-dropout" not in text and "--average-last" not in text


@pytest.mark.parametrize("argv, flag, now", [
    (["embed", "in.txt", "out.hdf5", "--all", "--stateful"], "--stateful", "--initial-state carry"),
    (["embed", "in.txt", "out.hdf5", "--all", "--max-tokens-per-batch=100"], "--max-tokens-per-batch",
     "--max-batch-tokens"),
    (["train", "--bf16"], "--bf16", "--precision bf16"),
])
def test_removed_flags_name_the_new_one(argv, flag, now, capsys):
    with pytest.raises(SystemExit) as raised:
        cli_main(argv)
    assert raised.value.code == 2
    assert capsys.readouterr().err == f"elmo: error: {flag} was removed: use {now}\n"


def test_quiet_and_debug_are_taken_after_the_command_too():
    from elmo.cli import build_parser

    parser = build_parser()
    for argv in (["-q", "--debug", "embed", "a", "b"], ["embed", "a", "b", "-q", "--debug"],
                 ["task", "train", "ner", "--config", "c", "--train", "t", "--dev", "d", "--output", "o", "--quiet"]):
        args = parser.parse_args(argv)
        assert args.quiet and (args.debug or argv[0] == "task"), argv
    args = parser.parse_args(["embed", "a", "b"])
    assert not args.quiet and not args.debug


def test_debug_after_the_command_shows_the_traceback(tmp_path, model_dir):
    from elmo.errors import ElmoError

    with pytest.raises(ElmoError, match="no such input file"):
        cli_main(["embed", str(tmp_path / "nope.txt"), str(tmp_path / "o.hdf5"), "--top", "--model", str(model_dir),
                  "--debug"])


def test_record_fields_on_text_input_are_refused_not_ignored(tmp_path, text_file, model_dir, capsys):
    assert cli_main(["embed", str(text_file), str(tmp_path / "o.hdf5"), "--top", "--model", str(model_dir),
                     "--text-field", "body"]) == 2
    assert capsys.readouterr().err == f"elmo: error: --text-field and --id-field name fields of JSONL or Parquet " \
                                      f"records; {text_file} is read as text (--input-format)\n"
    assert not (tmp_path / "o.hdf5").exists()


def test_models_of_a_family_that_does_not_exist_is_a_usage_error(capsys):
    assert cli_main(["models", "--family", "nosuch"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # not an empty table
    assert captured.err.startswith("elmo: error: --family nosuch: no such family (the families: bilm-tf, ")


def test_every_engine_the_flag_offers_has_a_start_up_in_the_cli():
    from elmo.cli.embed_commands import ENGINES as START_UPS
    from elmo.embedding.embed_options import ENGINES

    assert sorted(START_UPS) == sorted(ENGINES)
