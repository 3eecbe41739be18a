"""Shared test setup: the topology finder caches into a per-session temporary directory,
never into the user's ~/.cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _finder_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("COLLC_CACHE_DIR")
    os.environ["COLLC_CACHE_DIR"] = str(tmp_path_factory.mktemp("collc-cache"))
    yield
    if old is None:
        os.environ.pop("COLLC_CACHE_DIR", None)
    else:
        os.environ["COLLC_CACHE_DIR"] = old
