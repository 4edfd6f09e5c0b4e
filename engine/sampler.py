"""Choosing the next token from logits, on the host (numpy): one vocabulary row per step is
cheap to copy, and keeping the policy out of the jitted step means changing a sampling setting
never recompiles anything.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .errors import SettingsError


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.2  # 0 = greedy; 0.2 is what the SmolLM2 card recommends
    top_k: int = 40  # 0 = off
    top_p: float = 0.9  # 1 = off
    min_p: float = 0.05  # 0 = off
    repetition_penalty: float = 1.1  # 1 = off
    repeat_last_n: int = 64
    seed: int | None = None
    max_tokens: int = 512
    ignore_eos: bool = False

    def validate(self) -> "SamplingParams":
        checks = [
            (0 <= self.temperature <= 5, f"temperature must be between 0 and 5 (got {self.temperature})"),
            (self.top_k >= 0, f"top-k must be 0 (off) or more (got {self.top_k})"),
            (0 < self.top_p <= 1, f"top-p must be in (0, 1] (got {self.top_p})"),
            (0 <= self.min_p < 1, f"min-p must be in [0, 1) (got {self.min_p})"),
            (0 < self.repetition_penalty <= 10, f"repetition penalty must be in (0, 10] (got {self.repetition_penalty})"),
            (self.max_tokens >= 1, f"max tokens must be at least 1 (got {self.max_tokens})"),
        ]
        for ok, msg in checks:
            if not ok:
                raise SettingsError(msg)
        return self

    def with_(self, **kw) -> "SamplingParams":
        return replace(self, **{k: v for k, v in kw.items() if v is not None}).validate()


GREEDY = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0)


class Sampler:
    def __init__(self, params: SamplingParams):
        self.params = params.validate()
        self.rng = np.random.default_rng(params.seed)

    def __call__(self, logits: np.ndarray, recent) -> int:
        """recent: the latest token ids (any sequence or deque), for the repetition penalty."""
        x = self._penalized(logits, recent)
        if self.params.temperature <= 0:
            return int(np.argmax(x))
        ids, probs = _candidates(x / self.params.temperature, self.params)
        return int(ids[self.rng.choice(ids.size, p=probs)])

    def verify(self, rows: np.ndarray, draft: list[int], recent) -> list[int]:
        """Speculative sampling against a draft: rows[i] are the logits after draft[:i] (rows has
        len(draft) + 1 rows). Returns the drafts kept plus one token sampled after them.

        Greedy keeps a draft token iff it is the argmax, so the output is exactly plain decoding's.
        Sampling keeps draft token d with probability p(d) and otherwise draws from p with d
        removed (the residual of speculative sampling for a draft that is a point mass): each
        token is distributed exactly as plain sampling would draw it."""
        p = self.params
        hist = list(recent)[-p.repeat_last_n :] if p.repetition_penalty != 1.0 else []
        out: list[int] = []
        for i, d in enumerate(draft):
            x = self._penalized(rows[i], hist)
            if p.temperature <= 0:
                t = int(np.argmax(x))
                if t != d:
                    return out + [t]
            else:
                ids, probs = _candidates(x / p.temperature, p)
                pd = float(probs[ids == d].sum())
                if self.rng.random() >= pd:  # rejected: draw from the residual
                    keep = ids != d
                    ids, probs = ids[keep], probs[keep] / probs[keep].sum()
                    return out + [int(ids[self.rng.choice(ids.size, p=probs)])]
            out.append(d)
            hist.append(d)
        return out + [self(rows[len(draft)], hist)]

    def _penalized(self, logits: np.ndarray, recent) -> np.ndarray:
        p = self.params
        x = np.asarray(logits, dtype=np.float32).reshape(-1).copy()
        if p.repetition_penalty != 1.0 and recent:
            ids = np.unique(np.fromiter(recent, dtype=np.int64)[-p.repeat_last_n :])
            vals = x[ids]
            x[ids] = np.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)
        return x


def _candidates(x: np.ndarray, p: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and their probabilities after top-k, top-p and min-p (llama.cpp's order)."""
    k = p.top_k if 0 < p.top_k < x.size else x.size
    ids = np.argpartition(-x, k - 1)[:k] if k < x.size else np.arange(x.size)
    ids = ids[np.argsort(-x[ids], kind="stable")]
    probs = np.exp(x[ids] - x[ids[0]])
    probs /= probs.sum()
    if p.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), p.top_p) + 1)
        ids, probs = ids[:keep], probs[:keep]
    if p.min_p > 0:
        m = probs >= p.min_p * probs[0]
        ids, probs = ids[m], probs[m]
    return ids, probs / probs.sum()
