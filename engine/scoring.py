"""StreamingLLM-style evaluation: the log-probability of every token given what the bounded
cache holds when it is predicted, through the same Decoder as chat."""
from __future__ import annotations

import numpy as np

from .budget import MemoryPlan
from .decoder import Decoder


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def score(model, token_ids, plan: MemoryPlan, chunk: int = 64, progress=None) -> np.ndarray:
    """log p(token[i] | cache at i-1) for i = 1..n-1, as float64 [n - 1]."""
    ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
    if ids.size < 2:
        return np.zeros(0)
    dec = Decoder(model, plan, n_sink=plan.sinks, chunk=max(1, int(chunk)))
    out = np.empty(ids.size - 1)
    step = max(1, int(chunk))
    for start in range(0, ids.size - 1, step):
        part = ids[start : start + step]
        logp = log_softmax(dec.feed(part, all_logits=True, chunk=step))
        targets = ids[start + 1 : start + 1 + part.size]
        out[start : start + targets.size] = logp[np.arange(targets.size), targets]
        if progress is not None:
            progress(start + part.size, ids.size)
    return out
