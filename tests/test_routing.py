"""Uniform routing's statistics (roofline.routing), against routing simulated token by token: each token picks
k distinct experts of E at random; the experts are split whole over g GPUs; count what each GPU touches."""

import numpy as np
import pytest

from roofline.routing import expected_busiest_touched, expected_experts_touched


def _simulated(E: int, k: int, M: int, g: int, trials: int = 3000, seed: int = 0) -> tuple[float, float]:
    """(mean experts touched in all, mean of the busiest GPU's touched experts) over ``trials`` routings."""
    rng = np.random.default_rng(seed)
    picks = np.argsort(rng.random((trials, M, E)), axis=-1)[..., :k]  # k distinct experts a token
    touched = np.zeros((trials, E), dtype=bool)
    np.put_along_axis(touched, picks.reshape(trials, M * k), True, axis=1)
    return float(touched.sum(axis=1).mean()), float(touched.reshape(trials, g, E // g).sum(axis=2).max(axis=1).mean())


@pytest.mark.parametrize("E, k, M, g", [(128, 8, 16, 8), (128, 8, 16, 4), (256, 8, 1, 8), (256, 8, 4, 8), (256, 8, 64, 8),
                                        (64, 6, 3, 4)])
def test_the_busiest_gpu_touches_what_simulated_routing_gives(E, k, M, g):
    whole, busiest = _simulated(E, k, M, g)
    assert expected_experts_touched(E, k, M) == pytest.approx(whole, rel=0.02)
    assert expected_busiest_touched(E, k, M, g) == pytest.approx(busiest, rel=0.03)
    assert expected_busiest_touched(E, k, M, g) >= expected_experts_touched(E, k, M) / g


def test_its_limits():
    """No tokens touch nothing; enough touch every expert; one GPU, or a split that is not whole, is the mean;
    arrays of token counts are read at once, as one at a time."""
    assert expected_busiest_touched(256, 8, 0, 8) == 0.0
    assert expected_busiest_touched(256, 8, 100_000, 8) == pytest.approx(32.0)
    assert expected_busiest_touched(128, 8, 16, 1) == pytest.approx(expected_experts_touched(128, 8, 16))
    assert expected_busiest_touched(128, 8, 16, 3) == pytest.approx(expected_experts_touched(128, 8, 16) / 3)
    ms = np.array([1.0, 7.0, 300.0])
    assert np.allclose(expected_busiest_touched(160, 6, ms, 8), [expected_busiest_touched(160, 6, float(m), 8) for m in ms])
