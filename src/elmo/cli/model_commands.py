"""``elmo models``: the published models ``--model NAME`` accepts, by family and language, and which are cached."""

from __future__ import annotations

import argparse
import json
import os
import sys

from elmo.errors import UsageError


def cmd_models(args: argparse.Namespace) -> int:
    from elmo.formats.published import list_models

    rows = list_models()
    if args.family:
        families = sorted({row.family for row in rows})
        if args.family not in families:
            raise UsageError(f"--family {args.family}: no such family (the families: {', '.join(families)})")
        rows = [row for row in rows if row.family == args.family]
    if args.json:
        text = json.dumps([row.as_dict() for row in rows], indent=2, ensure_ascii=False)
    else:
        table = [("name", "family", "language", "size", "cached")]
        table += [(r.name, r.family, r.language, format_size(r.size), "yes" if r.cached else "no") for r in rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        text = "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `elmo models | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def format_size(size: int | str | None) -> str:
    """Bytes in kB, MB or GB (one decimal); an estimate from the registry as written; '?' when unknown."""
    if size is None:
        return "?"
    if isinstance(size, str):
        return size
    unit, scale = next((u, s) for u, s in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if size >= s or u == "kB")
    return f"{size / scale:.1f} {unit}"


def add_model_commands(commands) -> None:
    models = commands.add_parser(
        "models", help="list the published models --model NAME accepts (family, language, size, cached or not)"
    )
    models.add_argument("--family", help="only this family (bilm-tf, manylangs, tf-hub, shipped)")
    models.add_argument("--json", action="store_true", help="one JSON list of objects instead of the table")
    models.set_defaults(func=cmd_models)
