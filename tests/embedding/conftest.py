"""Fixtures the embedding tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def text(tmp_path, request):
    """The test module's ``LINES`` as an input file, one sentence per line."""
    path = tmp_path / "in.txt"
    path.write_text("\n".join(request.module.LINES) + "\n", encoding="utf-8")
    return path
