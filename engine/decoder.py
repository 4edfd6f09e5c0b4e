"""Feeding tokens through the model into the bounded cache.

`Decoder` owns the device cache (allocated once per plan) and the host `Ring`; it turns a list
of token ids into fixed-size chunks (static shapes: one compile for prefill chunks, one for
single-token decode steps, one for verifying a speculative draft) and returns the logits the
caller asked for.

A draft is checked in two calls: `verify(ids)` returns the logits of every row and writes
nothing; `accept(m)` then stores the first m rows (the token that was already sampled plus the
drafts the sampler accepted). The cache never holds a rejected token, so speculation cannot
change what the model sees.

Hybrid models (Qwen3.5's DeltaNet layers) keep a recurrent state beside the cache. It cannot
hold back a rejected draft (every row of a verify would update it), so they decode without
drafts (`can_verify` False) and run short pieces as 8-row steps; reset() zeroes the state, and
skip() cannot skip tokens for it (the session puts back a state snapshot instead, or re-encodes
the whole stream: engine.snapshots).
"""
from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np

from . import compile_cache, forward, rope
from .budget import MemoryPlan
from .kv_cache import Ring, allocate
from .sysmem import trim

PREFILL_CHUNK = 64
DRAFT_ROWS = forward.MATVEC_ROWS  # the verify shape: the sampled token plus up to 7 drafts
SHORT_TAIL = 32  # pieces of up to this many tokens run as 8-row steps (see _run_short)


class Decoder:
    def __init__(self, model, plan: MemoryPlan, n_sink: int | None = None, chunk: int = PREFILL_CHUNK):
        compile_cache.enable()  # before the first compile of this process
        self.model = model
        self.cfg = model.config
        self.plan = plan
        self.chunk = chunk
        factors = model.freq_factors(plan.capacity) if hasattr(model, "freq_factors") else None
        self.theta = rope.inv_freq(self.cfg, factors)
        self.theta_local = rope.inv_freq(self.cfg, local=True)
        self.cache = allocate(self.cfg, plan)  # the only KV allocation this decoder ever makes
        self.lock = threading.Lock()  # guards the rings against stats readers on other threads
        self._new_rings(plan.sinks if n_sink is None else n_sink)
        self._draft = None  # (rows verified, their K/V) of the last verify, until accept()

    @property
    def kv_bytes(self) -> int:
        return self.cache.nbytes

    def _new_rings(self, n_sink: int, start_pos: int = 0) -> None:
        """The global ring (what the session reports) and, for models with sliding-window
        layers, theirs: the same stream, fewer slots, the file's window rule."""
        self.ring = Ring(self.plan.capacity, n_sink)
        self.local_ring = None
        if self.cfg.local_layers:
            self.local_ring = Ring(self.plan.local_slots, min(n_sink, self.plan.local_slots - 1), self.cfg.sliding_window)
        for r in self._rings:
            r.next_pos = start_pos

    @property
    def _rings(self) -> list[Ring]:
        return [self.ring] + ([self.local_ring] if self.local_ring is not None else [])

    @property
    def can_verify(self) -> bool:
        """Whether drafts can be verified without being kept (not with a recurrent state)."""
        return not self.cfg.recurrent_layers

    def snapshot_state(self):
        """A copy of the recurrent state (engine.snapshots keeps them at message boundaries)."""
        return jax.tree_util.tree_map(jnp.copy, self.cache.state)

    def restore_state(self, state) -> None:
        """Put a snapshot's state back (a copy: the cache is donated to the next step)."""
        self.cache.state = jax.tree_util.tree_map(jnp.copy, state)

    def reset(self, n_sink: int, start_pos: int = 0) -> None:
        """Forget every token (the arrays stay; masks come from the ring's positions; a
        recurrent state is zeroed in place)."""
        with self.lock:
            self._new_rings(n_sink, start_pos)
        if self.cache.state is not None:
            self.cache = self._step(forward.clear_state, self.cache)

    @property
    def _shape_key(self) -> str:
        """Everything the compiled steps depend on (the cache is keyed by HLO; this names it)."""
        from . import kernels

        return repr((self.cfg, self.plan.capacity, self.plan.local_slots, self.plan.kv_dtype, self.chunk,
                     kernels.build_tag()))

    def compiled_before(self) -> bool:
        """True when an earlier run compiled these steps into the compiled-step store."""
        return compile_cache.is_warm(self._shape_key)

    def warmup(self) -> None:
        """Have the prefill, decode and 8-row (drafts, short pieces) steps ready, so the first
        reply doesn't wait: loaded when an earlier run compiled them (milliseconds), else
        compiled (seconds). Nothing runs: the cache and the rings are as they were, so this can
        come at any point of a chat (a new cache shape mid-conversation)."""
        params, cfg = self.model.params, self.cfg
        for C in (self.chunk, 1) + (() if self.can_verify else (DRAFT_ROWS,)):
            compile_cache.compiled(forward.step, (params, self.cache, self._batch(np.zeros(C, np.int32), C)[1]),
                                   cfg=cfg, all_logits=False)
        if not self.can_verify:
            compile_cache.compiled(forward.clear_state, (self.cache,))
        else:
            _, batch = self._batch(np.zeros(2, np.int32), DRAFT_ROWS)
            verify = compile_cache.compiled(forward.verify, (params, self.cache, batch), cfg=cfg)
            local_slot = None if batch.local is None else batch.local.write_slot
            compile_cache.compiled(forward.write_rows, (self.cache, verify.out_info[1], batch.write_slot,
                                                        local_slot), cfg=cfg)
        if not self.compiled_before():
            compile_cache.mark_warm(self._shape_key)
            trim()  # what the compiler freed

    def skip(self, n: int) -> None:
        """Advance the stream by n tokens that would have been evicted anyway (rebuilds)."""
        with self.lock:
            for r in self._rings:
                r.next_pos += n

    def feed(
        self,
        ids,
        *,
        all_logits: bool = False,
        chunk: int | None = None,
    ) -> np.ndarray | None:
        """Run ids through the model. Returns logits of the last token ([V]), or of every token
        ([n, V]) with all_logits. A single token uses the decode-step shape (chunk 1).
        Callers that report progress or honour a cancel feed one chunk at a time."""
        ids = np.asarray(ids, dtype=np.int32).reshape(-1)
        if ids.size == 0:
            return None
        C = 1 if ids.size == 1 else (chunk or self.chunk)
        out = []
        for start in range(0, ids.size, C):
            part = ids[start : start + C]
            if not all_logits and C == self.chunk and 1 < part.size <= SHORT_TAIL:
                out.append(self._run_short(part)[None])
                continue
            logits = self._run(part, C, all_logits)
            out.append(logits[: part.size] if all_logits else logits)
        return np.concatenate(out) if all_logits else out[-1][0]

    def _run_short(self, part: np.ndarray) -> np.ndarray:
        """A short piece (a prompt's tail, a chat turn of a few tokens) in 8-row verify steps
        instead of one 64-row chunk that would be mostly padding: with the default 928-slot cache a
        64-row step took 330 ms and an 8-row one 78 ms here (2 cores, quiet). Returns the last
        token's logits."""
        for s in range(0, part.size, DRAFT_ROWS):
            piece = part[s : s + DRAFT_ROWS]
            if not self.can_verify:  # a plain 8-row step: the state takes every row
                logits = self._run(piece, DRAFT_ROWS, False)
                continue
            logits = self.verify(piece)
            self.accept(piece.size)
        return logits[-1]

    def verify(self, ids) -> np.ndarray:
        """Logits [n, V] of every row of a draft (n <= DRAFT_ROWS), without writing the cache:
        row i predicts the token after ids[i]. Follow with accept()."""
        ids = np.asarray(ids, dtype=np.int32).reshape(-1)
        assert 0 < ids.size <= DRAFT_ROWS and self.can_verify
        _, batch = self._batch(ids, DRAFT_ROWS)
        logits, rows = self._step(forward.verify, self.model.params, self.cache, batch, cfg=self.cfg)
        self._draft = (ids.size, rows)
        return np.asarray(jax.device_get(logits))[: ids.size]

    def accept(self, m: int) -> None:
        """Store the first m rows of the last verified draft; the rest are dropped."""
        n, rows = self._draft
        assert 0 < m <= n
        self._draft = None
        with self.lock:
            plans = [r.plan_chunk(m, DRAFT_ROWS) for r in self._rings]
        local_slot = plans[1].write_slot if len(plans) > 1 else None
        self.cache = self._step(forward.write_rows, self.cache, rows, plans[0].write_slot, local_slot, cfg=self.cfg)
        self._commit(plans)

    @staticmethod
    def _step(fn, *args, **static):
        """fn(*args, **static) through the compiled-step store: loaded, not traced, when an
        earlier run compiled it (engine.compile_cache)."""
        return compile_cache.compiled(fn, args, **static)(*args)

    def _commit(self, plans) -> None:
        with self.lock:
            for r, cp in zip(self._rings, plans):
                r.commit(cp)

    def _batch(self, part: np.ndarray, C: int):
        """The chunk's inputs; returns (one ChunkPlan per ring, Batch)."""
        n = part.size
        with self.lock:
            plans = [r.plan_chunk(n, C) for r in self._rings]
        cp = plans[0]
        tokens = np.zeros(C, np.int32)
        tokens[:n] = part
        tokens[n:] = part[-1]
        f = self.cfg.rope_attn_factor
        cos, sin = rope.cos_sin(cp.q_pos, self.theta, f)
        scos, ssin = rope.cos_sin(cp.sink_q_pos, self.theta, f)
        local = None
        if len(plans) > 1:
            lp = plans[1]
            lcos, lsin = rope.cos_sin(lp.q_pos, self.theta_local)
            local = forward.LocalKeys(lcos, lsin, lp.mask, lp.write_slot, lp.order)
        return plans, forward.Batch(tokens, cos, sin, scos, ssin, cp.mask, cp.key_sink, cp.write_slot,
                                    np.int32(n - 1), cp.order, local)

    def _run(self, part: np.ndarray, C: int, all_logits: bool) -> np.ndarray:
        plans, batch = self._batch(part, C)
        logits, self.cache = self._step(forward.step, self.model.params, self.cache, batch, cfg=self.cfg,
                                        all_logits=all_logits)
        logits = np.asarray(jax.device_get(logits))
        self._commit(plans)
        return logits
