"""benchmarks/torque_smoothing_bags.py: the centred moving average of the reported torques."""

import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bags(benchmark_module):
    return benchmark_module("torque_smoothing_bags")


def test_interior_samples_are_the_centred_mean(bags):
    x = np.random.default_rng(0).normal(size=(30, 3))
    y = bags.centred_average(x, 2)
    for k in range(2, 28):
        np.testing.assert_allclose(y[k], x[k - 2 : k + 3].mean(axis=0), atol=1e-12)
    # the ends: the window shrinks symmetrically (stays centred, no lag)
    np.testing.assert_allclose(y[0], x[0], atol=1e-12)
    np.testing.assert_allclose(y[1], x[:3].mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(y[-2], x[-3:].mean(axis=0), atol=1e-12)


def test_linear_signal_is_unchanged_and_segments_are_not_crossed(bags):
    t = np.arange(20.0)[:, None]
    np.testing.assert_allclose(bags.centred_average(2.0 * t + 1.0, 4), 2.0 * t + 1.0, atol=1e-12)
    x = np.where(t < 10, 0.0, 1.0)  # a step at a segment boundary
    seg = (t[:, 0] >= 10).astype(int)
    np.testing.assert_allclose(bags.centred_average(x, 3, seg), x, atol=1e-12)
    assert not np.allclose(bags.centred_average(x, 3), x)  # without the segments the step is smeared
