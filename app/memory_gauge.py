"""The memory gauge: where the bytes go, drawn with QPainter from the session's numbers.

It shows, top to bottom: KV bytes allocated against the budget; the cache's slots as
sinks | window | free; tokens seen and evicted; model weights, process RSS and (on a GPU)
device memory; and a small plot over the session of RSS and tokens/s -- flat RSS while the
token count climbs is the point of a bounded cache.

Each row leads with plain words ("Conversation memory", "Recent text the model sees: ~3,000
words", "Forgotten so far", "Pinwheel's memory use"); hovering a row shows a tooltip that says
what it means in the exact terms, with the exact numbers. `set_details(True)` (the side
panel's Details toggle) draws the expert labels instead.

A hybrid model (Qwen3.5: DeltaNet layers with a fixed state, a few attention layers) gets a
row for its summary of the whole chat, and what has left the window is "out of the window,
summarised" rather than forgotten (app.memory_words has the words).

It never asks the engine for anything: :meth:`MemoryGauge.set_snapshot` takes the
StatsSnapshot the engine thread emitted, stores the numbers and schedules a repaint.
Colours come from the palette, so light and dark themes both work.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from .memory_words import HybridMemory, fmt_bytes, hybrid_memory, layers
from .memory_words import approx_words as words  # "~3,100": how many words so many tokens are
HISTORY = 240  # plot samples kept (one per SAMPLE_S at most; older ones are thinned, not dropped)
SAMPLE_S = 0.25


def wrapped(tip: str) -> str:
    """A tooltip that wraps: Qt shows plain text on one line, as wide as the screen."""
    return "<p>" + html.escape(tip, quote=False).replace("\n", "<br>") + "</p>"


@dataclass
class GaugeValues:
    kv_bytes: int = 0
    budget_bytes: int = 0
    capacity: int = 0
    sink_tokens: int = 0
    window: int = 0
    cache_tokens: int = 0
    tokens_seen: int = 0
    evicted_tokens: int = 0
    weight_bytes: int | None = None
    rss_bytes: int | None = None
    device_bytes: int | None = None
    tok_s: float = 0.0
    local_layers: int = 0  # sliding-window layers (Gemma 3) and the slots each holds
    local_slots: int = 0


def fit_left(fm: QFontMetrics, left: str, right: str, width: float) -> str:
    """A row's label, cut short with "…" where it would run into the row's value on its right
    (the value is what the row is for; the label's whole text is in the row's tooltip)."""
    if not right:
        return left
    room = int(width - fm.horizontalAdvance(right) - fm.horizontalAdvance("  "))
    return fm.elidedText(left, Qt.TextElideMode.ElideRight, max(room, 0))


class MemoryGauge(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("memoryGauge")
        self.setAccessibleName("Memory gauge")
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)  # so a screen reader can land on it
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.values = GaugeValues()
        self.history: list[tuple[float, float, float, float]] = []  # t, rss, tok/s, tokens seen
        self.updates = 0  # how many snapshots arrived (tests watch it)
        self.details = False  # the expert labels (KV cache, slots, sinks, RSS) instead of plain words
        self.hybrid: HybridMemory | None = None  # a hybrid model's summary of the whole chat (set_plan)
        self._tips: list[tuple[float, float, str]] = []  # (top, bottom, tooltip) of each row painted
        self._t0: float | None = None
        self.setMinimumWidth(240)
        self.setFixedHeight(self._height())

    # -- data ------------------------------------------------------------------------

    def set_plan(self, plan, config=None) -> None:
        """Show an allocated plan before any stats arrive (just loaded / just applied); `config`
        (the model's ModelConfig) says how many of a hybrid's layers attend."""
        v = self.values
        v.kv_bytes, v.budget_bytes = plan.kv_bytes, plan.budget_bytes
        v.capacity, v.window, v.sink_tokens = plan.sinks + plan.window, plan.window, plan.sinks
        v.local_layers, v.local_slots = getattr(plan, "local_layers", 0), getattr(plan, "local_slots", None) or 0
        self.hybrid = hybrid_memory(plan, config)
        self._refit()

    def set_snapshot(self, snap) -> None:
        s = snap.stats
        v = self.values
        v.kv_bytes = int(s.kv_bytes)
        v.budget_bytes = int(s.budget_bytes)
        v.capacity = int(s.capacity)
        v.sink_tokens = int(s.sink_tokens)
        v.window = int(s.window)
        v.cache_tokens = int(s.cache_tokens)
        v.tokens_seen = int(s.tokens_seen)
        v.evicted_tokens = int(s.evicted_tokens)
        v.weight_bytes = getattr(s, "weight_bytes", None)
        v.rss_bytes = getattr(s, "rss_bytes", None)
        v.device_bytes = snap.device_bytes
        v.tok_s = float(snap.tok_s)
        if self._t0 is None:
            self._t0 = snap.t
        t = snap.t - self._t0
        sample = (t, float(v.rss_bytes or 0), v.tok_s, float(v.tokens_seen))
        if not self.history or t - self.history[-1][0] >= SAMPLE_S:
            self.history.append(sample)
            if len(self.history) > HISTORY:  # the whole session stays in view, at half the detail
                self.history = self.history[::2]
        else:  # within a sample period: latest memory, fastest speed
            self.history[-1] = (self.history[-1][0], sample[1], max(v.tok_s, self.history[-1][2]), sample[3])
        self.updates += 1
        self.setAccessibleDescription(f"{self.plain_summary()}. In detail: {self.summary()}")
        self._refit()

    def _refit(self) -> None:
        """A row came or went (a GPU's memory, Gemma's layers): the gauge's height follows."""
        if self.height() != self._height():
            self.setFixedHeight(self._height())
        self.update()

    def set_details(self, on: bool) -> None:
        """Expert labels (on) or plain words (off); the numbers are the same."""
        self.details = on
        self._refit()

    def filled_bytes(self) -> float:
        """The part of the conversation memory the chat fills now (the bar's strong part): the
        cache's share of its slots in use, and a hybrid's fixed state from the first token."""
        v = self.values
        state = self.hybrid.state_bytes if self.hybrid is not None else 0
        return state + (v.kv_bytes - state) * min(v.cache_tokens / max(v.capacity, 1), 1.0)

    def slots(self) -> tuple[int, int, int]:
        """(sinks, window used, free): the cache's slots, summing to its capacity. The sink slots
        are the sinks' whether or not their tokens are in yet (at first start the legend read
        "sinks 11 · window 0/917 · free 928" of 928 slots)."""
        v = self.values
        sinks = min(max(v.sink_tokens, 0), v.capacity)
        used = min(max(v.cache_tokens - v.sink_tokens, 0), v.capacity - sinks)
        return sinks, used, v.capacity - sinks - used

    def legend(self) -> list[str]:
        """The labels under the slots bar."""
        sinks, used, free = self.slots()
        return [f"sinks {sinks:,}", f"window {used:,}/{self.values.window:,}", f"free {free:,}"]

    def plain_legend(self) -> list[str]:
        return ["always kept", "recent", "room left"]  # (the numbers, in tokens, are the row's tooltip)

    def rows(self) -> list[tuple[str, str, str]]:
        """(label, value, tooltip) of the rows under the two bars, as drawn now."""
        v, d = self.values, self.details
        gpu = bool(v.device_bytes)
        rows = []
        h = self.hybrid
        if h is not None:  # Qwen3.5: most layers keep a fixed summary of everything said
            rows.append(("Recurrent state" if d else "Summary of the whole chat",
                         f"{h.recurrent_layers} layers, {fmt_bytes(h.state_bytes)}" if d
                         else f"{fmt_bytes(h.state_bytes)}, fixed",
                         h.summary_tip(v.window)))
        # Gemma 3 / 4: most layers hold only their sliding window. In plain words only where that
        # is less than the cache: with a window shorter than theirs they see what every layer sees,
        # and "Most layers see only the last ~56 words" beside "Recent text ~48 words" misled.
        if v.local_layers and (d or v.local_slots < v.capacity):
            rows.append(("Sliding-window layers" if d else "Most layers see only",
                         f"{v.local_layers} × {v.local_slots:,} slots" if d
                         else f"the last {words(v.local_slots)} words",
                         f"{v.local_layers} of this model's layers are sliding-window layers: each keeps only the "
                         f"last {v.local_slots:,} tokens (its own attention window), whatever the cache holds, "
                         "so they take little memory. The other layers see the whole cache."))
        if h is None:
            evicted = ("Tokens evicted" if d else "Forgotten so far",
                       f"{v.evicted_tokens:,} of {v.tokens_seen:,} seen" if d else
                       (f"{words(v.evicted_tokens)} words" if v.evicted_tokens else "nothing yet"),
                       f"Tokens evicted: {v.evicted_tokens:,} of the {v.tokens_seen:,} tokens this conversation has "
                       "fed the model have left the sliding window. The model no longer sees them (they stay in "
                       "the chat, faded, and in the saved conversation); memory stays the same size.")
        else:  # out of the window, but summarised: not forgotten
            evicted = ("Tokens evicted" if d else "Left the window",
                       f"{v.evicted_tokens:,} of {v.tokens_seen:,} seen" if d else
                       (f"{words(v.evicted_tokens)} words, summarized" if v.evicted_tokens else "nothing yet"),
                       h.evicted_tip(v.evicted_tokens, v.tokens_seen))
        rows += [
            evicted,
            ("Model weights" if d else "The model itself", fmt_bytes(v.weight_bytes),
             "The model's weights as Pinwheel holds them in memory (quantized as in the file, or converted "
             "for the kernel). Loaded once; the same for every conversation."),
            ("Process RSS" if d else "Pinwheel's memory use", fmt_bytes(v.rss_bytes),
             "Process RSS (resident set size): the memory of this computer Pinwheel occupies now — weights, "
             "conversation memory, the window and its runtime. It stays flat as the chat grows."),
        ]
        if gpu or d:
            rows.append(("Device memory" if d else "GPU memory",
                         fmt_bytes(v.device_bytes) if gpu else "— (CPU: part of RSS)",
                         "Memory in use on the accelerator (GPU) that runs the model; on the CPU this is part of "
                         "the process RSS above."))
        rows.append(("Speed", (f"{v.tok_s:.1f} tok/s" if d else f"{words(round(v.tok_s))} words/s") if v.tok_s
                     else "idle",
                     f"Generation speed: {v.tok_s:.1f} tokens per second (a token is a word or part of one)."
                     if v.tok_s else "Generation speed, while a reply is written."))
        return rows

    def plain_summary(self) -> str:
        v = self.values
        sinks, used, _free = self.slots()
        gone = "forgotten so far" if self.hybrid is None else "out of the window so far (summarized)"
        hybrid = "" if self.hybrid is None else f"{self.hybrid.sentence(v.window)}; "
        return (f"Conversation memory {fmt_bytes(v.kv_bytes)}; {hybrid}the model sees {words(used)} words of recent "
                f"text (room for {words(v.window)}) and always keeps {sinks:,} tokens; "
                f"{gone} {words(v.evicted_tokens)} words; Pinwheel's memory use {fmt_bytes(v.rss_bytes)}")

    def summary(self) -> str:
        v = self.values
        sinks, used, free = self.slots()
        parts = [
            f"KV cache {fmt_bytes(v.kv_bytes)} of {fmt_bytes(v.budget_bytes)} budget" + self._split(),
            *([self.hybrid.sentence(v.window, plain=False)] if self.hybrid is not None else []),
            f"{sinks:,} sink token{'s' if sinks != 1 else ''}, "
            f"window {used:,} of {v.window:,} used, {free:,} slots free",
            f"{v.evicted_tokens:,} tokens evicted of {v.tokens_seen:,} seen",
            f"weights {fmt_bytes(v.weight_bytes)}, process RSS {fmt_bytes(v.rss_bytes)}",
        ]
        if v.device_bytes:
            parts.append(f"device memory {fmt_bytes(v.device_bytes)}")
        parts.append(f"{v.tok_s:.1f} tokens/s" if v.tok_s else "idle")
        return "; ".join(parts)

    def _split(self) -> str:
        v = self.values
        if self.hybrid is not None:
            return f" ({fmt_bytes(self.hybrid.state_bytes)} of it the recurrent layers' fixed state)"
        if not v.local_layers:
            return ""
        return f" ({v.local_layers} sliding-window layers hold {v.local_slots:,} slots each)"

    # -- painting --------------------------------------------------------------------

    def _line_h(self) -> int:
        return QFontMetrics(self.font()).height()

    def _height(self) -> int:
        lh = self._line_h()
        rows = len(self.rows()) if hasattr(self, "details") else 5
        return int(lh * (4.6 + rows) + 14 + 58)  # (58: the plot)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(280, self._height())

    def changeEvent(self, e):  # noqa: N802
        super().changeEvent(e)
        self.setFixedHeight(self._height())

    def _colors(self):
        pal = self.palette()
        hl = pal.color(QPalette.ColorRole.Highlight)
        text = pal.color(QPalette.ColorRole.WindowText)
        base = pal.color(QPalette.ColorRole.Base)
        dark = pal.color(QPalette.ColorRole.Window).lightness() < 128
        sink = QColor("#d08a2e") if not dark else QColor("#f0b060")
        window = hl
        rss = QColor("#2e8b57") if not dark else QColor("#66cc99")
        return text, base, sink, window, rss, pal.color(QPalette.ColorRole.Mid)

    def paintEvent(self, _e):  # noqa: N802
        v = self.values
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        text, base, sink_c, win_c, rss_c, mid = self._colors()
        fm = QFontMetrics(self.font())
        lh = fm.height()
        w = self.width() - 12
        x0, y = 6, 4

        def row(left: str, right: str = "") -> None:
            nonlocal y
            p.setPen(text)
            left = fit_left(fm, left, right, w)
            p.drawText(QRectF(x0, y, w, lh), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, left)
            if right:
                p.drawText(QRectF(x0, y, w, lh), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, right)
            y += lh

        def bar(segments: list[tuple[float, QColor]]) -> None:
            nonlocal y
            h = max(8, lh * 0.7)
            rect = QRectF(x0, y + 1, w, h)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(base)
            p.drawRoundedRect(rect, 3, 3)
            x = rect.left()
            for frac, color in segments:
                ww = max(0.0, min(frac, 1.0)) * rect.width()
                if ww > 0:
                    p.setBrush(color)
                    p.drawRect(QRectF(x, rect.top(), ww, rect.height()))
                    x += ww
            p.setPen(QPen(mid, 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRoundedRect(rect, 3, 3)
            y += h + 4

        # Allocated once, at the plan's size: the bar shows what the chat fills of it (strong)
        # and what is reserved but still empty (faint), against the budget.
        d = self.details
        self._tips = []
        budget = max(v.budget_bytes, 1)
        filled = self.filled_bytes()
        top = y
        row("KV cache" if d else "Conversation memory",
            f"{fmt_bytes(v.kv_bytes)} / {fmt_bytes(v.budget_bytes)} budget" if d else fmt_bytes(v.kv_bytes))
        reserved = QColor(win_c)
        reserved.setAlpha(70)
        bar([(filled / budget, win_c), ((v.kv_bytes - filled) / budget, reserved)])
        self._tips.append((top, y, f"The KV cache: the model's working memory of this conversation, "
                                   f"{fmt_bytes(v.kv_bytes)} of a {fmt_bytes(v.budget_bytes)} budget{self._split()}. "
                                   "It is reserved once, at its full size, and never grows during a chat; the "
                                   "strong part of the bar is what the conversation fills now."))

        cap = max(v.capacity, 1)
        sinks, used_window, _free = self.slots()
        top = y
        row("Cache slots" if d else "Recent text the model sees",
            f"{v.cache_tokens:,} / {v.capacity:,}" if d else f"{words(used_window)} of {words(v.window)} words")
        bar([(sinks / cap, sink_c), (used_window / cap, win_c)])
        # legend
        p.setPen(text)
        sx = x0
        for label, color in zip(self.legend() if d else self.plain_legend(), (sink_c, win_c, base)):
            p.setBrush(color)
            p.setPen(QPen(mid, 1))
            p.drawRect(QRectF(sx, y + lh * 0.25, lh * 0.5, lh * 0.5))
            p.setPen(text)
            tw = fm.horizontalAdvance(label)
            p.drawText(QRectF(sx + lh * 0.7, y, tw + 2, lh), Qt.AlignmentFlag.AlignVCenter, label)
            sx += lh * 0.7 + tw + 10
        y += lh
        h = self.hybrid
        self._tips.append((top, y, ("" if h is None else
                                    f"Only this model's {layers(h.attention_layers, 'attention')} read these slots, "
                                    "word for word. ")
                           + f"Cache slots: {v.capacity:,}, one per token. {sinks:,} hold the attention sinks "
                             "(always kept: your system prompt and pinned messages); the sliding window of "
                             f"{v.window:,} holds the most recent text ({used_window:,} in use, about "
                             f"{words(used_window)[1:]} words). When it is full, the oldest text "
                           + ("is forgotten, a token at a time." if h is None else
                              "leaves it, a token at a time: the attention layers no longer see it, but the "
                              f"{layers(h.recurrent_layers, 'DeltaNet')}' summary still carries it.")))
        for label, value, tip in self.rows():
            top = y
            row(label, value)
            self._tips.append((top, y, tip))
        self._plot(p, QRectF(x0, y + 4, w, self.height() - y - 8), text, base, rss_c, win_c, mid, fm)
        p.end()

    def event(self, e):  # noqa: D102 - each row's tooltip explains that row
        if e.type() == QEvent.Type.ToolTip:
            y = e.pos().y()
            tip = next((t for top, bottom, t in self._tips if top <= y < bottom),
                       "Memory over this session: Pinwheel's memory use (green) stays flat while the text seen "
                       "(dashed) climbs; the blue line is the speed.")
            QToolTip.showText(e.globalPos(), wrapped(tip), self)
            return True
        return super().event(e)

    def _plot(self, p: QPainter, rect: QRectF, text, base, rss_c, tok_c, mid, fm) -> None:
        p.setPen(QPen(mid, 1))
        p.setBrush(base)
        p.drawRect(rect)
        pts = list(self.history)
        lh = fm.height()
        d = self.details
        p.setPen(rss_c)
        p.drawText(QRectF(rect.left() + 4, rect.top() + 1, rect.width(), lh), Qt.AlignmentFlag.AlignLeft,
                   "RSS" if d else "memory use")
        p.setPen(tok_c)
        p.drawText(QRectF(rect.left(), rect.top() + 1, rect.width() - 4, lh), Qt.AlignmentFlag.AlignRight,
                   "tok/s" if d else "speed")
        p.setPen(mid)
        p.drawText(QRectF(rect.left(), rect.top() + 1, rect.width(), lh), Qt.AlignmentFlag.AlignHCenter,
                   "tokens seen" if d else "text seen")
        if len(pts) < 2:
            return
        t0, t1 = pts[0][0], pts[-1][0]
        span = max(t1 - t0, 1e-6)
        inner = rect.adjusted(2, lh + 2, -2, -3)

        def path(vals: list[float], lo: float, hi: float) -> QPainterPath:
            rng = max(hi - lo, 1e-9)
            pp = QPainterPath()
            for i, (t, val) in enumerate(zip((q[0] for q in pts), vals)):
                pt = QPointF(inner.left() + (t - t0) / span * inner.width(),
                             inner.bottom() - (val - lo) / rng * inner.height())
                pp.moveTo(pt) if i == 0 else pp.lineTo(pt)
            return pp

        rss = [q[1] for q in pts]
        hi = max(rss)
        lo = 0.0  # from zero, so flat memory looks flat
        p.setBrush(Qt.BrushStyle.NoBrush)
        seen = [q[3] for q in pts]  # climbs with the chat, while RSS stays level
        p.setPen(QPen(mid, 1.2, Qt.PenStyle.DashLine))
        p.drawPath(path(seen, 0.0, max(seen) * 1.1 if max(seen) else 1))
        p.setPen(QPen(rss_c, 1.6))
        p.drawPath(path(rss, lo, hi * 1.1 if hi else 1))
        tok = [q[2] for q in pts]
        p.setPen(QPen(tok_c, 1.2))
        p.drawPath(path(tok, 0.0, max(tok) * 1.1 if max(tok) else 1))
        # The values sit on the chart's bottom, where the speed and the text seen start (zero):
        # each on a patch of the chart's own background, so a line passes behind it, not through
        # its letters (a strip of their own, a line taller, put Apply below the fold at 1280x800).
        strip = QRectF(rect.left() + 4, rect.bottom() - lh - 1, rect.width() - 8, lh)
        right = f"peak {max(tok):.0f} tok/s" if d else f"fastest {words(round(max(tok)))} words/s"
        for label, align in ((fmt_bytes(rss[-1]), Qt.AlignmentFlag.AlignLeft), (right, Qt.AlignmentFlag.AlignRight)):
            box = fm.boundingRect(strip.toRect(), int(align | Qt.AlignmentFlag.AlignVCenter), label)
            p.fillRect(QRectF(box).adjusted(-2, 0, 2, 0), base)
            p.setPen(text)
            p.drawText(strip, align | Qt.AlignmentFlag.AlignVCenter, label)
