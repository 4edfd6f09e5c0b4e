"""engine.half: the f16 conversions spelled with integer operations give numpy's bits exactly."""
import jax
import jax.numpy as jnp
import numpy as np

from engine import half


def test_every_finite_f16_value_converts_exactly():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = h[np.isfinite(h)]
    got = np.asarray(jax.jit(half.to_f32)(jnp.asarray(h)))
    np.testing.assert_array_equal(got.view(np.uint32), h.astype(np.float32).view(np.uint32))  # (-0.0 too)


def test_rounding_to_f16_matches_numpy_ties_subnormals_and_overflow():
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    every = np.sort(every[np.isfinite(every)].astype(np.float32))
    rng = np.random.default_rng(0)
    x = np.concatenate([every, (every[1:] + every[:-1]) / 2,  # every value and every tie between two
                        *(rng.standard_normal(20000).astype(np.float32) * s for s in (1e-7, 1e-5, 1, 1e4, 1e5)),
                        np.float32([65519.0, 65520.0, -70000.0, 0.0, -0.0])])
    got = np.asarray(jax.jit(half.round_f16)(jnp.asarray(x)))
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
