"""The task-kind registry: every kind trains end to end on its tiny preset, and no code outside the registry
compares task names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import elmo
from elmo.tasks import TASK_KINDS, build_runner, load_task_data, load_task_model, train_task
from elmo.tasks.task_config import read_task_config
from tests.tasks.conftest import EXAMPLE_WRITERS, write_examples

SRC = Path(elmo.__file__).resolve().parent
REGISTRY = SRC / "tasks" / "kinds.py"


def test_every_kind_has_test_examples_and_a_tiny_preset():
    assert set(EXAMPLE_WRITERS) == set(TASK_KINDS)
    for name, kind in TASK_KINDS.items():
        assert kind.name == name and kind.description and "\n" not in kind.description
        assert read_task_config(f"{name}-tiny").task == name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TASK_KINDS))
def test_every_kind_trains_on_its_tiny_preset_and_reloads(name, bilm_dir, tmp_path):
    kind = TASK_KINDS[name]
    path = write_examples(name, tmp_path / f"{name}.txt")
    config = read_task_config(f"{name}-tiny")
    data = load_task_data(name, path, path, path)
    runner = build_runner(config, data, bilm_dir=bilm_dir, device="cpu", progress=False)
    assert sorted(runner.labels.labels) == sorted(set(kind.label_targets(data.train)))
    result = train_task(runner, data, output_dir=tmp_path / "run", bilm_dir=bilm_dir, progress=False)
    assert 0 <= result.test_score <= 100 and (tmp_path / "run" / "predictions.test.txt").is_file()

    again = load_task_model(tmp_path / "run", progress=False)
    assert again.kind is kind
    predicted = again.predict(data.test)
    assert [kind.tags_tokens] * len(predicted) == [isinstance(p, list) for p in predicted]
    assert again.score(data.test, predicted) == result.test_score


def _constants(node: ast.AST) -> list:
    """The constants an operand compares against: itself, or the items of a literal tuple, list or set."""
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [c for item in node.elts for c in _constants(item)]
    return []


def test_no_code_outside_the_registry_compares_task_names():
    names = set(TASK_KINDS) | {"ner", "sst"}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.MatchValue):
                operands = [node.value]
            else:
                continue
            if names & {c for operand in operands for c in _constants(operand) if isinstance(c, str)}:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == [], "compare the task kind's fields (elmo.tasks.kinds), not its name"
