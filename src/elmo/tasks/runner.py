"""A task model with everything needed to feed it text: vocabularies, the ELMo cache, the device.

Used by training and by evaluation on new files, so both batch, predict and score the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

from elmo.tasks.elmo_features import ActivationCache, CachedElmo
from elmo.tasks.kinds import TaskKind
from elmo.tasks.task_batches import TaskBatch, make_batch, tag_targets
from elmo.tasks.task_config import TaskConfig
from elmo.tasks.word_index import LabelIndex, WordIndex


@dataclass
class TaskRunner:
    config: TaskConfig
    model: nn.Module
    word_index: WordIndex
    labels: LabelIndex
    cache: ActivationCache | None = None
    device: str | torch.device = "cpu"

    @property
    def elmo_mode(self) -> str | None:
        elmo = getattr(self.model, "elmo", None)
        if elmo is None:
            return None
        return "cached" if isinstance(elmo, CachedElmo) else "ids"

    @property
    def kind(self) -> TaskKind:
        return self.config.kind

    @property
    def is_tagger(self) -> bool:
        """Whether the model tags tokens (a tag list per sentence) rather than labelling sentences."""
        return self.kind.tags_tokens

    def batch(self, examples: Sequence, with_targets: bool) -> TaskBatch:
        targets = None
        if with_targets:
            gold = [self.kind.gold(e) for e in examples]
            ids = self.labels.ids
            targets = tag_targets(gold, ids) if self.is_tagger else torch.tensor([ids[label] for label in gold])
        batch = make_batch(
            [e.words for e in examples],
            self.word_index,
            self.config.model.max_characters_per_token,
            self.elmo_mode,
            self.cache,
            targets,
        )
        return batch.to(self.device)

    def prepare(self, examples: Sequence) -> None:
        """Compute the biLM activations of any sentence not cached yet (cached-ELMo models only)."""
        if self.elmo_mode == "cached" and self.cache is not None:
            self.cache.ensure([e.words for e in examples])

    def penalty(self) -> torch.Tensor | float:
        """lambda * ||w||^2 over the learned ELMo mixes (zero for the baseline and for the fixed top layer)."""
        use = self.config.elmo
        if self.elmo_mode is None or use.layers != "all" or use.l2_coef == 0:
            return 0.0
        return self.model.elmo.scalar_mix_penalty(use.l2_coef)

    def loss(self, examples: Sequence) -> torch.Tensor:
        """Task loss + mix penalty for one batch of labelled examples."""
        return self.model(self.batch(examples, with_targets=True)) + self.penalty()

    @torch.no_grad()
    def predict(self, examples: Sequence, batch_size: int = 64, progress: bool = False) -> list:
        """Tag lists (tagger) or labels (classifier), in the order of ``examples``; runs in eval mode."""
        self.prepare(examples)
        was_training = self.model.training
        self.model.eval()
        # Longest first in batches of similar length, to waste little on padding; results go back in order.
        order = sorted(range(len(examples)), key=lambda i: -len(examples[i].words))
        out: list = [None] * len(examples)
        for start in tqdm(range(0, len(order), batch_size), desc="predict", disable=not progress, leave=False):
            chunk = order[start : start + batch_size]
            predicted = self.model.predict(self.batch([examples[i] for i in chunk], with_targets=False))
            for i, p in zip(chunk, predicted):
                out[i] = [self.labels.labels[t] for t in p] if self.is_tagger else self.labels.labels[p]
        self.model.train(was_training)
        return out

    def score(self, examples: Sequence, predicted: Sequence) -> float:
        """The task kind's metric (span F1 of a tagger, accuracy of a classifier), in percent."""
        return self.kind.metric([self.kind.gold(e) for e in examples], predicted)

    def layer_weights(self) -> list[dict]:
        """softmax(w) and gamma of each ELMo mix (input first, then output)."""
        if self.elmo_mode is None:
            return []
        return [
            {"weights": mix.normalized_weights().detach().tolist(), "gamma": mix.gamma.item()}
            for mix in self.model.elmo.scalar_mixes
        ]
