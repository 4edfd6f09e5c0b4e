"""The memory gauge: where the bytes go, drawn with QPainter from the session's numbers.

It shows, top to bottom: KV bytes allocated against the budget; the cache's slots as
sinks | window | free; tokens seen and evicted; model weights, process RSS and (on a GPU)
device memory; and a small plot over the session of RSS and tokens/s -- flat RSS while the
token count climbs is the point of a bounded cache.

It never asks the engine for anything: :meth:`MemoryGauge.set_snapshot` takes the
StatsSnapshot the engine thread emitted, stores the numbers and schedules a repaint.
Colours come from the palette, so light and dark themes both work.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

HISTORY = 240  # plot samples kept (one per SAMPLE_S at most; older ones are thinned, not dropped)
SAMPLE_S = 0.25


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


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
        self._t0: float | None = None
        self.setMinimumWidth(240)
        self.setFixedHeight(self._height())

    # -- data ------------------------------------------------------------------------

    def set_plan(self, plan) -> None:
        """Show an allocated plan before any stats arrive (just loaded / just applied)."""
        v = self.values
        v.kv_bytes, v.budget_bytes = plan.kv_bytes, plan.budget_bytes
        v.capacity, v.window, v.sink_tokens = plan.sinks + plan.window, plan.window, plan.sinks
        v.local_layers, v.local_slots = getattr(plan, "local_layers", 0), getattr(plan, "local_slots", None) or 0
        self.update()

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
        self.setAccessibleDescription(self.summary())
        self.setToolTip(self.summary().replace("; ", "\n"))  # one fact a line: fits a small screen
        self.update()

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

    def summary(self) -> str:
        v = self.values
        sinks, used, free = self.slots()
        parts = [
            f"KV cache {fmt_bytes(v.kv_bytes)} of {fmt_bytes(v.budget_bytes)} budget" + self._split(),
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
        if not v.local_layers:
            return ""
        return f" ({v.local_layers} sliding-window layers hold {v.local_slots:,} slots each)"

    # -- painting --------------------------------------------------------------------

    def _line_h(self) -> int:
        return QFontMetrics(self.font()).height()

    def _height(self) -> int:
        lh = self._line_h()
        return int(lh * 9.6 + 14 + 72)

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
        budget = max(v.budget_bytes, 1)
        filled = v.kv_bytes * min(v.cache_tokens / max(v.capacity, 1), 1.0)
        row("KV cache", f"{fmt_bytes(v.kv_bytes)} / {fmt_bytes(v.budget_bytes)} budget")
        reserved = QColor(win_c)
        reserved.setAlpha(70)
        bar([(filled / budget, win_c), ((v.kv_bytes - filled) / budget, reserved)])

        cap = max(v.capacity, 1)
        sinks, used_window, _free = self.slots()
        row("Cache slots", f"{v.cache_tokens:,} / {v.capacity:,}")
        bar([(sinks / cap, sink_c), (used_window / cap, win_c)])
        # legend
        p.setPen(text)
        sx = x0
        for label, color in zip(self.legend(), (sink_c, win_c, base)):
            p.setBrush(color)
            p.setPen(QPen(mid, 1))
            p.drawRect(QRectF(sx, y + lh * 0.25, lh * 0.5, lh * 0.5))
            p.setPen(text)
            tw = fm.horizontalAdvance(label)
            p.drawText(QRectF(sx + lh * 0.7, y, tw + 2, lh), Qt.AlignmentFlag.AlignVCenter, label)
            sx += lh * 0.7 + tw + 10
        y += lh
        if v.local_layers:  # Gemma 3: most layers hold only their sliding window
            row("Sliding-window layers", f"{v.local_layers} × {v.local_slots:,} slots")
        row("Tokens evicted", f"{v.evicted_tokens:,} of {v.tokens_seen:,} seen")
        row("Model weights", fmt_bytes(v.weight_bytes))
        row("Process RSS", fmt_bytes(v.rss_bytes))
        row("Device memory", fmt_bytes(v.device_bytes) if v.device_bytes else "— (CPU: part of RSS)")
        row("Speed", f"{v.tok_s:.1f} tok/s" if v.tok_s else "idle")
        self._plot(p, QRectF(x0, y + 4, w, self.height() - y - 8), text, base, rss_c, win_c, mid, fm)
        p.end()

    def _plot(self, p: QPainter, rect: QRectF, text, base, rss_c, tok_c, mid, fm) -> None:
        p.setPen(QPen(mid, 1))
        p.setBrush(base)
        p.drawRect(rect)
        pts = list(self.history)
        lh = fm.height()
        p.setPen(rss_c)
        p.drawText(QRectF(rect.left() + 4, rect.top() + 1, rect.width(), lh), Qt.AlignmentFlag.AlignLeft,
                   "RSS")
        p.setPen(tok_c)
        p.drawText(QRectF(rect.left(), rect.top() + 1, rect.width() - 4, lh), Qt.AlignmentFlag.AlignRight,
                   "tok/s")
        p.setPen(mid)
        p.drawText(QRectF(rect.left(), rect.top() + 1, rect.width(), lh), Qt.AlignmentFlag.AlignHCenter,
                   "tokens seen")
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
        p.setPen(text)
        p.drawText(QRectF(rect.left() + 4, rect.bottom() - lh - 1, rect.width() - 8, lh),
                   Qt.AlignmentFlag.AlignLeft,
                   f"{fmt_bytes(rss[-1])}")
        p.drawText(QRectF(rect.left() + 4, rect.bottom() - lh - 1, rect.width() - 8, lh),
                   Qt.AlignmentFlag.AlignRight, f"peak {max(tok):.0f} tok/s")
