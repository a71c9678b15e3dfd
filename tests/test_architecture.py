"""The import rules of docs/architecture.md, read from the code: which part may import which, no cycles, no private
name imported across modules, at most 12 files at the package top. A failure names the import that breaks a rule."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "elmo"

BASE = {"errors", "config", "settings", "shared_settings", "precision", "devices", "text", "runtime"}
"""What every part may import: the one-line errors, the settings, the architecture config, the text readers and
token encodings, and the process plumbing."""

MAY_IMPORT = {
    "errors": set(),
    "runtime": {"errors"},
    "settings": {"errors"},
    "config": {"errors", "settings"},
    "precision": {"errors", "settings"},
    "devices": {"errors", "settings"},
    "shared_settings": {"errors", "settings", "precision"},
    "text": {"errors", "runtime"},
    "presets": {"errors"},
    "client": {"errors"},
    "modules": BASE,
    "formats": BASE | {"modules"},
    "embedding": BASE | {"modules", "formats"},
    "training": BASE | {"modules", "formats", "presets"},
    "tasks": BASE | {"modules", "formats", "embedding", "training", "presets"},
    "probing": BASE | {"modules", "formats", "embedding"},
    "serving": BASE | {"formats", "embedding", "client"},
    "allennlp": BASE | {"modules", "formats", "embedding"},
    "integrations": BASE | {"modules", "formats", "embedding"},
    "cli": None,  # the entry point: anything
    "__main__": {"cli"},
    "__init__": None,  # `import elmo` names the public API, each imported on first use
}
"""Part -> the parts it may import (besides itself); a part is a folder of the package or a module at its top.
This is the table of docs/architecture.md ("Which way imports go"), which says why."""

ROOT_NAMES = {"__version__", "DISTRIBUTION"}
"""What any module may take from the package root itself (the root imports the rest lazily, so anything else taken
from it would hide an import of a higher part)."""

MAX_TOP_FILES = 12


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def part_of(module: str) -> str:
    """The part a module belongs to: its folder under ``elmo``, or its own name at the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def imports(module: str) -> list[tuple[str, list[str], int]]:
    """Every ``elmo`` module ``module`` imports, at any depth of its code (a lazy import inside a function is an
    import too): (imported module, names taken from it, line)."""
    path = MODULES[module]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names if alias.name.split(".")[0] == "elmo"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "elmo":
                continue
            names = [alias.name for alias in node.names]
            submodules = [f"{target}.{name}" for name in names if f"{target}.{name}" in MODULES]
            found.append((target, [n for n in names if f"{target}.{n}" not in MODULES], node.lineno))
            found += [(sub, [], node.lineno) for sub in submodules]
    return found


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent.parent)}:{line}"


def test_every_part_is_in_the_table():
    assert sorted({part_of(m) for m in MODULES} - set(MAY_IMPORT)) == []


def test_no_part_imports_a_part_above_it():
    broken = []
    for module in MODULES:
        mine, allowed = part_of(module), MAY_IMPORT[part_of(module)]
        for target, names, line in imports(module):
            theirs = part_of(target)
            if target == "elmo":
                if mine != "__init__" and set(names) - ROOT_NAMES:
                    broken.append(f"{where(module, line)}: takes {sorted(set(names) - ROOT_NAMES)} from the root")
            elif allowed is not None and theirs != mine and theirs not in allowed:
                broken.append(f"{where(module, line)}: {mine} imports {target} ({theirs})")
    assert broken == []


def test_no_private_name_is_imported_from_another_module():
    broken = [
        f"{where(module, line)}: {name} from {target}"
        for module in MODULES
        for target, names, line in imports(module)
        for name in names
        if name.startswith("_") and not name.startswith("__") and target != module
    ]
    assert broken == []


def test_the_modules_import_no_cycle():
    """Between modules, lazy imports included: a cycle means two modules are one concept or a layer is missing."""
    graph = {m: {t for t, _, _ in imports(m) if t in MODULES and t != m and t != "elmo"} for m in MODULES}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(" -> ".join(path[path.index(target):] + [module, target]) if target in path
                              else f"{module} -> {target}")
            elif target not in state:
                visit(target, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert cycles == []


def test_the_package_top_holds_few_files():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_FILES, top
