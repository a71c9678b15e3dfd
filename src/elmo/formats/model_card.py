"""The model card of a Hugging Face-style folder: ``README.md`` beside the native ``config.json`` and
``model.safetensors``, so a model hub (or a person browsing one) can tell what the folder holds without loading it.

A hub reads the YAML front matter (``library_name``, ``tags``, ``language``, ``license``); people read the body:
the architecture, the training data and evaluation numbers the source records, and how to load the folder. Nothing
is guessed: a fact no source file records is left out or says "not recorded". The front matter is written by hand
(PyYAML is no dependency) from a few safe value shapes, and read back by :func:`read_front_matter` the same way.

Where the facts come from (:func:`source_facts`): the published-model registry (language, description, where it
was published), an NLPL ``meta.json`` (corpus, language), the source folder's own files (a card it already has,
``history.json`` and ``finetune.json`` of a training run, ``train_config.json``, ``vocab.txt``) and the training
keys its options carry (``n_train_tokens``, ...).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, metadata
from pathlib import Path
from typing import Any

from elmo.formats.archives import describe_meta, is_archive, read_meta
from elmo.formats.locations import elmo_home
from elmo.formats.model_ref import FILES, PUBLISHED, SHIPPED, ModelRef
from elmo.formats.native import CARD_FILE, NATIVE_CONFIG_FILE, NATIVE_LEXICON_FILE, NATIVE_WEIGHTS_FILE
from elmo.formats.published import REGISTRY_FILE, model_path, read_registry, shipped_models
from elmo.formats.warm_state import WARM_STATE_FILE
from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.manylangs_encoder import ManyLangsTokenEncoder
from elmo.modules.token_embedding import TokenEmbedding

log = logging.getLogger(__name__)

LIBRARY_NAME = "elmo-bilm"
NOTES_BEGIN, NOTES_END = "<!-- elmo-bilm: source notes -->", "<!-- elmo-bilm: end of source notes -->"
"""Around the text carried over from the source's own card, so that converting a converted folder again carries
that text once, not the whole earlier card inside the new one."""

LANGUAGE_CODES = {
    "english": "en", "russian": "ru", "norwegian": "no", "norwegian bokmål": "nb", "norwegian nynorsk": "nn",
    "portuguese": "pt", "arabic": "ar", "bulgarian": "bg", "catalan": "ca", "czech": "cs",
    "old church slavonic": "cu", "danish": "da", "german": "de", "greek": "el", "spanish": "es", "estonian": "et",
    "basque": "eu", "persian": "fa", "finnish": "fi", "french": "fr", "irish": "ga", "galician": "gl",
    "ancient greek": "grc", "hebrew": "he", "hindi": "hi", "croatian": "hr", "hungarian": "hu", "indonesian": "id",
    "italian": "it", "japanese": "ja", "korean": "ko", "latin": "la", "latvian": "lv", "dutch": "nl",
    "polish": "pl", "romanian": "ro", "slovak": "sk", "slovene": "sl", "slovenian": "sl", "swedish": "sv",
    "turkish": "tr", "uyghur": "ug", "ukrainian": "uk", "urdu": "ur", "vietnamese": "vi", "chinese": "zh",
}
"""Language names as the registry and NLPL's meta.json spell them -> the ISO 639 codes a hub's ``language`` takes
("English (biomedical)" is English: the words in parentheses are dropped)."""

DEFAULT_DESCRIPTION = ("A bidirectional language model whose layers give contextual word vectors (ELMo, Peters et "
                       "al., NAACL 2018), in the folder layout of the `elmo-bilm` library.")

TRAINING_OPTIONS = ("n_train_tokens", "n_tokens_vocab", "n_epochs", "batch_size", "unroll_steps", "learning_rate",
                    "optimizer", "sample_softmax", "n_negative_samples_batch", "dropout", "all_clip_norm_val")
"""The trainer keys a card names (of bilm-tf's options.json and this package's presets), in this order."""

OPTIONS_LINE = "Training options the model records:"

_SIMPLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass
class CardFacts:
    """What the card says beyond the architecture, each item as the source records it."""

    name: str | None = None
    """The source's name: a published or shipped name, or the last part of its path."""
    description: str | None = None
    language: list[str] = field(default_factory=list)
    """ISO 639 codes."""
    license: str | None = None
    published: list[str] = field(default_factory=list)
    """Where the weights were published (URLs, the registry's note on them)."""
    training: list[str] = field(default_factory=list)
    """Markdown lines about the training data and the training run."""
    evaluation: list[str] = field(default_factory=list)
    """Markdown lines with the numbers the source records."""
    notes: str | None = None
    """The source's own card (its body), carried over."""
    training_options: dict[str, Any] = field(default_factory=dict)
    """Trainer keys of a run's ``train_config.json``; the card adds those the model's own options record."""


# ------------------------------------------------------------------ facts from the source


def source_facts(ref: ModelRef) -> CardFacts:
    """The facts the model ``ref`` names records. Reads only small files beside the weights; never downloads (a
    published model is looked for in the cache)."""
    if ref.kind == PUBLISHED:
        path = elmo_home() / "models" / ref.location
        facts = CardFacts(name=ref.location)
        if (entry := _registry().get(ref.location)) is not None:
            _registry_facts(facts, entry)
            path = model_path(path, entry)  # where the loader found it: no download
    else:
        path = Path(ref.location).parent if ref.kind == FILES else ref.path()
        facts = CardFacts(name=ref.location if ref.kind == SHIPPED else path.name)
    if path.exists() and path.resolve() in {p.resolve() for p in shipped_models().values()}:
        facts.license = _package_license()  # the shipped models come with the package, under its licence
        facts.language = ["en"]  # trained on English text (their cards say which)
    if path.is_dir() or is_archive(path):
        _meta_facts(facts, _quiet(read_meta, path))
    if path.is_dir():
        _folder_facts(facts, path)
    return facts


def _registry() -> dict[str, dict]:
    try:
        return read_registry()
    except Exception as e:  # the card is written without the registry's facts, not refused
        log.warning("no registry facts for the model card: %s", e)
        return {}


def _registry_facts(facts: CardFacts, entry: dict) -> None:
    facts.description = entry.get("description") or None
    facts.language = _language_codes(entry.get("language"))
    facts.license = entry.get("license") or None
    family = entry.get("family", "bilm-tf")
    source = entry.get("source")
    notes = read_registry_sources().get(source, "") if source else ""
    facts.published = [f"family: {family}" + (f"; {notes}" if notes else "")]
    facts.published += [f"`{name}`: <{spec['url']}>" for name, spec in entry.get("files", {}).items()]
    if entry.get("description"):
        facts.training.append(f"As the registry describes it: {entry['description']}.")


def read_registry_sources() -> dict[str, str]:
    """The registry's ``_sources`` notes (where each family's URLs were found)."""
    path = Path(os.environ.get("ELMO_MODEL_REGISTRY") or REGISTRY_FILE)
    raw = _quiet(lambda p: json.loads(p.read_text(encoding="utf-8")), path)
    sources = raw.get("_sources") if isinstance(raw, dict) else None
    return {k: str(v) for k, v in sources.items()} if isinstance(sources, dict) else {}


def _meta_facts(facts: CardFacts, meta: dict | None) -> None:
    summary = describe_meta(meta)
    if summary is None or meta is None:
        return
    facts.training.append(f"NLPL `meta.json`: {summary}.")
    corpora = meta.get("corpus")
    for corpus in corpora if isinstance(corpora, list) else [corpora]:
        if isinstance(corpus, dict) and not facts.language:
            facts.language = _language_codes(corpus.get("language"))


def _folder_facts(facts: CardFacts, folder: Path) -> None:
    card = folder / CARD_FILE
    if card.is_file():
        _card_facts(facts, _quiet(lambda p: p.read_text(encoding="utf-8"), card))
    history = _read_json_quietly(folder / "history.json")
    if isinstance(history, list):
        steps = [e for e in history if isinstance(e, dict) and "step" in e]
        if steps:
            facts.training.append(f"Training run (`history.json`): {steps[-1]['step']:,} steps.")
        for entry in [e for e in steps if "valid_geometric_mean" in e][-1:]:
            facts.evaluation.append(
                f"Held-out perplexity at step {entry['step']:,} (full softmax, the run's own check): forward "
                f"{_number(entry.get('valid_forward'))}, backward {_number(entry.get('valid_backward'))}, geometric "
                f"mean {_number(entry['valid_geometric_mean'])}.")
    finetune = _read_json_quietly(folder / "finetune.json")
    if isinstance(finetune, dict):
        facts.training.append(f"Fine-tuned from `{finetune.get('model', '?')}` (`finetune.json`).")
        for when in ("before", "after"):
            if isinstance(finetune.get(when), dict):
                facts.evaluation.append(f"Held-out perplexity {when} fine-tuning: {_perplexities(finetune[when])}.")
    train_config = _read_json_quietly(folder / "train_config.json")
    if isinstance(train_config, dict):
        facts.training_options = {k: train_config[k] for k in TRAINING_OPTIONS if k in train_config}
    vocab = folder / "vocab.txt"
    if vocab.is_file():
        lines = _quiet(lambda p: sum(1 for _ in p.open(encoding="utf-8")), vocab)
        if lines:
            facts.training.append(f"Softmax vocabulary: {lines:,} words (`vocab.txt`).")


def _card_facts(facts: CardFacts, text: str | None) -> None:
    """An existing card: an elmo-bilm one gives its front matter and the notes it carried; any other is carried
    whole (a shipped model's card holds its data, training and results)."""
    if not text:
        return
    front, body = split_front_matter(text)
    if front.get("library_name") == LIBRARY_NAME:
        facts.language = facts.language or [str(x) for x in _as_list(front.get("language"))]
        facts.license = facts.license or (str(front["license"]) if front.get("license") else None)
        title = re.search(r"^# ELMo biLM(?:: ([^\n]*))?\n\n([^\n]+(?:\n[^\n]+)*)\n\n", body, re.M)
        if title:
            facts.name = title.group(1) or facts.name
            if not facts.description and title.group(2) != DEFAULT_DESCRIPTION:
                facts.description = title.group(2)
        begin, end = body.find(NOTES_BEGIN), body.find(NOTES_END)
        notes = body[begin + len(NOTES_BEGIN):end] if 0 <= begin < end else ""
        notes = re.sub(r"^## From the source's card\n", "", notes.strip())
        facts.notes = notes.strip() or None
        for section, target in (("Training data", facts.training), ("Evaluation", facts.evaluation)):
            target.extend(line for line in _section(body, section)  # the options line is made again from the model
                          if line not in target and not line.startswith(OPTIONS_LINE))
    else:
        facts.notes = body.strip() or None


# ------------------------------------------------------------------ the card


def render_card(bilm: BiLM, facts: CardFacts) -> str:
    config = bilm.config
    assert config is not None
    front: dict[str, Any] = {"library_name": LIBRARY_NAME, "pipeline_tag": "feature-extraction",
                             "tags": ["elmo", "bilm", "contextual-embeddings", *_encoder_tags(bilm)]}
    if facts.language:
        front["language"] = facts.language
    if facts.license:
        front["license"] = facts.license
    missing = "See the source's card below." if facts.notes else "Not recorded by the source."
    title = f"ELMo biLM: {facts.name}" if facts.name else "ELMo biLM"
    lines = [write_front_matter(front), f"# {title}", "",
             facts.description or DEFAULT_DESCRIPTION, "",
             "## Architecture", "", *_architecture(bilm), "", "## Files", "", *_files(bilm), "",
             "## Training data", "", *(_bullets([*facts.training, *_training_options(bilm, facts)]) or [missing]),
             "",
             "## Evaluation", "", *(_bullets(facts.evaluation) or [missing]), ""]
    if facts.published:
        lines += ["## Where it was published", "", *_bullets(facts.published), ""]
    if facts.notes:
        lines += [NOTES_BEGIN, "## From the source's card", "", _demote(facts.notes), NOTES_END, ""]
    lines += ["## Usage", "", *_usage(bilm)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _architecture(bilm: BiLM) -> list[str]:
    config = bilm.config
    assert config is not None
    lstm = config.lstm
    rows = []
    if config.char_cnn is not None and isinstance(bilm.token_encoder, CharCNNEncoder):
        cnn = config.char_cnn
        rows.append(("token encoder", f"character CNN (bilm-tf): {_filters(cnn.filters)}; "
                     f"{_count(cnn.n_highway, 'highway layer')}; {cnn.activation}; {cnn.embedding_dim}-d character "
                     "embeddings; up to "
                     f"{cnn.max_characters_per_token} characters per token (UTF-8 bytes, markers included)"))
    elif config.manylangs is not None and isinstance(bilm.token_encoder, ManyLangsTokenEncoder):
        token = config.manylangs
        parts = []
        if token.word_dim:
            parts.append(f"{token.word_dim}-d word embedding ({token.n_words:,} words)")
        if token.char_dim:
            parts.append(f"character CNN over {token.n_characters:,} characters ({token.char_dim}-d): "
                         f"{_filters(token.filters)}")
        rows.append(("token encoder", "ELMoForManyLangs: " + " + ".join(parts) + "; "
                     f"{_count(token.n_highway, 'highway layer')}; up to {token.max_characters_per_token} characters "
                     "per token"))
    else:
        rows.append(("token encoder", f"token table: {bilm.token_encoder.embedding.num_embeddings - 1:,} "
                     "token vectors (word-id input)"))
    clips = f"cell clip {lstm.cell_clip}, projection clip {lstm.proj_clip}"
    projection = f"projection to {lstm.projection_dim}" if lstm.has_projection else "no projection"
    rows.append(("LSTM", f"{lstm.n_layers} layers per direction (forward and backward), {lstm.dim:,} cells, "
                 f"{projection} ({clips}); residual connections: {'yes' if lstm.use_skip_connections else 'no'}"))
    rows.append(("ELMo layers", f"{bilm.num_layers} (the token layer + {bilm.num_layers - 1} LSTM layers), each "
                 f"{bilm.output_dim}-d"))
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in bilm.state_dict().values()})
    count = sum(p.numel() for p in bilm.parameters())
    rows.append(("parameters", f"{count:,} ({', '.join(dtypes)})"))
    return ["| | |", "|---|---|", *(f"| {name} | {text} |" for name, text in rows)]


def _training_options(bilm: BiLM, facts: CardFacts) -> list[str]:
    assert bilm.config is not None
    recorded = {**bilm.config.training, **facts.training_options}
    shown = [f"{key} {value:,}" if isinstance(value, int) and not isinstance(value, bool) else f"{key} {value}"
             for key in TRAINING_OPTIONS if (value := recorded.get(key)) is not None]
    return [f"{OPTIONS_LINE} {', '.join(shown)}."] if shown else []


def _files(bilm: BiLM) -> list[str]:
    files = [f"`{NATIVE_CONFIG_FILE}`: the architecture (bilm-tf's options, wrapped); "
             f"`{NATIVE_WEIGHTS_FILE}`: the weights (safetensors, read without running any code)"]
    if getattr(bilm.token_encoder, "lexicon", None) is not None:
        files.append(f"`{NATIVE_LEXICON_FILE}`: the character and word dictionaries")
    if bilm.warm_state is not None:
        files.append(f"`{WARM_STATE_FILE}`: the warm initial state (`--initial-state warm`)")
    return _bullets(files)


def _usage(bilm: BiLM) -> list[str]:
    if isinstance(bilm.token_encoder, TokenEmbedding):
        python = ["from elmo import BiLM, Elmo, batch_to_token_ids", "",
                  'bilm = BiLM.from_pretrained("path/to/this/folder")  # a token-input biLM: word ids in',
                  "elmo = Elmo(bilm, num_output_representations=1)"]
    else:
        python = ["from elmo import BiLM, Embedder", "",
                  'bilm = BiLM.from_pretrained("path/to/this/folder")  # or elmo.load_bilm(...)',
                  'layers = Embedder(bilm).embed_sentence(["Hello", "world", "."])  # (L + 1, 3, 2P) float32']
    command = "elmo embed sentences.txt vectors.hdf5 --all --model path/to/this/folder"
    return ["```bash", "pip install elmo-bilm", command, "```", "", "```python", *python, "```"]


# ------------------------------------------------------------------ front matter


def write_front_matter(front: dict[str, Any]) -> str:
    """``---``, one ``key: value`` line per scalar and ``- item`` lines per list, ``---``; every value a plain
    word or a JSON string (which YAML reads as a double-quoted scalar)."""
    lines = ["---"]
    for key, value in front.items():
        if isinstance(value, list):
            lines += [f"{key}:", *(f"- {_scalar(v)}" for v in value)]
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join([*lines, "---", ""])


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(the front matter :func:`write_front_matter` writes, the body); ({}, text) when the text has none. Reads
    the same shapes only: ``key: value``, ``key:`` + ``- item`` lines."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        return {}, text
    end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    front: dict[str, Any] = {}
    key = None
    for line in lines[1:end]:
        if line.startswith("- ") and key is not None:
            front.setdefault(key, [])
            if isinstance(front[key], list):
                front[key].append(_unquote(line[2:]))
        elif ":" in line and not line.startswith((" ", "#")):
            key, value = (part.strip() for part in line.split(":", 1))
            front[key] = _unquote(value) if value else []
    return front, "\n".join(lines[end + 1:])


def read_front_matter(path: str | os.PathLike) -> dict[str, Any]:
    """The front matter of a card file ({} when it has none)."""
    return split_front_matter(Path(path).read_text(encoding="utf-8"))[0]


def _scalar(value: Any) -> str:
    text = str(value)
    return text if _SIMPLE.match(text) and text.lower() not in ("true", "false", "null", "yes", "no", "on", "off") \
        else json.dumps(text, ensure_ascii=False)


def _unquote(value: str) -> str:
    value = value.strip()
    if value.startswith('"'):
        try:
            return str(json.loads(value))
        except ValueError:
            return value
    return value.strip("'")


# ------------------------------------------------------------------ helpers


def _encoder_tags(bilm: BiLM) -> list[str]:
    if isinstance(bilm.token_encoder, CharCNNEncoder):
        return ["character-level"]
    return ["elmoformanylangs"] if isinstance(bilm.token_encoder, ManyLangsTokenEncoder) else ["word-level"]


def _language_codes(language: Any) -> list[str]:
    codes = []
    for name in _as_list(language):
        text = re.sub(r"\(.*?\)", "", str(name)).strip().lower()
        code = LANGUAGE_CODES.get(text) or (text if re.fullmatch(r"[a-z]{2,3}", text) else None)
        if code and code not in codes:
            codes.append(code)
    return codes


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [] if value in (None, "") else [value]


def _filters(filters: list[tuple[int, int]]) -> str:
    return (f"{sum(n for _, n in filters):,} filters of widths {filters[0][0]}-{filters[-1][0]} ("
            + ", ".join(f"{n} x {w}" for w, n in filters) + ")")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _bullets(items: list[str]) -> list[str]:
    return [f"* {item}" for item in items]


def _section(body: str, title: str) -> list[str]:
    """The bullet items of the card section ``## title``."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |^<!-- |\Z)", body, re.M | re.S)
    return [line[2:] for line in match.group(1).splitlines() if line.startswith("* ")] if match else []


def _demote(text: str) -> str:
    """Headings moved down so that the carried card's top level is ###, under the card's own ## heading."""
    lines, fenced, headings = text.splitlines(), False, []
    for i, line in enumerate(lines):
        fenced ^= line.lstrip().startswith("```")
        if not fenced and re.match(r"#+ ", line):
            headings.append(i)
    shift = "#" * max(0, 3 - min((len(lines[i]) - len(lines[i].lstrip("#")) for i in headings), default=3))
    for i in headings:
        lines[i] = shift + lines[i]
    return "\n".join(lines)


def _number(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) and math.isfinite(value) else str(value)


def _perplexities(result: dict) -> str:
    return ", ".join(f"{k} {_number(v)}" for k, v in result.items() if isinstance(v, (int, float)))


def _package_license() -> str | None:
    try:
        meta = metadata(LIBRARY_NAME)
    except PackageNotFoundError:
        return None
    license = meta.get("License-Expression") or meta.get("License")
    return license.lower() if license and _SIMPLE.match(license) else None


def _read_json_quietly(path: Path) -> Any:
    return _quiet(lambda p: json.loads(p.read_text(encoding="utf-8")), path) if path.is_file() else None


def _quiet(read, path: Path) -> Any:
    """A source file the card cannot read is left out of the card (with a warning), not a failed conversion."""
    try:
        return read(path)
    except Exception as e:  # a bad side file must not stop the conversion of good weights
        log.warning("%s: left out of the model card (%s)", path, e)
        return None
