"""Syntax colours for fenced code blocks, from Pygments, written into a rendered QTextDocument.

Qt's Markdown importer marks each line of a fenced block with BlockCodeFence and the fence's
language (BlockCodeLanguage); this module lexes each block's text with that language's Pygments
lexer and merges a foreground colour (and bold/italic) per token into the document. Only the
characters' formats change: the text, the block formats (whole lines that scroll sideways) and
the code shading stay as the view set them.

One Pygments style per scheme: a light one on a light window, a dark one on a dark window (a
light style's navy keywords vanish on a dark background). A block with no language, or one
Pygments does not know, stays plain: guessing a language from a few lines is often wrong.
"""
from __future__ import annotations

from functools import lru_cache

from . import qt_compat  # noqa: F401  (first: guards a PySide6 bug, see qt_compat)
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat

STYLES = {"light": "default", "dark": "github-dark"}
MAX_CHARS = 50_000  # a longer block stays plain: lexing it on every streamed flush would show


@lru_cache(maxsize=64)
def _lexer(language: str):
    """The Pygments lexer for a fence's language word ("python", "js", "c++"), or None."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:  # (stripnl/ensurenl off: token offsets must match the document's text exactly)
        return get_lexer_by_name(language.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=1024)
def _format(scheme: str, ttype) -> QTextCharFormat | None:
    """The character format a token type gets in `scheme`; None when the style leaves it plain."""
    from pygments.styles import get_style_by_name

    st = get_style_by_name(STYLES[scheme]).style_for_token(ttype)
    if not (st["color"] or st["bold"] or st["italic"]):
        return None
    fmt = QTextCharFormat()
    if st["color"]:
        fmt.setForeground(QColor("#" + st["color"]))
    if st["bold"]:
        fmt.setFontWeight(QFont.Weight.Bold)
    if st["italic"]:
        fmt.setFontItalic(True)
    return fmt


def code_runs(doc: QTextDocument) -> list[tuple[int, str, str]]:
    """(position, language, text) of each fenced block in `doc`: its lines joined by "\\n", so
    an offset into the text plus `position` is the document position (one paragraph mark
    between blocks, as one line break)."""
    runs: list[tuple[int, str, list[str]]] = []
    prev_fenced = False
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        fenced = fmt.hasProperty(QTextFormat.Property.BlockCodeFence)
        if fenced:
            lang = fmt.stringProperty(QTextFormat.Property.BlockCodeLanguage).split()[:1]
            lang = lang[0] if lang else ""
            if prev_fenced and runs and runs[-1][1] == lang:
                runs[-1][2].append(block.text())
            else:
                runs.append((block.position(), lang, [block.text()]))
        prev_fenced = fenced
        block = block.next()
    return [(pos, lang, "\n".join(lines)) for pos, lang, lines in runs]


def highlight(doc: QTextDocument, scheme: str) -> int:
    """Colour every fenced block of `doc` whose language Pygments knows, for `scheme` ("light"
    or "dark"). Returns how many blocks were coloured."""
    coloured = 0
    cursor = None
    for pos, lang, text in code_runs(doc):
        lexer = _lexer(lang) if lang and len(text) <= MAX_CHARS else None
        if lexer is None:
            continue
        if cursor is None:
            cursor = QTextCursor(doc)
            cursor.beginEditBlock()
        for offset, ttype, value in lexer.get_tokens_unprocessed(text):
            fmt = _format(scheme, ttype)
            if fmt is None or not value.strip():
                continue
            cursor.setPosition(pos + offset)
            cursor.setPosition(pos + offset + len(value), QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(fmt)
        coloured += 1
    if cursor is not None:
        cursor.endEditBlock()
    return coloured
