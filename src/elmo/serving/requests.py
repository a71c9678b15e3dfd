"""The body of ``POST /v1/embed``, checked: every mistake becomes a 4xx whose message names what is wrong.

A sentence is a list of tokens or a string split on whitespace, exactly as ``elmo embed`` splits a line, so the
same text gets the same vectors. Checks run before any work is queued, so a bad request costs the model nothing.
The fields are declared once (:data:`REQUEST_FIELDS`): the parser accepts exactly those names, and ``/openapi.json``
describes them with this service's limits (:func:`request_schema`).

The JSON is read strictly: the nesting depth is checked on the raw bytes before parsing (``json`` recurses once per
level, so 100,000 ``[`` would raise RecursionError), and NaN/Infinity literals, numbers too large for a float (an
integer of 400 digits too: ``float()`` of it raises OverflowError) or with more digits than Python converts (a
ValueError, not a JSONDecodeError) and duplicate keys are refused. A field that applies only with one layer choice
(``mix_weights``, ``mix_gamma``: ``layer`` ``mix``) is refused without it, and a number the answer's float32
arithmetic must hold (``mix_gamma``) beyond float32's range; an answer that still overflows its dtype is refused
when it is made (:func:`check_answer`). Every refusal carries a ``reason`` that ``/metrics`` counts
(``elmo_bad_requests_total``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from elmo.embedding.selection import DTYPES, LAYERS, POOLS, SELECTION_FIELDS, VectorSelection
from elmo.errors import ConfigError
from elmo.serving.serve_options import ServeOptions

Schema = Callable[[ServeOptions, int], dict]
"""A field's JSON Schema for a service with these limits and a model of ``num_layers`` layers (L + 1)."""


@dataclass(frozen=True)
class RequestField:
    """One field of the body of ``POST /v1/embed``, declared once: the parser accepts exactly these names, and the
    OpenAPI document (:mod:`elmo.serving.openapi`) describes them from the same declaration."""

    name: str
    help: str
    schema: Schema
    deprecated: bool = False
    only_with_layer: str | None = None
    """The field applies only with this ``layer`` (or ``output``): without it the field is refused."""
    float32: bool = False
    """A number the answer is computed with in float32: beyond float32's range it is refused."""


def _sentences(limits: ServeOptions, num_layers: int) -> dict:
    token = {"type": "string", "minLength": 1, "pattern": r"^\S+$"}
    return {"type": "array", "maxItems": limits.max_request_sentences, "items": {"anyOf": [
        {"type": "array", "items": token, "maxItems": limits.max_sentence_tokens},
        {"type": "string", "description": f"split on whitespace as `elmo embed` splits a line; at most "
                                          f"{limits.max_sentence_tokens} tokens"}]}}


def _layer(limits: ServeOptions, num_layers: int) -> dict:
    return {"anyOf": [{"enum": [*LAYERS, *map(str, range(num_layers))]},
                      {"type": "integer", "minimum": 0, "maximum": num_layers - 1}],
            "default": VectorSelection().layer}


def _mix_weights(limits: ServeOptions, num_layers: int) -> dict:
    return {"type": "array", "items": {"type": "number"}, "minItems": num_layers, "maxItems": num_layers}


def _choice(name: str, values: tuple[str, ...]) -> Schema:
    return lambda limits, num_layers: {"enum": list(values), "default": getattr(VectorSelection(), name)}


REQUEST_FIELDS = (
    RequestField("sentences", "the sentences: each a list of tokens (non-empty strings without whitespace) or a "
                 "string split on whitespace as `elmo embed` splits a line; an empty sentence gets an empty array",
                 _sentences),
    RequestField("output", "the older name of `layer` (give one of them)", _layer, deprecated=True),
    RequestField("layer", "which layer: all (L + 1, n, 2P), top, average, mix (n, 2P) or an index (0 = the token "
                 "layer), as `elmo embed --all/--top/--average/--layer`", _layer),
    RequestField("pool", "one vector per sentence instead of one per token, as `elmo embed --pool`",
                 _choice("pool", POOLS)),
    RequestField("mix_weights", "with layer mix (only): the scalar mix's weights, one per layer, before the softmax",
                 _mix_weights, only_with_layer="mix"),
    RequestField("mix_gamma", "with layer mix (only): the scale gamma",
                 lambda limits, num_layers: {"type": "number", "default": VectorSelection().mix_gamma},
                 only_with_layer="mix", float32=True),
    RequestField("dtype", "the answer's dtype (the computation is the same)", _choice("dtype", DTYPES)),
)
"""Every field a request may hold, in the order the docs list them."""
FIELDS = tuple(field.name for field in REQUEST_FIELDS)
SELECTION = tuple(name for name in FIELDS if name in SELECTION_FIELDS)
"""The request fields that are :class:`VectorSelection` fields (``output`` is the older name of ``layer``)."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
"""The largest magnitude a float32 holds: a number the answer is computed with must not pass it."""


MAX_NESTING = 8
"""Deepest nesting of lists and objects accepted; a request needs 3 (object, sentences list, sentence list)."""
REASONS = ("not_utf8", "not_json", "nesting", "non_finite", "duplicate_key", "schema", "too_large", "too_slow")
"""Why a request was refused, as ``/metrics`` counts it (``elmo_bad_requests_total{reason}``): 413 for
``too_large``, 408 for ``too_slow`` (the body did not arrive within ``body_timeout``), 400 for the others;
``schema`` is valid JSON that is not a valid request."""


def request_schema(limits: ServeOptions, num_layers: int) -> dict:
    """The JSON Schema of a request body: :data:`REQUEST_FIELDS`, ``sentences`` required, no other field, not both
    ``layer`` and ``output``, a field that applies only with one layer only with it. The limits a schema cannot say
    (bytes, tokens per request, the time the body may take) are in its description."""
    return {
        "type": "object", "required": ["sentences"], "additionalProperties": False,
        "not": {"required": ["layer", "output"]},
        "properties": {f.name: {"description": f.help, **f.schema(limits, num_layers)}
                       | ({"minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX} if f.float32 else {})
                       | ({"deprecated": True} if f.deprecated else {}) for f in REQUEST_FIELDS},
        "dependentSchemas": {f.name: {"anyOf": [{"required": [name], "properties": {name: {"const": f.only_with_layer}}}
                                                for name in ("layer", "output")]}
                             for f in REQUEST_FIELDS if f.only_with_layer},
        "description": f"at most {limits.max_request_bytes} bytes, {limits.max_request_sentences} sentences, "
                       f"{limits.max_sentence_tokens} tokens per sentence and {limits.max_request_tokens} tokens in "
                       f"all (over any: 413), the whole body within {limits.body_timeout:g} s of the headers (else "
                       f"408); JSON nested at most {MAX_NESTING} deep, finite numbers, no key twice",
    }


class RequestError(Exception):
    """A request the service refuses: ``status`` (400 malformed, 408 too slow, 413 over a limit), a one-line message,
    and the ``reason`` (one of :data:`REASONS`) that ``/metrics`` counts it under."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason or ("too_large" if status == 413 else "schema")


@dataclass(frozen=True)
class EmbedRequest:
    sentences: list[list[str]]
    selection: VectorSelection = VectorSelection()
    """What the answer holds of each sentence's layers, as ``elmo embed --layer/--pool/--dtype`` say."""

    @property
    def tokens(self) -> int:
        return sum(len(s) for s in self.sentences)


def parse_embed_request(body: bytes, limits: ServeOptions) -> EmbedRequest:
    """The checked request in ``body`` (JSON), or :class:`RequestError`."""
    if len(body) > limits.max_request_bytes:
        raise too_large(len(body), limits.max_request_bytes)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(400, f"the body is not UTF-8 JSON: {e.reason} at byte {e.start}", "not_utf8") from None
    check_nesting(body)
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_int,
                          object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise RequestError(400, f"the body is not JSON: {e.msg} at line {e.lineno} column {e.colno}",
                           "not_json") from None
    if not isinstance(data, dict):
        raise RequestError(400, f'the body must be a JSON object like {{"sentences": [...]}}, got {_kind(data)}')
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestError(400, f"unknown field {unknown[0]!r} (the fields are: {', '.join(FIELDS)})")
    if "sentences" not in data:
        raise RequestError(400, "'sentences' is missing: a list of token lists or of whitespace-tokenised strings")
    sentences = data["sentences"]
    if not isinstance(sentences, list):
        raise RequestError(400, f"'sentences' must be a list of token lists or strings, got {_kind(sentences)}")
    if len(sentences) > limits.max_request_sentences:
        raise RequestError(413, f"'sentences' holds {len(sentences)} sentences, over the limit of "
                                f"{limits.max_request_sentences} per request: send fewer at a time")
    checked = [_sentence(s, i, limits.max_sentence_tokens) for i, s in enumerate(sentences)]
    tokens = sum(map(len, checked))
    if tokens > limits.max_request_tokens:
        raise RequestError(413, f"the request holds {tokens} tokens, over the limit of {limits.max_request_tokens} "
                                "per request: send fewer sentences at a time")
    return EmbedRequest(checked, _selection(data))


def check_for_model(selection: VectorSelection, num_layers: int) -> None:
    """A layer index or number of mix weights the service's model cannot have is a 400, before any work."""
    try:
        selection.check_model(num_layers)
    except ConfigError as e:
        field, problem = str(e).split(" ", 1)
        raise RequestError(400, f"'{field}' {_LONG_NUMBER.sub(lambda m: _clip(m[0]), problem)}") from None


def check_answer(arrays: list[np.ndarray], selection: VectorSelection) -> None:
    """Refuses (400) an answer that overflows its dtype: a ``mix_gamma`` near float32's limit, or vectors past
    float16's 65504 with ``dtype`` float16 (JSON cannot carry infinities, and a client would not want them)."""
    for i, array in enumerate(arrays):
        if not np.isfinite(array).all():
            scaled = f" scaled by mix_gamma {selection.mix_gamma:g}" if selection.layer == "mix" else ""
            advice = [a for a, applies in (("a smaller mix_gamma", selection.layer == "mix"),
                                           ("dtype float32", selection.dtype != "float32")) if applies]
            raise RequestError(400, f"sentences[{i}]'s vectors{scaled} overflow {selection.dtype} (largest "
                                    f"{float(np.finfo(selection.dtype).max):g}): ask for {' or '.join(advice)}",
                               "non_finite")


def _selection(data: dict) -> VectorSelection:
    if "output" in data and "layer" in data:
        raise RequestError(400, "give 'layer' or 'output' (its older name), not both")
    fields = {k: v for k, v in data.items() if k in SELECTION}
    if "output" in data:
        fields["layer"] = data["output"]
    try:
        selection = VectorSelection(**fields)
    except ConfigError as e:  # "pool must be one of ...": the field as the request names it, and the problem
        field, problem = str(e).split(" ", 1)
        raise RequestError(400, f"'{'output' if field == 'layer' and 'output' in data else field}' "
                                f"{_clip(problem, 200)}") from None
    for field in REQUEST_FIELDS:
        value = data.get(field.name)
        if field.only_with_layer and field.name in data and selection.layer != field.only_with_layer:
            raise RequestError(400, f"'{field.name}' is for layer {field.only_with_layer} (got layer "
                                    f"{_clip(selection.layer)})")
        if field.float32 and abs(value or 0) > FLOAT32_MAX:  # a number, checked by VectorSelection
            raise RequestError(400, f"'{field.name}' {value:g} is beyond float32's range (at most {FLOAT32_MAX:g} "
                                    "either way)", "non_finite")
    return selection


_LONG_NUMBER = re.compile(r"\d{41,}")
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEPS = bytes.maketrans(b"[{]}", bytes([1, 1, 255, 255]))


def check_nesting(body: bytes, limit: int = MAX_NESTING) -> None:
    """Refuses (400) a UTF-8 ``body`` whose lists and objects nest deeper than ``limit``, without parsing it.

    Linear time, no recursion: escapes are dropped first (so that a string holds no quote), then strings (brackets
    in tokens do not count), and the depth is the running sum of the brackets left. Exact for valid JSON; in a body
    that is not JSON it is exact up to the first error, which is as far as the parser would get.
    """
    brackets = _STRING.sub(b"", _ESCAPE.sub(b"", body)).translate(None, _NOT_BRACKET)
    if len(brackets) <= limit:
        return
    depth = int(np.cumsum(np.frombuffer(brackets.translate(_STEPS), dtype=np.int8), dtype=np.int64).max())
    if depth > limit:
        raise RequestError(400, f"the body nests lists and objects {depth} deep, over the limit of {limit} "
                                "(a request needs 3)", "nesting")


def _no_constant(name: str) -> None:
    raise RequestError(400, f"the body holds {name}, which is not JSON: numbers must be finite", "non_finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RequestError(400, f"the number {_clip(text)} is too large for a float", "non_finite")
    return value


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:  # over Python's limit on digits (4300): a ValueError, not a JSONDecodeError
        raise RequestError(400, f"the number {_clip(text)} has {len(text)} digits, too many", "non_finite") from None
    try:
        float(value)  # every number of a request is used as a float (or a small index)
    except OverflowError:
        raise RequestError(400, f"the number {_clip(text)} is too large for a float", "non_finite") from None
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise RequestError(400, f"the key {_clip(key)!r} appears twice in one object", "duplicate_key")
    return data


def too_slow(timeout: float) -> RequestError:
    return RequestError(408, f"the body did not arrive within {timeout:g} s of the headers (--body-timeout): send it "
                             "at once, or fewer sentences at a time", "too_slow")


def too_large(size: int, limit: int) -> RequestError:
    return RequestError(413, f"the body is {size} bytes or more, over the limit of {limit} bytes: "
                             "send fewer sentences at a time")


def _sentence(sentence: object, i: int, max_tokens: int) -> list[str]:
    where = f"sentences[{i}]"
    if isinstance(sentence, str):
        tokens = sentence.split()
    elif isinstance(sentence, list):
        tokens = sentence
        for j, token in enumerate(tokens):
            if not isinstance(token, str):
                raise RequestError(400, f"{where}[{j}] must be a string (a token), got {_kind(token)}")
            if not token:
                raise RequestError(400, f"{where}[{j}] is an empty token")
            if len(token.split()) != 1 or token != token.strip():
                raise RequestError(400, f"{where}[{j}] {_clip(token)!r} contains whitespace: tokens are split on "
                                        "whitespace (send the sentence as one string to have it split)")
    else:
        raise RequestError(400, f"{where} must be a list of tokens or a string, got {_kind(sentence)}")
    if len(tokens) > max_tokens:
        raise RequestError(413, f"{where} has {len(tokens)} tokens, over the limit of {max_tokens} per sentence")
    return list(tokens)


def _kind(value: object) -> str:
    """A JSON value's type, in JSON's words."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _clip(value: object, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
