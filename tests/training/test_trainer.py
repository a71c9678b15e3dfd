"""Training end to end on CPU: exact resume after kill -9, 2 processes vs 1, export -> load, errors."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from elmo.cli import main
from elmo.formats.checkpoints import latest_checkpoint
from elmo.formats.model_files import load_bilm
from elmo.text.char_encoding import batch_to_ids
from elmo.training.run_files import load_language_model
from tests.conftest import write_lm_corpus

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_lm_corpus(tmp_path_factory.mktemp("corpus"))


def _args(corpus, out, *extra) -> list[str]:
    return ["train", "--config", "tiny", "--train", str(corpus["train"]), "--vocab", str(corpus["vocab"]),
            "--out", str(out), "--no-progress", *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(latest_checkpoint(run_dir) / "model.safetensors")


@pytest.mark.slow
def test_kill_9_then_resume_is_bit_identical(corpus, tmp_path):
    steps = ["--max-steps", "60", "--checkpoint-every", "5", "--log-every", "20"]
    full = tmp_path / "full"
    subprocess.run([sys.executable, "-m", "elmo", "-q", *_args(corpus, full, *steps)], env=_env(), check=True)
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "elmo", "-q", *_args(corpus, killed, *steps)], env=_env())
    deadline = time.time() + 180
    while not (killed / "checkpoints" / "step-00000010").exists() and time.time() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert latest_checkpoint(killed) is not None, "no checkpoint within the deadline"
    interrupted_at = int(latest_checkpoint(killed).name.split("-")[1])
    assert 10 <= interrupted_at < 60, "the run must be killed before it finishes"
    subprocess.run([sys.executable, "-m", "elmo", "-q", *_args(corpus, killed, *steps, "--resume")], env=_env(),
                   check=True)
    a, b = (load_file(latest_checkpoint(run) / "model.safetensors") for run in (full, killed))
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    history = json.loads((killed / "history.json").read_text())
    assert [h["step"] for h in history] == [20, 40, 60]


@pytest.mark.slow
def test_two_processes_match_one_with_the_same_global_batch(corpus, tmp_path):
    common = ["--max-steps", "6", "--dropout", "0", "--log-every", "1", "--checkpoint-every", "100"]
    common += ["--precision", "fp32"]  # bf16 sums in another order round differently
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                    str(29500 + os.getpid() % 1000), "-m", "elmo", "-q",
                    *_args(corpus, tmp_path / "two", *common, "--batch-size", "2")], env=_env(), check=True)
    subprocess.run([sys.executable, "-m", "elmo", "-q", *_args(corpus, tmp_path / "one", *common, "--batch-size", "4")],
                   env=_env(), check=True)
    two = json.loads((tmp_path / "two" / "history.json").read_text())
    one = json.loads((tmp_path / "one" / "history.json").read_text())
    assert len(one) == len(two) == 6
    for x, y in zip(one, two):
        assert x["train_loss"] == pytest.approx(y["train_loss"], rel=1e-4, abs=1e-5)
    a, b = _weights(tmp_path / "one"), _weights(tmp_path / "two")
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_gradient_accumulation_matches_a_bigger_batch(corpus, tmp_path):
    common = ["--max-steps", "4", "--dropout", "0", "--log-every", "1", "--precision", "fp32"]  # as above
    assert main(["-q", *_args(corpus, tmp_path / "big", *common, "--batch-size", "4")]) == 0
    assert main(["-q", *_args(corpus, tmp_path / "acc", *common, "--batch-size", "2", "--grad-accum", "2")]) == 0
    a, b = _weights(tmp_path / "big"), _weights(tmp_path / "acc")
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)


def test_export_loads_anywhere_and_reproduces_activations(corpus, tmp_path, capsys):
    run, export = tmp_path / "run", tmp_path / "export"
    assert main(["-q", *_args(corpus, run, "--max-steps", "3", "--valid", str(corpus["valid"]))]) == 0
    assert (run / "training_curve.png").is_file() and (run / "tensorboard").is_dir()
    assert main(["-q", "export", str(run), str(export)]) == 0
    options = json.loads((export / "options.json").read_text())
    assert options["char_cnn"]["n_characters"] == 262
    trained, _ = load_language_model(run)
    loaded = load_bilm(export)
    ids = batch_to_ids([["the", "cat", "sat"], ["a", "zebra"]], add_sentence_boundaries=True)
    with torch.no_grad():
        want, got = trained.bilm(ids), loaded(ids)
    for x, y in zip(want.layers, got.layers):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-6)
    # Perplexity of the run and of its export agree (the export carries the softmax).
    results = []
    for model in (run, export):
        assert main(["perplexity", "--model", str(model), "--data", str(corpus["valid"]), "--vocab",
                     str(corpus["vocab"]), "--json"]) == 0
        results.append(json.loads(capsys.readouterr().out))
    assert set(results[0]) == {"forward", "backward", "geometric_mean", "arithmetic_mean", "tokens"}
    assert results[0]["forward"] == pytest.approx(results[1]["forward"], rel=1e-5)


@pytest.mark.slow
def test_finetune_reports_before_and_after(corpus, tmp_path):
    from elmo.training.finetune import finetune
    from elmo.training.presets import load_preset
    from elmo.training.trainer import TrainSpec

    run, export = tmp_path / "run", tmp_path / "export"
    assert main(["-q", *_args(corpus, run, "--max-steps", "2")]) == 0
    assert main(["-q", "export", str(run), str(export)]) == 0
    _, train = load_preset("tiny", {"log_every": 1})
    spec = TrainSpec(None, train, corpus["vocab"], [str(corpus["train"])], tmp_path / "ft",
                     valid_path=corpus["valid"], max_steps=3, progress=False)
    result = finetune(spec, export)
    assert result["before"]["tokens"] == result["after"]["tokens"] > 0
    assert result["after"]["geometric_mean"] != result["before"]["geometric_mean"]
    assert latest_checkpoint(tmp_path / "ft").name == "step-00000003"
    # "after" is the trainer's final evaluation, which equals scoring the saved fine-tuned model afresh
    from elmo.text.sentences import read_sentences
    from elmo.text.vocab import Vocabulary
    from elmo.training.perplexity import perplexity
    from elmo.training.run_files import load_language_model

    tuned, _ = load_language_model(tmp_path / "ft")
    sentences = [line.tokens for line in read_sentences(corpus["valid"], skip_blank=True)]
    again = perplexity(tuned, Vocabulary.from_file(corpus["vocab"]), sentences, rows=train.eval_rows)
    assert result["after"]["forward"] == pytest.approx(again.forward, rel=1e-5)
    assert result["after"]["backward"] == pytest.approx(again.backward, rel=1e-5)
    assert json.loads((tmp_path / "ft" / "finetune.json").read_text()) == {"model": str(export), **result}


def test_user_errors_are_one_line(corpus, tmp_path, capsys):
    assert main(_args(corpus, tmp_path / "r", "--max-steps", "1")) == 0
    assert main(_args(corpus, tmp_path / "r", "--max-steps", "2")) == 1
    assert "already holds a run; pass --resume to continue it" in capsys.readouterr().err
    assert main(_args(corpus, tmp_path / "r", "--max-steps", "2", "--resume", "--unroll-steps", "7")) == 1
    assert "different 'unroll_steps'" in capsys.readouterr().err
    bad = dict(corpus, train=tmp_path / "nope*.txt")
    assert main(_args(bad, tmp_path / "r2", "--max-steps", "1")) == 1
    assert "matches no shard" in capsys.readouterr().err
    assert main(["train", "--config", "nosuchpreset", "--train", "x", "--vocab", "v", "--out", "o"]) == 1
    assert "no such preset" in capsys.readouterr().err


def test_a_failed_start_leaves_no_run_directory(corpus, tmp_path, capsys):
    """Bad inputs are found before anything is written; a directory the user made keeps only what it held."""
    (tmp_path / "bad_vocab.txt").write_text("the\ncat\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    for bad, message in ((dict(corpus, vocab=tmp_path / "bad_vocab.txt"), "line 1 must be <S>"),
                         (dict(corpus, train=tmp_path / "empty.txt"), "empty.txt: no sentences"),
                         (dict(corpus, train=tmp_path / "nomatch*.txt"), "matches no shard")):
        assert main(_args(bad, tmp_path / "run", "--max-steps", "1")) == 1
        assert message in capsys.readouterr().err
        assert not (tmp_path / "run").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    assert main(_args(dict(corpus, train=tmp_path / "empty.txt"), mine, "--max-steps", "1")) == 1
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert main(_args(corpus, mine / "notes.txt", "--max-steps", "1")) == 1
    assert "notes.txt exists and is not a directory" in capsys.readouterr().err


def test_resume_names_a_missing_run_directory(corpus, tmp_path, capsys):
    args = _args(corpus, tmp_path / "absent", "--resume")
    del args[1:3]  # no --config: the run's own would be used
    assert main(args) == 1
    assert "--resume: the run directory " in (err := capsys.readouterr().err) and "does not exist" in err
    assert not (tmp_path / "absent").exists()
    (tmp_path / "absent").mkdir()
    assert main(args) == 1
    assert "is not a training run (no train_config.json)" in capsys.readouterr().err


@pytest.mark.slow
def test_bf16_and_full_softmax_options_train(corpus, tmp_path):
    for name, flags in (("bf16", ("--precision", "bf16")), ("full", ("--full-softmax",))):
        assert main(["-q", *_args(corpus, tmp_path / name, "--max-steps", "2", "--log-every", "1", *flags)]) == 0
        history = json.loads((tmp_path / name / "history.json").read_text())
        assert len(history) == 2 and all(h["train_loss"] > 0 for h in history)
    assert json.loads((tmp_path / "full" / "train_config.json").read_text())["sample_softmax"] is False
    assert json.loads((tmp_path / "bf16" / "train_config.json").read_text())["precision"] == "bf16"


@pytest.mark.parametrize("key, value", [("bf16", True), ("precision", "bf16")])
def test_precision_flag_turns_off_a_presets_bf16(corpus, tmp_path, key, value):
    """A preset's bf16, in the run directories' earlier key ``bf16`` or in ``precision``, gives way to the flag."""
    preset = json.loads((SRC / "elmo" / "presets" / "tiny.json").read_text())
    preset.pop("precision")  # "auto" in the shipped preset
    preset[key] = value
    (tmp_path / "bf16.json").write_text(json.dumps(preset))
    args = _args(corpus, tmp_path / "run", "--max-steps", "1", "--precision=fp32")
    args[args.index("tiny")] = str(tmp_path / "bf16.json")
    assert main(["-q", *args]) == 0
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["precision"] == "fp32"


@pytest.mark.parametrize("flag, now", [("--bf16", "--precision bf16"), ("--no-bf16", "--precision fp32")])
def test_removed_precision_flags_say_the_new_one(corpus, tmp_path, capsys, flag, now):
    with pytest.raises(SystemExit) as raised:  # a usage error, as argparse's own
        main(["-q", *_args(corpus, tmp_path / "run", "--max-steps", "1", flag)])
    assert raised.value.code == 2 and capsys.readouterr().err == f"elmo: error: {flag} was removed: use {now}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, message", [
    (["--learning-rate", "inf"], "--learning-rate: must be a finite number, got inf"),
    (["--learning-rate", "nan"], "--learning-rate: must be a finite number, got nan"),
    (["--dropout", "1"], "--dropout: must be in [0, 1), got 1.0"),
    (["--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
])
def test_a_bad_flag_value_is_one_line_before_any_file_is_written(corpus, tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as raised:  # a usage error: the preset key's check runs as the flag is parsed
        main(["-q", *_args(corpus, tmp_path / "run", "--max-steps", "1", *flags)])
    assert raised.value.code == 2
    assert capsys.readouterr().err == f"elmo train: error: argument {message} (see elmo train --help)\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_adam_with_a_decaying_schedule_logs_the_learning_rate(corpus, tmp_path):
    run = tmp_path / "adam"
    assert main(["-q", *_args(corpus, run, "--max-steps", "4", "--log-every", "1", "--optimizer", "adam",
                              "--learning-rate", "0.01", "--lr-schedule", "linear")]) == 0
    lrs = [h["lr"] for h in json.loads((run / "history.json").read_text())]
    assert lrs == pytest.approx([0.01, 0.0075, 0.005, 0.0025])
    state = torch.load(latest_checkpoint(run) / "optimizer.pt", weights_only=True)
    assert "exp_avg_sq" in next(iter(state["state"].values()))


@pytest.mark.slow
def test_one_process_updates_only_the_sampled_softmax_rows(corpus, tmp_path, caplog):
    """One process with Adagrad gives the softmax sparse updates (two processes keep the dense gradient that
    DistributedDataParallel all-reduces, and still match one process: see test_two_processes_match_one_...);
    rows that no step sampled or predicted keep their initial weights."""
    caplog.set_level(logging.INFO, logger="elmo")
    run = tmp_path / "sparse"
    few = ["--negatives", "2", "--batch-size", "1", "--unroll-steps", "2"]  # at most 8 of the 15 rows per step
    assert main(["-q", *_args(corpus, run, "--max-steps", "2", "--checkpoint-every", "1", *few)]) == 0
    assert "the softmax weights take sparse Adagrad updates" in caplog.text
    first, last = (load_file(run / "checkpoints" / f"step-{k:08d}" / "model.safetensors") for k in (1, 2))
    changed = (first["softmax.weight"] != last["softmax.weight"]).any(dim=1)
    assert 0 < int(changed.sum()) < changed.numel()
    caplog.clear()
    assert main(["-q", *_args(corpus, tmp_path / "adam", "--max-steps", "1", "--optimizer", "adam")]) == 0
    assert "sparse Adagrad" not in caplog.text


@pytest.mark.slow
def test_logged_losses_are_window_means_of_both_directions(corpus, tmp_path):
    run = tmp_path / "log"
    assert main(["-q", *_args(corpus, run, "--max-steps", "6", "--log-every", "3")]) == 0
    history = json.loads((run / "history.json").read_text())
    assert [h["step"] for h in history] == [3, 6]
    for h in history:  # loss = (forward + backward) / 2 at every step, so also for the means over a log window
        assert h["train_loss"] == pytest.approx(0.5 * (h["train_forward_loss"] + h["train_backward_loss"]), rel=1e-6)


def test_state_reset_zeroes_the_drawn_rows_before_a_window(corpus, tmp_path):
    from elmo.runtime.distributed import DistInfo
    from elmo.training.presets import load_preset
    from elmo.training.trainer import Trainer, TrainSpec

    config, train = load_preset("tiny", {"state_reset_prob": 0.5})
    spec = TrainSpec(config, train, corpus["vocab"], [str(corpus["train"])], tmp_path / "run", progress=False)
    trainer = Trainer(spec, DistInfo(), torch.device("cpu"))
    trainer.lstm_state = tuple(torch.ones_like(s) for s in trainer.lstm_state)  # as if carried from a window
    seen = []
    forward = trainer.model.forward
    trainer.model.forward = lambda *args: seen.append(args[5]) or forward(*args)
    draws = torch.Generator().set_state(trainer.sampler_generator.get_state())
    trainer.train_step(trainer.next_batch())
    reset = torch.rand(trainer.global_rows, generator=draws) < 0.5  # the trainer's draw, repeated
    h, c = seen[0]  # (2, L, B, P), (2, L, B, C) handed to the model
    assert 0 < int(reset.sum()) < trainer.global_rows
    for rows, value in ((reset, 0.0), (~reset, 1.0)):
        assert bool((h[:, :, rows] == value).all()) and bool((c[:, :, rows] == value).all())


def test_weight_dropout_reaches_every_lstm_layer(corpus, tmp_path):
    from elmo.training.presets import load_preset
    from elmo.training.run_files import build_language_model, wrap_bilm

    run = tmp_path / "run"
    assert main(["-q", *_args(corpus, run, "--max-steps", "1", "--weight-dropout", "0.25")]) == 0
    assert json.loads((run / "train_config.json").read_text())["weight_dropout"] == 0.25
    config, train = load_preset("tiny", {"weight_dropout": 0.25})
    plain = build_language_model(config, load_preset("tiny", {})[1], 50)
    assert all(cell.weight_dropout == 0.0 for cell in plain.bilm.forward_lstm.layers)
    for lm in (build_language_model(config, train, 50), wrap_bilm(plain.bilm, plain.softmax, train)):
        cells = [cell for stack in (lm.bilm.forward_lstm, lm.bilm.backward_lstm) for cell in stack.layers]
        assert len(cells) == 2 * config.lstm.n_layers and all(cell.weight_dropout == 0.25 for cell in cells)


@pytest.mark.slow
def test_a_run_written_with_the_earlier_key_name_resumes(corpus, tmp_path):
    """A run directory whose train_config.json has the keys of earlier versions: ``compile_lstm`` (now ``compile``),
    ``bf16`` (now ``precision``) and the retired ``variational_dropout`` and ``average_last`` at their off values."""
    run = tmp_path / "run"
    fp32 = ("--precision", "fp32")  # earlier versions wrote fp32 or bf16, never auto
    assert main(["-q", *_args(corpus, run, "--max-steps", "1", "--checkpoint-every", "1", *fp32)]) == 0
    saved = json.loads((run / "train_config.json").read_text())
    saved["compile_lstm"] = saved.pop("compile")
    saved["bf16"] = saved.pop("precision") == "bf16"
    saved.update(variational_dropout=False, average_last=0.0)
    (run / "train_config.json").write_text(json.dumps(saved))
    assert main(["-q", *_args(corpus, run, "--max-steps", "2", "--checkpoint-every", "1", "--resume", *fp32)]) == 0
    assert len(json.loads((run / "history.json").read_text())) == 2


@pytest.mark.slow
def test_compile_option_trains_through_the_compiled_loops(corpus, tmp_path):
    from elmo.modules import char_cnn, compiled, highway, lstm_window, softmax_loss

    args = _args(corpus, tmp_path / "run", "--max-steps", "2", "--log-every", "1", "--compile")
    assert main(["-q", *args]) == 0
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["compile"] is True
    for function in (lstm_window.forward_steps, softmax_loss.softmax_block, char_cnn.max_and_first_position,
                     highway.highway_layer):
        assert compiled.compiled(function)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert len(history) == 2 and all(h["train_loss"] > 0 for h in history)
