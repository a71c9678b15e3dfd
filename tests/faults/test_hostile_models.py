"""Hostile model files, for every family: files of a few bytes that declare huge sizes (cells, layers, filters,
vocabularies, characters per token, softmax rows), NaN, negative and wrongly typed settings, overlapping slices, a
checkpoint outside its folder, archive bombs. Each must give one ``elmo: error:`` line and a non-zero exit, no
traceback and no output, at a peak memory of no more than ``RSS_ALLOWANCE`` over a process that refuses nothing.

Every case runs ``elmo embed`` (``elmo finetune`` for the softmax) in a fresh process: most of them in a child forked,
one at a time, from one process that has imported the ``elmo`` command (so torch is imported once), whose own peak is
read with ``wait4``; a representative case of each kind also runs as ``python -m elmo`` on its own. The files are made
cheaply: nothing here writes more than a few megabytes (the bombs are compressed streams of one block repeated).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import struct
import subprocess
import sys
import tarfile
import textwrap
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo.formats.hdf5 import bilm_to_datasets
from elmo.formats.model_files import save_bilm
from elmo.formats.tensorflow.tf_hub import hub_variable_name
from tests.conftest import random_bilm, tiny_config
from tests.faults.conftest import env
from tests.formats.bilm_tf_files import bilm_tf_options, write_bundle_dir
from tests.formats.manylangs_files import write_manylangs_model
from tests.formats.tf_bundle_files import write_hub_module

RSS_ALLOWANCE = 96 << 20
"""Peak RSS of a refused model over the peak of the same process shape refusing nothing (a child that only starts):
96 MiB, whatever the files declare (gigabytes, in every case below). Measured: docs/reliability.md (in a venv made
minutes before, three cases measure 64-69 MB where a long-used venv with the same packages measures 19-21)."""

Case = tuple[Callable[[Path], Path], str, list[str]]
"""(make the model under a folder -> the path to give --model, the command, fragments of the one error line)."""

CONFIG = tiny_config()  # C 12, P 8, 2 layers, filters (1, 4) (2, 6) (3, 8), E 5, 1 highway


def _options(**changes) -> dict:
    """The tiny model's options.json, with ``changes`` ("lstm.dim": value) made."""
    options = CONFIG.to_options()
    for key, value in changes.items():
        *path, leaf = key.split(".")
        node = options
        for part in path:
            node = node[part]
        node[leaf] = value
    return options


def _write_json(path: Path, data, text: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else json.dumps(data), encoding="utf-8")


# ------------------------------------------------------------------ options.json + weights.hdf5


def _original(options_text: str | None = None, with_weights: bool = True, **changes) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        model = root / "model"
        if with_weights:
            save_bilm(random_bilm(CONFIG), model)
        _write_json(model / "options.json", _options(**changes), options_text)
        return model

    return make


def _unwritten_hdf5(dim: int, vocab: int | None = None) -> Callable[[Path], Path]:
    """options.json of ``dim`` cells (within the limits) over a weights.hdf5 whose datasets have the shapes the
    options give but were never written: HDF5 would hand back zeros for all of it, from a file of a few KB."""

    def make(root: Path) -> Path:
        import dataclasses

        from elmo.config import BiLMConfig
        from elmo.modules.bilm import build_bilm

        config = BiLMConfig(lstm=dataclasses.replace(CONFIG.lstm, dim=dim), char_cnn=CONFIG.char_cnn)
        if vocab is not None:
            config = BiLMConfig(lstm=config.lstm, char_cnn=None)
        bilm = build_bilm(config, token_vocab_size=vocab, device="meta")
        model = root / "model"
        model.mkdir()
        with h5py.File(model / "weights.hdf5", "w") as f:
            from elmo.formats.hdf5 import expected_dataset_shape, weight_entries

            state = bilm.state_dict()
            for entry in weight_entries(bilm):
                f.create_dataset(entry.dataset, shape=expected_dataset_shape(entry, state), dtype="f4")
        _write_json(model / "options.json", config.to_options())
        assert (model / "weights.hdf5").stat().st_size < 100_000
        return model

    return make


# ------------------------------------------------------------------ native, HF folder


def _native(config_text: str | None = None, card: bool = False, token_vocab_size=None, **changes):
    def make(root: Path) -> Path:
        model = root / "model"
        save_bilm(random_bilm(CONFIG), model, native=True)
        meta = {"format": "elmo-native/1", "options": _options(**changes), "token_vocab_size": token_vocab_size}
        if token_vocab_size is not None:
            del meta["options"]["char_cnn"]
        _write_json(model / "config.json", meta, config_text)
        if card:
            (model / "README.md").write_text("---\nlibrary_name: elmo\n---\n# a model\n")
        return model

    return make


def _native_header_declares(root: Path) -> Path:
    """A safetensors header declaring a (16384, 16384) float32 tensor (1 GiB) in a file of a few hundred bytes."""
    model = root / "model"
    save_bilm(random_bilm(CONFIG), model, native=True)
    header = json.dumps({"token_encoder.char_embedding.weight": {"dtype": "F32", "shape": [16384, 16384],
                                                                  "data_offsets": [0, 16384 * 16384 * 4]}}).encode()
    (model / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(64))
    return model


# ------------------------------------------------------------------ NLPL zips


def _zip_member(name: str, data: bytes, crc: int, size: int, method: int, offset: int) -> tuple[bytes, bytes]:
    """(local header + data, central directory entry) of one member, written by hand (the bomb's data is a
    deflate stream made without inflating it)."""
    fields = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0x21, crc, len(data), size, len(name), 0)
    local = b"PK\x03\x04" + fields + name.encode() + data
    central = (b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<HHHII", 0, 0, 0, 0, offset)
               + name.encode())
    return local, central


def _write_zip(path: Path, members: list[tuple[str, bytes, int, int, int]]) -> Path:
    """members: (name, data as stored, crc, size, method)."""
    body, directory = b"", b""
    for name, data, crc, size, method in members:
        local, central = _zip_member(name, data, crc, size, method, len(body))
        body += local
        directory += central
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, len(members), len(members), len(directory), len(body), 0)
    path.write_bytes(body + directory + end)
    return path


def _deflated_zeros(total: int, chunk: int = 64 << 20) -> tuple[bytes, int]:
    """A raw deflate stream of ``total`` zero bytes and their CRC-32: one chunk compressed once (ending on a full
    flush, so it stands alone) and repeated, then an empty final block."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc, zeros = 0, bytes(chunk)
    for _ in range(total // chunk):
        crc = zlib.crc32(zeros, crc)
    return block * (total // chunk) + zlib.compressobj(9, zlib.DEFLATED, -15).flush(), crc


def _stored(name: str, data: bytes) -> tuple[str, bytes, int, int, int]:
    return name, data, zlib.crc32(data), len(data), 0


def _nlpl_bomb(root: Path) -> Path:
    """options.json and a model.hdf5 of 2 GiB of zeros, deflated: a 2 MB zip."""
    data, crc = _deflated_zeros(2 << 30)
    options = json.dumps(CONFIG.to_options()).encode()
    return _write_zip(root / "195.zip", [_stored("options.json", options),
                                          ("model.hdf5", data, crc, 2 << 30, 8)])


def _nlpl(options: dict, junk: int = 0) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        save_bilm(random_bilm(CONFIG), root / "files")
        members = [_stored("options.json", json.dumps(options).encode()),
                   _stored("model.hdf5", (root / "files" / "weights.hdf5").read_bytes())]
        members += [_stored(f"junk/{i:05d}", b"") for i in range(junk)]
        return _write_zip(root / "195.zip", members)

    return make


# ------------------------------------------------------------------ ELMoForManyLangs


def _manylangs(encoder: dict | None = None, embedder: dict | None = None, pickle=None) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        model = write_manylangs_model(root / "de.model")
        name = "cnn_50_100_512_4096_sample.json"
        config = json.loads((model / name).read_text())
        config["encoder"].update(encoder or {})
        config["token_embedder"].update(embedder or {})
        (model / name).write_text(json.dumps(config))
        if pickle is not None:
            pickle(model / "encoder.pkl")
        return model

    return make


def _deflate_the_records(path: Path) -> None:
    """The zip-format torch file, its records deflated (torch.save stores them: torch would inflate them whole)."""
    with zipfile.ZipFile(path) as original:
        records = [(info.filename, original.read(info)) for info in original.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as repacked:
        for name, data in records:
            repacked.writestr(name, data)


def _legacy_declaring_1e9(path: Path) -> None:
    """A pre-1.6 torch pickle whose one storage declares 10^9 floats (4 GB) over a few bytes."""
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(3, 4)}, buffer, _use_new_zipfile_serialization=False)
    data = buffer.getvalue()
    # the storage's numel (12, BININT1) and the tensor's size (3, 4) -> 10^9 and (250000000, 4) (BININT)
    pattern = re.compile(rb"(cpuq.)K\x0c(Ntq.QK\x00)K\x03(K\x04\x86)", re.DOTALL)
    assert len(pattern.findall(data)) == 1, "torch's legacy pickle layout changed"
    data = pattern.sub(lambda m: m[1] + b"J" + struct.pack("<i", 10**9) + m[2] + b"J"
                       + struct.pack("<i", 250_000_000) + m[3], data)
    data = data.replace(b"a." + struct.pack("<q", 12), b"a." + struct.pack("<q", 10**9))  # its stored numel
    path.write_bytes(data)


# ------------------------------------------------------------------ bilm-tf training directories


def _bilm_tf_files(directory: Path, seed: int = 0, **kwargs) -> None:
    write_bundle_dir(directory, random_bilm(CONFIG, seed=seed), seed=seed, **kwargs)


def _bilm_tf(**kwargs) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        _bilm_tf_files(root / "run", **kwargs)
        return root / "run"

    return make


def _bilm_tf_outside(root: Path) -> Path:
    """The folder's own checkpoint, and a ``checkpoint`` file naming another folder's."""
    _bilm_tf_files(root / "outside", step=99, seed=1)
    _bilm_tf_files(root / "run", step=1, checkpoint_name="../outside/model.ckpt-99")
    return root / "run"


def _bilm_tf_cells_over_tiny_data(root: Path) -> Path:
    """options.json and every LSTM variable declaring 16,384 cells (within the limits), over the tiny model's bytes."""
    cells, p = 16384, 8
    declare = {}
    for d in (0, 1):
        for layer in range(2):
            cell = f"lm/RNN_{d}/rnn/multi_rnn_cell/cell_{layer}/lstm_cell/"
            declare[cell + "kernel"] = {"shape": (2 * p, 4 * cells), "size": 2 * p * 4 * cells * 4}
            declare[cell + "bias"] = {"shape": (4 * cells,), "size": 4 * cells * 4}
            declare[cell + "projection/kernel"] = {"shape": (cells, p), "size": cells * p * 4}
    options = bilm_tf_options(CONFIG, 20)
    options["lstm"]["dim"] = cells
    _bilm_tf_files(root / "run", options=options, declare=declare)
    return root / "run"


def _overlapping_slices(root: Path) -> Path:
    """``lm/CNN/b_cnn_2`` (8 values) in two slices of 4 rows that overlap by 2 (6 rows covered, 8 values stored):
    counting values finds all 8, and rows 6..7 would be whatever memory held."""
    b = random_bilm(CONFIG).state_dict()["token_encoder.convolutions.2.bias"].numpy()
    slices = {"lm/CNN/b_cnn_2": [([(0, 4)], b[:4]), ([(2, 4)], b[2:6])]}
    _bilm_tf_files(root / "run", slices=slices, declare={"lm/CNN/b_cnn_2": {"shape": (8,)}})
    return root / "run"


# ------------------------------------------------------------------ TF-Hub modules


def _hub_module(directory: Path, cells: int | None = None, filters: int | None = None) -> Path:
    """The tiny model as a hub module; ``cells``/``filters``: every LSTM (first CNN) variable declares that many
    cells (filters of width 1) over the tiny model's bytes."""
    declare: dict[str, dict] = {}
    for name in bilm_to_datasets(random_bilm(CONFIG)):
        hub = hub_variable_name(name)
        if cells is not None and "/lstm_cell/" in hub:
            shape = (cells, 8) if hub.endswith("projection/kernel") else (
                (16, 4 * cells) if hub.endswith("kernel") else (4 * cells,))
            declare[hub] = {"shape": shape, "size": int(np.prod(shape)) * 4}
    if filters is not None:
        declare["bilm/CNN/W_cnn_0"] = {"shape": (1, 1, 5, filters), "size": 5 * filters * 4}
        declare["bilm/CNN/b_cnn_0"] = {"shape": (filters,), "size": filters * 4}
    return write_hub_module(directory, random_bilm(CONFIG), declare)


def _hub(**kwargs) -> Callable[[Path], Path]:
    return lambda root: _hub_module(root / "module", **kwargs)


def _hub_tar(junk_bytes: int = 0, junk_files: int = 0, **kwargs) -> Callable[[Path], Path]:
    """The module as a .tar.gz; ``junk_bytes``: a member of that many zeros under variables/ (one gzip member of 64 MiB
    of zeros, repeated: the file stays a few MB); ``junk_files``: that many empty members."""

    def make(root: Path) -> Path:
        module = _hub_module(root / "module", **kwargs)
        buffer = io.BytesIO()
        tar = tarfile.open(fileobj=buffer, mode="w")
        tar.add(module, arcname="elmo_module")
        for i in range(junk_files):
            tar.addfile(tarfile.TarInfo(f"elmo_module/assets/junk-{i:05d}"))
        if not junk_bytes:
            tar.close()
        path = root / "module.tar.gz"
        with open(path, "wb") as out:
            out.write(gzip.compress(buffer.getvalue()))
            if junk_bytes:  # the member's header, its zeros, the end of the archive
                info = tarfile.TarInfo("elmo_module/variables/junk.bin")
                info.size = junk_bytes
                out.write(gzip.compress(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")))
                chunk = 64 << 20
                block = gzip.compress(bytes(chunk), compresslevel=9)
                for _ in range(junk_bytes // chunk):
                    out.write(block)
                out.write(gzip.compress(bytes(2 * tarfile.BLOCKSIZE)))
        return path

    return make


# ------------------------------------------------------------------ the cases

EMBED, FINETUNE = "embed", "finetune"
LIMIT = "exceeds the limit"
CASES: dict[str, Case] = {
    # options.json (+ weights.hdf5)
    "original/dim-4e6-no-weights": (_original('{"lstm": {"dim": 4e6, "projection_dim": 8, "n_layers": 2}, '
                                              '"char_cnn": {"filters": [[1, 4]], "embedding": {"dim": 5}}}',
                                              with_weights=False), EMBED, ["options.json", "lstm.dim", "4000000.0"]),
    "original/dim-4000000": (_original(**{"lstm.dim": 4_000_000}), EMBED, ["options.json", "lstm.dim", LIMIT]),
    "original/layers-1e6": (_original(**{"lstm.n_layers": 1_000_000}), EMBED, ["lstm.n_layers", LIMIT]),
    "original/max-chars-1e9": (_original(**{"char_cnn.max_characters_per_token": 10**9}), EMBED,
                               ["char_cnn.max_characters_per_token", LIMIT]),
    "original/filters-1e8": (_original(**{"char_cnn.filters": [[1, 4], [2, 10**8]]}), EMBED,
                             ["char_cnn.filters[1] n_filters", LIMIT]),
    "original/cell-clip-nan": (_original(**{"lstm.cell_clip": float("nan")}), EMBED, ["lstm.cell_clip", "nan"]),
    "original/cell-clip-negative": (_original(**{"lstm.cell_clip": -1}), EMBED, ["lstm.cell_clip", "-1"]),
    "original/skip-string": (_original(**{"lstm.use_skip_connections": "false"}), EMBED,
                             ["lstm.use_skip_connections", "expected true or false", "'false'"]),
    "original/highway-1.7": (_original(**{"char_cnn.n_highway": 1.7}), EMBED, ["char_cnn.n_highway", "1.7"]),
    "original/embedding-dim-negative": (_original(**{"char_cnn.embedding.dim": -3}), EMBED,
                                        ["char_cnn.embedding.dim", "-3"]),
    "original/activation-gelu": (_original(**{"char_cnn.activation": "gelu"}), EMBED, ["char_cnn.activation"]),
    "original/unwritten-16384-cells": (_unwritten_hdf5(16384), EMBED, ["weights.hdf5", "bytes, but 0 are stored"]),
    "original/unwritten-token-table": (_unwritten_hdf5(12, vocab=9_000_000), EMBED,
                                       ["weights.hdf5", "'embedding'", "but 0 are stored"]),
    # native and Hugging Face-style folders
    "native/dim-4e6-no-weights": (_native('{"format": "elmo-native/1", "options": {"lstm": {"dim": 4e6, '
                                          '"projection_dim": 8, "n_layers": 2}}, "token_vocab_size": 10}'),
                                  EMBED, ["config.json", "lstm.dim", "4000000.0"]),
    "native/token-vocab-string": (_native(token_vocab_size="12"), EMBED, ["config.json", "token_vocab_size", "'12'"]),
    "native/header-declares-1gib": (_native_header_declares, EMBED, ["model.safetensors", "16384, 16384"]),
    "native/dim-16384-over-tiny-weights": (_native(**{"lstm.dim": 16384}), EMBED, ["model.safetensors", "shape"]),
    "hf/cell-clip-nan": (_native(card=True, **{"lstm.cell_clip": float("nan")}), EMBED, ["config.json", "cell_clip"]),
    # NLPL zips
    "nlpl/2gib-of-zeros": (_nlpl_bomb, EMBED, ["model.hdf5 in", "195.zip", "100:1"]),
    "nlpl/options-dim-4000000": (_nlpl(_options(**{"lstm.dim": 4_000_000})), EMBED,
                                 ["options.json in", "lstm.dim", LIMIT]),
    "nlpl/20000-entries": (_nlpl(_options(), junk=20_000), EMBED, ["195.zip", "more than 10,000 entries"]),
    # ELMoForManyLangs
    "manylangs/dim-4e6": (_manylangs(encoder={"dim": 4e6}), EMBED, ["cnn_50_100_512_4096_sample.json",
                                                                     "encoder.dim", "4000000.0"]),
    "manylangs/max-chars-1e9": (_manylangs(embedder={"max_characters_per_token": 10**9}), EMBED,
                                ["token_embedder.max_characters_per_token", LIMIT]),
    "manylangs/word-dim-string": (_manylangs(embedder={"word_dim": "100"}), EMBED, ["token_embedder.word_dim"]),
    "manylangs/cell-clip-nan": (_manylangs(encoder={"cell_clip": float("nan")}), EMBED, ["encoder.cell_clip"]),
    "manylangs/deflated-torch-records": (_manylangs(pickle=_deflate_the_records), EMBED,
                                         ["encoder.pkl", "compressed"]),
    "manylangs/legacy-pickle-declares-1e9": (_manylangs(pickle=_legacy_declaring_1e9), EMBED,
                                             ["encoder.pkl", "not a readable weights-only torch file"]),
    # bilm-tf training directories
    "bilm-tf/16384-cells-over-tiny-data": (_bilm_tf_cells_over_tiny_data, EMBED,
                                           ["model.ckpt-1.data-00000-of-00001", "lstm_cell/kernel", "file ends"]),
    "bilm-tf/overlapping-slices": (_overlapping_slices, EMBED, ["lm/CNN/b_cnn_2", "overlap"]),
    "bilm-tf/checkpoint-outside-its-folder": (_bilm_tf_outside, EMBED, ["checkpoint", "../outside/model.ckpt-99",
                                                                        "outside"]),
    "bilm-tf/cell-clip-nan": (_bilm_tf(options=bilm_tf_options(CONFIG, 20) | {
        "lstm": {**CONFIG.to_options()["lstm"], "cell_clip": float("nan")}}), EMBED, ["options.json", "cell_clip"]),
    "bilm-tf/softmax-1e9-rows": (_bilm_tf(declare={"lm/softmax/W": {"shape": (10**9, 8), "size": 32 * 10**9}}),
                                 FINETUNE, ["lm/softmax/W", "1,000,000,000 rows"]),
    "bilm-tf/softmax-5e6-rows-over-tiny-data": (_bilm_tf(declare={
        "lm/softmax/W": {"shape": (5 * 10**6, 8), "size": 160 * 10**6},
        "lm/softmax/b": {"shape": (5 * 10**6,), "size": 20 * 10**6}}), FINETUNE, ["lm/softmax/W", "file ends"]),
    # TF-Hub modules, folders and archives
    "hub/4000000-cells": (_hub(cells=4_000_000), EMBED, ["module", "lstm.dim", LIMIT]),
    "hub/16384-cells-over-tiny-data": (_hub(cells=16384), EMBED, ["variables.data-00000-of-00001", "file ends"]),
    "hub/filters-1e8": (_hub(filters=10**8), EMBED, ["module", "n_filters", LIMIT]),
    "hub-tar/4000000-cells": (_hub_tar(cells=4_000_000), EMBED, ["module.tar.gz", "lstm.dim", LIMIT]),
    "hub-tar/3gib-junk-member": (_hub_tar(junk_bytes=3 << 30), EMBED, ["module.tar.gz", "100:1"]),
    "hub-tar/20000-junk-files": (_hub_tar(junk_files=20_000), EMBED, ["module.tar.gz", "more than 10,000 entries"]),
}
IN_OWN_PROCESS = ["original/dim-4e6-no-weights", "nlpl/2gib-of-zeros", "hub-tar/3gib-junk-member",
                  "bilm-tf/softmax-1e9-rows"]
"""Also run as ``python -m elmo`` in a process of its own (the rest in forked children)."""


def _argv(command: str, model: Path, work: Path) -> list[str]:
    if command == FINETUNE:
        return ["finetune", "--model", str(model), "--vocab", str(work / "vocab.txt"), "--train",
                str(work / "train.txt"), "--out", str(work / "out"), "--no-progress"]
    return ["embed", str(work / "in.txt"), str(work / "out.hdf5"), "--all", "--model", str(model)]


FORKS = textwrap.dedent("""
    import json, os, sys
    from elmo.cli import main
    # what the cases import, before the forks: a child charged for compiling a module (no .pyc is written under
    # PYTHONDONTWRITEBYTECODE) would measure Python, not the refusal
    import elmo.cli.embed_commands, elmo.embedding.engines.local, elmo.embedding.file_job, elmo.formats.model_files
    import elmo.training.finetune, h5py

    def run(argv, log):
        pid = os.fork()
        if pid == 0:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            try:
                code = main(argv) if argv else 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 99
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code or 0)
        _, status, usage = os.wait4(pid, 0)
        return {"code": os.waitstatus_to_exitcode(status), "rss": usage.ru_maxrss * 1024,
                "log": open(log, encoding="utf-8", errors="replace").read()}

    cases = json.loads(sys.argv[1])
    results = {"(idle)": run([], sys.argv[2])}
    for name, argv in cases.items():
        results[name] = run(argv, sys.argv[2])
    print(json.dumps(results))
""")


OWN = textwrap.dedent("""
    import atexit, runpy, sys

    def peak():  # VmHWM: this image's own peak (ru_maxrss would keep the forking parent's, across exec)
        with open(report, "w") as out:
            out.write(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))

    report, sys.argv = sys.argv[1], ["elmo", *sys.argv[2:]]
    atexit.register(peak)
    if sys.argv[1:]:
        runpy.run_module("elmo", run_name="__main__", alter_sys=True)  # python -m elmo ARGV
    else:  # what the command imports before it reads a model, and nothing else
        import elmo.cli, elmo.cli.embed_commands, elmo.formats.model_files, h5py
""")


def _own_process(argv: list[str], work: Path) -> dict:
    """``python -m elmo ARGV`` in a process of its own: exit code, peak RSS, output."""
    result = subprocess.run([sys.executable, "-c", OWN, str(work / "peak"), *argv], env=env(), capture_output=True,
                            text=True, timeout=300)
    return {"code": result.returncode, "rss": int((work / "peak").read_text()) * 1024,
            "log": result.stdout + result.stderr}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    """Every case built, then run: name -> (result, its work folder, the error fragments)."""
    root = tmp_path_factory.mktemp("hostile")
    argvs, built = {}, {}
    for name, (make, command, fragments) in CASES.items():
        work = root / name.replace("/", "--")
        work.mkdir()
        (work / "in.txt").write_text("the cat sat\n", encoding="utf-8")
        (work / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\n", encoding="utf-8")
        (work / "train.txt").write_text("the cat sat\n" * 20, encoding="utf-8")
        argvs[name] = _argv(command, make(work), work)
        built[name] = (work, fragments)
    result = subprocess.run([sys.executable, "-c", FORKS, json.dumps(argvs), str(root / "fork.log")], env=env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    forked = json.loads(result.stdout.strip().splitlines()[-1])
    own = {name: _own_process(argvs[name], built[name][0]) for name in IN_OWN_PROCESS}
    own_idle = _own_process([], root)["rss"]
    for name, (work, _) in built.items():  # what a case left behind is checked after all of them ran
        built[name] = (work, built[name][1], [p.name for p in work.iterdir() if p.name.split(".")[0] == "out"])
    print("\npeak RSS over the idle process (MB):")
    for name in CASES:
        extra = f", own process {(own[name]['rss'] - own_idle) / 1e6:+.1f}" if name in own else ""
        print(f"  {name}: forked {(forked[name]['rss'] - forked['(idle)']['rss']) / 1e6:+.1f}{extra}")
    print(f"  (idle: forked {forked['(idle)']['rss'] / 1e6:.0f} MB, own process {own_idle / 1e6:.0f} MB)")
    return {"forked": forked, "own": own, "own_idle": own_idle, "built": built}


def _check(result: dict, fragments: list[str], idle_rss: int, leftovers: list[str]) -> None:
    log = result["log"]
    assert result["code"] == 1, log
    assert "Traceback" not in log, log
    errors = [line for line in log.splitlines() if line.startswith("elmo: ")]
    assert len(errors) == 1 and errors[0].startswith("elmo: error: "), log
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    assert leftovers == [], leftovers  # no output, no OUT.parts/, no run directory
    assert result["rss"] - idle_rss < RSS_ALLOWANCE, (result["rss"] - idle_rss) / 1e6


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_model_is_one_line_within_the_memory_bound(hostile, name):
    work, fragments, leftovers = hostile["built"][name]
    _check(hostile["forked"][name], fragments, hostile["forked"]["(idle)"]["rss"], leftovers)


@pytest.mark.parametrize("name", IN_OWN_PROCESS)
def test_in_a_process_of_its_own_too(hostile, name):
    work, fragments, leftovers = hostile["built"][name]
    _check(hostile["own"][name], fragments, hostile["own_idle"], leftovers)
