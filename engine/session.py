"""A chat conversation over the bounded cache: the app's (and the CLI's) only way into the engine.

The session keeps the conversation as messages plus, for each, the token ids it put into the
stream ("chunks"). A new turn renders the model's chat template over the whole conversation,
takes only the text after what the cache already holds, and prefills those tokens: history is
never re-read. Anything that changes the past (regenerate, edit, pin, a new plan, loading a
stored chat) re-encodes from the chunks, and that costs at most `capacity` tokens of prefill,
because tokens that would be evicted again are skipped rather than computed.

Continue extends a reply cut at max_tokens inside the same message and chunk: its last sampled
token (held back, see _pending) is fed and decoding goes on, so the cache ends as one longer
reply would leave it. Stepping to another version of the conversation (select_history) re-reads
nothing at once: the cache keeps what it holds, and stepping back to that is free.
"""
from __future__ import annotations

import threading
import time
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from . import forward
from .budget import AUTO_SINKS_WITHOUT_SYSTEM, MIN_WINDOW, MemoryPlan, auto_budget, plan_memory  # noqa: F401 (re-exported)
from .decoder import DRAFT_ROWS, Decoder
from .draft import DraftStats, PromptLookup, next_tokens
from .errors import SettingsError
from .events import Done, MessageMemory, PrefillProgress, Rebuilt, SessionStats, Stats, Token
from .sampler import Sampler, SamplingParams
from .snapshots import StateSnapshots
from .sysmem import rss_bytes, trim

STATS_EVERY_S = 0.2


@dataclass
class Chunk:
    msg: int  # index into messages, -1 = the system turn
    ids: array  # token ids it put into the stream
    start: int = 0  # stream position of its first token
    # A turn's prefill also carries the previous reply's closing markers (its first `lead`
    # tokens) and the next reply's opening (its last `tail`): counted as those messages', as a
    # re-encoding cuts them, so a message has one size (what a pin's preview promises).
    lead: int = 0
    tail: int = 0


def common_prefix(a: str, b: str) -> int:
    if a.startswith(b):  # the usual case, at C speed: the template only appended
        return len(b)
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _same_turns(a: list[dict], b: list[dict]) -> bool:
    """Whether two conversations render alike (role, text and pin of every message)."""
    return len(a) == len(b) and all(
        (x["role"], x["content"], bool(x.get("pinned"))) == (y["role"], y["content"], bool(y.get("pinned")))
        for x, y in zip(a, b))


def _render_system(template, system: str | None) -> str:
    """The system prompt's text at the start of the conversation (the sinks). render_head: a
    template that refuses a system prompt alone (Qwen3.5's) still gives its place in a chat."""
    if not system:
        return ""
    return template.render_head([{"role": "system", "content": system}])


def _encode(tok, text: str, first: bool = False) -> list[int]:
    # A template that already starts with the BOS text must not get a second BOS.
    add_bos = first and tok.add_bos and not (tok.bos_text and text.startswith(tok.bos_text))
    return tok.encode(text, add_bos=add_bos, parse_special=True)


def count_sink_tokens(model, system: str | None, sinks: int | str = "auto") -> int:
    """How many sink tokens a system prompt and sink setting pin: the number given, or for
    "auto" the rendered system turn (4 tokens without one). Known before a session exists, so
    the auto budget can leave the window its full size beside them."""
    if sinks not in ("auto", None, -1):
        return int(sinks)
    text = _render_system(model.chat_template, system)
    return len(_encode(model.tokenizer, text, first=True)) if text else AUTO_SINKS_WITHOUT_SYSTEM


def session_plan(model, kv_dtype: str = "int8", budget_bytes: int | None = None, window: int | None = None,
                 system: str | None = None, sinks: int | str = "auto") -> MemoryPlan:
    """The base plan to hand a ChatSession for these settings. Its sinks are 0: the session adds
    its own and shrinks the window to keep the budget. The auto budget (budget_bytes None) is
    sized with the sinks this system prompt pins, so the window beside them is the full
    AUTO_WINDOW; pinned messages later take from it, as they do from any budget."""
    rule = None
    if budget_bytes is None:
        budget_bytes, rule = auto_budget(model.config, kv_dtype, count_sink_tokens(model, system, sinks))
    return plan_memory(model.config, kv_dtype, budget_bytes, window=window, sinks=0, budget_rule=rule)


class ChatSession:
    def __init__(self, model, plan: MemoryPlan, system: str | None = None,
                 sampling: SamplingParams | None = None, sinks: int | str = "auto",
                 speculative: bool = True):
        self.model = model
        self.tok = model.tokenizer
        self.template = model.chat_template
        self.sampling = (sampling or SamplingParams()).validate()
        self.base_plan = plan
        self.sinks_setting = sinks
        self.system = system or None
        self.messages: list[dict] = []
        self._chunks: list[Chunk] = []
        self._pending: list[int] = []  # last sampled token of a reply, fed with the next turn
        self._rendered = ""  # the text whose tokens are in the stream
        self._markers, self._markers_for = ("", ""), None  # _turn_markers(), for this template
        self._recent: deque[int] = deque(maxlen=256)
        self._cancel = threading.Event()
        self._dirty = False  # the cache no longer matches the chunks: re-encode before use
        # (messages, chunks, rendered, pending) the cache holds while another version is shown
        self._held: tuple | None = None
        # each message's tokens in a version shown but not read yet ({index: tokens}): stats()
        # reports them so pinning can be priced before the re-read (None once the cache holds it)
        self._unread: dict[int, int] | None = None
        # Prompt-lookup speculative decoding: same output, fewer steps where the text repeats.
        self.speculative = speculative
        self.drafter = PromptLookup(max_draft=DRAFT_ROWS - 1)
        self._snapshots = StateSnapshots()  # a hybrid's recurrent state at turn boundaries
        self._system_ids = self._encode_system()
        self.plan = self._effective_plan()
        self.decoder = Decoder(model, self.plan, n_sink=self.plan.sinks)

    # --- plan and sinks --------------------------------------------------------------------
    def _encode_system(self) -> list[int]:
        self._system_text = self._render_system(self.system)
        return self._encode(self._system_text, first=True) if self._system_text else []

    def _render_system(self, system: str | None) -> str:
        return _render_system(self.template, system)

    def count_sink_tokens(self, system: str | None, sinks: int | str = "auto") -> int:
        """How many sink tokens a system prompt and sink setting would pin (for previews)."""
        return count_sink_tokens(self.model, system, sinks)

    def _encode(self, text: str, first: bool = False) -> list[int]:
        return _encode(self.tok, text, first)

    def _turn_markers(self) -> tuple[str, str]:
        """The template's closing of a reply and its generation prompt (the opening of the next),
        found once by rendering a one-word exchange; ("", "") where a template hides them."""
        if self._markers_for is not self.template:
            closing = opening = ""
            try:
                user = [{"role": "user", "content": "\x01"}]
                bare = self.template.render(user, add_generation_prompt=False)
                prompted = self.template.render(user, add_generation_prompt=True)
                if prompted.startswith(bare):
                    opening = prompted[len(bare):]
                both = self.template.render(user + [{"role": "assistant", "content": "\x02"}],
                                            add_generation_prompt=False)
                if both.count("\x02") == 1:
                    closing = both[both.index("\x02") + 1:]
            except Exception:  # noqa: BLE001 - a template that rejects the probe: count as before
                closing = opening = ""
            self._markers, self._markers_for = (closing, opening), self.template
        return self._markers

    def _encode_turn(self, text: str, first: bool) -> tuple[list[int], int, int]:
        """A turn's new text as ids, with how many lead ones close the previous reply and how
        many tail ones open the next (each piece encoded on its own, as _rechunk would)."""
        closing, opening = self._turn_markers()
        after_reply = len(self.messages) >= 2 and self.messages[-2]["role"] == "assistant"
        a = len(closing) if after_reply and closing and text.startswith(closing) else 0
        b = len(text) - len(opening) if opening and text.endswith(opening) and len(text) - len(opening) >= a else len(text)
        ids: list[int] = []
        counts = []
        for piece in (text[:a], text[a:b], text[b:]):
            part = self._encode(piece, first=first and not ids) if piece else []
            ids += part
            counts.append(len(part))
        return ids, counts[0], counts[2]

    def _pinned_ids(self) -> list[int]:
        n = len(self.messages)
        return [t for c in self._chunks if 0 <= c.msg < n and self.messages[c.msg].get("pinned") for t in c.ids]

    def _wanted_sinks(self) -> int:
        pinned = len(self._pinned_ids())
        if self.sinks_setting == "auto" or self.sinks_setting is None or self.sinks_setting == -1:
            return (len(self._system_ids) or AUTO_SINKS_WITHOUT_SYSTEM) + pinned
        return int(self.sinks_setting) + pinned

    def _effective_plan(self) -> MemoryPlan:
        base = self.base_plan
        user_window = base.window if base.window < base.slots - base.sinks else None
        sinks = min(self._wanted_sinks(), base.slots - MIN_WINDOW)
        if sinks < 0:
            raise SettingsError(f"sinks must be 0 or more (got {sinks})")
        return plan_memory(self.model.config, base.kv_dtype, base.budget_bytes, window=user_window, sinks=sinks,
                           budget_rule=base.budget_rule)

    def _replan(self) -> bool:
        """Re-derive the plan; reallocate only when the cache's size or precision changed."""
        plan = self._effective_plan()
        realloc = (plan.capacity, plan.local_slots, plan.kv_dtype) != (self.plan.capacity, self.plan.local_slots,
                                                                   self.plan.kv_dtype)
        self.plan = plan
        if realloc:
            self.decoder = None  # free the old arrays (and executables) before allocating the new ones
            forward.forget_compiled()
            self.decoder = Decoder(self.model, plan, n_sink=plan.sinks)
        return realloc

    # --- public API ------------------------------------------------------------------------
    def send(self, text: str, **overrides) -> Iterator[str]:
        """Stream the reply to `text` as text pieces."""
        for ev in self.stream(text, **overrides):
            if isinstance(ev, Token) and ev.text:
                yield ev.text

    def stream(self, text: str, **overrides) -> Iterator:
        """Stream events for the reply to a new user message."""
        self._cancel.clear()
        self.messages.append({"role": "user", "content": text, "pinned": False})
        if self._dirty:  # (an edit, a cancelled prefill): the wait is the re-encoding, and it counts
            t0 = time.perf_counter()
            logits = yield from self._resync(add_generation_prompt=True)
            prompt_tokens, prefill_s = self.decoder.ring.cache_tokens, time.perf_counter() - t0
        else:
            logits, prompt_tokens, prefill_s = yield from self._prefill_turn()
        if logits is None:  # cancelled during prefill
            self._dirty = True
            yield self._done("cancelled", [], prompt_tokens, prefill_s, 0.0, 0.0)
            return
        yield from self._generate(logits, overrides, prompt_tokens, prefill_s)

    def regenerate(self, **overrides) -> Iterator:
        """Answer the last user message again (the last reply is dropped)."""
        self._cancel.clear()
        if self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        if not self.messages or self.messages[-1]["role"] != "user":
            raise SettingsError("there is no user message to answer again")
        t0 = time.perf_counter()
        logits = yield from self._resync(add_generation_prompt=True)
        if logits is None:  # stopped while re-reading (a hybrid's re-read can take seconds): no reply
            yield self._done("cancelled", [], self.decoder.ring.cache_tokens, time.perf_counter() - t0, 0.0, 0.0)
            return
        yield from self._generate(logits, overrides, self.decoder.ring.cache_tokens, time.perf_counter() - t0)

    def edit_last(self, text: str, **overrides) -> Iterator:
        """Replace the last user message (and drop its reply), then answer it."""
        while self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages.pop()
        self._dirty = True
        yield from self.stream(text, **overrides)

    def continue_reply(self, **overrides) -> Iterator:
        """Extend the last reply from where it stopped (cut at max_tokens): the same message and
        chunk, up to max_tokens more. Where the cache still ends with that reply, only its held-back
        last token is fed (no re-read); otherwise the conversation is re-encoded with the reply
        left open (no end-of-turn after it), as an edit re-encodes."""
        self._cancel.clear()
        if not self.messages or self.messages[-1]["role"] != "assistant":
            raise SettingsError("there is no reply to continue")
        t0 = time.perf_counter()
        chunk = self._chunks[-1] if self._chunks else None
        if not self._dirty and self._pending and chunk is not None and chunk.msg == len(self.messages) - 1:
            ids, self._pending = self._pending, []
            logits = yield from self._feed(ids)
            if logits is None:
                self._pending = ids  # cancelled before it was fed: still held back
            prompt_tokens = len(ids)
        else:
            logits = yield from self._reopen_reply()
            chunk, prompt_tokens = self._chunks[-1], self.decoder.ring.cache_tokens
        prefill_s = time.perf_counter() - t0
        if logits is None:
            yield self._done("cancelled", [], prompt_tokens, prefill_s, 0.0, 0.0, text=self.messages[-1]["content"],
                             total=len(chunk.ids))
            return
        yield from self._generate(logits, overrides, prompt_tokens, prefill_s, chunk=chunk)

    def _reopen_reply(self):
        """Re-encode the conversation up to the last reply's opening, then the reply's text with
        no closing marker after it; returns the last logits (None if cancelled)."""
        reply = self.messages.pop()
        logits = yield from self._resync(add_generation_prompt=True)
        self.messages.append(reply)
        ids = self._encode(reply["content"]) if reply["content"] else []
        self._chunks.append(Chunk(len(self.messages) - 1, array("i", ids), self.decoder.ring.next_pos))
        if logits is not None and ids:
            logits = yield from self._feed(ids)
            self.drafter.extend(ids)
        self._rendered += reply["content"]
        self._dirty = logits is None
        return logits

    def select_history(self, messages: list[dict]) -> bool:
        """Show another version of the conversation (a reply or question stepped to, the start
        of a fork). Nothing is re-read now: the cache keeps what it holds, and the next turn
        re-encodes (bounded) if the conversation differs from it. Returns True when the cache
        holds exactly this conversation (stepping back to the version it was written with)."""
        new = [{"role": m["role"], "content": m.get("content", ""), "pinned": bool(m.get("pinned", False))}
               for m in messages if m.get("role") in ("user", "assistant")]
        if _same_turns(new, self.messages):
            return not self._dirty
        held = self._held
        if held is not None and _same_turns(new, held[0]):
            self.messages, self._chunks, self._rendered, self._pending = held
            self._held, self._dirty, self._unread = None, False, None
            return True
        if held is None and not self._dirty:
            self._held = (self.messages, self._chunks, self._rendered, self._pending)
        self.messages = new
        self._chunks, self._rendered, self._pending = [], "", []
        self._dirty = True
        # only tokenized (no model work): the sizes a pin preview needs, without the re-read
        try:
            self._unread = {c.msg: len(c.ids) for c in self._chunked(add_generation_prompt=False)[0]}
        except Exception:  # noqa: BLE001 - a template that fails here fails the re-read, which says why
            self._unread = None
        return False

    def warmup(self) -> None:
        """Have the compiled steps ready before the next turn (no effect on the conversation)."""
        self.decoder.warmup()

    def cancel(self) -> None:
        self._cancel.set()

    def load_history(self, messages: list[dict]) -> None:
        """Restore a stored conversation; the cache is re-encoded lazily (bounded) on next use."""
        self.messages = [
            {"role": m["role"], "content": m.get("content", ""), "pinned": bool(m.get("pinned", False))}
            for m in messages if m.get("role") in ("user", "assistant")
        ]
        self._chunks, self._pending, self._rendered = [], [], ""
        self._held = self._unread = None
        self.drafter.reset()
        self._dirty = bool(self.messages)
        if not self.messages:
            self.decoder.reset(self.plan.sinks)

    def set_pinned(self, index: int, pinned: bool) -> Rebuilt | None:
        """Pin a message: its tokens join the sinks and the window shrinks to keep the budget.
        Re-encodes the cache now (bounded by its capacity); returns what that cost."""
        if not 0 <= index < len(self.messages):
            raise SettingsError(f"no message {index}")
        old = self.messages[index].get("pinned", False)
        self.messages[index]["pinned"] = bool(pinned)
        try:
            return self.resync()
        except SettingsError:
            self.messages[index]["pinned"] = old
            self._dirty = True
            raise

    def resync(self) -> Rebuilt | None:
        """Re-encode the cache from the conversation now, if there is one."""
        self._cancel.clear()  # a Stop pressed before belonged to the reply it stopped, not to this re-read
        if not self.messages:
            self._dirty = False
            return None
        last = None
        for ev in self._resync(add_generation_prompt=False):
            if isinstance(ev, Rebuilt):
                last = ev
        return last

    def apply_plan(self, plan: MemoryPlan, sinks: int | str | None = None, system: str | None = None) -> bool:
        """Adopt new memory settings; True when the cache had to be reallocated."""
        if sinks is not None:
            self.sinks_setting = sinks
        if system is not None and (system or None) != self.system:
            self.system = system or None
            self._system_ids = self._encode_system()
            self._dirty = True
        self.base_plan = plan
        before = self.plan
        realloc = self._replan()
        if self.plan != before or realloc:
            self._dirty = True
        if self._dirty:
            self.resync()
        return realloc

    def preview_plan(self, plan: MemoryPlan, sinks: int | str | None = None) -> MemoryPlan:
        """The plan this session would run with under new settings (nothing is applied)."""
        saved = (self.base_plan, self.sinks_setting)
        try:
            self.base_plan = plan
            if sinks is not None:
                self.sinks_setting = sinks
            return self._effective_plan()
        finally:
            self.base_plan, self.sinks_setting = saved

    def stats(self) -> SessionStats:
        dec = self.decoder
        with dec.lock:
            ring = dec.ring
            positions = ring.slot_pos.copy()
            seen, cached = ring.next_pos, ring.cache_tokens
        per_msg: dict[int, list[int]] = {}
        # A reply's last sampled tokens wait to be fed with the next turn (_pending): not written
        # yet, but not out of view either (counted out, every last reply read as "partly out of
        # view", and pinning it said it had "left the window")
        held = (seen, seen + len(self._pending))
        for c in list(self._chunks):
            lo, hi = c.start + c.lead, c.start + len(c.ids) - c.tail
            for msg, a, b in ((c.msg - 1, c.start, lo), (c.msg, lo, hi), (c.msg + 1, hi, c.start + len(c.ids))):
                if b > a or msg == c.msg:
                    acc = per_msg.setdefault(msg, [0, 0])
                    acc[0] += b - a
                    acc[1] += int(((positions >= a) & (positions < b)).sum()) + max(0, min(b, held[1]) - max(a, held[0]))
        unread = self._unread if not self._chunks else None
        if unread is not None:
            # a version not read yet: its sizes, as if all in view (what the re-read keeps is
            # not known until it runs); `reread_pending` says the cache still holds another
            per_msg = {i: [n, n] for i, n in unread.items()}
        msgs = tuple(
            MessageMemory(i, "system" if i < 0 else self.messages[i]["role"], n, k,
                          i >= 0 and bool(self.messages[i].get("pinned")))
            for i, (n, k) in sorted(per_msg.items()) if i < len(self.messages)
        )
        return SessionStats(
            tokens_seen=seen, cache_tokens=cached, capacity=self.plan.capacity,
            sink_tokens=ring.n_sink, window=ring.window, evicted_tokens=seen - cached,
            kv_bytes=dec.kv_bytes, budget_bytes=self.plan.budget_bytes,
            weight_bytes=self.model.weight_bytes, rss_bytes=rss_bytes(),
            kv_dtype=self.plan.kv_dtype, messages=msgs,
            system_in_sinks=not self.system or self.system in self._system_text,
            reread_pending=unread is not None,
        )

    # --- turns -----------------------------------------------------------------------------
    def _prefill_turn(self):
        t0 = time.perf_counter()
        first = not self._chunks
        if first and self._system_ids:
            self._chunks.append(Chunk(-1, array("i", self._system_ids), 0))
            self._rendered = self._system_text  # fed just below, as the sinks
            self.drafter.extend(self._system_ids)
        full = self.template.render(self._template_messages(), add_generation_prompt=True)
        cut = common_prefix(full, self._rendered)
        if cut < len(self._rendered):
            # The template renders the history differently now (Qwen3 drops an earlier reply's
            # <think> block): what the cache holds is no longer the conversation, so rebuild it.
            if first and self._system_ids:
                self._chunks.clear()
            logits = yield from self._resync(add_generation_prompt=True)
            return logits, self.decoder.ring.cache_tokens, time.perf_counter() - t0
        delta, lead, tail = self._encode_turn(full[cut:], first=first and not self._system_ids)
        self._rendered = full
        start = self.decoder.ring.next_pos + len(self._pending) + (len(self._system_ids) if first else 0)
        self._chunks.append(Chunk(len(self.messages) - 1, array("i", delta), start, lead, tail))
        self.drafter.extend(delta)  # (the pending token joined the drafter when it was sampled)
        ids = (self._system_ids if first else []) + self._pending + delta
        self._pending = []
        logits = yield from self._feed(ids)
        if logits is not None and self.decoder.cache.state is not None:
            self._snapshots.take(self.decoder, np.concatenate([np.asarray(c.ids, np.int32) for c in self._chunks]),
                                 self.plan)
        return logits, len(ids), time.perf_counter() - t0

    def _feed(self, ids):
        """Prefill ids, yielding progress events; returns the last logits (None if cancelled)."""
        C = self.decoder.chunk
        logits = None
        for s in range(0, len(ids), C):
            if self._cancel.is_set():
                return None
            part = ids[s : s + C]
            start = self.decoder.ring.next_pos
            logits = self.decoder.feed(part)
            # Sinks (the system prompt, pinned messages) stay out of the repetition penalty:
            # penalising them made the model avoid the very name its system prompt gave it.
            self._recent.extend(part[max(0, self.decoder.ring.n_sink - start):])
            if len(ids) > C:
                yield PrefillProgress(min(s + C, len(ids)), len(ids))
        return logits

    def _generate(self, logits, overrides, prompt_tokens: int, prefill_s: float, chunk: Chunk | None = None):
        """Decode a reply into a new message, or (Continue) on at the end of `chunk`, the last one's."""
        params = self.sampling.with_(**overrides)
        sampler = Sampler(params)
        eot = set() if params.ignore_eos else set(self.tok.eot_ids)
        text_out = self.tok.stream_decoder()
        reply: list[int] = []
        reason = "max_tokens"
        t_start = time.perf_counter()
        t_first = t_last_stats = None
        new_reply = chunk is None
        if new_reply:
            chunk = Chunk(len(self.messages), array("i"), self.decoder.ring.next_pos)
            self._chunks.append(chunk)
            self.messages.append({"role": "assistant", "content": "", "pinned": False})
        for t in chunk.ids:  # mid-reply: no leading-space strip, a split character completes
            text_out.push(t)
        earlier = list(chunk.ids)
        yield Stats(self.stats())
        if new_reply and self._cancel.is_set():
            # A Stop that came while the prompt was read (after stream() had cleared the flag):
            # no reply at all, not one token shown after the Stop. The prompt is in the cache with
            # no reply chunk after it, so the next turn re-encodes, as after a cancelled prefill.
            self._chunks.pop(), self.messages.pop()
            self._dirty = True
            yield self._done("cancelled", [], prompt_tokens, prefill_s, 0.0, 0.0)
            return
        self.drafter.stats = DraftStats()  # Done reports this reply's drafts
        todo = deque([sampler(logits, self._recent)])  # sampled; only the last is not yet cached
        while True:
            tid = todo.popleft()
            if tid in eot:
                reason = "eos"
                break
            reply.append(tid)
            chunk.ids.append(tid)
            self._recent.append(tid)
            self.drafter.extend((tid,))
            now = time.perf_counter()
            first = t_first is None
            if first:
                t_first = t_last_stats = now
            yield Token(text_out.push(tid), tid, prefill_s + (now - t_start) if first else None)
            if len(reply) >= params.max_tokens:
                self._pending = [tid]  # fed with the next turn: the reply ends without waiting
                break
            if todo:  # an accepted draft token: already in the cache
                continue
            if self._cancel.is_set():
                reason = "cancelled"
                self._pending = [tid]  # not fed yet: as at max_tokens, the next turn (or Continue) feeds it
                break
            drafter = self.drafter if self.speculative and self.decoder.can_verify else None
            todo.extend(next_tokens(self.decoder, drafter, sampler, tid, self._recent,
                                    params.max_tokens - len(reply), eot))
            if now - t_last_stats >= STATS_EVERY_S:
                t_last_stats = now
                yield Stats(self.stats())
        tail = text_out.flush()
        if tail:
            yield Token(tail, -1)
        before = self.messages[-1]["content"]
        text = self.tok.decode(earlier + reply)
        self.messages[-1]["content"] = text
        if reason == "cancelled":
            self.messages[-1]["interrupted"] = True
        else:
            self.messages[-1].pop("interrupted", None)
        if self._rendered.endswith(before):
            self._rendered = self._rendered[:len(self._rendered) - len(before)] + text
        # A turn's freed memory (its prompt's arrays, the renders, XLA's buffers) back to the
        # system now, in the pause before the next message: otherwise the heap's free pages
        # show as growth over a long chat (+4.4 MB over 3,000 tokens in the soak test).
        trim(collect=False)
        decode_s = (time.perf_counter() - t_first) if t_first else 0.0
        ttft = prefill_s + ((t_first - t_start) if t_first else 0.0)
        yield Stats(self.stats())
        yield self._done(reason, reply, prompt_tokens, prefill_s, decode_s, ttft, text=text, total=len(chunk.ids))

    def _done(self, reason, reply, prompt_tokens, prefill_s, decode_s, ttft, text: str | None = None,
              total: int | None = None) -> Done:
        """`text`, `total`: the whole reply's text and tokens, where a Continue extended one."""
        n = len(reply)
        return Done(
            reason=reason, reply=text if text is not None else (self.tok.decode(reply) if reply else ""),
            prompt_tokens=prompt_tokens, generated_tokens=n,
            prefill_tok_s=prompt_tokens / prefill_s if prefill_s > 0 else 0.0,
            decode_tok_s=(n - 1) / decode_s if n > 1 and decode_s > 0 else 0.0,
            ttft_s=ttft, draft=self.drafter.stats.to_dict(), reply_tokens=n if total is None else total,
        )

    def _template_messages(self) -> list[dict]:
        sys = [{"role": "system", "content": self.system}] if self.system else []
        return sys + [{"role": m["role"], "content": m["content"]} for m in self.messages]

    # --- re-encoding -----------------------------------------------------------------------
    def _rechunk(self, add_generation_prompt: bool) -> None:
        """Token chunks for the conversation as stored, by rendering growing prefixes."""
        chunks, full = self._chunked(add_generation_prompt)
        self._chunks, self._rendered, self._pending, self._unread = chunks, full, [], None

    def _chunked(self, add_generation_prompt: bool) -> tuple[list[Chunk], str]:
        """(the conversation's token chunks, its full render); changes nothing."""
        msgs = self._template_messages()
        offset = len(msgs) - len(self.messages)
        chunks = [Chunk(-1, array("i", self._system_ids))] if self._system_ids else []
        head = self.template.render_head(msgs[:offset]) if offset else ""
        full = self.template.render(msgs, add_generation_prompt=add_generation_prompt) if self.messages else head
        # Message i's tokens: the text between where the renders of the messages before it and of
        # the messages up to it leave the full text. Cut from the one full render, the chunks
        # concatenate to exactly that text, even where a template renders an earlier message
        # differently once later ones follow (Qwen3's <think> blocks).
        prev = common_prefix(full, head)
        for i in range(len(self.messages)):
            last = i == len(self.messages) - 1
            text = full if last else self.template.render(msgs[: offset + i + 1], add_generation_prompt=False)
            end = max(prev, common_prefix(full, text))
            if last and add_generation_prompt:
                # the generation prompt is the reply's to come, as when the turn was prefilled
                ids, lead, tail = self._encode_turn(full[prev:end], first=not chunks)
                chunks.append(Chunk(i, array("i", ids), lead=lead, tail=tail))
            else:
                chunks.append(Chunk(i, array("i", self._encode(full[prev:end], first=not chunks))))
            prev = end
        return chunks, full

    def _resync(self, add_generation_prompt: bool):
        """Re-encode the cache from the conversation: sinks (system + pinned), then only the
        newest tokens that fit the window. Returns the last logits."""
        t0 = time.perf_counter()
        self._held = None  # the cache is about to change: what it held is gone
        self._rechunk(add_generation_prompt)
        self._replan()
        n_sink = self.plan.sinks
        pinned = [c for c in self._chunks if c.msg >= 0 and self.messages[c.msg].get("pinned")]
        system = [c for c in self._chunks if c.msg < 0]
        rest = [c for c in self._chunks if c not in pinned and c not in system]
        order = system + pinned + rest
        pos = 0
        for c in order:  # positions in the new stream order
            c.start, pos = pos, pos + len(c.ids)
        stream = np.fromiter((t for c in order for t in c.ids), dtype=np.int32, count=pos)
        window = self.plan.window
        head = stream[:n_sink]
        tail_from = max(n_sink, stream.size - window)
        snap = None
        if self.model.config.recurrent_layers:
            # A hybrid's DeltaNet state summarises the whole stream: start from the latest state
            # snapshot the new stream still begins with, else from the start (engine.snapshots).
            snap = self._snapshots.find(stream, tail_from, self.plan, at_least=n_sink)
            tail_from = snap.pos if snap is not None else n_sink
        self.decoder.reset(n_sink)
        logits = None
        if head.size:
            logits = yield from self._feed(list(head))
        if snap is not None:
            self.decoder.restore_state(snap.state)
        self.decoder.skip(tail_from - n_sink)
        tail = stream[tail_from:]
        if tail.size and self.decoder.cache.state is None:
            logits = yield from self._feed(list(tail))
        elif tail.size:  # a hybrid: fed in pieces that end at message ends, each end's state kept
            a = tail_from
            for b in self._snapshots.cuts([c.start + len(c.ids) for c in order], tail_from, stream.size):
                logits = yield from self._feed(list(stream[a:b]))
                if logits is None:
                    break
                self._snapshots.take(self.decoder, stream[:b], self.plan)
                a = b
        self._chunks = order
        self._recent.clear()
        self._recent.extend(stream[n_sink:][-256:].tolist())
        self.drafter.reset(stream)
        self._dirty = logits is None and stream.size > 0
        yield Rebuilt(int(head.size + tail.size), time.perf_counter() - t0)
        return logits
