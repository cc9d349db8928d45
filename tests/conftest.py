"""Fixtures shared across test modules."""

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty qgpu cache directory (tokenizer ranks, build stages) per test module: a module's
    first build or tokenizer load is cold, its later ones may hit what that one stored."""
    return tmp_path_factory.mktemp("cache")

