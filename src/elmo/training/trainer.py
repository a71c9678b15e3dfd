"""Train a biLM language model the way bilm-tf ``train()`` does (``elmo train``, ``elmo finetune``).

One optimizer step::

    global rows = batch_size x grad_accum_steps x world_size, packed by one RowPacker (elmo.training.windows)
    this process takes its slice; micro-batch k of it starts from its rows' carried LSTM states
    loss = (fwd CE + bwd CE) / 2 with the sampled softmax (each direction draws its negatives, as in bilm-tf;
           all processes and micro-batches share them)
    backward on loss * unroll_steps / grad_accum_steps   (the original differentiates loss * unroll_steps)
    clip the global gradient norm to all_clip_norm_val; Adagrad(lr, initial_accumulator_value) (or Adam), with the
    learning rate of this step from the preset's schedule (constant in the original)
    keep the final LSTM states, detached, for the next window of the same rows

Every process builds the same global batch and the same negatives, so the data position, sampler and step are
identical everywhere and a run with N processes sees the same rows as one process with N x the rows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import signal
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from elmo.config import BiLMConfig
from elmo.devices import checked_device
from elmo.errors import ConfigError, InputFileError, Interrupted, OutputWriteError, TrainingDiverged
from elmo.formats import checkpoints as ckpt
from elmo.formats.checked_reads import load_checked_state, read_json
from elmo.modules.language_model import BiLMLanguageModel
from elmo.precision import Precision, resolve_precision
from elmo.runtime.atomic_files import check_destination, replace_directory, write_failure, write_text_atomic
from elmo.runtime.compile_switch import set_compile
from elmo.runtime.distributed import DistInfo, mean_across
from elmo.runtime.extras import optional
from elmo.runtime.interrupts import StopRequest, stop_on_signals
from elmo.settings import SettingError
from elmo.text.sentences import read_sentences
from elmo.text.vocab import Vocabulary
from elmo.training.corpus import SentenceStream, expand_shards, rereadable
from elmo.training.optimizer import clipped_step, gradient_norm, make_optimizer, seed_adagrad
from elmo.training.perplexity import PerplexityResult, perplexity
from elmo.training.run_files import FINETUNE_FILE, RUN_CONFIG_FILE, VOCAB_FILE, build_language_model
from elmo.training.train_config import TrainConfig, lr_factor, merge_preset, split_preset
from elmo.training.windows import LMBatch, PackerState, RowPacker, windows_to_batch

log = logging.getLogger(__name__)


@dataclass
class TrainSpec:
    """What to train on and where to write (the CLI fills this; everything is importable)."""

    config: BiLMConfig | None
    """None when fine-tuning: the architecture is the model's."""
    train: TrainConfig
    vocab_path: Path
    train_patterns: list[str]
    run_dir: Path
    valid_path: Path | None = None
    max_steps: int | None = None
    resume: bool = False
    device: str | None = None
    progress: bool = True
    initial_model: BiLMLanguageModel | None = None
    """Start from these weights (fine-tuning) instead of a fresh initialisation."""
    initial_accumulators: dict[str, torch.Tensor] | None = None
    """Adagrad's accumulators to start from, by parameter name of ``initial_model`` (fine-tuning a bilm-tf
    checkpoint: :func:`elmo.training.optimizer.seed_adagrad`); a resumed run reads its own checkpoint's instead."""
    force: bool = False
    """A new run (not ``resume``) into a ``run_dir`` that exists and is not empty replaces it as a whole; without
    it such a directory is refused (an empty one is used)."""

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise SettingError("max_steps", f"must be >= 1, got {self.max_steps}")


@dataclass
class TrainState:
    step: int = 0
    tokens: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    bad_steps: int = 0
    """Non-finite steps in a row (each skipped); the run stops at ``max_bad_steps``."""
    skipped_steps: int = 0


class Trainer:
    """The training loop for one process; ``run()`` trains to the last step and returns the final state."""

    def __init__(self, spec: TrainSpec, info: DistInfo, device: torch.device) -> None:
        self.spec, self.info, self.device = spec, info, device
        tc = spec.train
        self.vocab = Vocabulary.from_file(spec.vocab_path, require_special_tokens=True)
        self.shards = rereadable(expand_shards(spec.train_patterns))
        if not any(line.tokens for s in self.shards for line in read_sentences(s)):  # stops at the first sentence
            raise InputFileError(f"--train {' '.join(map(str, spec.train_patterns))}: no sentences (the files hold "
                                 "only blank lines)")
        self.local_rows = tc.batch_size * tc.grad_accum_steps
        self.global_rows = self.local_rows * info.world_size
        torch.manual_seed(tc.seed)  # identical initial weights in every process
        set_compile(tc.compile)  # the training step's hot loops through torch.compile, for this process
        self.precision = resolve_precision(tc.precision, device)  # auto: bf16 only where this device runs it fast
        self.lm = spec.initial_model or build_language_model(spec.config, tc, len(self.vocab))
        self._check_vocab_size()
        self.lm.to(device).train()
        # The sampled softmax touches a few thousand of the V weight rows per step: one process gives Adagrad only
        # those (TF's sparse update, as in bilm-tf); DistributedDataParallel all-reduces dense gradients.
        self.lm.softmax.sparse = self.lm.sampler is not None and tc.optimizer == "adagrad" and not info.enabled
        self.optimizer = make_optimizer(self.lm.parameters(), tc)
        if spec.initial_accumulators is not None:
            seed_adagrad(self.optimizer, self.lm, spec.initial_accumulators)
        self.sampler_generator = torch.Generator().manual_seed(tc.seed)
        torch.manual_seed(tc.seed + 1000 * info.rank + 1)  # dropout masks differ between processes
        self.state = TrainState()
        h, c = self.lm.bilm.zero_state(self.local_rows)
        self.lstm_state = (h, c)
        packer_state = self._restore() if spec.resume else None
        stream = SentenceStream(self.shards, seed=tc.seed)
        self.packer = RowPacker(stream, self.global_rows, tc.unroll_steps, packer_state)
        self.model = DistributedDataParallel(self.lm) if info.enabled else self.lm
        self.total_steps = spec.max_steps or self._steps_from_epochs()
        self.writer = None
        """TensorBoard, opened by ``run``: nothing is written before the inputs have been checked."""
        self.last_evaluation: tuple[int, PerplexityResult] | None = None
        """(step, result) of the newest held-out evaluation; ``run`` ends with one when there is a held-out file."""
        self.stop = StopRequest()
        self.stop_everywhere = False

    # ------------------------------------------------------------------ setup

    def _check_vocab_size(self) -> None:
        expected = self.spec.train.n_tokens_vocab
        if expected is not None and expected != len(self.vocab):
            raise ConfigError(f"{self.spec.vocab_path}: {len(self.vocab)} words, but the preset's n_tokens_vocab is "
                              f"{expected}")
        if self.lm.softmax.vocab_size != len(self.vocab):
            raise ConfigError(
                f"{self.spec.vocab_path}: {len(self.vocab)} words, but the model's softmax has "
                f"{self.lm.softmax.vocab_size} rows"
            )

    def _steps_from_epochs(self) -> int:
        tc = self.spec.train
        tokens = tc.n_train_tokens or sum(len(line.tokens) + 1 for p in self.shards
                                          for line in read_sentences(p, skip_blank=True))
        per_step = self.global_rows * tc.unroll_steps
        steps = tc.n_epochs * (tokens // per_step)
        if steps < 1:
            raise ConfigError(f"the corpus ({tokens} tokens) is smaller than one batch ({per_step} tokens)")
        return steps

    def _restore(self) -> PackerState | None:
        checkpoint = ckpt.latest_checkpoint(self.spec.run_dir)
        if checkpoint is None:
            log.info("--resume: no checkpoint in %s yet, starting from scratch", self.spec.run_dir)
            return None
        trainer = ckpt.read_trainer_state(checkpoint)
        if trainer["world_size"] != self.info.world_size or trainer["global_rows"] != self.global_rows:
            raise ConfigError(
                f"{checkpoint}: saved with {trainer['world_size']} process(es) and {trainer['global_rows']} rows; "
                f"resume with the same number of processes, batch_size and grad_accum_steps"
            )
        load_checked_state(self.lm, ckpt.read_model_state(checkpoint), checkpoint / "model.safetensors")
        self.optimizer.load_state_dict(ckpt.read_torch_state(checkpoint / "optimizer.pt"))
        mine = ckpt.read_torch_state(checkpoint / f"rank-{self.info.rank}.pt")
        torch.set_rng_state(mine["torch_rng"])
        if self.device.type == "cuda" and "cuda_rng" in mine:
            torch.cuda.set_rng_state(mine["cuda_rng"], self.device)
        self.sampler_generator.set_state(mine["sampler_rng"])
        self.lstm_state = (mine["lstm_h"].to(self.device), mine["lstm_c"].to(self.device))
        self.state = TrainState(trainer["step"], trainer["tokens"], trainer["history"],
                                trainer.get("bad_steps", 0), trainer.get("skipped_steps", 0))
        log.info("resumed from %s (step %d)", checkpoint, self.state.step)
        return PackerState.from_dict(trainer["data_position"])

    # ------------------------------------------------------------------ one step

    def next_batch(self) -> LMBatch:
        forward, backward = self.packer.next_windows()  # endless stream: never None
        lo = self.info.rank * self.local_rows
        rows = slice(lo, lo + self.local_rows)
        width = self.lm.bilm.token_encoder.config.max_characters_per_token
        return windows_to_batch(forward[rows], backward[rows], self.vocab, width)

    def train_step(self, batch: LMBatch) -> dict[str, float]:
        """Forward/backward over the micro-batches, clip, update; the carried states move on to this window's end."""
        tc = self.spec.train
        if tc.state_reset_prob > 0:  # drawn over the global rows from the shared generator: N processes = 1 process
            reset = torch.rand(self.global_rows, generator=self.sampler_generator) < tc.state_reset_prob
            lo = self.info.rank * self.local_rows
            keep = (~reset[lo : lo + self.local_rows]).to(self.device).view(1, 1, -1, 1)  # (1, 1, rows, 1)
            self.lstm_state = (self.lstm_state[0] * keep, self.lstm_state[1] * keep)
        samples = None
        if self.lm.sampler is not None:  # one set of negatives per direction, shared by processes and micro-batches
            samples = [self.lm.sampler.sample(self.sampler_generator) for _ in range(2)]
            samples = [(ids.to(self.device), tries) for ids, tries in samples]
        self.optimizer.zero_grad(set_to_none=True)
        words = batch.word_char_ids.to(self.device)
        losses, new_h, new_c = [], [], []
        for k in range(tc.grad_accum_steps):
            rows = slice(k * tc.batch_size, (k + 1) * tc.batch_size)
            micro = batch.rows(rows.start, rows.stop)
            state = (self.lstm_state[0][:, :, rows], self.lstm_state[1][:, :, rows])
            last = k == tc.grad_accum_steps - 1
            sync = contextlib.nullcontext() if last or not self.info.enabled else self.model.no_sync()
            with sync, torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision is Precision.BF16):
                out = self.model(
                    words, micro.forward_index.to(self.device), micro.backward_index.to(self.device),
                    micro.forward_targets.to(self.device), micro.backward_targets.to(self.device), state, samples,
                )
                (out.loss * tc.unroll_steps / tc.grad_accum_steps).backward()
            losses.append(torch.stack([out.loss, out.forward_loss, out.backward_loss]).detach().float())
            new_h.append(out.state[0].detach())
            new_c.append(out.state[1].detach())
        grad_norm = gradient_norm(self.lm.parameters())
        # The gradients (hence grad_norm) are already averaged over processes and the losses are averaged here,
        # so every process takes the same decision below. The stop flag rides along: one reduction per step.
        stop = torch.tensor([float(self.stop.requested)], device=self.device)
        stats = mean_across(self.info, torch.cat([torch.stack(losses).mean(0), stop])).cpu()
        self.stop_everywhere = bool(stats[3] > 0)
        finite = math.isfinite(float(stats[0])) and math.isfinite(float(grad_norm))
        if finite:
            factor = lr_factor(tc.lr_schedule, self.state.step, self.total_steps, tc.warmup_steps)
            for group in self.optimizer.param_groups:
                group["lr"] = tc.learning_rate * factor
            clipped_step(self.optimizer, grad_norm, tc.all_clip_norm_val)  # the clip, folded into the update
            self.lstm_state = (torch.cat(new_h, dim=2), torch.cat(new_c, dim=2))
            self.state.bad_steps = 0
        else:  # skip the update and keep the rows' states from before this window
            self.state.bad_steps += 1
            self.state.skipped_steps += 1
            self._on_bad_step(float(stats[0]), float(grad_norm))
        self.state.step += 1
        self.state.tokens += self.global_rows * tc.unroll_steps
        return {"loss": float(stats[0]), "forward": float(stats[1]), "backward": float(stats[2]),
                "grad_norm": float(grad_norm)}

    def _on_bad_step(self, loss: float, grad_norm: float) -> None:
        limit = self.spec.train.max_bad_steps
        if self.info.is_main:
            log.warning("step %d: non-finite loss (%g) or gradient norm (%g); skipped this update (%d in a row, "
                        "the run stops at %d)", self.state.step + 1, loss, grad_norm, self.state.bad_steps, limit)
        if self.state.bad_steps >= limit:
            latest = ckpt.latest_checkpoint(self.spec.run_dir)
            where = f"the newest good checkpoint is {latest}" if latest else "no checkpoint was written yet"
            tc, last = self.spec.train, self.state.step + 1
            raise TrainingDiverged(
                f"training diverged: {limit} steps in a row with a non-finite loss or gradient (from step "
                f"{last - self.state.bad_steps + 1} to step {last}); {where}; lower --learning-rate (now "
                f"{tc.learning_rate:g}) or --clip-norm (now {tc.all_clip_norm_val:g}) and --resume"
            )

    # ------------------------------------------------------------------ loop

    def run(self) -> TrainState:
        if self.info.is_main:
            self.writer = _tensorboard(self.spec.run_dir)
            log.info(
                "training %d steps of %d rows x %d tokens (%d process(es)), %s loss, from step %d",
                self.total_steps, self.global_rows, self.spec.train.unroll_steps, self.info.world_size,
                self.loss_name, self.state.step,
            )
            if self.lm.softmax.sparse:
                log.info("the softmax weights take sparse Adagrad updates: only the rows of each step's negatives "
                         "and targets")
        bar = _progress(self.total_steps, self.state.step, self.spec.progress and self.info.is_main)
        window_start, window_tokens, window_losses = time.perf_counter(), 0, []
        while self.state.step < self.total_steps:
            stats = self.train_step(self.next_batch())
            if self.stop_everywhere:
                self._stop_cleanly(bar)
            window_tokens += self.global_rows * self.spec.train.unroll_steps
            if math.isfinite(stats["loss"]):
                window_losses.append((stats["loss"], stats["forward"], stats["backward"]))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{stats['loss']:.3f}")
            step = self.state.step
            if step % self.spec.train.log_every == 0 or step == self.total_steps:
                elapsed = time.perf_counter() - window_start
                means = [sum(v) / len(v) for v in zip(*window_losses)] if window_losses else [math.nan] * 3
                self._log_train(stats, *means, window_tokens / max(elapsed, 1e-9))
                window_start, window_tokens, window_losses = time.perf_counter(), 0, []
            if self.spec.train.eval_every and step % self.spec.train.eval_every == 0 and step < self.total_steps:
                self.evaluate()
            if step % self.spec.train.checkpoint_every == 0 or step == self.total_steps:
                if step == self.total_steps and self.spec.valid_path is not None:
                    self.evaluate()
                self.save_checkpoint()
        if bar is not None:
            bar.close()
        self._finish()
        return self.state

    def run_stoppable(self, what: str = "training") -> TrainState:
        """``run`` with SIGINT/SIGTERM as a clean stop: the step in progress finishes and is checkpointed."""
        with stop_on_signals(what) as request:
            self.stop = request
            return self.run()

    def _stop_cleanly(self, bar) -> None:
        """After SIGINT/SIGTERM (in any process): checkpoint this step everywhere, then raise Interrupted."""
        if bar is not None:
            bar.close()
        saved = self.save_checkpoint()
        signum = self.stop.signal_number or signal.SIGTERM  # another process got the signal
        where = f"; checkpoint {saved}" if saved is not None else ""
        raise Interrupted(f"training stopped by {signal.Signals(signum).name} at step {self.state.step}{where}; "
                          "continue with --resume", signum)

    @property
    def loss_name(self) -> str:
        return "sampled-softmax" if self.lm.sampler is not None else "full-softmax"

    def _log_train(
        self, stats: dict[str, float], mean_loss: float, mean_forward: float, mean_backward: float,
        tokens_per_s: float,
    ) -> None:
        """One log line: losses averaged over the steps since the last line; grad norm of the last step."""
        if not self.info.is_main:
            return
        lr = self.optimizer.param_groups[0]["lr"]
        step = self.state.step
        log.info(
            "step %d/%d | train loss (%s) %.4f (fwd %.4f, bwd %.4f) | exp(loss) %.1f | lr %g | grad norm %.2f | "
            "%.0f tokens/s", step, self.total_steps, self.loss_name, mean_loss, mean_forward, mean_backward,
            math.exp(min(mean_loss, 50.0)), lr, stats["grad_norm"], tokens_per_s,
        )
        entry = {"step": step, "train_loss": mean_loss, "train_forward_loss": mean_forward,
                 "train_backward_loss": mean_backward, "tokens_per_s": tokens_per_s, "lr": lr,
                 "grad_norm": stats["grad_norm"]}
        self.state.history.append(entry)
        if self.writer is not None:
            self.writer.add_scalar(f"train/{self.loss_name}_loss", mean_loss, step)
            self.writer.add_scalar("train/tokens_per_s", tokens_per_s, step)
            self.writer.add_scalar("train/lr", lr, step)
            self.writer.add_scalar("train/grad_norm", stats["grad_norm"], step)

    def evaluate(self) -> PerplexityResult | None:
        """Full-softmax perplexity on the held-out file (main process; the others wait)."""
        result = None
        if self.info.is_main and self.spec.valid_path is not None:
            sentences = [line.tokens for line in read_sentences(self.spec.valid_path, skip_blank=True)]
            result = perplexity(self.lm, self.vocab, sentences, rows=self.spec.train.eval_rows,
                                unroll_steps=self.spec.train.unroll_steps, device=self.device)
            step = self.state.step
            log.info(
                "step %d | held-out perplexity (full softmax) forward %.2f, backward %.2f, geometric mean %.2f "
                "(%d tokens)", step, result.forward, result.backward, result.geometric_mean, result.tokens,
            )
            self.last_evaluation = (step, result)
            self.state.history.append({"step": step, "valid_forward": result.forward, "valid_backward":
                                       result.backward, "valid_geometric_mean": result.geometric_mean})
            if self.writer is not None:
                for name in ("forward", "backward", "geometric_mean"):
                    self.writer.add_scalar(f"valid/perplexity_{name}", getattr(result, name), step)
        self.info.barrier()
        return result

    def save_checkpoint(self) -> Path | None:
        """Write this step's checkpoint atomically; on a write error the earlier checkpoints stay as they were."""
        bad = [name for name, p in self.lm.named_parameters() if not torch.isfinite(p).all()]
        if bad:
            latest = ckpt.latest_checkpoint(self.spec.run_dir)
            raise TrainingDiverged(f"training diverged: parameter '{bad[0]}' is not finite at step {self.state.step}; "
                                   f"not writing it (newest good checkpoint: {latest})")
        try:
            return self._write_checkpoint()
        except OSError as e:  # files are serialised in memory first, so a failed write is an OSError
            latest = ckpt.latest_checkpoint(self.spec.run_dir)
            reason = write_failure(e)
            raise OutputWriteError(
                f"{self.spec.run_dir}: cannot write the checkpoint of step {self.state.step} ({reason}); "
                f"{f'{latest} is intact' if latest else 'no earlier checkpoint'}; free space and --resume"
            ) from e

    def _write_checkpoint(self) -> Path | None:
        step, run_dir = self.state.step, self.spec.run_dir
        tmp = ckpt.temporary_dir(run_dir, step)
        if self.info.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.info.barrier()
        mine = {"torch_rng": torch.get_rng_state(), "sampler_rng": self.sampler_generator.get_state(),
                "lstm_h": self.lstm_state[0].cpu(), "lstm_c": self.lstm_state[1].cpu()}
        if self.device.type == "cuda":
            mine["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        ckpt.write_rank_state(tmp, self.info.rank, mine)
        self.info.barrier()
        final = None
        if self.info.is_main:
            trainer = {"step": step, "tokens": self.state.tokens, "history": self.state.history,
                       "bad_steps": self.state.bad_steps, "skipped_steps": self.state.skipped_steps,
                       "world_size": self.info.world_size, "global_rows": self.global_rows,
                       "data_position": self.packer.state().to_dict()}
            ckpt.write_shared_state(tmp, self.lm.state_dict(), self.optimizer.state_dict(), trainer)
            final = ckpt.publish(tmp, run_dir, step, self.spec.train.keep_checkpoints)
            log.info("saved checkpoint %s", final)
        self.info.barrier()
        return final

    def _finish(self) -> None:
        if not self.info.is_main:
            return
        from elmo.training.plotting import plot_history

        if self.writer is not None:
            self.writer.close()
        write_text_atomic(self.spec.run_dir / "history.json", json.dumps(self.state.history, indent=1) + "\n")
        plot = plot_history(self.state.history, self.spec.run_dir / "training_curve.png", f"{self.loss_name} loss")
        if plot is not None:
            log.info("wrote %s", plot)


def check_run_dir(spec: TrainSpec) -> None:
    """Refuse a run directory that holds another run (or, when resuming, a run with a different preset)."""
    run_dir = spec.run_dir
    preset = merge_preset(spec.config, spec.train)
    config_path = run_dir / RUN_CONFIG_FILE
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--out {run_dir}: not a directory")
    if spec.resume and config_path.is_file():
        # read as a preset, so keys renamed since the run started compare under their new names
        saved = merge_preset(*split_preset(read_json(config_path), str(config_path)))
        changed = sorted(k for k in set(saved) | set(preset) if saved.get(k) != preset.get(k))
        if changed:
            raise ConfigError(f"{config_path}: the run was started with a different '{changed[0]}'; "
                              "resume with the run's own config")
    elif not spec.resume and not spec.force and ckpt.latest_checkpoint(run_dir) is not None:
        raise ConfigError(f"{run_dir}: already holds checkpoints; pass --resume to continue it, or --force to "
                          "replace it")
    if not spec.resume:
        check_destination(run_dir, spec.force)  # a new run: an existing non-empty directory only with force
        inputs = [*spec.train_patterns, *([spec.valid_path] if spec.valid_path else [])]
        inside = next((p for p in inputs if run_dir.resolve() in Path(p).resolve().parents), None)
        if spec.force and inside is not None and run_dir.is_dir():
            raise ConfigError(f"--force would delete {inside}, an input inside {run_dir}; move it first")


def write_run_dir(spec: TrainSpec, info: DistInfo) -> None:
    """Write the preset and the vocabulary into the run directory."""
    run_dir, config_path = spec.run_dir, spec.run_dir / RUN_CONFIG_FILE
    preset = merge_preset(spec.config, spec.train)
    if info.is_main and not spec.resume:  # a new run: a new directory, built beside it and renamed into place

        def build(tmp: Path) -> None:
            write_text_atomic(tmp / RUN_CONFIG_FILE, json.dumps(preset, indent=2) + "\n")
            shutil.copyfile(spec.vocab_path, tmp / VOCAB_FILE)

        replace_directory(run_dir, build, spec.force)
    elif info.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt.remove_stale_temporaries(run_dir)
        write_text_atomic(config_path, json.dumps(preset, indent=2) + "\n")
        if Path(spec.vocab_path).resolve() != (run_dir / VOCAB_FILE).resolve():
            shutil.copyfile(spec.vocab_path, run_dir / VOCAB_FILE)
    info.barrier()


def train(spec: TrainSpec, info: DistInfo | None = None, device: torch.device | None = None) -> TrainState:
    """Train (or resume) a run; returns the final :class:`TrainState`."""
    finetuned = spec.run_dir / FINETUNE_FILE
    if spec.resume and finetuned.is_file():  # resumed here, it would end without its perplexity after
        recorded = read_json(finetuned)
        model = recorded.get("model", "MODEL") if isinstance(recorded, dict) else "MODEL"
        raise ConfigError(f"{spec.run_dir}: a fine-tuning run ({FINETUNE_FILE}); continue it with "
                          f"`elmo finetune --model {model} --resume`")
    info = info or DistInfo()
    device = checked_device(device or "cpu")
    return start_run(spec, info, device).run_stoppable()


def start_run(spec: TrainSpec, info: DistInfo, device: torch.device) -> Trainer:
    """The run's trainer, its run directory written only after every input passed its checks.

    The trainer reads the vocabulary and the corpus and builds the model first, so that a bad input (a vocabulary
    without the special tokens, an empty corpus, a glob that matches nothing) leaves no half-made run directory.
    """
    check_run_dir(spec)
    trainer = Trainer(spec, info, device)
    write_run_dir(spec, info)
    return trainer


def _progress(total: int, initial: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True)


def _tensorboard(run_dir: Path):
    if optional("tensorboard", "train", "the TensorBoard log") is None:  # the train extra; training goes on without
        return None
    # TensorBoard imports TensorFlow when it is installed (seconds of start-up, and TF's own log lines on stderr)
    # unless a module tensorboard.compat.notf exists (tensorboard/compat/__init__.py): then it writes without TF
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(run_dir / "tensorboard"))
