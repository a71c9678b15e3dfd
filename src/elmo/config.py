"""Model configuration as plain dataclasses that round-trip the original ``options.json``.

The original TensorFlow code (allenai/bilm-tf) describes a biLM with one JSON file::

    {"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
              "use_skip_connections": true},
     "char_cnn": {"activation": "relu", "filters": [[1, 32], ...], "n_highway": 2, "embedding": {"dim": 16},
                  "n_characters": 262, "max_characters_per_token": 50},
     ... training keys (batch_size, unroll_steps, n_tokens_vocab, ...)}

:class:`BiLMConfig` holds the architecture; keys that only the original trainer reads are kept verbatim in
``BiLMConfig.training`` so that ``from_options(o).to_options() == o``. This module imports no torch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from elmo.errors import ConfigError
from elmo.settings import check_keys

# Keys the original trainer writes or reads at the top level of options.json (bilm-tf training.py, train()).
TRAINING_KEYS = frozenset(
    {
        "dropout",
        "all_clip_norm_val",
        "n_epochs",
        "n_train_tokens",
        "batch_size",
        "n_tokens_vocab",
        "unroll_steps",
        "n_negative_samples_batch",
        "learning_rate",
        "sample_softmax",
        "share_embedding_softmax",
    }
)
_TOP_KEYS = TRAINING_KEYS | {"lstm", "char_cnn", "bidirectional", "manylangs_token_embedder"}
_LSTM_KEYS = {"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"}
_CNN_KEYS = {"activation", "filters", "n_highway", "embedding", "n_characters", "max_characters_per_token"}
_MANYLANGS_KEYS = {"name", "activation", "filters", "n_highway", "word_dim", "char_dim", "max_characters_per_token",
                   "n_characters", "n_words"}

# Character vocabulary sizes: 261 raw ids in training files, 262 with the padding id 0 used at inference.
N_CHARACTERS_TRAIN = 261
N_CHARACTERS_INFERENCE = 262


@dataclass
class CharCNNConfig:
    """Character CNN token encoder (bilm-tf ``char_cnn`` block)."""

    filters: list[tuple[int, int]]
    """(width, number of filters) for each convolution."""
    embedding_dim: int = 16
    """Size of each character embedding (``char_cnn.embedding.dim``)."""
    n_highway: int = 2
    """Highway layers between the max-pooled filters and the projection."""
    activation: str = "relu"
    """Non-linearity after max-pooling: ``relu`` or ``tanh``."""
    max_characters_per_token: int = 50
    """Characters per token, begin/end-of-word markers included; longer words are cut (bilm-tf's 50)."""
    n_characters: int = N_CHARACTERS_INFERENCE
    """262 at inference (id 0 pads), 261 in files written for the original trainer."""

    def __post_init__(self) -> None:
        self.filters = [(int(w), int(n)) for w, n in self.filters]
        if not self.filters:
            raise ConfigError("char_cnn.filters: expected at least one [width, n_filters] pair, got none")
        for width, num in self.filters:
            if width < 1 or num < 1:
                raise ConfigError(f"char_cnn.filters: width and count must be positive, got [{width}, {num}]")
            if width > self.max_characters_per_token:
                raise ConfigError(
                    f"char_cnn.filters: width {width} exceeds max_characters_per_token {self.max_characters_per_token}"
                )
        if self.activation not in ("relu", "tanh"):
            raise ConfigError(f"char_cnn.activation: expected 'relu' or 'tanh', got {self.activation!r}")
        if self.n_characters not in (N_CHARACTERS_TRAIN, N_CHARACTERS_INFERENCE):
            raise ConfigError(f"char_cnn.n_characters: expected 261 or 262, got {self.n_characters}")
        if self.max_characters_per_token < 3:
            raise ConfigError(f"char_cnn.max_characters_per_token: expected >= 3, got {self.max_characters_per_token}")

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


MANYLANGS_KEY = "manylangs_token_embedder"
"""The options key of an ELMoForManyLangs token embedder (in place of ``char_cnn``)."""


@dataclass
class ManyLangsTokenConfig:
    """ELMoForManyLangs' ``cnn`` token embedder (its ``ConvTokenEmbedder``): a word embedding and a char CNN over
    its own learned character lexicon, concatenated, then one projection. The sizes of the two tables come from the
    model's dictionaries (``char.dic``, ``word.dic``); 0 means the part is absent (``char_dim``/``word_dim`` 0)."""

    filters: list[tuple[int, int]]
    char_dim: int = 50
    word_dim: int = 100
    n_highway: int = 2
    activation: str = "relu"
    """After the max-pool; the highway layers always use relu."""
    max_characters_per_token: int = 50
    """Markers included: a token keeps its first max - 2 characters (code points, not bytes)."""
    n_characters: int = 0
    """Rows of the character embedding (entries of char.dic)."""
    n_words: int = 0
    """Rows of the word embedding (entries of word.dic)."""

    def __post_init__(self) -> None:
        self.filters = [(int(w), int(n)) for w, n in self.filters]
        for name in ("char_dim", "word_dim", "n_highway", "n_characters", "n_words"):
            if int(getattr(self, name)) < 0:
                raise ConfigError(f"{MANYLANGS_KEY}.{name}: expected >= 0, got {getattr(self, name)}")
        if self.char_dim == 0 and self.word_dim == 0:
            raise ConfigError(f"{MANYLANGS_KEY}: char_dim and word_dim are both 0 (no token input)")
        if self.char_dim > 0:
            if not self.filters:
                raise ConfigError(f"{MANYLANGS_KEY}.filters: expected at least one [width, n_filters] pair")
            for width, num in self.filters:
                if width < 1 or num < 1 or width > self.max_characters_per_token:
                    raise ConfigError(f"{MANYLANGS_KEY}.filters: bad [width, n_filters] pair [{width}, {num}]")
            if self.n_characters < 1:
                raise ConfigError(f"{MANYLANGS_KEY}.n_characters: a char_dim > 0 needs the character table size")
        if self.word_dim > 0 and self.n_words < 1:
            raise ConfigError(f"{MANYLANGS_KEY}.n_words: a word_dim > 0 needs the word table size")
        if self.activation not in ("relu", "tanh"):
            raise ConfigError(f"{MANYLANGS_KEY}.activation: expected 'relu' or 'tanh', got {self.activation!r}")
        if self.max_characters_per_token < 3:
            raise ConfigError(f"{MANYLANGS_KEY}.max_characters_per_token: expected >= 3, "
                              f"got {self.max_characters_per_token}")

    @property
    def n_filters(self) -> int:
        """Width of the char CNN's output (0 without characters)."""
        return sum(n for _, n in self.filters) if self.char_dim > 0 else 0

    @property
    def input_dim(self) -> int:
        """Width of [word vector; char CNN output], the projection's input."""
        return self.word_dim + self.n_filters

    def to_options(self) -> dict[str, Any]:
        return {"name": "cnn", "activation": self.activation, "filters": [[w, n] for w, n in self.filters],
                "n_highway": self.n_highway, "word_dim": self.word_dim, "char_dim": self.char_dim,
                "max_characters_per_token": self.max_characters_per_token, "n_characters": self.n_characters,
                "n_words": self.n_words}

    @classmethod
    def from_options(cls, options: Any) -> ManyLangsTokenConfig:
        for key in ("char_dim", "word_dim"):
            if key not in options:
                raise ConfigError(f"missing required key '{MANYLANGS_KEY}.{key}'")
        if options.get("name", "cnn") != "cnn":
            raise ConfigError(f"{MANYLANGS_KEY}.name: only the 'cnn' token embedder is supported, "
                              f"got {options.get('name')!r}")
        return cls(filters=[tuple(f) for f in options.get("filters", [])], char_dim=int(options["char_dim"]),
                   word_dim=int(options["word_dim"]), n_highway=int(options.get("n_highway", 0)),
                   activation=options.get("activation", "relu"),
                   max_characters_per_token=int(options.get("max_characters_per_token", 50)),
                   n_characters=int(options.get("n_characters", 0)), n_words=int(options.get("n_words", 0)))


@dataclass
class LSTMConfig:
    """The stacked LSTMs with projection (bilm-tf ``lstm`` block); both directions share the shape."""

    dim: int = 4096
    """Number of memory cells."""
    projection_dim: int = 512
    """Output (and token-layer) size; equal to ``dim`` means no projection."""
    n_layers: int = 2
    cell_clip: float | None = 3.0
    """Memory cells are clipped to [-cell_clip, cell_clip] after every step (None: no clip)."""
    proj_clip: float | None = 3.0
    """The same for the projected output."""
    use_skip_connections: bool = True
    """Residual connection around every layer but the first."""

    def __post_init__(self) -> None:
        for name in ("dim", "projection_dim", "n_layers"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"lstm.{name}: expected a positive integer, got {getattr(self, name)}")
        if self.projection_dim > self.dim:
            raise ConfigError(f"lstm.projection_dim ({self.projection_dim}) cannot exceed lstm.dim ({self.dim})")

    @property
    def has_projection(self) -> bool:
        return self.projection_dim < self.dim


@dataclass
class BiLMConfig:
    """A bidirectional LM: token encoder (char CNN, or a token embedding table when ``char_cnn`` is None, or
    ELMoForManyLangs' token embedder when ``manylangs`` is set) + LSTMs."""

    lstm: LSTMConfig
    char_cnn: CharCNNConfig | None
    bidirectional: bool = True
    training: dict[str, Any] = field(default_factory=dict)
    """Trainer-only options.json keys (batch_size, unroll_steps, ...), kept verbatim."""
    manylangs: ManyLangsTokenConfig | None = None
    """ELMoForManyLangs' token embedder (options key ``manylangs_token_embedder``); ``char_cnn`` is then None."""

    @property
    def forget_bias(self) -> float:
        """TF's constant forget-gate offset; ELMoForManyLangs' (PyTorch) weights already hold it in their bias."""
        return 0.0 if self.manylangs is not None else 1.0

    @property
    def output_dim(self) -> int:
        """Width of each ELMo layer: forward and backward outputs concatenated."""
        return 2 * self.lstm.projection_dim

    @property
    def num_layers(self) -> int:
        """Number of representation layers, L + 1 (token layer first)."""
        return self.lstm.n_layers + 1

    # ------------------------------------------------------------------ options.json

    @classmethod
    def from_options(cls, options: dict[str, Any], source: str = "options") -> BiLMConfig:
        """Build from a parsed original ``options.json``; ``source`` names the file in errors."""
        if not isinstance(options, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(options).__name__}")
        check_keys(options, _TOP_KEYS, source, "")
        if "lstm" not in options:
            raise ConfigError(f"{source}: missing required key 'lstm'")
        lstm_opts = options["lstm"]
        check_keys(lstm_opts, _LSTM_KEYS, source, "lstm.")
        for key in ("dim", "projection_dim", "n_layers"):
            if key not in lstm_opts:
                raise ConfigError(f"{source}: missing required key 'lstm.{key}'")
        try:
            lstm = LSTMConfig(
                dim=int(lstm_opts["dim"]),
                projection_dim=int(lstm_opts["projection_dim"]),
                n_layers=int(lstm_opts["n_layers"]),
                cell_clip=_optional_float(lstm_opts.get("cell_clip")),
                proj_clip=_optional_float(lstm_opts.get("proj_clip")),
                use_skip_connections=bool(lstm_opts.get("use_skip_connections", False)),
            )
            char_cnn = None
            if "char_cnn" in options:
                cnn = options["char_cnn"]
                check_keys(cnn, _CNN_KEYS, source, "char_cnn.")
                for key in ("filters", "embedding"):
                    if key not in cnn:
                        raise ConfigError(f"{source}: missing required key 'char_cnn.{key}'")
                char_cnn = CharCNNConfig(
                    filters=[tuple(f) for f in cnn["filters"]],
                    embedding_dim=int(cnn["embedding"]["dim"]),
                    n_highway=int(cnn.get("n_highway") or 0),
                    activation=cnn.get("activation", "relu"),
                    max_characters_per_token=int(cnn.get("max_characters_per_token", 50)),
                    n_characters=int(cnn.get("n_characters", N_CHARACTERS_INFERENCE)),
                )
            manylangs = None
            if MANYLANGS_KEY in options:
                if char_cnn is not None:
                    raise ConfigError(f"'char_cnn' and '{MANYLANGS_KEY}' exclude each other")
                check_keys(options[MANYLANGS_KEY], _MANYLANGS_KEYS, source, f"{MANYLANGS_KEY}.")
                manylangs = ManyLangsTokenConfig.from_options(options[MANYLANGS_KEY])
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from e
        except (TypeError, ValueError, KeyError) as e:
            raise ConfigError(f"{source}: malformed value ({e})") from e
        bidirectional = bool(options.get("bidirectional", True))
        if not bidirectional:
            raise ConfigError(f"{source}: 'bidirectional': false (a one-direction LM) is not supported")
        training = {k: copy.deepcopy(v) for k, v in options.items() if k in TRAINING_KEYS}
        return cls(lstm=lstm, char_cnn=char_cnn, bidirectional=bidirectional, training=training, manylangs=manylangs)

    def to_options(self) -> dict[str, Any]:
        """The original ``options.json`` object (keys in the order the original writer uses)."""
        options: dict[str, Any] = {}
        options["bidirectional"] = self.bidirectional
        if self.char_cnn is not None:
            c = self.char_cnn
            options["char_cnn"] = {
                "activation": c.activation,
                "embedding": {"dim": c.embedding_dim},
                "filters": [[w, n] for w, n in c.filters],
                "max_characters_per_token": c.max_characters_per_token,
                "n_characters": c.n_characters,
                "n_highway": c.n_highway,
            }
        if self.manylangs is not None:
            options[MANYLANGS_KEY] = self.manylangs.to_options()
        lstm = self.lstm
        options["lstm"] = {
            "cell_clip": _plain_number(lstm.cell_clip),
            "dim": lstm.dim,
            "n_layers": lstm.n_layers,
            "proj_clip": _plain_number(lstm.proj_clip),
            "projection_dim": lstm.projection_dim,
            "use_skip_connections": lstm.use_skip_connections,
        }
        options["lstm"] = {k: v for k, v in options["lstm"].items() if v is not None}
        options.update(copy.deepcopy(self.training))
        return options


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _plain_number(value: float | None) -> float | int | None:
    """3.0 -> 3 so that written options look like the original ones."""
    if value is not None and float(value).is_integer():
        return int(value)
    return value


# ------------------------------------------------------------------ named sizes
# The published English models (allennlp.org/elmo) differ only in these numbers; all use the 2048-filter char CNN.

FILTERS_2048 = [(1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)]


def _config(dim: int, projection_dim: int, n_highway: int) -> BiLMConfig:
    return BiLMConfig(
        lstm=LSTMConfig(dim=dim, projection_dim=projection_dim, n_layers=2),
        char_cnn=CharCNNConfig(filters=list(FILTERS_2048), embedding_dim=16, n_highway=n_highway),
    )


def original_config() -> BiLMConfig:
    """2x4096_512_2048cnn_2xhighway: the paper's model (93.6M parameters)."""
    return _config(4096, 512, 2)


def medium_config() -> BiLMConfig:
    """2x2048_256_2048cnn_1xhighway (28.0M parameters)."""
    return _config(2048, 256, 1)


def small_config() -> BiLMConfig:
    """2x1024_128_2048cnn_1xhighway (13.6M parameters)."""
    return _config(1024, 128, 1)


NAMED_CONFIGS = {"original": original_config, "medium": medium_config, "small": small_config}
