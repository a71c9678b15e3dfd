"""The rule that decides which blocks of the docs run (markdown_snippets.py)."""

from __future__ import annotations

import pytest

from tests.journeys.markdown_snippets import read_snippets, rule_violations

DOC = """# Title

```bash
elmo demo
```

<!-- not-run: downloads 400 MB -->

```python
fetch_model("original")
```

1. In a list:

   ```python
   print("indented")
   ```

```
src/elmo/   a layout, not code
```

````markdown
```python
not a block of its own
```
````
"""


def test_blocks_their_tags_and_the_reasons_not_to_run_them(tmp_path):
    (tmp_path / "doc.md").write_text(DOC)
    snippets = read_snippets(tmp_path / "doc.md")
    assert [(s.line, s.language, s.runs, s.not_run) for s in snippets] == [
        (3, "bash", True, None),
        (9, "python", False, "downloads 400 MB"),
        (15, "python", True, None),
        (19, "", False, None),
        (23, "markdown", False, None),
    ]
    assert snippets[2].code == 'print("indented")\n'
    assert rule_violations(snippets) == []


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ("```sh\nelmo demo\n```\n", "doc.md:1: tagged 'sh': tag it python or bash"),
        ("<!-- not-run: -->\n```bash\nelmo demo\n```\n", "doc.md:2: <!-- not-run: --> without a reason"),
        ("<!-- not-run: why -->\n```json\n{}\n```\n", "doc.md:2: a not-run marker on a 'json' block"),
    ],
)
def test_blocks_that_would_escape_the_rule_are_reported(tmp_path, doc, problem):
    (tmp_path / "doc.md").write_text(doc)
    [reported] = rule_violations(read_snippets(tmp_path / "doc.md"))
    assert reported.startswith(problem)


def test_an_unclosed_block_is_an_error(tmp_path):
    (tmp_path / "doc.md").write_text("text\n```python\nprint()\n")
    with pytest.raises(ValueError, match="doc.md:2: code block never closed"):
        read_snippets(tmp_path / "doc.md")
