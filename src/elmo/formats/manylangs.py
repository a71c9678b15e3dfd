"""ELMoForManyLangs models (HIT-SCIR; 44 languages, and the NLPL repository's ids 136-179): a directory, or a
folder inside a zip archive, holding::

    config.json          the training options; "config_path" names the model config
    <model config>.json  encoder + token_embedder sizes (often absent: the original then uses its bundled copy)
    char.dic, word.dic   token<TAB>id lines (:func:`elmo.manylangs_vocab.parse_dictionary`)
    token_embedder.pkl   torch.save'd state dict of the token embedder
    encoder.pkl          torch.save'd state dict of the biLM (AllenNLP's ElmoLstm names, PyTorch gate order)

``root`` is a :class:`pathlib.Path` or a :class:`zipfile.Path`: every file is read through that API, nothing is
extracted. The pickles are read with ``torch.load(weights_only=True)`` only, and every tensor is checked against the
model config and the dictionaries before it reaches a module. The biLM weights go into our LSTM unchanged except
for the gate order (PyTorch i, f, g, o -> TF i, j, f, o) and the bias, which moves from the recurrent to the input
half; the forget offset is already in it (``BiLMConfig.forget_bias`` is 0 for this family).
"""

from __future__ import annotations

import io
import json
import posixpath
from typing import Any, Protocol

import torch

from elmo.config import BiLMConfig, LSTMConfig, ManyLangsTokenConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.checked_reads import load_checked_state
from elmo.manylangs_vocab import CHAR_SPECIALS, WORD_SPECIALS, ManyLangsLexicon, parse_dictionary
from elmo.modules.bilm import BiLM, build_bilm

CONFIG_FILE = "config.json"
CHAR_DIC = "char.dic"
WORD_DIC = "word.dic"
TOKEN_EMBEDDER_FILE = "token_embedder.pkl"
ENCODER_FILE = "encoder.pkl"
MARKER_FILES = (TOKEN_EMBEDDER_FILE, ENCODER_FILE, CHAR_DIC, WORD_DIC)
"""Any of these makes a directory an ELMoForManyLangs model (the native format shares only config.json)."""

_SAMPLE_CONFIG = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {"name": "cnn", "activation": "relu",
                       "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                       "n_highway": 2, "word_dim": 100, "char_dim": 50, "max_characters_per_token": 50},
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
BUNDLED_CONFIGS = {"cnn_50_100_512_4096_sample.json": _SAMPLE_CONFIG, "cnn_0_100_512_4096_sample.json": _SAMPLE_CONFIG}
"""The model configs the original package ships (elmoformanylangs/configs; both files hold the same sizes): used
when config.json names one the model directory lacks, as the original does."""


class ModelRoot(Protocol):
    """What is used of :class:`pathlib.Path` / :class:`zipfile.Path`."""

    def __truediv__(self, name: str) -> ModelRoot: ...
    def is_file(self) -> bool: ...
    def open(self, mode: str = "r") -> Any: ...


def is_manylangs(root: ModelRoot) -> bool:
    """Whether ``root`` holds an ELMoForManyLangs model (by its pickles or dictionaries)."""
    return any((root / name).is_file() for name in MARKER_FILES)


def read_manylangs_config(root: ModelRoot) -> BiLMConfig:
    """The architecture, with the table sizes taken from the dictionaries; no weights are read."""
    return _read_model(root)[0]


def load_manylangs(root: ModelRoot) -> BiLM:
    """Load an ELMoForManyLangs model on the CPU, in eval mode, with its lexicon attached to the token encoder."""
    config, lexicon = _read_model(root)
    state = _token_embedder_state(root, config.manylangs, lexicon) | _encoder_state(root, config.lstm)
    bilm = build_bilm(config)
    load_checked_state(bilm, state, _name(root))
    bilm.token_encoder.lexicon = lexicon
    return bilm.eval()


# ------------------------------------------------------------------ config and dictionaries


def _read_model(root: ModelRoot) -> tuple[BiLMConfig, ManyLangsLexicon]:
    options = _read_json(root / CONFIG_FILE)
    config_path = options.get("config_path") if isinstance(options, dict) else None
    if not isinstance(config_path, str) or not config_path:
        raise ConfigError(f"{_name(root / CONFIG_FILE)}: no \"config_path\" naming the model config")
    model_config, source = _model_config(root, config_path)
    encoder = _section(model_config, "encoder", source)
    embedder = _section(model_config, "token_embedder", source)
    if str(encoder.get("name", "")).lower() != "elmo":
        raise ConfigError(f"{source}: encoder {encoder.get('name')!r} is not supported (only 'elmo', the biLM)")
    if str(embedder.get("name", "")).lower() != "cnn":
        raise ConfigError(f"{source}: token_embedder {embedder.get('name')!r} is not supported (only 'cnn')")
    try:
        char_dim, word_dim = int(embedder.get("char_dim", 0)), int(embedder.get("word_dim", 0))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: malformed char_dim or word_dim ({e})") from None
    chars = _read_dictionary(root, CHAR_DIC, CHAR_SPECIALS) if char_dim > 0 else None
    words = _read_dictionary(root, WORD_DIC, WORD_SPECIALS) if word_dim > 0 else None
    try:
        width = int(embedder.get("max_characters_per_token", 50))
        token_config = ManyLangsTokenConfig(
            filters=[tuple(f) for f in embedder.get("filters", [])], char_dim=char_dim, word_dim=word_dim,
            n_highway=int(embedder.get("n_highway", 0)), activation=embedder.get("activation", "relu"),
            max_characters_per_token=width, n_characters=len(chars or ()), n_words=len(words or ()),
        )
        lstm = LSTMConfig(
            dim=int(encoder["dim"]), projection_dim=int(encoder["projection_dim"]), n_layers=int(encoder["n_layers"]),
            cell_clip=_clip(encoder.get("cell_clip")), proj_clip=_clip(encoder.get("proj_clip")),
            use_skip_connections=True,  # the original's ElmobiLm adds every layer's input from the second on
        )
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    except KeyError as e:
        raise ConfigError(f"{source}: missing required key {e}") from None
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: malformed value ({e})") from None
    if not lstm.has_projection:
        raise ConfigError(f"{source}: encoder dim {lstm.dim} equals projection_dim: the original always projects")
    return BiLMConfig(lstm=lstm, char_cnn=None, manylangs=token_config), ManyLangsLexicon(chars, words, width)


def _model_config(root: ModelRoot, config_path: str) -> tuple[dict, str]:
    """Where the original looks: the path as given (inside the model), its file name in the model directory, then
    the original package's bundled configs by that name."""
    base = posixpath.basename(config_path.replace("\\", "/"))
    candidates = [] if posixpath.isabs(config_path) or ".." in config_path.split("/") else [config_path]
    for candidate in [*candidates, base]:
        path = root / candidate
        if path.is_file():
            return _read_json(path), _name(path)
    if base in BUNDLED_CONFIGS:
        return BUNDLED_CONFIGS[base], f"{_name(root / CONFIG_FILE)} (bundled {base})"
    raise ConfigError(f"{_name(root / CONFIG_FILE)}: the model config {config_path!r} is neither in the model "
                      f"directory nor one of the original's bundled configs ({', '.join(BUNDLED_CONFIGS)})")


def _clip(value: Any) -> float | None:
    """The original clips only when the value is truthy (``if self.memory_cell_clip_value:``)."""
    return float(value) if value else None


def _section(config: Any, key: str, source: str) -> dict:
    if not isinstance(config, dict) or not isinstance(config.get(key), dict):
        raise ConfigError(f"{source}: missing the '{key}' object")
    return config[key]


def _read_dictionary(root: ModelRoot, name: str, specials: tuple[str, ...]) -> dict[str, int]:
    path = root / name
    if not path.is_file():
        raise ConfigError(f"{_name(path)}: no such file (the model config uses it)")
    with path.open("rb") as f:
        lexicon = parse_dictionary(f.read(), _name(path))
    absent = ManyLangsLexicon.missing(lexicon, specials)
    if absent is not None:
        raise ConfigError(f"{_name(path)}: no entry for {absent!r}, which the original requires")
    return lexicon


def _read_json(path: ModelRoot) -> Any:
    if not path.is_file():
        raise ConfigError(f"{_name(path)}: no such file")
    with path.open("rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8-sig"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{_name(path)}: invalid JSON at line {e.lineno}: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{_name(path)}: not UTF-8 text ({e.reason} at byte {e.start})") from None


# ------------------------------------------------------------------ the two state dicts


def _load_pickle(root: ModelRoot, name: str) -> tuple[dict[str, torch.Tensor], str]:
    """A torch.save'd state dict, unpickled with ``weights_only=True`` (tensors and plain containers only)."""
    path = root / name
    source = _name(path)
    if not path.is_file():
        raise WeightFileError(f"{source}: no such file")
    with path.open("rb") as f:
        data = io.BytesIO(f.read())  # seekable, as torch.load needs (a zip member's seek would re-inflate it)
    try:
        state = torch.load(data, weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - whatever the unpickler or the zip reader raises, it is this file's fault
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WeightFileError(f"{source}: not a readable weights-only torch file ({reason})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise WeightFileError(f"{source}: expected a state dict (names -> tensors), got {type(state).__name__}")
    return state, source


def _check_tensors(state: dict[str, torch.Tensor], expected: dict[str, tuple[int, ...]], source: str) -> None:
    """Names, shapes, float dtypes and finiteness, in the original's names."""
    missing = [k for k in expected if k not in state]
    if missing:
        raise WeightFileError(f"{source}: missing tensor '{missing[0]}' ({len(missing)} missing in all)")
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        raise WeightFileError(f"{source}: unexpected tensor '{unexpected[0]}' ({len(unexpected)} unexpected in all)")
    for key, shape in expected.items():
        value = state[key]
        if tuple(value.shape) != shape:
            raise WeightFileError(f"{source}: tensor '{key}' has shape {tuple(value.shape)}, the model config "
                                  f"expects {shape}")
        if not value.is_floating_point():
            raise WeightFileError(f"{source}: tensor '{key}' has dtype {value.dtype}, expected a float dtype")
        if not torch.isfinite(value).all():
            raise WeightFileError(f"{source}: tensor '{key}' contains NaN or Inf values")


def _check_table(state: dict[str, torch.Tensor], key: str, what: str, dictionary: str, entries: int,
                 source: str) -> None:
    """The known mismatch (the Chinese releases): a dictionary that does not fit its embedding matrix."""
    value = state.get(key)
    if value is not None and value.dim() == 2 and value.shape[0] != entries:
        raise WeightFileError(f"{dictionary} has {entries} entries but the {what} embedding in {source} has "
                              f"{value.shape[0]} rows (dictionary and weights are from different models)")


def _token_embedder_state(root: ModelRoot, config: ManyLangsTokenConfig,
                          lexicon: ManyLangsLexicon) -> dict[str, torch.Tensor]:
    state, source = _load_pickle(root, TOKEN_EMBEDDER_FILE)
    expected: dict[str, tuple[int, ...]] = {}
    if config.word_dim > 0:
        _check_table(state, "word_emb_layer.embedding.weight", "word", _name(root / WORD_DIC), config.n_words, source)
        expected["word_emb_layer.embedding.weight"] = (config.n_words, config.word_dim)
    if config.char_dim > 0:
        _check_table(state, "char_emb_layer.embedding.weight", "char", _name(root / CHAR_DIC), config.n_characters,
                     source)
        expected["char_emb_layer.embedding.weight"] = (config.n_characters, config.char_dim)
        for i, (width, num) in enumerate(config.filters):
            expected[f"convolutions.{i}.weight"] = (num, config.char_dim, width)
            expected[f"convolutions.{i}.bias"] = (num,)
        for i in range(config.n_highway):
            expected[f"highways._layers.{i}.weight"] = (2 * config.n_filters, config.n_filters)
            expected[f"highways._layers.{i}.bias"] = (2 * config.n_filters,)
    projection_dim = state["projection.weight"].shape[0] if "projection.weight" in state else 0
    expected["projection.weight"] = (projection_dim, config.input_dim)
    expected["projection.bias"] = (projection_dim,)
    _check_tensors(state, expected, source)
    for table, dictionary, name in ((lexicon.chars, CHAR_DIC, "char_emb_layer"), (lexicon.words, WORD_DIC,
                                                                                  "word_emb_layer")):
        if table:
            top = max(table.values())
            bottom = min(table.values())
            rows = state[f"{name}.embedding.weight"].shape[0]
            if bottom < 0 or top >= rows:
                raise WeightFileError(f"{_name(root / dictionary)}: id {bottom if bottom < 0 else top} is outside "
                                      f"the {rows} rows of its embedding in {source}")
    renamed = {}
    for key, value in state.items():
        key = key.replace("word_emb_layer.embedding.", "word_embedding.").replace(
            "char_emb_layer.embedding.", "char_embedding.").replace("highways._layers.", "highway.")
        renamed[f"token_encoder.{key}"] = value
    return renamed


def _encoder_state(root: ModelRoot, lstm: LSTMConfig) -> dict[str, torch.Tensor]:
    state, source = _load_pickle(root, ENCODER_FILE)
    cells, proj = lstm.dim, lstm.projection_dim
    expected: dict[str, tuple[int, ...]] = {}
    for direction in ("forward", "backward"):
        for layer in range(lstm.n_layers):
            prefix = f"{direction}_layer_{layer}."
            expected[prefix + "input_linearity.weight"] = (4 * cells, proj)
            expected[prefix + "state_linearity.weight"] = (4 * cells, proj)
            expected[prefix + "state_linearity.bias"] = (4 * cells,)
            expected[prefix + "state_projection.weight"] = (proj, cells)
    _check_tensors(state, expected, source)

    def tf_order(x: torch.Tensor) -> torch.Tensor:
        """PyTorch's gate blocks i, f, g, o -> TF's i, j (= g), f, o."""
        i, f, g, o = x.split(cells, dim=0)
        return torch.cat([i, g, f, o])

    out = {}
    for direction in ("forward", "backward"):
        for layer in range(lstm.n_layers):
            src, dst = f"{direction}_layer_{layer}.", f"{direction}_lstm.layers.{layer}."
            out[dst + "input_linearity.weight"] = tf_order(state[src + "input_linearity.weight"])
            out[dst + "input_linearity.bias"] = tf_order(state[src + "state_linearity.bias"])
            out[dst + "state_linearity.weight"] = tf_order(state[src + "state_linearity.weight"])
            out[dst + "projection.weight"] = state[src + "state_projection.weight"]
    return out


def _name(path: Any) -> str:
    """A path for messages: the file path, or archive.zip/inner/path for a zip member."""
    root = getattr(path, "root", None)
    if root is not None and hasattr(path, "at"):  # zipfile.Path
        return posixpath.join(str(getattr(root, "filename", None) or "<zip>"), path.at)
    return str(path)
