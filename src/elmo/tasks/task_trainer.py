"""Train a task model: Adam, gradient clipping, model selection on the dev score, early stopping.

The best model (by dev score) is checkpointed as soon as it is found; at the end it is restored, scored on dev
and test, and its predictions are written. All of it goes into a temporary sibling of the output directory, which
takes the output's place when training ends (an earlier output only with ``force``). Only the scalar mixes and the
task model train; the biLM is frozen.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from elmo.devices import checked_device
from elmo.embedding.embedder import Embedder
from elmo.errors import InputFileError
from elmo.formats.model_ref import ModelRef
from elmo.runtime.atomic_files import check_destination, replace_directory, write_json_atomic
from elmo.tasks.builder import build_elmo, build_task_model
from elmo.tasks.elmo_features import ActivationCache
from elmo.tasks.runner import TaskRunner
from elmo.tasks.task_checkpoint import BILM_PREFIX, save_task_model
from elmo.tasks.task_config import TaskConfig
from elmo.tasks.word_index import LabelIndex, build_word_index, embedding_matrix
from elmo.tasks.word_vectors import read_word_vectors

log = logging.getLogger(__name__)


@dataclass
class TaskData:
    """Examples as the task kind reads them: :class:`~elmo.tasks.conll.TaggedSentence` (token tagging) or
    :class:`~elmo.tasks.sentence_labels.LabelledSentence` (sentence labels)."""

    train: list
    dev: list
    test: list | None = None


@dataclass
class TrainResult:
    best_epoch: int
    dev_score: float
    test_score: float | None
    epochs_run: int
    seconds: float
    layer_weights: list[dict] = field(default_factory=list)
    """softmax(w) and gamma of each ELMo mix at the best epoch."""
    history: list[dict] = field(default_factory=list)


def build_runner(
    config: TaskConfig,
    data: TaskData,
    word_vectors: str | os.PathLike | None = None,
    bilm_dir: str | os.PathLike | None = None,
    cache_path: str | os.PathLike | None = None,
    device: str | torch.device | None = None,
    progress: bool = True,
) -> TaskRunner:
    """Vocabularies, initial word vectors, ELMo (cached or on the fly) and the untrained model.

    Seeds torch with ``config.train.seed`` first, so that a run's initialisation is reproducible from its config.
    """
    device = checked_device(device)
    torch.manual_seed(config.train.seed)
    pretrained_words, vectors = [], None
    if word_vectors is not None:
        pretrained_words, vectors = read_word_vectors(word_vectors, config.train.max_vocab)
    word_index = build_word_index(pretrained_words, (e.words for e in data.train))
    if vectors is None:
        vectors = torch.randn(1, config.model.word_dim).numpy() * 0.1
    matrix = embedding_matrix(word_index, pretrained_words, vectors, config.train.seed)
    labels = LabelIndex(config.kind.label_targets(data.train))
    elmo, cache, dim = None, None, 0
    if config.elmo.enabled:
        if bilm_dir is None:
            raise InputFileError("this config uses ELMo: give a biLM directory (--bilm), or set elmo.enabled false")
        bilm = ModelRef.parse(bilm_dir).load()
        dim = bilm.output_dim
        elmo = build_elmo(config.elmo, bilm.num_layers, None if config.elmo.cached else bilm)
        if config.elmo.cached:
            embedder = Embedder(bilm, batch_size=config.elmo.embed_batch_size, precision=config.elmo.precision,
                                device=device, initial_state=config.elmo.initial_state)
            cache = ActivationCache(embedder, cache_path, progress=progress)
    model = build_task_model(config, matrix, labels.labels, elmo, dim).to(device)
    return TaskRunner(config, model, word_index, labels, cache, device)


def shuffled_batches(lengths: Sequence[int], batch_size: int, generator: torch.Generator, pool: int = 20) -> list:
    """Random batches of indices whose sentences have similar lengths (less padding, so faster epochs).

    Shuffle, sort each pool of ``pool * batch_size`` indices by length, cut it into batches, shuffle the batches.
    """
    order = torch.randperm(len(lengths), generator=generator).tolist()
    batches = []
    for start in range(0, len(order), pool * batch_size):
        chunk = sorted(order[start : start + pool * batch_size], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def train_epoch(runner: TaskRunner, optimizer, train: Sequence, generator: torch.Generator, progress: bool) -> float:
    """One pass over ``train`` in random batches; returns the mean training loss."""
    cfg = runner.config.train
    runner.model.train()
    total, batches = 0.0, 0
    for batch in tqdm(
        shuffled_batches([len(e.words) for e in train], cfg.batch_size, generator),
        desc="train", unit="batch", disable=not progress, leave=False,
    ):
        loss = runner.loss([train[i] for i in batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(runner.model.parameters(), cfg.grad_clip)
        optimizer.step()
        total, batches = total + loss.item(), batches + 1
    return total / max(batches, 1)


def train_task(
    runner: TaskRunner,
    data: TaskData,
    output_dir: str | os.PathLike | None = None,
    bilm_dir: str | os.PathLike | None = None,
    progress: bool = True,
    force: bool = False,
) -> TrainResult:
    """Train ``runner.model`` on ``data.train``, select on ``data.dev``, score ``data.test``; see module doc.

    ``output_dir`` is written as a whole: built in a temporary sibling and renamed into place at the end. An
    existing non-empty one is refused before training unless ``force``, which replaces it."""
    if output_dir is None:
        return _train_task(runner, data, None, bilm_dir, progress)
    check_destination(output_dir, force)  # before any training
    result: list[TrainResult] = []
    replace_directory(output_dir, lambda tmp: result.append(_train_task(runner, data, tmp, bilm_dir, progress)), force)
    return result[0]


def _train_task(runner: TaskRunner, data: TaskData, output_dir, bilm_dir, progress: bool) -> TrainResult:
    cfg = runner.config.train
    started = time.time()
    for split in (data.train, data.dev, data.test or []):
        runner.prepare(split)
    params = [p for p in runner.model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=cfg.learning_rate)
    generator = torch.Generator().manual_seed(cfg.seed)
    best_score, best_epoch, best_state, history = -math.inf, 0, None, []
    for epoch in range(1, cfg.epochs + 1):
        loss = train_epoch(runner, optimizer, data.train, generator, progress)
        dev_score = runner.score(data.dev, runner.predict(data.dev))
        history.append({"epoch": epoch, "train_loss": loss, "dev_score": dev_score})
        log.info("epoch %d: train loss %.4f, dev %.2f", epoch, loss, dev_score)
        if dev_score > best_score:
            best_score, best_epoch = dev_score, epoch
            best_state = _trainable_state(runner)
            if output_dir is not None:
                save_task_model(output_dir, runner, _resolved(bilm_dir), {"epoch": epoch, "dev_score": dev_score})
        elif best_score > 0 and epoch - best_epoch >= cfg.patience:
            break  # patience counts from the first dev score above 0: an all-`O` tagger has not started learning
    runner.model.load_state_dict(best_state, strict=False)  # everything but the frozen biLM
    result = TrainResult(best_epoch, best_score, None, len(history), 0.0, runner.layer_weights(), history)
    result.dev_score = _finish_split(runner, data.dev, output_dir, "dev")
    if data.test:
        result.test_score = _finish_split(runner, data.test, output_dir, "test")
    result.seconds = time.time() - started
    if output_dir is not None:
        write_json_atomic(Path(output_dir) / "result.json", asdict(result))
    return result


def _trainable_state(runner: TaskRunner) -> dict[str, torch.Tensor]:
    """A CPU copy of the model's state without the frozen biLM (which never changes)."""
    state = runner.model.state_dict()
    return {k: v.detach().cpu().clone() for k, v in state.items() if not k.startswith(BILM_PREFIX)}


def _finish_split(runner: TaskRunner, examples: Sequence, output_dir, split: str) -> float:
    predicted = runner.predict(examples)
    if output_dir is not None:
        write_predictions(runner, Path(output_dir) / f"predictions.{split}.txt", examples, predicted)
    return runner.score(examples, predicted)


def write_predictions(runner: TaskRunner, path: Path, examples: Sequence, predicted: Sequence) -> None:
    runner.kind.write_predictions(path, examples, predicted)


def _resolved(path) -> str | None:
    """How task.json records the biLM: a shipped or published name as is, a path absolute (any working directory)."""
    return None if path is None else ModelRef.parse(path).record
