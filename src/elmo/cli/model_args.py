"""``--model`` / ``--options-file`` / ``--weight-file``: the biLM that embed, convert, dump and demo run."""

from __future__ import annotations

import argparse
import logging

from elmo.errors import ElmoError

log = logging.getLogger("elmo")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model (default: the small demo biLM shipped with the package)")
    group.add_argument(
        "--model",
        help="model directory (options.json + weights.hdf5, config.json + model.safetensors, or an ELMoForManyLangs "
        "model: config.json + *.dic + *.pkl), a model archive "
        "(an NLPL .zip, read in place), a TF-Hub module (its folder or .tar.gz), or the name of a published model "
        "(`elmo models` lists them; downloaded once "
        "into $ELMO_HOME)",
    )
    add_checkpoint_arg(group)
    group.add_argument("--options-file", help="original options.json")
    group.add_argument("--weight-file", help="original weights.hdf5")


def add_checkpoint_arg(parser) -> None:
    parser.add_argument(
        "--checkpoint",
        help="with --model a bilm-tf training directory: the checkpoint to read (model.ckpt-N) instead of the one "
        "its 'checkpoint' file names",
    )


def model_name(args: argparse.Namespace) -> str:
    """How outputs and the service name the model the flags give: the published or shipped name, or the last part
    of the path (not the directories of this machine)."""
    from pathlib import Path

    if args.model:
        return Path(args.model).name or args.model
    if args.weight_file:
        return Path(args.weight_file).name
    return "demo"


def check_model_args(args: argparse.Namespace) -> None:
    """The model flags go together as they must (before any model loads)."""
    if args.model and (args.options_file or args.weight_file):
        raise ElmoError("give either --model or --options-file/--weight-file, not both")
    if getattr(args, "checkpoint", None) and not args.model:
        raise ElmoError("--checkpoint picks a checkpoint of a bilm-tf training directory: give that directory as "
                        "--model")
    if (args.options_file or args.weight_file) and not (args.options_file and args.weight_file):
        raise ElmoError("--options-file and --weight-file go together")


def load_model(args: argparse.Namespace):
    """The biLM the model flags name."""
    from elmo.formats.model_files import load_bilm
    from elmo.formats.published import demo_model_dir, resolve_model

    check_model_args(args)
    if args.model:
        return load_bilm(resolve_model(args.model), checkpoint=getattr(args, "checkpoint", None))
    if args.options_file:
        return load_bilm(options_file=args.options_file, weight_file=args.weight_file)
    log.info("no model given: using the small demo biLM shipped with the package (see --model)")
    return load_bilm(demo_model_dir())
