"""Continue language-model training of a pretrained biLM on new text (Peters et al. 2018, section 3.4).

The paper fine-tunes the biLM's LM objective on the task's text before freezing it. The published models ship
without their softmax, so unless the model directory has the ``softmax.hdf5`` of ``elmo export`` *and* the same
vocabulary, a fresh softmax over the new vocabulary is trained along with the biLM.

A bilm-tf training directory (:mod:`elmo.formats.tensorflow.bilm_tf_checkpoint`) carries its softmax and Adagrad
accumulators: fine-tuning then continues that run. Its softmax is kept when ``--vocab`` has as many words as the
softmax has rows (bilm-tf's directories do not keep the vocabulary: ``--vocab`` must be the file it was trained
with; a ``vocab.txt`` in the directory, if any, must equal it), and every parameter's Adagrad accumulator starts
where bilm-tf's stopped (the biLM's only, with a new softmax). The step count of the new run starts at 0
(``--max-steps`` counts this run's steps); the checkpoint's ``global_step`` is recorded in ``finetune.json``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch

from elmo.devices import checked_device
from elmo.formats.checked_reads import read_json
from elmo.formats.model_formats import BilmTfCheckpointDir
from elmo.formats.model_ref import ModelRef
from elmo.formats.softmax_hdf5 import SOFTMAX_FILE, read_softmax
from elmo.formats.tensorflow.bilm_tf_checkpoint import read_bilm_tf_training_state
from elmo.modules.softmax import Softmax
from elmo.runtime.atomic_files import write_json_atomic
from elmo.runtime.distributed import DistInfo
from elmo.text.sentences import read_sentences
from elmo.text.vocab import Vocabulary
from elmo.training.perplexity import perplexity
from elmo.training.run_files import FINETUNE_FILE, VOCAB_FILE, wrap_bilm
from elmo.training.trainer import TrainSpec, check_run_dir, start_run

log = logging.getLogger(__name__)

CORPUS_KEYS = ("n_train_tokens", "n_tokens_vocab")
"""Training keys of a model's options that describe the corpus it was trained on, not the new text."""


def model_training_keys(model_dir: str | Path) -> dict[str, Any]:
    """The training keys of the model's own options (batch_size, unroll_steps, n_negative_samples_batch, ...).

    Fine-tuning without a preset starts from them, as bilm-tf's ``restart.py`` does, except :data:`CORPUS_KEYS`.
    """
    training = ModelRef.parse(model_dir).read_config().training
    keys = {k: v for k, v in training.items() if k not in CORPUS_KEYS and v is not None}
    if keys:
        log.info("fine-tuning with the model's own %s", ", ".join(f"{k} {v}" for k, v in sorted(keys.items())))
    return keys


def finetune(spec: TrainSpec, model_dir: str | Path, checkpoint: str | None = None) -> dict[str, Any]:
    """Train ``spec`` starting from the model in ``model_dir``; returns held-out perplexities before and after.

    They are also written to ``RUN_DIR/finetune.json`` (``None`` without a held-out file). With ``spec.resume`` the
    run continues from its newest checkpoint exactly as if it had not stopped (SIGINT/SIGTERM checkpoint the step
    in progress), and "before" is the one measured when the run started. ``model_dir`` is any spelling ``elmo embed
    --model`` takes (a directory, an archive, a shipped or published name); ``finetune.json`` records it as
    :attr:`~elmo.formats.model_ref.ModelRef.record` does (a name as is, a path absolute). ``checkpoint``: in a
    bilm-tf training directory, the checkpoint to continue (``model.ckpt-N``; default: the latest).
    """
    ref = ModelRef.parse(model_dir, checkpoint=checkpoint)
    recorded: dict[str, Any] = {"model": ref.record}
    model_dir = ref.path()
    bilm = ref.load()
    vocab = Vocabulary.from_file(spec.vocab_path, require_special_tokens=True)
    accumulators = None
    if ref.format_name() == BilmTfCheckpointDir.name:
        softmax, accumulators, recorded["continued_from"] = _bilm_tf_continuation(model_dir, checkpoint, bilm, vocab,
                                                                                  spec)
    else:
        softmax = _softmax_for(model_dir, vocab, bilm.token_encoder.output_dim, spec.train.seed)
    lm = wrap_bilm(bilm, softmax, spec.train)
    assert bilm.config is not None
    spec = dataclasses.replace(spec, config=bilm.config, initial_model=lm, initial_accumulators=accumulators)
    check_run_dir(spec)  # before the held-out pass, which a run directory in use would waste
    result: dict[str, Any] = {"before": _recorded_before(spec), "after": None}
    sentences = [line.tokens for line in read_sentences(spec.valid_path, skip_blank=True)] if spec.valid_path else None
    if sentences and result["before"] is None:  # measured before a resumed trainer loads its checkpoint into lm
        result["before"] = perplexity(lm, vocab, sentences, rows=spec.train.eval_rows).to_dict()
    if result["before"] is not None:
        log.info("before fine-tuning: held-out perplexity %s", _short(result["before"]))
    trainer = start_run(spec, DistInfo(), checked_device(spec.device))
    write_json_atomic(spec.run_dir / FINETUNE_FILE, {**recorded, **result})  # "before", for --resume
    trainer.run_stoppable("fine-tuning")
    if sentences:
        step, final = trainer.last_evaluation or (None, None)  # the trainer scores the file after its last step
        if step != trainer.state.step or final is None:
            final = perplexity(trainer.lm, vocab, sentences, rows=spec.train.eval_rows, device=trainer.device)
        result["after"] = final.to_dict()
        log.info("after fine-tuning: held-out perplexity %s", _short(result["after"]))
    write_json_atomic(spec.run_dir / FINETUNE_FILE, {**recorded, **result})
    return result


def _recorded_before(spec: TrainSpec) -> dict[str, Any] | None:
    path = spec.run_dir / FINETUNE_FILE
    if not (spec.resume and spec.valid_path and path.is_file()):
        return None
    recorded = read_json(path)
    return recorded.get("before") if isinstance(recorded, dict) else None


def _bilm_tf_continuation(model_dir: Path, checkpoint: str | None, bilm, vocab: Vocabulary, spec: TrainSpec):
    """(softmax, accumulators, what finetune.json records) from a bilm-tf checkpoint (the module's docstring)."""
    state = read_bilm_tf_training_state(model_dir, bilm, checkpoint)
    vocab_path = model_dir / VOCAB_FILE
    same = len(vocab) == state.vocab_size and (not vocab_path.is_file()
                                              or Vocabulary.from_file(vocab_path).words == vocab.words)
    if same:
        softmax = Softmax(state.vocab_size, bilm.token_encoder.output_dim)
        with torch.no_grad():
            softmax.weight.copy_(state.softmax_weight)
            softmax.bias.copy_(state.softmax_bias)
        accumulators = state.accumulators
        log.info("%s: continuing bilm-tf's run from step %d: its weights, softmax (%d words, row i = line i of %s) "
                 "and Adagrad accumulators", state.checkpoint, state.global_step, state.vocab_size, spec.vocab_path)
    else:
        log.warning("%s: its softmax has %d rows, %s has %d words (or differs from %s): training a new softmax; the "
                    "biLM's Adagrad accumulators are kept", state.checkpoint, state.vocab_size, spec.vocab_path,
                    len(vocab), vocab_path)
        softmax = _softmax_for(model_dir, vocab, bilm.token_encoder.output_dim, spec.train.seed)
        accumulators = {k: v for k, v in state.accumulators.items() if k.startswith("bilm.")}
    recorded = {"checkpoint": state.checkpoint.name, "global_step": state.global_step, "softmax": same}
    return softmax, accumulators or None, recorded


def _softmax_for(model_dir: Path, vocab: Vocabulary, dim: int, seed: int) -> Softmax:
    softmax_path, vocab_path = model_dir / SOFTMAX_FILE, model_dir / VOCAB_FILE
    if softmax_path.is_file() and vocab_path.is_file() and Vocabulary.from_file(vocab_path).words == vocab.words:
        return read_softmax(softmax_path, dim)
    log.warning("%s: no softmax for this vocabulary; training a new one (%d words)", model_dir, len(vocab))
    with torch.random.fork_rng(devices=[]):  # from the run's seed: the same fine-tuning gives the same weights
        torch.manual_seed(seed)
        return Softmax(len(vocab), dim)


def _short(result: dict[str, Any]) -> str:
    return (f"forward {result['forward']:.2f}, backward {result['backward']:.2f}, "
            f"geometric mean {result['geometric_mean']:.2f}")
