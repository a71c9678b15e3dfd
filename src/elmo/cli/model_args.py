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


def model_ref(args: argparse.Namespace):
    """The :class:`~elmo.formats.model_ref.ModelRef` the model flags name (before any model loads): the flags go
    together as they must, and a spelling that names nothing is one line here."""
    from elmo.formats.model_ref import ModelRef

    options_file, weight_file = getattr(args, "options_file", None), getattr(args, "weight_file", None)
    if args.model and (options_file or weight_file):
        raise ElmoError("give either --model or --options-file/--weight-file, not both")
    if getattr(args, "checkpoint", None) and not args.model:
        raise ElmoError("--checkpoint picks a checkpoint of a bilm-tf training directory: give that directory as "
                        "--model")
    if (options_file or weight_file) and not (options_file and weight_file):
        raise ElmoError("--options-file and --weight-file go together")
    if options_file:
        return ModelRef.parse(options_file=options_file, weight_file=weight_file)
    if not args.model:
        log.info("no model given: using the small demo biLM shipped with the package (see --model)")
    return ModelRef.parse(args.model or "demo", checkpoint=getattr(args, "checkpoint", None))


def load_model(args: argparse.Namespace):
    """The biLM the model flags name."""
    return model_ref(args).load()
