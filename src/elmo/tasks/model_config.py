"""The task encoder's config: the ``model`` section of a task config (:mod:`elmo.tasks.task_config`).

Its own module so that the task models, which take it, and the task kinds, which name the models, import it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from elmo.settings import at_least, check_settings, fraction, setting

CLASSIFIER_NAMES = ("maxpool", "bcn")
"""The sentence classifiers by ``model.classifier`` (their classes: :data:`elmo.tasks.kinds.CLASSIFIERS`)."""


@dataclass
class ModelConfig:
    """The task encoder. The tagger uses a char-CNN; the classifier usually does not (char_filters = 0)."""

    # the context-independent token input x_k: word vectors and the task's own char CNN
    word_dim: int = setting(100, "word-vector size when no pretrained vectors are given (otherwise theirs)",
                            check=at_least(1))
    freeze_word_vectors: bool = setting(False, "keep the word vectors as initialised (pretrained or random)")
    char_embedding_dim: int = setting(16, "the task char CNN's character embedding size", check=at_least(1))
    char_filters: int = setting(128, "the task char CNN's filters (0: no char CNN)", check=at_least(0))
    char_width: int = setting(3, "the task char CNN's filter width, in characters", check=at_least(1))
    max_characters_per_token: int = setting(20, "characters of each token the task char CNN sees",
                                            check=at_least(1))
    """The biLM always sees 50; the task CNN's cost grows with this."""
    # the BiLSTM encoder
    hidden_dim: int = setting(200, "BiLSTM width per direction, for every BiLSTM layer", check=at_least(1))
    num_layers: int = setting(2, "layers per BiLSTM (the BCN has two BiLSTMs: encoder and integrator)",
                              check=at_least(1))
    dropout: float = setting(0.5, "dropout on the BiLSTM's input, between its layers and before the output layers",
                             check=fraction())
    # the heads
    classifier: str = setting(
        "maxpool", "sentence classifiers: maxpool (BiLSTM + max-pooling) or bcn (the paper's biattentive network)",
        choices=CLASSIFIER_NAMES,
    )
    classifier_hidden_dim: int = setting(200, "sentence classifiers: the feed-forward layer after pooling",
                                         check=at_least(1))
    bio_constraints: bool = setting(
        True, "tagger: forbid invalid BIO transitions (used only when all tags are O/B-X/I-X)"
    )

    def __post_init__(self) -> None:
        check_settings(self, prefix="model.")
