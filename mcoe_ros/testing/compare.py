"""Comparison of a result with its reference (the compiled path against the Python reference, in the tests)."""

from __future__ import annotations

import numpy as np


def assert_close(a, b, tol: float = 1e-9) -> float:
    """Max abs difference of ``a`` and the reference ``b`` relative to max(1, max |b|); asserts the shapes agree and
    the difference is <= ``tol``; returns it."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = float(np.abs(a - b).max() / max(1.0, float(np.abs(b).max()))) if b.size else 0.0
    assert err <= tol, err
    return err
