"""Prompt-lookup drafts for speculative decoding: guess the next tokens by finding the latest
earlier place in the conversation where the last few tokens occurred, and copying what followed.

Chat replies quote the question, repeat names, code and lists, and small models repeat
themselves: those stretches are drafted for free (no draft model, no extra memory). The decoder
verifies a draft in one multi-row step (~2x the cost of a single-token step on the CPU), and the
sampler keeps exactly the tokens plain decoding would have produced (greedy) or drawn from the
same distribution (sampling): speculation changes the speed, never the output.

A verify that accepts nothing costs a step for one token, so `PromptLookup` drafts only on a
match of at least `min_ngram` tokens and backs off for a while after drafts that keep failing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DraftStats:
    verifies: int = 0  # multi-row steps run
    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # draft tokens kept

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def to_dict(self) -> dict:
        return {"verifies": self.verifies, "drafted": self.drafted, "accepted": self.accepted,
                "acceptance": round(self.acceptance, 3)}


class PromptLookup:
    """Drafts from the token history of one conversation (the caller appends every token)."""

    def __init__(self, max_draft: int = 7, max_ngram: int = 8, min_ngram: int = 3,
                 horizon: int = 8192, backoff: int = 8):
        self.max_draft = max_draft
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.horizon = horizon  # only search this many recent tokens: bounded work per step
        self.backoff = backoff
        self._hist = np.zeros(max(horizon * 2, 64), np.int32)
        self._n = 0
        self._pause = 0  # tokens to wait before drafting again
        self._misses = 0
        self.stats = DraftStats()

    def reset(self, ids=()) -> None:
        self._n, self._pause, self._misses = 0, 0, 0
        self.extend(ids)

    def extend(self, ids) -> None:
        ids = np.asarray(ids, np.int32).reshape(-1)[-self.horizon :]
        if self._n + ids.size > self._hist.size:  # keep the last `horizon` tokens, in place
            keep = self._hist[max(0, self._n - self.horizon) : self._n].copy()
            self._hist[: keep.size] = keep
            self._n = keep.size
        self._hist[self._n : self._n + ids.size] = ids
        self._n += ids.size
        self._pause = max(0, self._pause - ids.size)

    def propose(self, limit: int) -> list[int]:
        """Up to min(limit, max_draft) tokens that followed the latest earlier occurrence of the
        longest matching suffix (max_ngram down to min_ngram tokens); [] when there is none."""
        limit = min(limit, self.max_draft)
        if limit <= 0 or self._pause > 0:
            return []
        h = self._hist[: self._n]
        for n in range(min(self.max_ngram, h.size - 1), self.min_ngram - 1, -1):
            starts = _occurrences(h, h[-n:])
            starts = starts[starts + n < h.size]  # not the suffix itself
            if starts.size:
                return _copy(h, int(starts[-1]) + n, limit)
        return []

    def record(self, drafted: int, accepted: int) -> None:
        """After a verify: back off when drafts keep failing (they cost a step each)."""
        st = self.stats
        st.verifies += 1
        st.drafted += drafted
        st.accepted += accepted
        self._misses = 0 if accepted else self._misses + 1
        if self._misses >= 2:
            self._pause = self.backoff * self._misses


def next_tokens(decoder, drafter: PromptLookup | None, sampler, tid: int, recent, room: int,
                stop=()) -> list[int]:
    """Feed tid (sampled, not yet cached) and return what follows it: one sampled token, or,
    when the history offers a draft, the drafts the sampler kept plus one more. At most `room`
    tokens; a draft ends before any `stop` token (plain decoding stops there, uncached).
    drafter None: no speculation. The caller appends what it emits to the drafter's history."""
    draft = drafter.propose(room - 1) if drafter is not None else []
    for i, t in enumerate(draft):
        if t in stop:
            draft = draft[:i]
            break
    if not draft:
        return [sampler(decoder.feed([tid]), recent)]
    rows = decoder.verify([tid] + draft)
    out = sampler.verify(rows, draft, recent)
    decoder.accept(len(out))  # tid and the kept drafts
    drafter.record(len(draft), len(out) - 1)
    return out


def _copy(h: np.ndarray, start: int, n: int) -> list[int]:
    """n tokens from h[start:], running on into the copy itself (LZ77-style) when h ends first:
    a match 3 tokens back in "dear, dear, dear," drafts the whole period again and again."""
    out = h[start : start + n].tolist()
    period = h.size - start
    while len(out) < n:
        out.append(out[len(out) - period])
    return out


def _occurrences(h: np.ndarray, pat: np.ndarray) -> np.ndarray:
    """Start indices where pat occurs in h (vectorised: one compare per pattern token)."""
    n = pat.size
    ok = h[: h.size - n + 1] == pat[0]
    for j in range(1, n):
        ok &= h[j : h.size - n + 1 + j] == pat[j]
    return np.flatnonzero(ok)
