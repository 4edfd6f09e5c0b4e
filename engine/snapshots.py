"""Recurrent-state snapshots at message boundaries, so a hybrid model's edit or regenerate
re-reads about a window of tokens instead of the whole chat.

A DeltaNet state summarises every token fed before it and cannot un-see one, so rebuilding the
cache after a change to the conversation would mean feeding the stream from its start. Instead
the session keeps a copy of the state (config.state_bytes each, at most LIMIT of them) at the
end of each turn's prefill and at the last message ends a rebuild feeds, keyed by the stream it has seen (a digest of its tokens) and by the
plan that shaped it (sinks, window and KV precision: the attention layers' view feeds the
DeltaNet layers). A rebuild whose new stream starts with a snapshot's tokens, at or before the
point where the window's tokens begin, feeds the sinks (their K/V), puts the snapshot's state
back, and feeds only from the snapshot on. Without one that fits, the whole stream is fed.

What a snapshot rebuild gives: the state the whole chat made up to the snapshot, then the
re-read tokens, which see the sinks and each other but not the window that preceded them the
first time (the K/V of every family's rebuild are made the same way). So the state comes near,
not bit-equal to, the state of feeding the whole chat again (tests/engine/test_deltanet.py).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .budget import SNAPSHOTS

LIMIT = SNAPSHOTS  # snapshots kept (the newest): LIMIT * state_bytes at most (the plan's snapshot_bytes)


@dataclass
class Snapshot:
    pos: int  # stream tokens the state has seen
    digest: bytes  # of those tokens
    key: tuple  # the plan it was taken under
    state: object  # a copy of the decoder's RecurrentState


def _digest(tokens: np.ndarray) -> bytes:
    return hashlib.blake2b(np.asarray(tokens, np.int32).tobytes(), digest_size=16).digest()


def plan_key(plan) -> tuple:
    return (plan.sinks, plan.window, plan.kv_dtype)


class StateSnapshots:
    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self._snaps: list[Snapshot] = []

    def __len__(self) -> int:
        return len(self._snaps)

    def clear(self) -> None:
        self._snaps.clear()

    def take(self, decoder, stream: np.ndarray, plan) -> None:
        """Keep the decoder's state as it is after `stream` (every token fed so far)."""
        if decoder.cache.state is None or decoder.ring.next_pos != stream.size:
            return
        key = plan_key(plan)
        self._snaps = [s for s in self._snaps if s.key == key and s.pos != stream.size][-(self.limit - 1):]
        self._snaps.append(Snapshot(stream.size, _digest(stream), key, decoder.snapshot_state()))

    def cuts(self, ends, start: int, stop: int) -> list[int]:
        """Where to split the feed of stream[start:stop] so that a snapshot can be taken at the
        last `limit` message ends (ends: stream positions where a message ends) inside it."""
        inside = sorted({int(e) for e in ends if start < e < stop})[-self.limit:] if self.limit else []
        return inside + [stop]

    def find(self, stream: np.ndarray, upto: int, plan, at_least: int = 0) -> Snapshot | None:
        """The latest snapshot taken under this plan whose tokens begin `stream`, with
        at_least <= its position <= upto."""
        key = plan_key(plan)
        for s in reversed(self._snaps):
            if s.key == key and at_least <= s.pos <= min(upto, stream.size) and s.digest == _digest(stream[: s.pos]):
                return s
        return None
