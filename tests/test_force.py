"""Nothing a user made is overwritten without being asked (issue #49): ``elmo convert``, ``export``, ``train --out``,
``task train`` and ``warm-state`` refuse an existing non-empty destination with one line naming ``--force``, before
any work, and leave it untouched; ``--force`` replaces it as a whole (no stale file survives); a fresh destination
works as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from elmo.cli import main
from elmo.formats.model_files import load_bilm, save_bilm
from elmo.formats.warm_state import WARM_STATE_FILE, read_warm_state
from tests.conftest import random_bilm, write_lm_corpus
from tests.tasks.conftest import write_conll

TASK_CONFIG = Path(__file__).resolve().parents[1] / "src" / "elmo" / "presets" / "tasks" / "ner-tiny.json"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _user_dir(path: Path) -> dict[str, bytes]:
    """A directory a user made, holding files the command must not touch; returns what it holds."""
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("mine\n")
    (path / "softmax.hdf5").write_bytes(b"an old model's softmax")
    (path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nold\n")
    return _snapshot(path)


def _refused(capsys, destination: Path, ends: str = "exists and is not empty; pass --force to replace it") -> None:
    err = capsys.readouterr().err
    assert err == f"elmo: error: {destination} {ends}\n"


def _no_temporaries(parent: Path) -> None:
    assert sorted(p.name for p in parent.iterdir() if p.name.startswith(".")) == [], "a temporary sibling was left"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_bilm(random_bilm(), tmp_path_factory.mktemp("models") / "model")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_lm_corpus(tmp_path_factory.mktemp("corpus"))


def _train_args(corpus, out: Path, *extra: str) -> list[str]:
    return ["-q", "train", "--config", "tiny", "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]),
            "--out", str(out), "--no-progress", "--max-steps", "1", *extra]


def test_convert(model, tmp_path, capsys):
    out = tmp_path / "converted"
    assert main(["-q", "convert", "--model", str(model), str(out), "--to", "hdf5"]) == 0  # (c) fresh
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "weights.hdf5"]
    (out / "softmax.hdf5").write_bytes(b"the old model's softmax")  # stale files of an earlier export
    (out / "vocab.txt").write_text("<S>\n</S>\n<UNK>\n")
    before = _snapshot(out)
    # (a) refused before the model loads: a model that does not exist is not even looked at
    assert main(["convert", "--model", str(tmp_path / "no-such-model"), str(out)]) == 1
    _refused(capsys, out)
    assert main(["convert", "--model", str(model), str(out)]) == 1
    _refused(capsys, out)
    assert _snapshot(out) == before
    # (b) --force replaces the directory as a whole: nothing of the old model is left beside the new one
    assert main(["-q", "convert", "--model", str(model), str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert load_bilm(out).state_dict().keys() == load_bilm(model).state_dict().keys()
    _no_temporaries(tmp_path)
    # a file where the directory would go is refused, even with --force
    (tmp_path / "file").write_text("mine")
    assert main(["convert", "--model", str(model), str(tmp_path / "file"), "--force"]) == 1
    _refused(capsys, tmp_path / "file", "exists and is not a directory")
    assert (tmp_path / "file").read_text() == "mine"


def test_save_bilm_refuses_a_non_empty_directory(tmp_path):
    from elmo.errors import ConfigError

    before = _user_dir(tmp_path / "m")
    with pytest.raises(ConfigError, match="pass --force"):
        save_bilm(random_bilm(), tmp_path / "m")
    assert _snapshot(tmp_path / "m") == before
    save_bilm(random_bilm(), tmp_path / "m", native=True, force=True)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "model.safetensors"]


@pytest.mark.slow
def test_warm_state(model, tmp_path, capsys):
    directory = save_bilm(load_bilm(model), tmp_path / "model")
    assert main(["-q", "warm-state", "--model", str(directory)]) == 0  # (c) no warm state yet
    path = directory / WARM_STATE_FILE
    read_warm_state(path, load_bilm(directory, warm_state=False))
    path.write_bytes(b"not a warm state: the user's own file")  # (a) refused, the file untouched
    assert main(["warm-state", "--model", str(directory)]) == 1
    _refused(capsys, path, "exists; pass --force to replace it")
    assert path.read_bytes() == b"not a warm state: the user's own file"
    assert main(["-q", "warm-state", "--model", str(directory), "--force"]) == 0  # (b) replaced
    read_warm_state(path, load_bilm(directory, warm_state=False))
    _no_temporaries(directory)


@pytest.mark.slow
def test_train_out(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    before = _user_dir(out)
    assert main(_train_args(corpus, out)) == 1  # (a)
    _refused(capsys, out)
    assert _snapshot(out) == before
    assert main(_train_args(corpus, out, "--force")) == 0  # (b)
    names = {p.name for p in out.iterdir()}
    assert {"train_config.json", "vocab.txt", "checkpoints"} <= names and "notes.txt" not in names
    assert (out / "vocab.txt").read_bytes() == corpus["vocab"].read_bytes()  # the run's, not the stale one
    _no_temporaries(tmp_path)
    # a run with checkpoints: a new run says --resume or --force; --resume continues in place
    assert main(_train_args(corpus, out)) == 1
    err = capsys.readouterr().err
    assert err == f"elmo: error: {out}: already holds a run; pass --resume to continue it, or --force to replace it\n"
    assert main(_train_args(corpus, out, "--resume", "--max-steps", "2")) == 0
    assert (out / "checkpoints" / "step-00000002").is_dir()
    # (c) a fresh directory, and an empty one, are fine
    assert main(_train_args(corpus, tmp_path / "fresh")) == 0
    (tmp_path / "empty").mkdir()
    assert main(_train_args(corpus, tmp_path / "empty")) == 0
    assert (tmp_path / "empty" / "train_config.json").is_file()


def test_train_force_keeps_the_inputs_it_reads(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    _user_dir(out)
    shard = out / "train.txt"
    shard.write_bytes(corpus["train"].read_bytes())
    args = _train_args(corpus, out, "--force")
    args[args.index("--train") + 1] = str(shard)
    assert main(args) == 1
    assert capsys.readouterr().err == f"elmo: error: {out}: holds {shard} (--train), an input of this command; " \
        "--force would delete it: move it first or give another output\n"
    assert shard.is_file() and (out / "notes.txt").is_file()


@pytest.mark.slow
def test_export(corpus, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(_train_args(corpus, run)) == 0
    out = tmp_path / "export"
    assert main(["-q", "export", str(run), str(out)]) == 0  # (c)
    assert {"options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt"} <= {p.name for p in out.iterdir()}
    (out / "model.safetensors").write_bytes(b"a stale native model")
    (out / "warm_state.safetensors").write_bytes(b"a stale warm state")
    before = _snapshot(out)
    assert main(["export", str(run), str(out)]) == 1  # (a)
    _refused(capsys, out)
    assert _snapshot(out) == before
    assert main(["-q", "export", str(run), str(out), "--force"]) == 0  # (b)
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]
    _no_temporaries(tmp_path)
    # never into the run itself, --force or not
    assert main(["export", str(run), str(run), "--force"]) == 1
    assert "is also run_dir, an input of this command" in capsys.readouterr().err
    assert main(["export", str(run), str(tmp_path), "--force"]) == 1  # a directory holding the run
    assert f"holds {run} (run_dir), an input of this command" in capsys.readouterr().err
    assert (run / "train_config.json").is_file()


@pytest.mark.slow
def test_task_train(tmp_path, capsys):
    pytest.importorskip("seqeval")
    data = write_conll(tmp_path / "ner.txt")
    out = tmp_path / "task"

    def args(*extra: str) -> list[str]:
        return ["-q", "task", "train", "ner", "--config", str(TASK_CONFIG), "--train", str(data), "--dev", str(data),
                "--output", str(out), "--no-elmo", "--epochs", "1", "--no-progress", *extra]

    before = _user_dir(out)
    assert main(args()) == 1  # (a)
    _refused(capsys, out)
    assert _snapshot(out) == before
    assert main(args("--force")) == 0  # (b)
    names = {p.name for p in out.iterdir()}
    assert {"model.safetensors", "task.json", "result.json", "predictions.dev.txt"} <= names
    assert not names & {"notes.txt", "softmax.hdf5", "vocab.txt"}
    _no_temporaries(tmp_path)
    out = tmp_path / "fresh"
    assert main(args()) == 0  # (c)
    assert (out / "result.json").is_file()
