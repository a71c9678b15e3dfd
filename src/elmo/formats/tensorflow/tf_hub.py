"""TF-Hub ELMo modules (google/elmo/2 and /3, DeepPavlov's Russian ELMo) -> a :class:`BiLM`, without TensorFlow.

A hub module is a folder (``tfhub_module.pb`` for the TF1 hub format, ``saved_model.pb``, ``variables/``) or its
``.tar.gz``/``.tgz`` as the hub and DeepPavlov serve it. Its variables are a TensorFlow tensor bundle
(:mod:`elmo.formats.tensorflow.tf_bundle`) holding bilm-tf's graph variables, so the weights map one to one onto the
HDF5 layout (:mod:`elmo.formats.hdf5`) under other names:

================================================================ ===========================================
hub variable                                                     HDF5 dataset (same layout)
================================================================ ===========================================
``bilm/char_embed`` [262, E], row 0 the padding row              ``char_embed`` [261, E] (our parameter as is)
``bilm/CNN/W_cnn_i``, ``b_cnn_i``, ``bilm/CNN_high_k/*``,        the same name without ``bilm/``
``bilm/CNN_proj/*``
``bilm/RNN_d/RNN/MultiRNNCell/Celll/rnn/lstm_cell/kernel``       ``RNN_d/RNN/MultiRNNCell/Celll/LSTMCell/W_0``
``.../rnn/lstm_cell/bias``                                       ``.../LSTMCell/B``
``.../rnn/lstm_cell/projection/kernel``                          ``.../LSTMCell/W_P_0``
================================================================ ===========================================

Beside them: the module's trained mix (google: ``aggregation/weights`` and ``aggregation/scaling``; DeepPavlov's
``elmo2tfhub.py``: ``elmo_output_ELMo_W`` and ``elmo_output_ELMo_gamma``, with or without ``aggregation/``), which
becomes ``bilm.default_mix`` (:class:`TrainedMix`; :class:`elmo.modules.elmo.Elmo` starts its mixes from it), and
bilm-tf's LSTM state buffers (``bilm/Variable``, ``bilm/Variable_1``, ...: the stateful graph's carried states, not
weights), which are skipped.

Every size comes from the variables' shapes, checked against each other (the first inconsistent tensor is named)
and against the limits of :mod:`elmo.config`; the biLM is built on the meta device, every variable it needs is held
to the bytes its data shard has, and only then are they read, block by block, into the parameters. The activation,
clips, residual switch and word length are graph ops only: they come from an ``options.json`` beside the module,
else from the ops of ``saved_model.pb`` that compute them (:mod:`elmo.formats.tensorflow.graph_def`), else from
bilm-tf's published defaults, with a warning that names them; the load's log line says which value came from where.

An archive is read in one pass over its compressed stream, within the caps of :mod:`elmo.formats.archive_limits`
(inflated bytes, compression ratio, number of entries); only the module's own files are written, into a temporary
folder that is removed afterwards.
"""

from __future__ import annotations

import logging
import os
import re
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from elmo.config import (
    MAX_CHARACTERS_PER_TOKEN,
    MAX_EMBEDDING_DIM,
    MAX_LSTM_DIM,
    N_CHARACTERS_INFERENCE,
    BiLMConfig,
    CharCNNConfig,
    LSTMConfig,
    check_filters,
    check_integer,
)
from elmo.errors import ConfigError, ElmoError, WeightFileError
from elmo.formats.archive_limits import COPY_CHUNK, CappedStream, check_member_count
from elmo.formats.checked_reads import fill_by_module, read_json, read_whole
from elmo.formats.hdf5 import WeightEntry, cell_order, entry_params, expected_dataset_shape, weight_entries
from elmo.formats.tensorflow.bilm_tf_checkpoint import describe_settings
from elmo.formats.tensorflow.graph_def import GraphFacts, graph_facts, read_graphs
from elmo.formats.tensorflow.tf_bundle import TensorBundle
from elmo.modules.bilm import BiLM, build_bilm
from elmo.modules.scalar_mix import TrainedMix

log = logging.getLogger(__name__)

HUB_MARKER = "tfhub_module.pb"
SAVED_MODEL = "saved_model.pb"
VARIABLES = "variables/variables"
OPTIONS = "options.json"
TAR_SUFFIXES = (".tar.gz", ".tgz")
_EXTRACTED = (HUB_MARKER, SAVED_MODEL, OPTIONS)
"""The files of a module archive that are extracted (with ``variables/*``); assets and the rest stay packed."""

PUBLISHED_DEFAULTS = {"activation": "relu", "cell_clip": 3.0, "proj_clip": 3.0, "use_skip_connections": True,
                      "max_characters_per_token": 50}
"""bilm-tf's published models (google's modules were made from the 1B Word Benchmark model): the fallback when
neither an options.json nor the graph says."""

_STATE_BUFFER = re.compile(r"^bilm/Variable(?:_\d+)?$")
_MIXES = (("aggregation/weights", "aggregation/scaling"),
          ("aggregation/elmo_output_ELMo_W", "aggregation/elmo_output_ELMo_gamma"),
          ("elmo_output_ELMo_W", "elmo_output_ELMo_gamma"))
_CELL = "bilm/RNN_{d}/RNN/MultiRNNCell/Cell{l}/rnn/lstm_cell/"



def is_hub_module(path: str | os.PathLike) -> bool:
    """A folder with ``tfhub_module.pb`` or ``saved_model.pb`` and a ``variables/variables.index``."""
    path = Path(path)
    return path.is_dir() and ((path / HUB_MARKER).is_file() or (path / SAVED_MODEL).is_file()) \
        and (path / (VARIABLES + ".index")).is_file()


def is_hub_archive(path: str | os.PathLike) -> bool:
    """A file named ``*.tar.gz`` or ``*.tgz`` (how the hub and DeepPavlov serve modules)."""
    path = Path(path)
    return path.is_file() and path.name.lower().endswith(TAR_SUFFIXES)


def load_hub_module(path: str | os.PathLike) -> BiLM:
    """The biLM of a hub module folder or archive, on the CPU, in eval mode, with ``default_mix`` set (None when
    the module holds no mix)."""
    with module_directory(path) as directory:
        variables = _HubVariables(directory, str(path))
        config, sources = _config(directory, variables, str(path))
        bilm = build_bilm(config, device="meta")  # shapes only: the checked variables become the parameters
        plan = _plan(bilm, variables)  # every variable's shape and bytes, before any is read
        variables.check_all_used()
        fill_by_module(bilm, (_params(bilm, variables, entry, name) for entry, name in plan), f"{path} (variables)")
        bilm.default_mix = _trained_mix(variables, config.num_layers)
    mix = f"; its trained mix {bilm.default_mix.source}" if bilm.default_mix is not None else ""
    log.info("%s: TF-Hub module, %d layers of %d cells projected to %d; %s%s", path, config.lstm.n_layers,
             config.lstm.dim, config.lstm.projection_dim, describe_settings(config, sources), mix)
    return bilm.eval()


def read_hub_config(path: str | os.PathLike) -> BiLMConfig:
    """The architecture of a hub module (from its variables' shapes and its graph); no tensor is read (nor, from
    an archive, extracted)."""
    with module_directory(path, data=False) as directory:
        return _config(directory, _HubVariables(directory, str(path)), str(path))[0]


# ------------------------------------------------------------------ the module's folder


@contextmanager
def module_directory(path: str | os.PathLike, data: bool = True) -> Iterator[Path]:
    """The module's folder: ``path`` itself, or the module extracted from an archive into a temporary folder that
    is removed afterwards (whatever happens); ``data=False`` leaves the variables' data shards packed."""
    path = Path(path)
    if not is_hub_archive(path):
        if not is_hub_module(path):
            raise WeightFileError(f"{path}: not a TF-Hub module ({HUB_MARKER} or {SAVED_MODEL}, and {VARIABLES}.index)")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="elmo-hub-") as tmp:
        try:
            yield _extract(path, Path(tmp), data)
        except ElmoError as e:  # a file of the module: named as the member of the archive, not the temporary copy
            members = re.compile(re.escape(tmp) + r"/([^\s:'(),]+)")
            e.args = (members.sub(lambda m: f"{m.group(1)} in {path}", str(e)),)
            raise


def _extract(archive: Path, target: Path, data: bool = True) -> Path:
    """Extract the module's files into ``target``, refusing (before writing anything of it) any member whose path
    leaves the archive's folder and any link; the module may sit at the top or in one folder. The stream is read
    within the caps of :mod:`elmo.formats.archive_limits`, so junk members cost neither memory nor disk."""
    count = 0
    try:
        with CappedStream(archive) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:  # one pass
            while (member := tar.next()) is not None:
                count += 1
                check_member_count(count, archive)
                tar.members.clear()  # stream mode keeps every member read; we need none of them back
                relative = _member_path(archive, member)
                if relative is None or not _wanted(relative, data):
                    continue
                destination = target.joinpath(*relative.parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                with source, open(destination, "wb") as out:
                    while chunk := source.read(COPY_CHUNK):
                        out.write(chunk)
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise WeightFileError(f"{archive}: not a readable tar archive ({e})") from e
    except OSError as e:
        raise WeightFileError(f"{archive}: cannot be extracted ({e})") from e
    roots = [d for d in (target, *sorted(p for p in target.iterdir() if p.is_dir())) if is_hub_module(d)]
    if len(roots) != 1:
        where = "several folders" if roots else "neither its top nor one folder"
        raise WeightFileError(f"{archive}: {where} hold(s) a TF-Hub module ({HUB_MARKER} or {SAVED_MODEL} with "
                              f"{VARIABLES}.index)")
    return roots[0]


def _member_path(archive: Path, member: tarfile.TarInfo) -> PurePosixPath | None:
    """The member's path inside the archive's folder (None for folders); a path that leaves it, or a link or
    device, is one error line."""
    name = member.name
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if name.startswith(("/", "\\")) or ".." in parts or any(":" in p or "\\" in p for p in parts):
        raise WeightFileError(f"{archive}: member '{name}' points outside the archive's folder; refusing to extract "
                              "anything (a module archive holds relative paths only)")
    if member.isdir():
        return None
    if not member.isfile():
        raise WeightFileError(f"{archive}: member '{name}' is a link or a special file; refusing to extract anything "
                              "(a module archive holds plain files only)")
    return PurePosixPath(*parts) if parts else None


def _wanted(relative: PurePosixPath, data: bool = True) -> bool:
    if relative.parent.name == "variables" and len(relative.parts) <= 3:
        return data or relative.name.endswith(".index")
    return relative.name in _EXTRACTED and len(relative.parts) <= 2


# ------------------------------------------------------------------ variables


class _HubVariables:
    """The module's tensor bundle, with names relative to the scope that holds ``bilm/`` (hub exports may prefix
    them), and a record of which were used."""

    def __init__(self, directory: Path, label: str) -> None:
        self.label = label
        self.bundle = TensorBundle(str(directory / VARIABLES))
        names = list(self.bundle.names())
        anchor = next((n for n in names if n == "bilm/char_embed" or n.endswith("/bilm/char_embed")), None)
        if anchor is None:
            if any(n.endswith("bilm/embedding") for n in names):
                raise WeightFileError(f"{label}: a token-input ELMo module (bilm/embedding, no bilm/char_embed); only "
                                      "character-input modules are supported")
            shown = ", ".join(sorted(names)[:5])
            raise WeightFileError(f"{label}: no variable bilm/char_embed: not an ELMo hub module (its variables: "
                                  f"{shown}{', ...' if len(names) > 5 else ''})")
        self.prefix = anchor[: -len("bilm/char_embed")]
        self.names = {n[len(self.prefix):]: n for n in names if n.startswith(self.prefix)}
        self.used: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self.bundle.shape(self.names[name]))

    def read(self, name: str) -> np.ndarray:
        """The tensor as float32 (a half or bfloat16 module is widened)."""
        self.used.add(name)
        self.check(name)
        array = np.asarray(self.bundle.read(self.names[name]))
        if array.dtype.kind in "biuSUO":
            raise WeightFileError(f"{self.label}: variable '{self.names[name]}' has dtype {array.dtype}, expected a "
                                  "float dtype")
        return array.astype(np.float32)

    def check(self, name: str) -> None:
        """The variable's bytes are in the data shards (before anything is allocated for it); it is used."""
        self.used.add(name)
        self.bundle.check(self.names[name])

    def blocks(self, name: str):
        """Its rows as checked float32 blocks (:data:`elmo.formats.hdf5.RowBlocks`)."""
        return lambda starts, stop: self.bundle.float_row_blocks(self.names[name], starts, stop, self.label)

    def expect(self, name: str, shape: tuple[int, ...], why: str) -> None:
        if name not in self:
            raise WeightFileError(f"{self.label}: missing variable '{self.prefix}{name}' ({why})")
        got = self.shape(name)
        if got != shape:
            raise WeightFileError(f"{self.label}: variable '{self.prefix}{name}' has shape {got}, expected {shape} "
                                  f"({why})")

    def check_all_used(self) -> None:
        """Every variable under ``bilm/`` went into the model (or is a state buffer): a module of another shape
        than the one inferred is one line naming the first variable left over."""
        left = sorted(n for n in self.names if n.startswith("bilm/") and n not in self.used
                      and not _STATE_BUFFER.match(n))
        if left:
            raise WeightFileError(f"{self.label}: unexpected variable '{self.prefix}{left[0]}' for the architecture "
                                  f"its other variables give ({len(left)} left over in all)")


@dataclass
class _Shapes:
    filters: list[tuple[int, int]]
    embedding_dim: int
    n_highway: int
    projection_dim: int
    dim: int
    n_layers: int


def _infer_shapes(v: _HubVariables) -> _Shapes:
    """Every size of the biLM from the variables' shapes; the first tensor that disagrees is named."""
    embed = v.shape("bilm/char_embed")
    rows, embedding_dim = (embed + (0, 0))[:2]
    if len(embed) != 2 or rows != N_CHARACTERS_INFERENCE:
        raise WeightFileError(f"{v.label}: variable '{v.prefix}bilm/char_embed' has shape {embed}, "
                              f"expected ({N_CHARACTERS_INFERENCE}, E) (the 261 byte ids and the padding row 0)")
    filters = []
    while f"bilm/CNN/W_cnn_{len(filters)}" in v:
        i = len(filters)
        shape = v.shape(f"bilm/CNN/W_cnn_{i}")
        if len(shape) != 4 or shape[0] != 1 or shape[2] != embedding_dim:
            raise WeightFileError(f"{v.label}: variable '{v.prefix}bilm/CNN/W_cnn_{i}' has shape {shape}, expected "
                                  f"(1, width, {embedding_dim}, n) (char_embed's width is {embedding_dim})")
        filters.append((shape[1], shape[3]))
        v.expect(f"bilm/CNN/b_cnn_{i}", (shape[3],), f"the bias of W_cnn_{i}")
    if not filters:
        raise WeightFileError(f"{v.label}: missing variable '{v.prefix}bilm/CNN/W_cnn_0' (the char CNN)")
    _within_limits(v.label, lambda: (check_integer(embedding_dim, "char_cnn.embedding.dim", 1, MAX_EMBEDDING_DIM),
                                     check_filters(filters, "char_cnn.filters", MAX_CHARACTERS_PER_TOKEN)))
    n_filters = sum(n for _, n in filters)
    n_highway = 0
    while f"bilm/CNN_high_{n_highway}/W_carry" in v:
        scope = f"bilm/CNN_high_{n_highway}/"
        why = f"highway layers act on the {n_filters} filters"
        for name in ("W_carry", "W_transform"):
            v.expect(scope + name, (n_filters, n_filters), why)
        for name in ("b_carry", "b_transform"):
            v.expect(scope + name, (n_filters,), why)
        n_highway += 1
    if "bilm/CNN_proj/W_proj" in v:
        shape = v.shape("bilm/CNN_proj/W_proj")
        if len(shape) != 2 or shape[0] != n_filters:
            raise WeightFileError(f"{v.label}: variable '{v.prefix}bilm/CNN_proj/W_proj' has shape {shape}, expected "
                                  f"({n_filters}, P) (the CNN has {n_filters} filters)")
        projection_dim = shape[1]
        v.expect("bilm/CNN_proj/b_proj", (projection_dim,), "the bias of W_proj")
    else:
        projection_dim = n_filters  # bilm-tf projects only when the filters are not already P wide
    cell0 = _CELL.format(d=0, l=0)
    if cell0 + "kernel" not in v:
        raise WeightFileError(f"{v.label}: missing variable '{v.prefix}{cell0}kernel' (the first LSTM layer)")
    kernel = v.shape(cell0 + "kernel")
    if len(kernel) != 2 or kernel[1] % 4:
        raise WeightFileError(f"{v.label}: variable '{v.prefix}{cell0}kernel' has shape {kernel}, expected "
                              "(input + output, 4 * cells)")
    dim = kernel[1] // 4
    _within_limits(v.label, lambda: check_integer(dim, "lstm.dim", 1, MAX_LSTM_DIM))
    if cell0 + "projection/kernel" not in v and dim != projection_dim:
        raise WeightFileError(f"{v.label}: variable '{v.prefix}{cell0}kernel' has {dim} cells and no projection, "
                              f"but the token layer is {projection_dim} wide")
    n_layers = 0
    while _CELL.format(d=0, l=n_layers) + "kernel" in v:
        n_layers += 1
    for d in (0, 1):
        for layer in range(n_layers):
            cell = _CELL.format(d=d, l=layer)
            v.expect(cell + "kernel", (2 * projection_dim, 4 * dim),
                     f"input {projection_dim} + output {projection_dim}, 4 gates of {dim} cells")
            v.expect(cell + "bias", (4 * dim,), f"4 gates of {dim} cells")
            if projection_dim < dim:
                v.expect(cell + "projection/kernel", (dim, projection_dim),
                         f"{dim} cells projected to {projection_dim}")
    return _Shapes(filters, embedding_dim, n_highway, projection_dim, dim, n_layers)


def _within_limits(label: str, check) -> None:
    """The sizes read so far within the limits of :mod:`elmo.config`, before more variables are held to them."""
    try:
        check()
    except ConfigError as e:
        raise ConfigError(f"{label}: {e} (as its variables' shapes give it)") from None


def _config(directory: Path, v: _HubVariables, label: str) -> tuple[BiLMConfig, dict[str, str]]:
    """The architecture, and where each graph-only setting came from (options.json, graph, default)."""
    shapes = _infer_shapes(v)
    settings, sources = _graph_settings(directory, shapes, label)
    try:
        config = BiLMConfig(
            lstm=LSTMConfig(dim=shapes.dim, projection_dim=shapes.projection_dim, n_layers=shapes.n_layers,
                            cell_clip=settings["cell_clip"], proj_clip=settings["proj_clip"],
                            use_skip_connections=bool(settings["use_skip_connections"])),
            char_cnn=CharCNNConfig(filters=shapes.filters, embedding_dim=shapes.embedding_dim,
                                   n_highway=shapes.n_highway, activation=settings["activation"],
                                   max_characters_per_token=int(settings["max_characters_per_token"])),
        )
    except ConfigError as e:
        raise ConfigError(f"{label}: {e} (as its variables' shapes and its graph give it)") from e
    return config, sources


def _graph_settings(directory: Path, shapes: _Shapes, label: str) -> tuple[dict, dict[str, str]]:
    """activation, clips, residual switch and word length, and where each came from: options.json beside the
    module, else the graph's ops that compute it, else the published default (named in a warning)."""
    options_file = directory / OPTIONS
    if options_file.is_file():
        return _options_settings(options_file, shapes, label), dict.fromkeys(PUBLISHED_DEFAULTS, OPTIONS)
    facts = GraphFacts()
    saved_model = directory / SAVED_MODEL
    if saved_model.is_file():
        facts = graph_facts(read_graphs(read_whole(saved_model), f"{label} ({SAVED_MODEL})"),
                            [w for w, _ in shapes.filters])
    settings: dict = {}
    if facts.activation is not None:
        settings["activation"] = facts.activation
    if facts.max_characters_per_token is not None:
        settings["max_characters_per_token"] = facts.max_characters_per_token
    if facts.cell_seen:  # the cell's computation is there: a clip not found on it is no clip
        settings["cell_clip"] = facts.cell_clip
    if shapes.projection_dim == shapes.dim:
        settings["proj_clip"] = None  # nothing to clip: no projection
    elif facts.projection_seen:
        settings["proj_clip"] = facts.proj_clip
    if facts.residual is not None:
        settings["use_skip_connections"] = facts.residual
    elif shapes.n_layers == 1:
        settings["use_skip_connections"] = False  # the residual starts at the second layer: none here
    sources = dict.fromkeys(settings, "graph")
    defaulted = [key for key in PUBLISHED_DEFAULTS if key not in settings]
    for key in defaulted:
        settings[key] = PUBLISHED_DEFAULTS[key]
        sources[key] = "default"
    if defaulted:
        log.warning("%s: the module's graph does not show %s; using bilm-tf's published %s (put the model's "
                    "options.json beside the module to set them)", label, ", ".join(defaulted),
                    ", ".join(f"{key}={PUBLISHED_DEFAULTS[key]}" for key in defaulted))
    return settings, sources


def _options_settings(options_file: Path, shapes: _Shapes, label: str) -> dict:
    """The graph-only settings from options.json, after checking that it describes these variables."""
    config = BiLMConfig.from_options(read_json(options_file), source=str(options_file))
    if config.char_cnn is None:
        raise ConfigError(f"{options_file}: no 'char_cnn' block, but {label} holds a character CNN")
    cnn, lstm = config.char_cnn, config.lstm
    for key, said, found in (("char_cnn.filters", [list(f) for f in cnn.filters], [list(f) for f in shapes.filters]),
                             ("char_cnn.embedding.dim", cnn.embedding_dim, shapes.embedding_dim),
                             ("char_cnn.n_highway", cnn.n_highway, shapes.n_highway),
                             ("lstm.dim", lstm.dim, shapes.dim), ("lstm.projection_dim", lstm.projection_dim,
                                                                  shapes.projection_dim),
                             ("lstm.n_layers", lstm.n_layers, shapes.n_layers)):
        if said != found:
            raise ConfigError(f"{options_file}: {key} is {said}, but the module's variables give {found} (this "
                              "options.json is not the module's)")
    return {"activation": cnn.activation, "cell_clip": lstm.cell_clip, "proj_clip": lstm.proj_clip,
            "use_skip_connections": lstm.use_skip_connections,
            "max_characters_per_token": cnn.max_characters_per_token}


# ------------------------------------------------------------------ weights


def hub_variable_name(dataset: str) -> str:
    """The hub variable of an HDF5 dataset (:data:`elmo.formats.hdf5.WEIGHT_MAP`'s names)."""
    name = "bilm/" + dataset
    for hdf5, hub in (("LSTMCell/W_0", "rnn/lstm_cell/kernel"), ("LSTMCell/B", "rnn/lstm_cell/bias"),
                      ("LSTMCell/W_P_0", "rnn/lstm_cell/projection/kernel")):
        if name.endswith(hdf5):
            return name[: -len(hdf5)] + hub
    return name


def _plan(bilm: BiLM, v: _HubVariables) -> list[tuple[WeightEntry, str]]:
    """(map entry, hub variable) for every parameter, one module's together, each variable's shape and its bytes
    in the data shards checked: nothing is read."""
    state = bilm.state_dict()
    plan = []
    for entry in sorted(weight_entries(bilm), key=cell_order):
        name = hub_variable_name(entry.dataset)
        want = tuple(state[entry.params[0]].shape) if entry.dataset == "char_embed" else \
            expected_dataset_shape(entry, state)  # the hub's char_embed has the padding row: our layout already
        v.expect(name, want, "the architecture its other variables give")
        v.check(name)
        plan.append((entry, name))
    return plan


def _params(bilm: BiLM, v: _HubVariables, entry: WeightEntry, name: str) -> dict[str, np.ndarray]:
    state = bilm.state_dict()
    if entry.dataset == "char_embed":
        entry = WeightEntry(entry.dataset, entry.params, "same")
    shapes = [tuple(state[p].shape) for p in entry.params]
    return entry_params(entry, shapes, v.shape(name)[0], v.blocks(name))


def _trained_mix(v: _HubVariables, num_layers: int) -> TrainedMix | None:
    for weights_name, gamma_name in _MIXES:
        if weights_name not in v:
            continue
        v.expect(weights_name, (num_layers,), f"one weight per layer: {num_layers} layers")
        if gamma_name not in v:
            raise WeightFileError(f"{v.label}: variable '{v.prefix}{weights_name}' without its scale "
                                  f"'{v.prefix}{gamma_name}'")
        if v.shape(gamma_name) not in ((), (1,)):
            raise WeightFileError(f"{v.label}: variable '{v.prefix}{gamma_name}' has shape {v.shape(gamma_name)}, "
                                  "expected a scalar")
        weights, gamma = v.read(weights_name), v.read(gamma_name)
        if not (np.isfinite(weights).all() and np.isfinite(gamma).all()):
            raise WeightFileError(f"{v.label}: the mix '{v.prefix}{weights_name}' holds NaN or Inf values")
        return TrainedMix(tuple(float(w) for w in weights), float(gamma.reshape(-1)[0]),
                          f"{v.prefix}{weights_name} + {v.prefix}{gamma_name}")
    return None
