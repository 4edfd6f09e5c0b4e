"""A read-only Markdown view for model output: Qt's own renderer, and it never fetches anything.

Model output is untrusted text.  This view:
* parses it with QTextDocument's Markdown importer (GitHub dialect) with raw HTML switched off,
  so ``<img src=http://...>`` or ``<script>`` show as text;
* never loads a resource: ``loadResource`` answers nothing for every URL (remote or local), so a
  Markdown image ``![](http://tracker/x.png)`` or ``![](file:///etc/passwd)`` stays a blank;
* never follows a link by itself (``setOpenLinks(False)``); a click emits ``linkClicked`` and
  the window opens http(s)/mailto links in the system browser.
It sizes itself to its content (no vertical scroll bar of its own) so many of them can sit in a
list; a fenced code block gets a view of its own whose long lines scroll sideways.

:class:`MarkdownStack` keeps re-rendering cheap while a long reply streams: parsing and laying
out Markdown costs time linear in its length (~2.5 ms per 1,000 characters here), so a reply
is cut, at blank lines outside code fences, into chunks of about CHUNK_CHARS that are rendered
once each; only the growing tail is re-rendered on every flush.
"""
from __future__ import annotations

import math
import re
from bisect import bisect_left
from dataclasses import dataclass, replace

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtCore import QByteArray, QEvent, QPoint, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (QColor, QGuiApplication, QPalette, QTextBlockFormat, QTextCharFormat, QTextCursor,
                           QTextDocument, QTextFormat)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QVBoxLayout, QWidget

from .code_highlight import highlight

MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
    | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)


_FENCE_LINE = re.compile(r"^ {0,3}(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def hard_line_breaks(text: str) -> str:
    """Keep the model's line breaks: chat models write poems, addresses and unfenced code one
    line at a time, and Markdown would join those lines into one paragraph.  Outside code
    fences, a line followed by another non-blank line gets a hard break (two trailing spaces)."""
    if "\n" not in text:
        return text
    lines = text.split("\n")
    in_fence = False
    for i, line in enumerate(lines[:-1]):
        if _FENCE_LINE.match(line):
            in_fence = not in_fence
            continue
        nxt = lines[i + 1]
        if not in_fence and line.strip() and nxt.strip() and not _FENCE_LINE.match(nxt):
            lines[i] = line + "  "
            indent = len(nxt) - len(nxt.lstrip(" "))
            if indent and not _LIST_ITEM.match(nxt) and not _LIST_ITEM.match(line):
                lines[i + 1] = "\u00a0" * indent + nxt[indent:]  # keep unfenced code's indentation
    return "\n".join(lines)


def blend(a: QColor, b: QColor, t: float) -> QColor:
    """`a` moved a fraction `t` towards `b`."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def _faded_text(pal: QPalette, group: QPalette.ColorGroup) -> QColor:
    """The colour of text the model no longer sees: the text's, most of the way to the window's."""
    return blend(pal.color(group, QPalette.ColorRole.Text), pal.color(group, QPalette.ColorRole.Window), 0.6)


def _theme_link() -> str:
    app = QGuiApplication.instance()
    return app.palette().color(QPalette.ColorRole.Link).name() if app is not None else ""


def _theme_scheme() -> str:
    """"dark" or "light": which syntax colours read on the theme's window colour."""
    app = QGuiApplication.instance()
    dark = app is not None and app.palette().color(QPalette.ColorRole.Window).lightness() < 128
    return "dark" if dark else "light"


COPIED_TEXT = "Copied ✓"
COPIED_MS = 1500  # how long a code block's Copy link reads "Copied ✓"


class MarkdownView(QTextBrowser):
    linkClicked = Signal(QUrl)
    menuRequested = Signal(QPoint)  # a context menu, at this global position

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        # Message bodies are reached with the mouse; the keyboard goes to each message's buttons.
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.viewport().setAutoFillBackground(False)
        self.setAutoFillBackground(False)
        self.document().setDocumentMargin(2)
        self.document().setUndoRedoEnabled(False)  # read-only: the fade's format edits need no history
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.anchorClicked.connect(self._anchor_clicked)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(lambda p: self.menuRequested.emit(self.viewport().mapToGlobal(p)))
        self._markdown = ""
        self._faded = False
        self._fade_to = 0  # characters at the start drawn faded (see fade_until)
        self._code = False
        self._rendered_link = _theme_link()
        self._rendered_scheme = _theme_scheme()
        self._retheme_pending = False
        self._copied_timer = QTimer(self)  # puts a "Copied ✓" link back to "Copy"
        self._copied_timer.setSingleShot(True)
        self._copied_timer.setInterval(COPIED_MS)
        self._copied_timer.timeout.connect(self._rerender)
        self._fit()

    def set_code(self, code: bool) -> None:
        """A view that holds one fenced code block: its lines are kept whole (code is read line
        by line) and scroll sideways when wider than the message, with a scroll bar of its own."""
        if code == self._code:
            return
        self._code = code
        self.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap if code else QTextBrowser.LineWrapMode.WidgetWidth)
        self.setHorizontalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAsNeeded if code else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._shade_code_blocks()
        self._fit()

    def is_code(self) -> bool:
        return self._code

    # -- safety ---------------------------------------------------------------------

    def loadResource(self, kind: int, url: QUrl):  # noqa: N802 - Qt override
        """Never load anything a message refers to (images, style sheets), local or remote.

        Returns empty bytes rather than None: PySide6 6.12 drops a reference to None each time
        a Python override returns None for this QVariant, which crashes the interpreter later.
        """
        return QByteArray()

    # -- content --------------------------------------------------------------------

    def set_markdown(self, text: str) -> None:
        if text == self._markdown and not self.document().isEmpty():
            return
        # the same block growing (a reply streaming) keeps where the user scrolled it; another
        # block in this view (a message re-cut) starts at the left
        same_block = bool(self._markdown) and text.split("\n", 1)[0] == self._markdown.split("\n", 1)[0]
        self._markdown = text
        bar = self.horizontalScrollBar()
        scrolled = bar.value() if same_block else 0
        self.setExtraSelections([])  # (marks of a search: their places are gone with the old text)
        self.document().setMarkdown(hard_line_breaks(text), MARKDOWN_FEATURES)
        self._rendered_link = _theme_link()
        self._shade_code_blocks()
        self._rendered_scheme = _theme_scheme()
        highlight(self.document(), self._rendered_scheme)
        self._fade_to = min(self._fade_to, self.chars())
        self._fade_range(0, self._fade_to)
        if self._code:
            # The cursor ends up after the last character, and a resize scrolls to it: a code
            # block opened at its right end. Keep it at the start, and where the user scrolled it
            # while it streams.
            self.moveCursor(QTextCursor.MoveOperation.Start)
            bar.setValue(scrolled)

    def changeEvent(self, e):  # noqa: N802 - a theme switch re-renders: links and code shading
        if e.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            # This view's palette is its own (set_faded), so a new theme does not reach it, and
            # Qt's Markdown importer writes the theme's link colour into the text: links stayed
            # dark blue on a dark background. Rebuild both once every widget has the theme.
            # (a faded start is in a colour blended from the theme: rebuilt with it)
            stale = _theme_link() != self._rendered_link or _theme_scheme() != self._rendered_scheme
            if (stale or self._fade_to) and not self._retheme_pending:
                self._retheme_pending = True
                QTimer.singleShot(0, self._retheme)
            self._shade_code_blocks()
        super().changeEvent(e)

    def _shade_code_blocks(self) -> None:
        """Give fenced/indented code a background so it reads as code (it is already monospace)."""
        doc = self.document()
        # From the application's palette, not this view's: the stylesheet makes message views'
        # backgrounds transparent, and their palette then reads Base as black (solid black code
        # blocks with black text, seen under X11). The theme's own colours are what a code block
        # must stand out from, lightly, in light and dark alike.
        app = QGuiApplication.instance()
        pal = app.palette() if app is not None else self.palette()
        # (messages sit on the window's colour: a code block is that, a little towards the text)
        bg = blend(pal.color(QPalette.ColorRole.Window), pal.color(QPalette.ColorRole.Text), 0.08)
        block = doc.begin()
        cursor = None
        while block.isValid():
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                if cursor is None:
                    cursor = QTextCursor(doc)
                    cursor.beginEditBlock()
                cursor.setPosition(block.position())
                shade = QTextBlockFormat()
                shade.setBackground(bg)
                # in a code view long lines scroll sideways; an indented block inside text wraps
                shade.setNonBreakableLines(self._code)
                cursor.mergeBlockFormat(shade)
            block = block.next()
        if cursor is not None:
            cursor.endEditBlock()

    # -- a code block's Copy link ----------------------------------------------------

    def _anchor_clicked(self, url: QUrl) -> None:
        if url.toString().startswith(COPY_CODE_LINK):
            self.show_copied(url.toString())
        self.linkClicked.emit(url)

    def show_copied(self, href: str) -> bool:
        """The link `href` reads "Copied ✓" for a moment (the message renders again after), so
        a click on a code block's Copy shows that it did something."""
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                if frag.isValid() and frag.charFormat().anchorHref() == href:
                    cursor = QTextCursor(self.document())
                    cursor.setPosition(frag.position())
                    cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                    cursor.insertText(COPIED_TEXT, frag.charFormat())
                    self._copied_timer.start()
                    return True
                it += 1
            block = block.next()
        return False

    # -- looks ----------------------------------------------------------------------

    def set_faded(self, faded: bool) -> None:
        if faded == self._faded:
            return
        self._faded = faded
        self._apply_palette()

    def chars(self) -> int:
        """Characters of the rendered text (the document's closing paragraph mark left out)."""
        return self.document().characterCount() - 1

    def fade_until(self, chars: int) -> None:
        """Draw the first `chars` characters faded: the start of a message the model no longer
        sees, the rest of it as usual. Less than before re-renders (the old fade is in the text)."""
        chars = max(0, min(chars, self.chars()))
        if chars == self._fade_to:
            return
        if chars < self._fade_to:
            self._fade_to = chars
            self._markdown, text = "", self._markdown
            self.set_markdown(text)
        else:
            self._fade_range(self._fade_to, chars)
            self._fade_to = chars

    def faded_chars(self) -> int:
        return self._fade_to

    def _fade_range(self, start: int, end: int) -> None:
        if end <= start:
            return
        base = self.parentWidget().palette() if self.parentWidget() else self.palette()
        fmt = QTextCharFormat()
        fmt.setForeground(_faded_text(base, QPalette.ColorGroup.Active))
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(min(end, self.chars()), QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(fmt)

    def _rerender(self) -> None:
        if self._markdown:
            self._markdown, text = "", self._markdown
            self.set_markdown(text)

    def _retheme(self) -> None:
        self._rerender()  # first: the palette change below then finds the link colour current
        self._rendered_link = _theme_link()
        self._apply_palette()
        self._retheme_pending = False

    def _apply_palette(self) -> None:
        base = self.parentWidget().palette() if self.parentWidget() else self.palette()
        pal = QPalette(base)
        if self._faded:
            for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
                pal.setColor(group, QPalette.ColorRole.Text, _faded_text(base, group))
        self.setPalette(pal)

    # -- size -----------------------------------------------------------------------

    def _fit(self, *_):
        h = math.ceil(self.document().size().height()) + 2 * self.frameWidth()
        if self._code and self.document().size().width() > self.viewport().width() + 1:
            h += self.horizontalScrollBar().sizeHint().height()  # the bar sits below the last line
        if h != self.height():
            self.setFixedHeight(max(h, 8))

    def resizeEvent(self, e):  # noqa: N802 - a narrower message may now need the sideways bar
        super().resizeEvent(e)
        if self._code:
            self._fit()

    def wheelEvent(self, e):  # noqa: N802
        """Vertical wheel turns scroll the chat, not a code block: a block never scrolls
        vertically (it is as tall as its code), only sideways with a horizontal turn or Shift."""
        if self._code and e.angleDelta().x() == 0:
            if not e.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                e.ignore()  # to the chat
                return
            bar = self.horizontalScrollBar()  # Shift+wheel: sideways, as in editors and browsers
            bar.setValue(bar.value() - round(e.angleDelta().y() / 120 * 3 * bar.singleStep()))
            e.accept()
            return
        super().wheelEvent(e)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(200, self.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(60, self.height())


CHUNK_CHARS = 2000  # re-render at most about twice this much text per streaming flush
SINGLE_VIEW_CHARS = 6000  # a finished message up to this long is shown as one document
_FENCE = re.compile(_FENCE_LINE.pattern, re.MULTILINE)


def _fence_starts(text: str) -> list[int]:
    return [m.start() for m in _FENCE.finditer(text)]


def split_markdown(text: str, start: int = 0, min_chars: int = CHUNK_CHARS) -> list[int]:
    """Cut points in text[start:]: chunks of min_chars to 2 * min_chars characters (the growing
    tail may be shorter).  A cut goes after a blank line outside code blocks when there is one
    (the chunks then render exactly like the whole); otherwise after a line break or a space,
    and a code block cut in two is closed and reopened by :func:`chunk_sources`."""
    fences = _fence_starts(text)
    cuts: list[int] = []
    last, n = start, len(text)
    while n - last > min_chars:
        lo, hi = last + min_chars, min(last + 2 * min_chars, n)
        p = text.find("\n\n", lo, hi)
        while p >= 0 and bisect_left(fences, p) % 2:  # inside a code block
            p = text.find("\n\n", p + 1, hi)
        if p >= 0:
            cut = p + 2
        elif n > last + 2 * min_chars:  # no blank line: a line break, a space, or right here
            p = text.rfind("\n", lo, hi)
            if p < 0:
                p = text.rfind(" ", lo, hi)
            cut = p + 1 if p >= 0 else hi
        else:
            break  # wait for more text
        cuts.append(cut)
        last = cut
    return cuts


def chunk_sources(text: str, bounds: list[int]) -> list[str]:
    """The Markdown each chunk text[a:b] renders: a chunk that starts or ends inside a code
    block gets that block's opening line prepended, or a closing fence appended."""
    fences = _fence_starts(text)
    out = []
    for a, b in zip(bounds, bounds[1:]):
        src = text[a:b]
        k = bisect_left(fences, a)
        if k % 2:  # starts inside a code block: reopen it the way it was opened
            f = fences[k - 1]
            end = text.find("\n", f)
            src = text[f:end if end >= 0 else len(text)] + "\n" + src
        k = bisect_left(fences, b)
        if k % 2 and b < len(text):  # ends inside one: close it
            opening = text[fences[k - 1]:].lstrip(" ")[:3]
            src += ("" if src.endswith("\n") else "\n") + opening
        out.append(src)
    return out


@dataclass(frozen=True)
class Fenced:
    """One fenced code block of a text, by CommonMark's rule: an opening line of 3+ backticks or
    tildes indented at most 3 spaces (a backtick fence's info has no backtick), closed by a line
    of the same character at least as long, indented at most 3 spaces."""

    start: int  # offset of the opening line
    first: int  # index of the opening line
    indent: int
    info: str  # what follows the opening fence ("python", ...)
    last: int | None = None  # index of the closing line; None: still open (streaming)
    end: int | None = None  # offset just past the closing line (and its line break)
    complete: bool = False  # the closing line has its line break (it cannot grow any more)


_OPENING = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


def fenced_blocks(text: str) -> list[Fenced]:
    blocks: list[Fenced] = []
    pos, fence, cur = 0, "", None
    lines = text.split("\n")
    for i, line in enumerate(lines):
        body = line.rstrip("\r")
        if cur is None:
            m = _OPENING.match(body)
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                fence = m.group(2)
                cur = Fenced(pos, i, len(m.group(1)), m.group(3).strip())
        else:
            closing = body.strip()
            if (len(body) - len(body.lstrip(" ")) <= 3 and closing and set(closing) == {fence[0]}
                    and len(closing) >= len(fence)):
                has_break = i < len(lines) - 1
                blocks.append(replace(cur, last=i, end=pos + len(line) + has_break, complete=has_break))
                cur = None
        pos += len(line) + 1
    if cur is not None:
        blocks.append(cur)
    return blocks


def code_cuts(text: str, start: int = 0) -> list[int]:
    """Cut points in text[start:] that give each fenced code block a view of its own: where its
    opening line starts and just after its closing line, once that line is whole (so a cut never
    moves as a reply streams in). Only blocks at the start of a line are cut out: one inside a
    list item stays in the text around it."""
    cuts: list[int] = []
    for b in fenced_blocks(text):
        if b.indent:
            continue
        cuts.append(b.start)
        if b.complete:
            cuts.append(b.end)
    return [c for c in cuts if start < c < len(text)]


def _is_code(src: str) -> bool:
    blocks = fenced_blocks(src.split("\n", 1)[0])
    return bool(blocks) and blocks[0].indent == 0


THINKING_LINK = "pinwheel:thinking"
COPY_CODE_LINK = "pinwheel:copy-code/"  # + the block's number in the message


def label_code_blocks(text: str) -> tuple[str, list[str]]:
    """Each fenced code block (fenced_blocks) gets a line above it, at its indentation, with its
    language and a Copy link; returns the new text and the blocks' code (what Copy puts on the
    clipboard), in order. An open fence (a block still streaming) is labelled too."""
    lines = text.split("\n")
    blocks = fenced_blocks(text)
    labels = {b.first: f"{' ' * b.indent}*{b.info.split()[0] if b.info else 'code'}* · [Copy]({COPY_CODE_LINK}{n})"
              for n, b in enumerate(blocks)}
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in labels:
            out.append(labels[i])
        out.append(line)
    def body(b: Fenced) -> str:  # its lines, less the fence's own indentation (CommonMark's rule)
        rows = lines[b.first + 1: len(lines) if b.last is None else b.last]
        return "\n".join(r[min(b.indent, len(r) - len(r.lstrip(" "))):] for r in rows)

    return "\n".join(out), [body(b) for b in blocks]


def fold_thinking(text: str, expanded: bool = False) -> str:
    """A reply that opens with a reasoning block (Qwen3's <think>...</think>) as Markdown: the
    block folded to one quoted line with a show/hide link, or quoted in full. The stored reply is
    not changed (the template decides what later turns see of it). A reply that starts inside
    the block, because the template's generation prompt opened it (Qwen3.5's ends in
    '<think>\n'), is folded too, once its </think> has come."""
    head = text.lstrip()
    if head.startswith("<think>"):
        body = head[len("<think>"):]
    elif "</think>" in head and "<think>" not in head.partition("</think>")[0]:
        body = head
    else:
        return text
    thought, closed, rest = body.partition("</think>")
    words = len(thought.split())
    label = f"Thought for {words:,} words" if closed else f"Thinking… ({words:,} words)"
    if not expanded:
        fold = f"> 💭 *{label}* · [show]({THINKING_LINK})"
    else:
        quoted = "\n".join("> " + line if line.strip() else ">" for line in thought.strip().splitlines())
        fold = f"> 💭 *{label}* · [hide]({THINKING_LINK})\n>\n{quoted}"
    return fold + ("\n\n" + rest.lstrip() if rest.strip() else "")


class MarkdownStack(QWidget):
    """A message body: one MarkdownView, or several for a long text (see split_markdown)."""

    linkClicked = Signal(QUrl)
    menuRequested = Signal(QPoint)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.setSpacing(0)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.views: list[MarkdownView] = []
        self._pieces: list[str] = [""]  # the part of the text each view shows
        self._faded = False
        self._unseen = 0.0  # the share of the text, from its start, drawn faded (set_unseen)
        self._view(0)

    def _view(self, i: int) -> MarkdownView:
        while len(self.views) <= i:
            v = MarkdownView(self)
            v.linkClicked.connect(self.linkClicked)
            v.menuRequested.connect(self.menuRequested)
            v.set_faded(self._faded)
            v.setAccessibleName(self.accessibleName())
            self._lay.addWidget(v)
            self.views.append(v)
        return self.views[i]

    def _show(self, text: str, bounds: list[int]) -> None:
        for i, src in enumerate(chunk_sources(text, bounds)):
            view = self._view(i)
            view.set_code(_is_code(src))
            view.set_markdown(src)  # a no-op for a chunk that did not change
        n = max(len(bounds) - 1, 1)
        for v in self.views[n:]:
            self._lay.removeWidget(v)
            v.deleteLater()
        del self.views[n:]
        self._pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])] or [""]
        self._fade_start()

    def markdown_text(self) -> str:
        return "".join(self._pieces)

    def set_markdown(self, text: str) -> None:
        """A finished text: one document when short enough to render at once."""
        cuts = split_markdown(text, 0, CHUNK_CHARS * 2) if len(text) > SINGLE_VIEW_CHARS else []
        self._show(text, [0, *sorted({*cuts, *code_cuts(text)}), len(text)])

    def stream_markdown(self, text: str) -> None:
        """A growing text: settled chunks stay as they are; only the tail is re-rendered."""
        bounds = [0]
        for piece in self._pieces[:-1]:
            bounds.append(bounds[-1] + len(piece))
        if not text.startswith("".join(self._pieces[:-1])):  # rewritten: start over
            bounds = [0]
        cuts = sorted({*split_markdown(text, bounds[-1]), *code_cuts(text, bounds[-1])})
        self._show(text, [*bounds, *cuts, len(text)])

    def toPlainText(self) -> str:  # noqa: N802 - like QTextEdit
        return "\n".join(v.toPlainText() for v in self.views)

    def selected_text(self) -> str:
        return "\n".join(t for t in (v.textCursor().selectedText() for v in self.views) if t).replace(
            "\u2029", "\n")

    def set_faded(self, faded: bool) -> None:
        self._faded = faded
        for v in self.views:
            v.set_faded(faded)

    def set_unseen(self, share: float) -> None:
        """Fade this share of the text, from its start: a message the model's window has cut
        (it sees only its last tokens) is faded where it no longer sees it.  Tokens are spread
        evenly over the rendered characters: the engine counts tokens, not characters."""
        share = max(0.0, min(share, 1.0))
        if share != self._unseen:
            self._unseen = share
            self._fade_start()

    def _fade_start(self) -> None:
        sizes = [v.chars() for v in self.views]
        left = round(sum(sizes) * self._unseen)
        for v, n in zip(self.views, sizes):
            v.fade_until(min(left, n))
            left = max(left - n, 0)

    def setAccessibleName(self, name: str) -> None:  # noqa: N802
        super().setAccessibleName(name)
        for v in self.views:
            v.setAccessibleName(name)
