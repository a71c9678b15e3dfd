"""Training runs on disk: build, load and export biLM language models (the biLM plus its softmax).

A training run directory::

    RUN_DIR/train_config.json   the preset (architecture + trainer keys) the run uses
    RUN_DIR/vocab.txt           the vocabulary (softmax row i = line i)
    RUN_DIR/checkpoints/step-N/ see elmo.formats.checkpoints
    RUN_DIR/finetune.json       fine-tuning runs: the model started from, held-out perplexity before and after

An export directory (``elmo export``) is a model directory any ELMo loader reads, plus the softmax::

    OUT/options.json + OUT/weights.hdf5    the original layout (n_characters 262)
    OUT/softmax.hdf5                       softmax/W (V, P), softmax/b (V): elmo.formats.softmax_hdf5
    OUT/vocab.txt
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from elmo.config import BiLMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.checked_reads import load_checked_state, read_json
from elmo.formats.checkpoints import latest_checkpoint, read_model_state
from elmo.formats.model_files import write_bilm_files
from elmo.formats.model_formats import load_path, recognise
from elmo.formats.model_ref import PATH, PUBLISHED, ModelRef
from elmo.formats.softmax_hdf5 import SOFTMAX_FILE, read_softmax, write_softmax
from elmo.modules.bilm import BiLM, build_bilm
from elmo.modules.initialization import init_like_original
from elmo.modules.language_model import BiLMLanguageModel
from elmo.modules.softmax import Softmax
from elmo.runtime.atomic_files import check_destination, replace_directory
from elmo.text.vocab import Vocabulary
from elmo.training.train_config import TrainConfig, split_preset

RUN_CONFIG_FILE = "train_config.json"
VOCAB_FILE = "vocab.txt"
FINETUNE_FILE = "finetune.json"


def build_language_model(config: BiLMConfig, train: TrainConfig, vocab_size: int) -> BiLMLanguageModel:
    """A freshly initialised (bilm-tf initialisers) language model for this preset."""
    bilm = build_bilm(config, dropout=train.dropout, weight_dropout=train.weight_dropout)
    init_like_original(bilm)
    softmax = Softmax(vocab_size, config.lstm.projection_dim)
    num_sampled = train.n_negative_samples_batch if train.sample_softmax else None
    return BiLMLanguageModel(bilm, softmax, output_dropout=train.dropout, num_sampled=num_sampled)


def wrap_bilm(bilm: BiLM, softmax: Softmax, train: TrainConfig) -> BiLMLanguageModel:
    """A pretrained biLM as a language model with the dropout and loss of ``train`` (for fine-tuning)."""
    for stack in (bilm.forward_lstm, bilm.backward_lstm):
        stack.dropout = torch.nn.Dropout(train.dropout)
        for cell in stack.layers:
            cell.weight_dropout = train.weight_dropout
    num_sampled = train.n_negative_samples_batch if train.sample_softmax else None
    return BiLMLanguageModel(bilm, softmax, output_dropout=train.dropout, num_sampled=num_sampled)


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / RUN_CONFIG_FILE).is_file()


def load_language_model(model: str | Path, needed_by: str = "this") -> tuple[BiLMLanguageModel, Vocabulary | None]:
    """A run directory (its newest checkpoint) or an export directory, by any spelling ``elmo embed --model`` takes
    (a directory, an archive, a shipped or published name) -> (model in eval mode, its vocab if stored).

    A directory with both a run's config and a model but no checkpoint (the shipped demo) is read as a model. A
    model without a softmax is one error line that says where one comes from (``needed_by``: the command).
    """
    from elmo.formats.published import read_registry, shipped_models

    ref = ModelRef.parse(model)
    files = read_registry().get(ref.location, {}).get("files", {}) if ref.kind == PUBLISHED else {}
    path = None if files and SOFTMAX_FILE not in files else ref.path()  # no download to find none
    if path is not None and is_run_dir(path) and (latest_checkpoint(path) is not None or recognise(path) is None):
        return _load_run(path)
    if path is None or not (path / SOFTMAX_FILE).is_file():
        with_one = [name for name, where in shipped_models().items() if (where / SOFTMAX_FILE).is_file()]
        shadowed = str(model) in with_one and ref.kind == PATH  # a directory here of that name is taken first
        raise WeightFileError(
            f"{model} has no softmax ({SOFTMAX_FILE} + {VOCAB_FILE}): {needed_by} needs a language model: a run "
            f"directory of `elmo train` or `elmo finetune`, its `elmo export`, or the shipped "
            f"{' or '.join(with_one) or 'none'} (no published model has one; `elmo finetune --model {model} ...` "
            "trains one)" + (f"; {model} here is the directory {Path(model).resolve()}, which a path takes before "
                             "the shipped model's name: run from another directory" if shadowed else "")
        )
    bilm = load_path(path)
    softmax = read_softmax(path / SOFTMAX_FILE, bilm.token_encoder.output_dim)
    lm = BiLMLanguageModel(bilm, softmax, num_sampled=None)
    vocab = Vocabulary.from_file(path / VOCAB_FILE) if (path / VOCAB_FILE).is_file() else None
    return lm.eval(), vocab


def _load_run(run_dir: Path) -> tuple[BiLMLanguageModel, Vocabulary]:
    config, train = split_preset(read_json(run_dir / RUN_CONFIG_FILE), str(run_dir / RUN_CONFIG_FILE))
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise WeightFileError(f"{run_dir}: the run has no checkpoint yet")
    vocab = Vocabulary.from_file(run_dir / VOCAB_FILE, require_special_tokens=True)
    lm = build_language_model(config, train, len(vocab))
    load_checked_state(lm, read_model_state(checkpoint), checkpoint / "model.safetensors")
    return lm.eval(), vocab


def export_language_model(
    lm: BiLMLanguageModel, out_dir: str | Path, vocab_path: str | Path | None = None, force: bool = False
) -> Path:
    """Write the biLM in the original layout, the softmax beside it, and the vocabulary, as one new directory: an
    existing non-empty ``out_dir`` is refused unless ``force``, which replaces it as a whole."""

    def build(tmp: Path) -> None:
        write_bilm_files(lm.bilm, tmp)
        write_softmax(tmp / SOFTMAX_FILE, lm.softmax)
        if vocab_path is not None:
            shutil.copyfile(vocab_path, tmp / VOCAB_FILE)

    return replace_directory(out_dir, build, force)


def export_run(run_dir: str | Path, out_dir: str | Path, force: bool = False) -> Path:
    """``elmo export``: the newest checkpoint of a run -> an export directory (refused if it exists and is not
    empty, unless ``force``; never the run directory itself or a directory holding it)."""
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise WeightFileError(f"{run_dir}: not a training run directory (no {RUN_CONFIG_FILE})")
    if Path(out_dir).resolve() in (run_dir.resolve(), *run_dir.resolve().parents):
        raise ConfigError(f"{out_dir} holds the run {run_dir}; export into another directory")
    check_destination(out_dir, force)  # before the model loads
    lm, _ = _load_run(run_dir)
    return export_language_model(lm, out_dir, run_dir / VOCAB_FILE, force)
