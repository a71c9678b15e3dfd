"""``elmo probe pos|wsd`` and ``elmo neighbours``: what each biLM layer knows (docs/probing.md)."""

from __future__ import annotations

import argparse
import json

from elmo.cli.model_args import add_model_args, load_model
from elmo.cli.setting_flags import add_flag, add_setting_flags, checked, settings_from_args
from elmo.precision import Precision
from elmo.probing.linear import ProbeSettings
from elmo.settings import at_least
from elmo.shared_settings import DEVICE, PRECISION


def _embedder(args: argparse.Namespace):
    from elmo.embedding.embedder import Embedder

    return Embedder(load_model(args), device=args.device, precision=args.precision)


def _print_table(result: dict, rows: list[tuple[str, dict]], baseline: tuple[str, float]) -> None:
    names = list(rows[0][1])
    print("| " + " | ".join(["", *[f"layer {n}" if n != "mix" else "mix" for n in names]]) + " |")
    print("|" + "---|" * (len(names) + 1))
    for label, values in rows:
        print("| " + " | ".join([label, *[f"{100 * values[n]:.1f}" if n in values else "" for n in names]]) + " |")
    print(f"{baseline[0]}: {100 * baseline[1]:.1f}")


def cmd_probe_pos(args: argparse.Namespace) -> int:
    from elmo.probing.pos import probe_pos

    result = probe_pos(_embedder(args), args.train, args.test, args.tagset, args.max_train_sentences,
                       ProbeSettings(**settings_from_args(ProbeSettings, args)))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.tagset.upper()} accuracy (%) on {result['test_words']} words of {args.test} "
          f"(trained on {result['train_words']} words of {result['train_sentences']} sentences):")
    _print_table(result, [("linear probe", result["accuracy"])],
                 ("most frequent tag per word", result["baseline_most_frequent_tag"]))
    print(f"mix weights (layer 0 first): {result['mix_weights']}")
    return 0


def cmd_probe_wsd(args: argparse.Namespace) -> int:
    from elmo.probing.wsd import probe_wsd

    result = probe_wsd(_embedder(args), args.data, ProbeSettings(**settings_from_args(ProbeSettings, args)))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"word-sense accuracy (= F1) (%), {result['split']}:")
    for word, values in [*result["words"].items(), ("all", result["overall"])]:
        print(f"\n{word}:")
        baseline = values["baseline_most_frequent_sense"]
        _print_table(values, [("centroid", values["centroid"]), ("linear", values["linear"])],
                     ("most frequent sense", baseline))
    return 0


def cmd_neighbours(args: argparse.Namespace) -> int:
    from elmo.probing.neighbours import format_neighbours, read_corpus, word_neighbours

    sentences = read_corpus(args.corpus, args.input_format, args.max_sentences)
    result = word_neighbours(_embedder(args), sentences, args.word, args.layer, args.k, args.max_uses)
    print(json.dumps(result, indent=2) if args.json else format_neighbours(result))
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    add_model_args(parser)
    add_flag(parser, "device", DEVICE)
    add_flag(parser, "precision", PRECISION, Precision)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def add_probe_commands(commands) -> None:
    probe = commands.add_parser("probe", help="probe what each biLM layer knows: POS tags, word senses")
    kinds = probe.add_subparsers(dest="probe", required=True, metavar="PROBE", parser_class=type(probe))

    pos = kinds.add_parser("pos", help="linear POS-tag probe per layer and on a learned mix (CoNLL-U files)")
    pos.add_argument("--train", required=True, help="CoNLL-U training file")
    pos.add_argument("--test", required=True, help="CoNLL-U test file")
    pos.add_argument("--tagset", choices=("upos", "xpos"), default="upos", help="which tag column (default: upos)")
    pos.add_argument("--max-train-sentences", type=checked(int, at_least(1)), default=None, metavar="N",
                     help="train on the first N sentences of --train only (default: all)")
    _common(pos)
    add_setting_flags(pos.add_argument_group("probe training"), ProbeSettings)
    pos.set_defaults(func=cmd_probe_pos)

    wsd = kinds.add_parser("wsd", help="word senses per layer: nearest sense centroid and linear probe (Senseval)")
    wsd.add_argument("--data", required=True,
                     help="a Senseval lexical-sample file or a directory of them (*.pos, *.xml)")
    _common(wsd)
    add_setting_flags(wsd.add_argument_group("probe training"), ProbeSettings)
    wsd.set_defaults(func=cmd_probe_wsd)

    neighbours = commands.add_parser("neighbours", help="contextual nearest neighbours of one word's uses in a corpus")
    neighbours.add_argument("--word", required=True, help="the word (exact, case-sensitive match of a token)")
    neighbours.add_argument("--corpus", required=True, help="text file, one tokenised sentence per line (or CoNLL-U "
                            "with --input-format conllu)")
    neighbours.add_argument("--input-format", choices=("text", "conllu"), default="text",
                            help="format of --corpus (default: text)")
    neighbours.add_argument("--layer", type=int, default=-1,
                            help="layer whose vectors are compared (default: -1, the top)")
    neighbours.add_argument("--k", type=checked(int, at_least(1)), default=5, help="neighbours per use (default: 5)")
    neighbours.add_argument("--max-sentences", type=checked(int, at_least(1)), default=10000, metavar="N",
                            help="read the first N sentences of the corpus (default: 10000)")
    neighbours.add_argument("--max-uses", type=checked(int, at_least(1)), default=None, metavar="N",
                            help="show the first N uses of the word (default: all)")
    _common(neighbours)
    neighbours.set_defaults(func=cmd_neighbours)
