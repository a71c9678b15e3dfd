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
import math
import numbers
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

MIN_WINDOW = 64
"""Fewest steps of a window when a long sequence runs a window at a time (``modules/long_sequences.py``, but the
whole call's own groups): the last piece of a group joins the one before. Here, in the torch-free base, because the
``sequence_window`` setting (``EmbedOptions``) refuses fewer."""

# ------------------------------------------------------------------ limits
# Every size a model file declares is checked against these before anything is built or read, so that a file of a
# few hundred bytes cannot ask for gigabytes. Each is many times the largest published value (in brackets: the
# original model; ELMoForManyLangs; the 1B Word Benchmark vocabulary); docs/formats.md, "Limits", lists them.
MAX_LSTM_DIM = 32768
"""``lstm.dim`` (and ``projection_dim``, which cannot exceed it): cells per layer [4096]."""
MAX_LSTM_LAYERS = 16
"""``lstm.n_layers``, per direction [2]."""
MAX_CONVOLUTIONS = 64
"""Entries of ``char_cnn.filters`` [7]."""
MAX_FILTERS = 16384
"""Filters of one width, and of all widths together [1024; 2048]."""
MAX_HIGHWAY = 16
"""``char_cnn.n_highway`` [2]."""
MAX_EMBEDDING_DIM = 4096
"""Character embedding size ``char_cnn.embedding.dim`` [16], ELMoForManyLangs' ``char_dim`` [50] and ``word_dim``
[100]."""
MAX_CHARACTERS_PER_TOKEN = 256
"""``max_characters_per_token``, markers included [50]."""
MAX_VOCABULARY = 10_000_000
"""Rows of a token table, a softmax or an ELMoForManyLangs dictionary [793,471 words; 140,384 in the largest
ELMoForManyLangs ``word.dic``]."""
ACTIVATIONS = ("relu", "tanh")


def _shown(value: Any) -> str:
    """A value as messages quote it, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_integer(value: Any, key: str, low: int, high: int, high_is: str | None = None) -> int:
    """``value`` as an int in ``low..high``; a float (even 2.0 or 4e6), a bool or a string is one line naming
    ``key``. ``high_is`` says what ``high`` is when it is not one of this module's limits."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{key}: expected an integer, got {_shown(value)}")
    if value < low:
        raise ConfigError(f"{key}: expected an integer >= {low}, got {value}")
    if value > high:
        raise ConfigError(f"{key}: {value} exceeds {high_is or f'the limit of {high:,} (docs/formats.md, Limits)'}")
    return int(value)


def check_boolean(value: Any, key: str) -> bool:
    """``value`` if it is true or false; the string ``"false"`` (which ``bool()`` makes True) or 0/1 is refused."""
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {_shown(value)}")
    return value


def check_clip(value: Any, key: str) -> float | None:
    """A clip: None (absent or null: no clip), else a finite number > 0, as a float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{key}: expected a positive number or null, got {_shown(value)}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{key}: expected a finite number > 0 or null (no clip), got {value!r}")
    return float(value)


def check_activation(value: Any, key: str) -> str:
    if value not in ACTIVATIONS or not isinstance(value, str):
        raise ConfigError(f"{key}: expected 'relu' or 'tanh', got {_shown(value)}")
    return value


def check_filters(value: Any, key: str, max_characters_per_token: int) -> list[tuple[int, int]]:
    """``[[width, n_filters], ...]``: 1 to MAX_CONVOLUTIONS pairs of integers, each width at most the word length,
    MAX_FILTERS filters in all."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{key}: expected a non-empty list of [width, n_filters] pairs, got {_shown(value)}")
    if len(value) > MAX_CONVOLUTIONS:
        raise ConfigError(f"{key}: {len(value)} convolutions exceed the limit of {MAX_CONVOLUTIONS} (docs/formats.md, "
                          "Limits)")
    filters = []
    for i, pair in enumerate(value):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ConfigError(f"{key}[{i}]: expected a [width, n_filters] pair, got {_shown(pair)}")
        filters.append((check_integer(pair[0], f"{key}[{i}] width", 1, max_characters_per_token,
                                      f"max_characters_per_token {max_characters_per_token}"),
                        check_integer(pair[1], f"{key}[{i}] n_filters", 1, MAX_FILTERS)))
    total = sum(n for _, n in filters)
    if total > MAX_FILTERS:
        raise ConfigError(f"{key}: {total:,} filters in all exceed the limit of {MAX_FILTERS:,} (docs/formats.md, "
                          "Limits)")
    return filters


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
        self.max_characters_per_token = check_integer(self.max_characters_per_token,
                                                      "char_cnn.max_characters_per_token", 3, MAX_CHARACTERS_PER_TOKEN)
        self.filters = check_filters(self.filters, "char_cnn.filters", self.max_characters_per_token)
        self.embedding_dim = check_integer(self.embedding_dim, "char_cnn.embedding.dim", 1, MAX_EMBEDDING_DIM)
        self.n_highway = check_integer(self.n_highway, "char_cnn.n_highway", 0, MAX_HIGHWAY)
        self.activation = check_activation(self.activation, "char_cnn.activation")
        self.n_characters = check_integer(self.n_characters, "char_cnn.n_characters", N_CHARACTERS_TRAIN,
                                          N_CHARACTERS_INFERENCE, "262 (expected 261 or 262)")

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
        key = MANYLANGS_KEY
        self.max_characters_per_token = check_integer(self.max_characters_per_token, f"{key}.max_characters_per_token",
                                                      3, MAX_CHARACTERS_PER_TOKEN)
        for name, high in (("char_dim", MAX_EMBEDDING_DIM), ("word_dim", MAX_EMBEDDING_DIM), ("n_highway", MAX_HIGHWAY),
                           ("n_characters", MAX_VOCABULARY), ("n_words", MAX_VOCABULARY)):
            setattr(self, name, check_integer(getattr(self, name), f"{key}.{name}", 0, high))
        self.activation = check_activation(self.activation, f"{key}.activation")
        if self.char_dim == 0 and self.word_dim == 0:
            raise ConfigError(f"{key}: char_dim and word_dim are both 0 (no token input)")
        if self.char_dim > 0:
            self.filters = check_filters(self.filters, f"{key}.filters", self.max_characters_per_token)
            if self.n_characters < 1:
                raise ConfigError(f"{key}.n_characters: a char_dim > 0 needs the character table size")
        else:
            self.filters = [tuple(f) for f in self.filters] if isinstance(self.filters, (list, tuple)) else []
        if self.word_dim > 0 and self.n_words < 1:
            raise ConfigError(f"{key}.n_words: a word_dim > 0 needs the word table size")

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
        return cls(filters=options.get("filters", []), char_dim=options["char_dim"], word_dim=options["word_dim"],
                   n_highway=options.get("n_highway", 0), activation=options.get("activation", "relu"),
                   max_characters_per_token=options.get("max_characters_per_token", 50),
                   n_characters=options.get("n_characters", 0), n_words=options.get("n_words", 0))


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
        self.dim = check_integer(self.dim, "lstm.dim", 1, MAX_LSTM_DIM)
        self.projection_dim = check_integer(self.projection_dim, "lstm.projection_dim", 1, MAX_LSTM_DIM)
        self.n_layers = check_integer(self.n_layers, "lstm.n_layers", 1, MAX_LSTM_LAYERS)
        self.cell_clip = check_clip(self.cell_clip, "lstm.cell_clip")
        self.proj_clip = check_clip(self.proj_clip, "lstm.proj_clip")
        self.use_skip_connections = check_boolean(self.use_skip_connections, "lstm.use_skip_connections")
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
                dim=lstm_opts["dim"],
                projection_dim=lstm_opts["projection_dim"],
                n_layers=lstm_opts["n_layers"],
                cell_clip=lstm_opts.get("cell_clip"),
                proj_clip=lstm_opts.get("proj_clip"),
                use_skip_connections=_unless_null(lstm_opts.get("use_skip_connections"), False),
            )
            char_cnn = None
            if "char_cnn" in options:
                cnn = options["char_cnn"]
                check_keys(cnn, _CNN_KEYS, source, "char_cnn.")
                for key in ("filters", "embedding"):
                    if key not in cnn:
                        raise ConfigError(f"{source}: missing required key 'char_cnn.{key}'")
                check_keys(cnn["embedding"], {"dim"}, source, "char_cnn.embedding.")
                if "dim" not in cnn["embedding"]:
                    raise ConfigError(f"{source}: missing required key 'char_cnn.embedding.dim'")
                char_cnn = CharCNNConfig(
                    filters=cnn["filters"],
                    embedding_dim=cnn["embedding"]["dim"],
                    n_highway=_unless_null(cnn.get("n_highway"), 0),
                    activation=cnn.get("activation", "relu"),
                    max_characters_per_token=cnn.get("max_characters_per_token", 50),
                    n_characters=cnn.get("n_characters", N_CHARACTERS_INFERENCE),
                )
            manylangs = None
            if MANYLANGS_KEY in options:
                if char_cnn is not None:
                    raise ConfigError(f"'char_cnn' and '{MANYLANGS_KEY}' exclude each other")
                check_keys(options[MANYLANGS_KEY], _MANYLANGS_KEYS, source, f"{MANYLANGS_KEY}.")
                manylangs = ManyLangsTokenConfig.from_options(options[MANYLANGS_KEY])
            bidirectional = check_boolean(options.get("bidirectional", True), "bidirectional")
        except ConfigError as e:
            if str(e).startswith(f"{source}: "):
                raise
            raise ConfigError(f"{source}: {e}") from e
        except (TypeError, ValueError, KeyError) as e:
            raise ConfigError(f"{source}: malformed value ({e})") from e
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


def _unless_null(value: Any, default: Any) -> Any:
    """bilm-tf reads an absent key and a null alike (``options.get(key)``: no highway layers, no residual)."""
    return default if value is None else value


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
