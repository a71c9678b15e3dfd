"""The code blocks of the README and the guides, as the journey tests run them.

The rule the docs follow: every fenced block tagged ``python`` or ``bash`` in README.md and docs/*.md is run, in
file order, in one work directory per file, unless the line before it (blank lines aside) is
``<!-- not-run: REASON -->``, which says in the Markdown source why a reader's copy cannot run in the test suite
(a download, hours of training, several processes). A block tagged with another name for Python or a shell
(``sh``, ``py``, ...) is an error, so no block escapes the rule by its tag; blocks that are not code (file trees,
JSON) are left untagged or tagged with what they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = ("python", "bash")
ALIASES = {"sh", "shell", "zsh", "console", "shell-session", "py", "python3", "pycon", "ipython"}
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")


@dataclass(frozen=True)
class Snippet:
    path: Path  # the Markdown file
    line: int  # 1-based line of the opening fence
    language: str  # the fence's tag ("" when untagged)
    code: str
    not_run: str | None  # the reason given in <!-- not-run: ... -->, or None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.not_run is None


def doc_files(repo: Path) -> list[Path]:
    """The files whose blocks the journeys run: the README and the guides (not the measurement logs)."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def read_snippets(path: Path) -> list[Snippet]:
    """Every fenced block of a Markdown file, with the not-run reason written before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    snippets = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, language = opening.groups()
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and set(lines[end].strip()) == {fence[0]}
        ):
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}:{i + 1}: code block never closed")
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : end]]
        snippets.append(Snippet(path, i + 1, language.lower(), "\n".join(body) + "\n", _reason_before(lines, i)))
        i = end + 1
    return snippets


def _reason_before(lines: list[str], fence_index: int) -> str | None:
    before = fence_index - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    marker = NOT_RUN.match(lines[before].strip()) if before >= 0 else None
    return marker.group(1) if marker else None


def rule_violations(snippets: list[Snippet]) -> list[str]:
    """Blocks that break the rule: a Python or shell block tagged so that it would not run, or an empty reason."""
    problems = []
    for s in snippets:
        if s.language in ALIASES:
            problems.append(f"{s.where}: tagged '{s.language}': tag it python or bash (run, or not-run with a reason)")
        if s.not_run is not None and not s.not_run:
            problems.append(f"{s.where}: <!-- not-run: --> without a reason")
        if s.not_run is not None and s.language not in RUN_LANGUAGES:
            problems.append(f"{s.where}: a not-run marker on a '{s.language}' block, which never runs")
    return problems
