"""Rotary position tables, computed on the host in float64.

Keys are stored rotated at their stream index and queries are rotated at theirs, so a score
only ever depends on the difference. The angle `pos * theta` must not be formed in float32:
at position 10**7 a float32 angle is off by a whole radian. Here the angle is reduced
modulo 2*pi in float64 (exact to ~1e-9 rad for any int64 position) before the cosine, and
only the final cos/sin values are rounded to float32.
"""
from __future__ import annotations

import numpy as np

from .config import ModelConfig


def inv_freq(config: ModelConfig, freq_factors: np.ndarray | None = None, local: bool = False) -> np.ndarray:
    """theta_i = base^(-2i/n_rot) for the rotated dims' half, as float64, times the linear
    position scale (global layers), divided by per-frequency factors when the file has them
    (Llama 3.x rope_freqs, Phi-3 LongRoPE factors). local: the sliding-window layers' base."""
    n_rot = config.local_rotary_dims if local else config.rotary_dims
    base = config.rope_local_base if local else config.rope_base
    theta = base ** (-np.arange(n_rot // 2, dtype=np.float64) * 2.0 / n_rot)
    if not local:
        theta = theta * config.rope_scale
        if freq_factors is not None:
            theta = theta / np.asarray(freq_factors, dtype=np.float64)[: n_rot // 2]
    if config.rope_sections:
        theta = np.where(text_sections(config.rope_sections, n_rot // 2), theta, 0.0)
    return theta


def text_sections(sections, half: int) -> np.ndarray:
    """Which rotary pairs a text token turns, under Qwen3.5's interleaved multi-section rotary
    (ggml's IMROPE): pair i takes the position of section i % 3 while i < 3 * that section's
    size, else the 4th one. llama.cpp gives text tokens their position in the first three and
    0 in the 4th, so the pairs left to the 4th do not turn (theta 0)."""
    s = list(sections) + [0] * (4 - len(sections))
    i = np.arange(half)
    return i < 3 * np.array(s[:3])[i % 3]


def cos_sin(positions: np.ndarray, theta: np.ndarray, mscale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin of positions x theta, shape [..., half], float32, exact for huge positions; both
    times mscale (LongRoPE's attention factor, as ggml's rope multiplies them)."""
    pos = np.asarray(positions, dtype=np.int64)
    # Split pos = hi * 2**20 + lo so each product is exact enough in float64 even at 2**40.
    hi = (pos >> 20).astype(np.float64)[..., None]
    lo = (pos & ((1 << 20) - 1)).astype(np.float64)[..., None]
    step = np.mod(theta * float(1 << 20), 2 * np.pi)
    angle = np.mod(hi * step, 2 * np.pi) + lo * theta
    return (mscale * np.cos(angle)).astype(np.float32), (mscale * np.sin(angle)).astype(np.float32)
