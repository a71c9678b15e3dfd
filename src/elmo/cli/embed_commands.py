"""``elmo embed``, ``convert``, ``dump-token-embeddings``, ``warm-state`` and ``demo``: commands that run a biLM."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from elmo.cli.model_args import add_model_args, load_model, model_ref
from elmo.cli.outputs import DIRECTORY, Output, add_output
from elmo.cli.setting_flags import add_flag, add_setting_flags, checked, settings_from_args, show_progress
from elmo.embedding.demo import DEMO_FILES
from elmo.embedding.embed_options import EmbedOptions, EngineOptions, OutputOptions
from elmo.embedding.selection import VectorSelection
from elmo.errors import ConfigError, UsageError
from elmo.settings import at_least, setting_of, settings_of
from elmo.shared_settings import DEVICE, FORCE, PROGRESS

if TYPE_CHECKING:
    from elmo.embedding.chunks import ChunkEngine
    from elmo.runtime.distributed import DistInfo

log = logging.getLogger("elmo")


def cmd_embed(args: argparse.Namespace) -> int:
    from elmo.embedding.embed_progress import EmbedProgress
    from elmo.embedding.file_job import EmbedFileJob, check_output
    from elmo.runtime.interrupts import stop_on_signals

    options = EmbedOptions(**settings_from_args(EmbedOptions, args))
    output = OutputOptions(**settings_from_args(OutputOptions, args))
    engine_options = EngineOptions(**settings_from_args(EngineOptions, args))
    selection = VectorSelection(**settings_from_args(VectorSelection, args) | {"layer": _layer(args)})
    check_output(Path(args.input), Path(args.output), output, args.resume)  # before the model loads
    if args.align and getattr(args, "server", None):
        raise ConfigError("--align maps the vectors of a model run here; it cannot be combined with --server")
    with ENGINES[engine_options.engine](args, options, engine_options) as (engine, ranks):
        job = EmbedFileJob(engine, output, resume=args.resume, ranks=ranks, selection=selection)
        with stop_on_signals("embedding") as stop, EmbedProgress(show_progress(args), ranks, stop) as bar:
            count = job.run(args.input, args.output, progress=bar)
    if ranks.is_main and not job.was_complete:
        log.info("embedded %d sentences into %s", count, args.output)
    return 0


@contextmanager
def _local_engine(args: argparse.Namespace, options: EmbedOptions, where: EngineOptions) -> Iterator[
        tuple[ChunkEngine, DistInfo]]:
    """``--engine local``: the model here (or, with ``--server``, a running ``elmo serve``), in every ``torchrun``
    rank."""
    from elmo.embedding.embedder import Embedder
    from elmo.embedding.engines.local import LocalEngine
    from elmo.formats.alignment import read_alignment
    from elmo.runtime.distributed import join_for_barriers, shutdown

    ranks = join_for_barriers()
    try:
        if args.server:  # the vectors come from a running `elmo serve`
            from elmo.cli.serve_commands import remote_embedder

            embedder = remote_embedder(args, options)
        else:
            ref = model_ref(args)
            bilm = ref.load()
            alignment = read_alignment(args.align, bilm.output_dim) if args.align else None
            embedder = Embedder(bilm, options, device=args.device or ranks.default_device(), alignment=alignment,
                                model_name=ref.label)
        yield LocalEngine(embedder), ranks
    finally:
        shutdown()


@contextmanager
def _ray_engine(args: argparse.Namespace, options: EmbedOptions, where: EngineOptions) -> Iterator[
        tuple[ChunkEngine, DistInfo]]:
    """``--engine ray``: the chunks embedded by Ray workers (``elmo.embedding.engines.ray``)."""
    from elmo.embedding.engines.ray import RayEngine, WorkerModel
    from elmo.runtime.distributed import DistInfo

    if args.server:
        raise ConfigError("--server sends the batches to a running `elmo serve`; --engine ray runs the model on Ray "
                          "workers: give one of them")
    if DistInfo.from_environment().world_size > 1:
        raise ConfigError("--engine ray spreads the chunks over Ray workers itself: run it without torchrun")
    align = str(Path(args.align).absolute()) if args.align else None  # the workers open it from their own directory
    with RayEngine(WorkerModel(options, model_ref(args), device=args.device, align=align), where) as engine:
        yield engine, DistInfo()


ENGINES = {"local": _local_engine, "ray": _ray_engine}
"""``--engine`` -> the context that starts its engine (and this process's ranks) and stops it at the end."""


def _embed_output_kind(args: argparse.Namespace) -> str:
    from elmo.embedding.output_store import output_store

    return output_store(args.output_format).kind


def _layer(args: argparse.Namespace) -> str:
    """The layer flags: ``--all``/``--top``/``--average``/``--layer``; pooled output defaults to the average."""
    if args.layer is not None:
        return args.layer
    if args.pool == "none":
        raise UsageError("say what to keep: --all, --top, --average or --layer N (or pool each sentence into one "
                         "vector with --pool mean)")
    return "average"


def cmd_convert(args: argparse.Namespace) -> int:
    from elmo.formats.model_files import save_bilm

    ref = model_ref(args)
    bilm = ref.load()
    if args.to == "hf":
        from elmo.formats.hf_folders import save_hf_folder
        from elmo.formats.model_card import source_facts

        save_hf_folder(bilm, args.output, source_facts(ref), force=args.force)
    else:
        save_bilm(bilm, args.output, native=args.to == "native", force=args.force)
    log.info("wrote %s model to %s", args.to, args.output)
    return 0


def cmd_dump_token_embeddings(args: argparse.Namespace) -> int:
    from elmo.embedding.token_table import dump_token_embeddings

    bilm = load_model(args)
    count = dump_token_embeddings(bilm, args.vocab, args.output, batch_size=args.batch_size)
    log.info("wrote %d token vectors to %s", count, args.output)
    return 0


def cmd_warm_state(args: argparse.Namespace) -> int:
    from elmo.formats.model_files import store_warm_state

    path = store_warm_state(model_ref(args).path(), force=args.force)
    log.info("wrote %s", path)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from elmo.embedding.demo import run_demo

    ref = model_ref(args)
    print(run_demo(ref.load(), args.output_dir, ref.label, force=args.force))
    return 0


def add_embed_commands(commands) -> None:
    embed = commands.add_parser("embed", help="embed a file of tokenised sentences into HDF5 (or Parquet shards)")
    embed.add_argument("input", help="text file, one whitespace-tokenised sentence per line, a CoNLL-U file "
                       "(.conllu), a FASTA file of sequences (.fa, .fasta, .faa: one token per residue, keyed by "
                       "record id), or records (.jsonl, .parquet: --text-field, --id-field); UTF-8; .gz is "
                       "unpacked; - reads stdin")
    add_output(embed, "output", output=Output(kind=_embed_output_kind), help="HDF5 file to write (it appears "
               "atomically when done; an existing one only with --force); with --format parquet, the directory of "
               "shards")
    vectors = embed.add_argument_group("what to keep (docs/embedding.md#sentence-vectors)")
    which = vectors.add_mutually_exclusive_group()
    which.add_argument("--all", dest="layer", action="store_const", const="all", help="all layers: (L+1, n, 2P)")
    which.add_argument("--top", dest="layer", action="store_const", const="top", help="top layer: (n, 2P)")
    which.add_argument("--average", dest="layer", action="store_const", const="average", help="mean of layers")
    add_setting_flags(which, VectorSelection, ["layer"])
    for action in which._group_actions:  # the CLI's own default (set_defaults below), not the Python API's
        if action.option_strings == ["--layer"]:
            action.help = action.help.replace("(default: all)", "(default: average with --pool; without it, one of "
                                              "these four flags is needed)")
    add_setting_flags(vectors, VectorSelection, ["pool"])
    add_flag(vectors, "mix_weights", setting_of(next(f for f in settings_of(VectorSelection)
                                                      if f.name == "mix_weights")), str)
    add_setting_flags(vectors, VectorSelection, ["mix_gamma", "dtype"])
    add_setting_flags(vectors, OutputOptions, ["matrix", "output_format"])
    embed.set_defaults(layer=None)  # none of the four: --pool decides (the average), else a usage error
    add_model_args(embed)
    embed.add_argument("--server", metavar="URL", help="send the batches to a running `elmo serve` at URL (its "
                       "model; API key from $ELMO_API_KEY) instead of loading a model here")
    embed.add_argument("--align", metavar="FILE", help="alignment matrix W of the aligned multilingual models "
                       "(<lang>_best_mapping.pth, fitted on layer 1): every output vector x becomes x @ W.T")
    add_setting_flags(embed, EmbedOptions, ["batch_size", "initial_state"])
    add_setting_flags(embed, OutputOptions, ["input_format", "use_sentence_keys", "forget_sentences", "tokens",
                                             "text_field", "id_field"])
    add_flag(embed, "device", DEVICE)
    speed = embed.add_argument_group("speed and scale")
    add_setting_flags(speed, EmbedOptions, ["precision", "max_batch_tokens", "chunk_size", "vocab_cache",
                                             "sequence_window", "pipeline"])
    add_setting_flags(speed, EngineOptions)
    speed.add_argument("--resume", action="store_true",
                       help="continue an interrupted run of the same command, computing only what is missing")
    add_setting_flags(speed, OutputOptions, ["errors"])
    add_flag(speed, "progress", PROGRESS, bool)
    embed.set_defaults(func=cmd_embed)

    convert = commands.add_parser("convert", help="convert a model between the original, the native and the "
                                  "Hugging Face-style format (an ELMoForManyLangs model: to native or hf only)")
    add_model_args(convert)
    add_output(convert, "output", output=Output(DIRECTORY), help="output directory (an existing non-empty one only "
               "with --force, which replaces it as a whole)")
    convert.add_argument(
        "--to", choices=("hdf5", "native", "hf"), default="native", help="hdf5: options.json + weights.hdf5; "
        "native: config.json + model.safetensors (default); hf: the native files + README.md, a model card for "
        "model hubs (architecture, and the language, training data and results the source records)"
    )
    convert.set_defaults(func=cmd_convert)

    dump = commands.add_parser(
        "dump-token-embeddings", help="precompute the token layer for a vocabulary (for token-input biLMs)"
    )
    add_model_args(dump)
    dump.add_argument("--vocab", required=True, help="vocabulary file, one token per line")
    add_output(dump, "output", help="HDF5 file to write (dataset 'embedding', one row per vocabulary line)")
    dump.add_argument("--batch-size", type=checked(int, at_least(1)), default=1024,
                      help="tokens per batch (default 1024)")
    dump.set_defaults(func=cmd_dump_token_embeddings)

    warm = commands.add_parser(
        "warm-state", help="store a model's warm initial state (for --initial-state warm) in its directory"
    )
    warm.add_argument("--model", required=True, help="model directory (either format) or published model's name: "
                      "warm_state.safetensors is written there, computed from a shipped neutral text; for a model "
                      "shipped in the package (read-only), into $ELMO_HOME/warm-state/, where loading finds it")
    add_flag(warm, "force", FORCE)
    warm.set_defaults(func=cmd_warm_state)

    demo = commands.add_parser("demo", help="embed example sentences; show one word's vectors differ by context")
    add_model_args(demo)
    add_output(demo, "--output-dir", output=Output(files=DEMO_FILES), default="runs/demo",
               help=f"the directory to write {' and '.join(DEMO_FILES)} in (either already there: only with --force)")
    demo.set_defaults(func=cmd_demo)
