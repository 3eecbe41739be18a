"""Small numpy helpers shared by the lowering and the checker."""

from __future__ import annotations

import numpy as np


def unique(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-d integer array: ``np.unique(a)`` without its check
    for masked arrays, which imports ``numpy.ma`` (a third of numpy's import time) into every
    build."""
    s = np.sort(a, kind="stable")
    out: np.ndarray = s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s
    return out
