"""Fixtures shared across test modules, and the ``slow`` mark for every test of the built model."""

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty qgpu cache directory (tokenizer ranks, build stages) per test module: a module's
    first build or tokenizer load is cold, its later ones may hit what that one stored."""
    return tmp_path_factory.mktemp("cache")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the built GPU model (``build_dir``, minutes to build) is slow, wherever
    it lives."""
    for item in items:
        if "build_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)

