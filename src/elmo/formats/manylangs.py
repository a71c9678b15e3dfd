"""ELMoForManyLangs models (HIT-SCIR; 44 languages, and the NLPL repository's ids 136-179): a directory, or a
folder inside a zip archive, holding::

    config.json          the training options; "config_path" names the model config
    <model config>.json  encoder + token_embedder sizes (often absent: the original then uses its bundled copy)
    char.dic, word.dic   token<TAB>id lines (:func:`elmo.text.manylangs_vocab.parse_dictionary`)
    token_embedder.pkl   torch.save'd state dict of the token embedder
    encoder.pkl          torch.save'd state dict of the biLM (AllenNLP's ElmoLstm names, PyTorch gate order)

``root`` is a :class:`pathlib.Path` or a :class:`zipfile.Path`: every file is read through that API, a zip member
within the caps of :mod:`elmo.formats.archive_limits` (a pickle is streamed into a temporary file, removed once
read). The pickles are read with ``torch.load(weights_only=True)`` only, after checking that a zip-format one holds
its records uncompressed (as ``torch.save`` writes them), so that what torch allocates is bounded by the file's own
bytes; every tensor is then checked against the model config and the dictionaries before it reaches a module, and
becomes its parameter (the biLM is built on the meta device). The biLM weights go into our LSTM unchanged except
for the gate order (PyTorch i, f, g, o -> TF i, j, f, o, reordered in place) and the bias, which moves from the
recurrent to the input half; the forget offset is already in it (``BiLMConfig.forget_bias`` is 0 for this family).
"""

from __future__ import annotations

import posixpath
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import torch

from elmo.config import (
    MAX_CHARACTERS_PER_TOKEN,
    MAX_EMBEDDING_DIM,
    MAX_HIGHWAY,
    MAX_LSTM_DIM,
    MAX_LSTM_LAYERS,
    BiLMConfig,
    LSTMConfig,
    ManyLangsTokenConfig,
    check_activation,
    check_clip,
    check_filters,
    check_integer,
)
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.archive_limits import check_member_count, extract_zip_member, read_zip_member
from elmo.formats.checked_reads import all_finite, load_checked_state, read_whole
from elmo.modules.bilm import BiLM, build_bilm
from elmo.runtime.text_files import parse_json
from elmo.text.manylangs_vocab import CHAR_SPECIALS, WORD_SPECIALS, ManyLangsLexicon, parse_dictionary

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
    bilm = build_bilm(config, device="meta")  # shapes only: the checked tensors become the parameters
    state = _token_embedder_state(root, config.manylangs, lexicon) | _encoder_state(root, config.lstm)
    load_checked_state(bilm, state, _name(root), assign=True)
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
    try:  # every value checked under its own key, before the dictionaries are read or anything is built
        char_dim = check_integer(embedder.get("char_dim", 0), "token_embedder.char_dim", 0, MAX_EMBEDDING_DIM)
        word_dim = check_integer(embedder.get("word_dim", 0), "token_embedder.word_dim", 0, MAX_EMBEDDING_DIM)
        width = check_integer(embedder.get("max_characters_per_token", 50), "token_embedder.max_characters_per_token",
                              3, MAX_CHARACTERS_PER_TOKEN)
        filters = check_filters(embedder.get("filters"), "token_embedder.filters", width) if char_dim else []
        n_highway = check_integer(embedder.get("n_highway", 0), "token_embedder.n_highway", 0, MAX_HIGHWAY)
        activation = check_activation(embedder.get("activation", "relu"), "token_embedder.activation")
        for key in ("dim", "projection_dim", "n_layers"):
            if key not in encoder:
                raise ConfigError(f"missing required key 'encoder.{key}'")
        dim = check_integer(encoder["dim"], "encoder.dim", 1, MAX_LSTM_DIM)
        projection_dim = check_integer(encoder["projection_dim"], "encoder.projection_dim", 1, MAX_LSTM_DIM)
        n_layers = check_integer(encoder["n_layers"], "encoder.n_layers", 1, MAX_LSTM_LAYERS)
        cell_clip = _clip(encoder.get("cell_clip"), "encoder.cell_clip")
        proj_clip = _clip(encoder.get("proj_clip"), "encoder.proj_clip")
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    chars = _read_dictionary(root, CHAR_DIC, CHAR_SPECIALS) if char_dim > 0 else None
    words = _read_dictionary(root, WORD_DIC, WORD_SPECIALS) if word_dim > 0 else None
    try:
        token_config = ManyLangsTokenConfig(
            filters=filters, char_dim=char_dim, word_dim=word_dim, n_highway=n_highway, activation=activation,
            max_characters_per_token=width, n_characters=len(chars or ()), n_words=len(words or ()),
        )
        lstm = LSTMConfig(
            dim=dim, projection_dim=projection_dim, n_layers=n_layers, cell_clip=cell_clip, proj_clip=proj_clip,
            use_skip_connections=True,  # the original's ElmobiLm adds every layer's input from the second on
        )
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
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


def _clip(value: Any, key: str) -> float | None:
    """The original clips only when the value is truthy (``if self.memory_cell_clip_value:``): 0, false and null
    mean no clip; anything else must be a finite number > 0 (NaN is truthy too, and would give NaN vectors)."""
    if value is None or value is False or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                           and value == 0):
        return None
    return check_clip(value, key)


def _section(config: Any, key: str, source: str) -> dict:
    if not isinstance(config, dict) or not isinstance(config.get(key), dict):
        raise ConfigError(f"{source}: missing the '{key}' object")
    return config[key]


def _read_dictionary(root: ModelRoot, name: str, specials: tuple[str, ...]) -> dict[str, int]:
    path = root / name
    if not path.is_file():
        raise ConfigError(f"{_name(path)}: no such file (the model config uses it)")
    lexicon = parse_dictionary(_read_bytes(path), _name(path))
    absent = ManyLangsLexicon.missing(lexicon, specials)
    if absent is not None:
        raise ConfigError(f"{_name(path)}: no entry for {absent!r}, which the original requires")
    return lexicon


def _read_json(path: ModelRoot) -> Any:
    if not path.is_file():
        raise ConfigError(f"{_name(path)}: no such file")
    return parse_json(_read_bytes(path), _name(path), ConfigError)


# ------------------------------------------------------------------ the two state dicts


def _read_bytes(path: ModelRoot) -> bytes:
    """A (small) file's bytes; a zip member within the archive caps."""
    if isinstance(path, zipfile.Path):
        return read_zip_member(path.root, path.at, _name(path))
    return read_whole(path)  # type: ignore[arg-type]


@contextmanager
def _local_file(path: ModelRoot) -> Iterator[Path]:
    """The file on disk: ``path`` itself, or a zip member streamed (within the caps) into a temporary file that is
    removed afterwards: ``torch.load`` seeks, which a deflated member would re-inflate from its start for."""
    if not isinstance(path, zipfile.Path):
        yield Path(path)  # type: ignore[arg-type]
        return
    with tempfile.TemporaryDirectory(prefix="elmo-zip-") as tmp:
        yield extract_zip_member(path.root, path.at, _name(path), Path(tmp) / posixpath.basename(path.at))


def _check_torch_file(path: Path, source: str) -> None:
    """What ``torch.load`` will allocate is bounded by the file's bytes: a zip-format file (torch >= 1.6) must
    store its records uncompressed, as ``torch.save`` writes them (torch would inflate a deflated one whole). A file
    in the older format holds its storages as they are."""
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            return
    try:
        with zipfile.ZipFile(path) as records:
            infos = records.infolist()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise WeightFileError(f"{source}: not a readable weights-only torch file ({e})") from None
    check_member_count(len(infos), source)
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise WeightFileError(f"{source}: record '{info.filename}' is compressed; torch.save stores its records "
                                  "as they are (not a file torch.save wrote)")


def _load_pickle(root: ModelRoot, name: str) -> tuple[dict[str, torch.Tensor], str]:
    """A torch.save'd state dict, unpickled with ``weights_only=True`` (tensors and plain containers only)."""
    path = root / name
    source = _name(path)
    if not path.is_file():
        raise WeightFileError(f"{source}: no such file")
    with _local_file(path) as local:
        _check_torch_file(local, source)
        try:
            state = torch.load(local, weights_only=True, map_location="cpu")
        except Exception as e:  # noqa: BLE001 - whatever the unpickler or the zip reader raises, it is this file's
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
        if not all_finite(value):
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
    renamed, owned = {}, set()
    for key, value in state.items():
        key = key.replace("word_emb_layer.embedding.", "word_embedding.").replace(
            "char_emb_layer.embedding.", "char_embedding.").replace("highways._layers.", "highway.")
        renamed[f"token_encoder.{key}"] = _own(value, owned)
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
    owned: set[int] = set()

    def tf_order(x: torch.Tensor) -> torch.Tensor:
        """PyTorch's gate blocks i, f, g, o -> TF's i, j (= g), f, o, in place (the f and g blocks swapped
        through one block's copy), on a tensor that owns its storage (else on a copy)."""
        x = _own(x, owned)
        f, g = x[cells : 2 * cells], x[2 * cells : 3 * cells]
        held = f.clone()
        f.copy_(g)
        g.copy_(held)
        return x

    out = {}
    for direction in ("forward", "backward"):
        for layer in range(lstm.n_layers):
            src, dst = f"{direction}_layer_{layer}.", f"{direction}_lstm.layers.{layer}."
            out[dst + "input_linearity.weight"] = tf_order(state.pop(src + "input_linearity.weight"))
            out[dst + "input_linearity.bias"] = tf_order(state.pop(src + "state_linearity.bias"))
            out[dst + "state_linearity.weight"] = tf_order(state.pop(src + "state_linearity.weight"))
            out[dst + "projection.weight"] = _own(state.pop(src + "state_projection.weight"), owned)
    return out


def _own(x: torch.Tensor, owned: set[int]) -> torch.Tensor:
    """``x``, or a copy of it where it shares its storage (a pickle may hold views of one storage): a parameter
    changed in place must not change another."""
    storage = x.untyped_storage()
    whole = x.is_contiguous() and x.storage_offset() == 0 and storage.nbytes() == x.numel() * x.element_size()
    if not whole or storage.data_ptr() in owned:
        x = x.clone(memory_format=torch.contiguous_format)
    owned.add(x.untyped_storage().data_ptr())
    return x


def _name(path: Any) -> str:
    """A path for messages: the file path, or archive.zip/inner/path for a zip member."""
    root = getattr(path, "root", None)
    if root is not None and hasattr(path, "at"):  # zipfile.Path
        return posixpath.join(str(getattr(root, "filename", None) or "<zip>"), path.at)
    return str(path)
