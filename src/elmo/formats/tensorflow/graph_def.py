"""The few facts a TF-Hub ELMo module keeps only in its graph, read from ``saved_model.pb`` without TensorFlow.

A hub module's variables give every size of the biLM, but not its char CNN activation, its clip values, its
residual switch or its word length: those are graph ops. This module walks ``SavedModel -> MetaGraphDef ->
GraphDef`` and its function library with the wire-format reader of :mod:`elmo.formats.tensorflow.protobuf` (no
generated code, no protobuf package), keeps each node's name, op, inputs and attributes, and reads from them what
bilm-tf's graph builder (``bilm/model.py``) leaves behind:

* activation: the ``Relu`` or ``Tanh`` applied to each convolution's ``MaxPool``;
* ``max_characters_per_token``: the ``MaxPool`` of convolution i spans ``max_chars - width_i + 1`` positions
  (the set of spans must fit the set of widths);
* clips: ``tf.clip_by_value`` inside ``lstm_cell`` is a ``Minimum`` (or one ``ClipByValue``) with a constant
  bound; the one applied to the projection's ``MatMul`` is ``proj_clip``, the other ``cell_clip``;
* residual: ``ResidualWrapper`` adds a layer's input to its output with a float ``Add`` in the scope of cells 1..L-1
  but outside ``lstm_cell`` (the only other ``Add`` there is the loop's int32 time counter).

Evidence, not absence: "no clip" and "no residual" are facts only where the graph shows the computation they would
be part of. A cell counts as computed when its ``lstm_cell`` scope holds the gates' ``MatMul`` and the ``Sigmoid``
and ``Tanh`` of the cell (variables named ``.../lstm_cell/kernel`` and their initialisers are not the computation);
the projection counts when a ``MatMul`` multiplies by the ``projection/kernel`` variable. A fact the graph does not
show stays unknown (None, or False for the ``*_seen`` flags) and the reader falls back (formats/tensorflow/tf_hub.py).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from elmo.errors import WeightFileError
from elmo.formats.tensorflow.protobuf import (
    BYTES,
    FIXED32,
    FIXED64,
    VARINT,
    MalformedMessage,
    fields,
    messages,
    packed_varints,
)

_FLOAT_TYPES = {1, 2, 14, 19}  # DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_HALF


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str] = field(default_factory=list)
    attrs: dict[str, bytes] = field(default_factory=dict)
    """Attribute name -> the raw ``AttrValue`` message."""


def _node(data: bytes) -> Node:
    node = Node("", "")
    for number, wire, value in fields(data):
        if wire != BYTES:
            continue
        if number == 1:
            node.name = value.decode("utf-8", "replace")
        elif number == 2:
            node.op = value.decode("utf-8", "replace")
        elif number == 3:
            node.inputs.append(value.decode("utf-8", "replace"))
        elif number == 5:  # map<string, AttrValue> entries
            key, attr = "", b""
            for n, w, v in fields(value):
                if n == 1 and w == BYTES:
                    key = v.decode("utf-8", "replace")
                elif n == 2 and w == BYTES:
                    attr = v
            node.attrs[key] = _checked_attr(attr)
    return node


def _checked_attr(attr: bytes) -> bytes:
    """``attr``, after walking the parts of it that :func:`graph_facts` reads (its type, its list of ints, its
    tensor), so that a malformed attribute is found here, inside :func:`read_graphs`, where the file is named."""
    _attr_type(attr), _attr_ints(attr), _tensor_scalar(attr)
    return attr


def read_graphs(data: bytes, source: str) -> list[list[Node]]:
    """The nodes of each meta graph of a serialized ``SavedModel`` (its GraphDef's nodes, then those of every
    function in its library)."""
    graphs = []
    try:
        for meta_graph in messages(data, 2):  # SavedModel.meta_graphs
            nodes = []
            for graph_def in messages(meta_graph, 2):  # MetaGraphDef.graph_def
                nodes += [_node(n) for n in messages(graph_def, 1)]  # GraphDef.node
                for library in messages(graph_def, 2):  # GraphDef.library
                    for function in messages(library, 1):  # FunctionDefLibrary.function
                        nodes += [_node(n) for n in messages(function, 3)]  # FunctionDef.node_def
            graphs.append(nodes)
    except MalformedMessage as e:
        raise WeightFileError(f"{source}: not a readable SavedModel ({e})") from e
    return graphs


def _attr_type(attr: bytes) -> int | None:
    return next((v for n, w, v in fields(attr) if n == 6 and w == VARINT), None)  # type: ignore[return-value]


def _attr_ints(attr: bytes) -> list[int]:
    """``AttrValue.list.i`` (packed or not)."""
    values: list[int] = []
    for listed in messages(attr, 1):
        for n, w, v in fields(listed):
            if n == 3 and w == VARINT:
                values.append(v)  # type: ignore[arg-type]
            elif n == 3 and w == BYTES:
                values.extend(packed_varints(v))  # type: ignore[arg-type]
    return values


def _tensor_scalar(attr: bytes) -> float | None:
    """The first value of a float ``AttrValue.tensor`` (a Const's ``value``), or None."""
    for tensor in messages(attr, 8):
        dtype = 1
        for n, w, v in fields(tensor):
            if n == 1 and w == VARINT:
                dtype = v  # type: ignore[assignment]
        for n, w, v in fields(tensor):
            if n == 5 and w == FIXED32:  # float_val, unpacked
                return struct.unpack("<f", v.to_bytes(4, "little"))[0]  # type: ignore[union-attr]
            if n == 5 and w == BYTES and len(v) >= 4:  # float_val, packed
                return struct.unpack("<f", v[:4])[0]  # type: ignore[index]
            if n == 6 and w == FIXED64:  # double_val
                return struct.unpack("<d", v.to_bytes(8, "little"))[0]  # type: ignore[union-attr]
            if n == 6 and w == BYTES and len(v) >= 8:
                return struct.unpack("<d", v[:8])[0]  # type: ignore[index]
            if n == 4 and w == BYTES:  # tensor_content
                if dtype == 1 and len(v) >= 4:
                    return struct.unpack("<f", v[:4])[0]  # type: ignore[index]
                if dtype == 2 and len(v) >= 8:
                    return struct.unpack("<d", v[:8])[0]  # type: ignore[index]
    return None


@dataclass
class GraphFacts:
    """What the graph says; None (or False for the ``*_seen`` flags) where it says nothing."""

    activation: str | None = None
    max_characters_per_token: int | None = None
    cell_seen: bool = False
    """The graph computes an LSTM cell: ``cell_clip`` is what it clips the cell with (None: no clip)."""
    cell_clip: float | None = None
    projection_seen: bool = False
    """The graph computes the cell's projection: ``proj_clip`` is what it clips it with (None: no clip)."""
    proj_clip: float | None = None
    residual: bool | None = None
    """Whether layers 1.. add their input; None unless the graph computes a cell of layer 1 or above."""


def _base(name: str) -> str:
    """A node input -> the node's name (``^ctl``, ``name:1`` and function-style ``name:output:0``)."""
    return name.lstrip("^").split(":", 1)[0]


_PASS_THROUGH = ("Identity", "Enter", "ReadVariableOp")
"""Ops that hand a value on unchanged (a variable's read, a loop's input)."""
_MATMULS = ("MatMul", "BatchMatMul", "BatchMatMulV2")
_CELL_SCOPE = re.compile(r"(?:^|/)RNN_\d+/RNN/MultiRNNCell/Cell(\d+)/(.*)$")


def graph_facts(graphs: list[list[Node]], widths: list[int]) -> GraphFacts:
    """The facts of the first meta graph that holds a bilm-tf biLM (``widths``: the convolutions' widths)."""
    for nodes in graphs:
        facts = _facts(nodes, widths)
        if facts.activation is not None or facts.cell_seen:
            return facts
    return GraphFacts()


def _facts(nodes: list[Node], widths: list[int]) -> GraphFacts:
    by_name = {node.name: node for node in nodes}
    facts = GraphFacts()

    def producer(name: str, hops: int = 4) -> Node | None:
        node = by_name.get(_base(name))
        while node is not None and node.op in _PASS_THROUGH and node.inputs and hops > 0:
            node, hops = by_name.get(_base(node.inputs[0])), hops - 1
        return node

    def constant(name: str) -> float | None:
        node = producer(name)
        return _tensor_scalar(node.attrs.get("value", b"")) if node is not None and node.op == "Const" else None

    activations, spans = set(), set()
    residual_layers: set[int] = set()
    cell_ops: dict[int, set[str]] = {}  # layer -> the ops of its lstm_cell scope that compute the cell
    clips: list[tuple[Node, float]] = []
    projection_matmuls: set[str] = set()
    for node in nodes:
        if node.op in ("Relu", "Tanh") and node.inputs:
            source = producer(node.inputs[0])
            if source is not None and source.op in ("MaxPool", "MaxPoolV2"):
                activations.add(node.op.lower())
        if node.op == "MaxPool" and "CNN/" in node.name:
            ksize = _attr_ints(node.attrs.get("ksize", b""))
            if len(ksize) == 4:
                spans.add(ksize[2])
        match = _CELL_SCOPE.search(node.name)
        if match is None:
            continue
        layer, rest = int(match.group(1)), match.group(2)
        if "lstm_cell/" in rest or rest.startswith("lstm_cell"):
            if node.op in _MATMULS and len(node.inputs) >= 2:
                weight = producer(node.inputs[1])
                if weight is not None and weight.name.endswith("projection/kernel"):
                    projection_matmuls.add(node.name)
                else:
                    cell_ops.setdefault(layer, set()).add("MatMul")
            elif node.op in ("Sigmoid", "Tanh"):
                cell_ops.setdefault(layer, set()).add(node.op)
            bound = None
            if node.op == "Minimum" and "clip_by_value" in rest and len(node.inputs) >= 2:
                bound = constant(node.inputs[1])
            elif node.op == "ClipByValue" and len(node.inputs) >= 3:
                bound = constant(node.inputs[2])
            if bound is not None:
                clips.append((node, float(bound)))
        elif layer > 0 and node.op in ("Add", "AddV2") and _attr_type(node.attrs.get("T", b"")) in _FLOAT_TYPES:
            residual_layers.add(layer)
    computed = {layer for layer, ops in cell_ops.items() if ops >= {"MatMul", "Sigmoid", "Tanh"}}
    facts.cell_seen = bool(computed)
    facts.projection_seen = facts.cell_seen and bool(projection_matmuls)
    for node, bound in clips:
        source = producer(node.inputs[0])
        if source is not None and source.name in projection_matmuls:
            facts.proj_clip = bound if facts.projection_seen else None
        elif facts.cell_seen:
            facts.cell_clip = bound
    if len(activations) == 1:
        facts.activation = activations.pop()
    if spans and widths:  # convolution i pools max_chars - width_i + 1 positions
        length = max(spans) + min(widths) - 1
        if spans == {length - width + 1 for width in widths}:
            facts.max_characters_per_token = length
    if any(layer > 0 for layer in computed):
        facts.residual = bool(residual_layers & computed)
    return facts
