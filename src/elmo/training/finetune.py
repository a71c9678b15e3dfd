"""Continue language-model training of a pretrained biLM on new text (Peters et al. 2018, section 3.4).

The paper fine-tunes the biLM's LM objective on the task's text before freezing it. The published models ship
without their softmax, so unless the model directory has the ``softmax.hdf5`` of ``elmo export`` *and* the same
vocabulary, a fresh softmax over the new vocabulary is trained along with the biLM.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch

from elmo.formats.model_files import load_bilm
from elmo.modules.softmax import Softmax
from elmo.runtime.atomic_files import write_json_atomic
from elmo.runtime.distributed import DistInfo
from elmo.training.corpus import read_sentences
from elmo.training.perplexity import perplexity
from elmo.training.run_files import SOFTMAX_FILE, VOCAB_FILE, read_softmax, wrap_bilm
from elmo.training.trainer import Trainer, TrainSpec, prepare_run_dir
from elmo.vocab import Vocabulary

log = logging.getLogger(__name__)

FINETUNE_FILE = "finetune.json"


def finetune(spec: TrainSpec, model_dir: str | Path) -> dict[str, Any]:
    """Train ``spec`` starting from the model in ``model_dir``; returns held-out perplexities before and after.

    They are also written to ``RUN_DIR/finetune.json`` (``None`` without a held-out file).
    """
    model_dir = Path(model_dir)
    bilm = load_bilm(model_dir)
    vocab = Vocabulary.from_file(spec.vocab_path, require_special_tokens=True)
    lm = wrap_bilm(bilm, _softmax_for(model_dir, vocab, bilm.token_encoder.output_dim), spec.train)
    assert bilm.config is not None
    spec = dataclasses.replace(spec, config=bilm.config, initial_model=lm)
    result: dict[str, Any] = {"before": None, "after": None}
    sentences = [t for _, t in read_sentences(spec.valid_path)] if spec.valid_path else None
    if sentences:
        result["before"] = perplexity(lm, vocab, sentences, rows=spec.train.eval_rows).to_dict()
        log.info("before fine-tuning: held-out perplexity %s", _short(result["before"]))
    prepare_run_dir(spec, DistInfo())
    trainer = Trainer(spec, DistInfo(), torch.device(spec.device or "cpu"))
    trainer.run()
    if sentences:
        step, final = trainer.last_evaluation or (None, None)  # the trainer scores the file after its last step
        if step != trainer.state.step or final is None:
            final = perplexity(trainer.lm, vocab, sentences, rows=spec.train.eval_rows, device=trainer.device)
        result["after"] = final.to_dict()
        log.info("after fine-tuning: held-out perplexity %s", _short(result["after"]))
    write_json_atomic(spec.run_dir / FINETUNE_FILE, {"model": str(model_dir), **result})
    return result


def _softmax_for(model_dir: Path, vocab: Vocabulary, dim: int) -> Softmax:
    softmax_path, vocab_path = model_dir / SOFTMAX_FILE, model_dir / VOCAB_FILE
    if softmax_path.is_file() and vocab_path.is_file() and Vocabulary.from_file(vocab_path).words == vocab.words:
        return read_softmax(softmax_path, dim)
    log.warning("%s: no softmax for this vocabulary; training a new one (%d words)", model_dir, len(vocab))
    return Softmax(len(vocab), dim)


def _short(result: dict[str, Any]) -> str:
    return (f"forward {result['forward']:.2f}, backward {result['backward']:.2f}, "
            f"geometric mean {result['geometric_mean']:.2f}")
