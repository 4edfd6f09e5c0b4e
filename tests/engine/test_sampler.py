"""Sampling policies on hand-made logits."""
import numpy as np
import pytest

from engine.errors import SettingsError
from engine.sampler import GREEDY, Sampler, SamplingParams

LOGITS = np.log(np.array([0.5, 0.3, 0.15, 0.05]))


def draws(params, n=3000, recent=()):
    s = Sampler(params)
    return np.bincount([s(LOGITS, list(recent)) for _ in range(n)], minlength=4) / n


def test_greedy_and_repetition_penalty():
    assert Sampler(GREEDY)(LOGITS, []) == 0
    assert Sampler(GREEDY.with_(repetition_penalty=3.0))(np.array([2.0, 1.0, 0.5]), [0]) == 1


def test_temperature_one_follows_the_distribution():
    f = draws(SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, seed=0))
    np.testing.assert_allclose(f, [0.5, 0.3, 0.15, 0.05], atol=0.03)


@pytest.mark.parametrize("kw, allowed", [
    (dict(top_k=2), {0, 1}), (dict(top_p=0.7), {0, 1}), (dict(min_p=0.2), {0, 1, 2}),
])
def test_truncations(kw, allowed):
    base = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, seed=1)
    f = draws(SamplingParams(**{**base, **kw}))
    assert set(np.nonzero(f)[0]) == allowed


def test_seed_reproduces():
    p = SamplingParams(temperature=1.0, seed=42)
    a, b = Sampler(p), Sampler(p)
    assert [a(LOGITS, []) for _ in range(50)] == [b(LOGITS, []) for _ in range(50)]


@pytest.mark.parametrize("kw", [dict(temperature=-1), dict(top_p=0), dict(min_p=1), dict(max_tokens=0)])
def test_invalid_settings(kw):
    with pytest.raises(SettingsError):
        SamplingParams(**kw).validate()
