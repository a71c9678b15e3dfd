"""Hugging Face-style model folders: the native ``config.json`` + ``model.safetensors`` with a model card
``README.md`` (:mod:`elmo.formats.model_card`), written by ``elmo convert --to hf`` and ``BiLM.save_pretrained``.
They load like any native folder (the card is not a model file), so ``load_bilm`` and every ``--model`` read them.

``modules/`` knows no file format, so ``BiLM.save_pretrained`` / ``BiLM.from_pretrained`` call what this module
registers (:func:`elmo.modules.bilm.register_pretrained_folders`) when it is imported; ``from elmo import BiLM``
imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

from elmo.formats.model_card import CardFacts, render_card
from elmo.formats.model_files import load_bilm, write_bilm_files
from elmo.formats.model_ref import ModelRef
from elmo.formats.native import CARD_FILE
from elmo.modules.bilm import BiLM, register_pretrained_folders
from elmo.runtime.atomic_files import replace_directory, write_text_atomic

__all__ = ["BiLM", "load_bilm", "load_pretrained", "save_hf_folder"]  # `from elmo import BiLM, load_bilm` get here


def save_hf_folder(bilm: BiLM, directory: str | os.PathLike, facts: CardFacts | None = None,
                   force: bool = False) -> Path:
    """Write ``config.json``, ``model.safetensors`` (every tensor in its own dtype, so loading gives the same bits)
    and the card ``README.md`` (plus ``lexicon.json`` and ``warm_state.safetensors`` where the model has them) as
    one new directory: an existing non-empty one is refused unless ``force``, which replaces it whole."""
    text = render_card(bilm, facts or CardFacts())  # first: the facts may come from the folder being replaced

    def build(tmp: Path) -> None:
        write_bilm_files(bilm, tmp, native=True)
        write_text_atomic(tmp / CARD_FILE, text)

    return replace_directory(directory, build, force)


def load_pretrained(model: ModelRef | str | os.PathLike) -> BiLM:
    """Any model spelling ``--model`` takes: a folder in any format, an archive, a shipped or published name."""
    return ModelRef.parse(model).load()


class _HfFolders:
    def save(self, bilm: BiLM, directory: str | os.PathLike, force: bool) -> Path:
        return save_hf_folder(bilm, directory, force=force)

    def load(self, model: ModelRef | str | os.PathLike) -> BiLM:
        return load_pretrained(model)


register_pretrained_folders(_HfFolders())
