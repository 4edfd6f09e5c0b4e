"""Workarounds for bugs in the Qt bindings that would otherwise crash the app.

PySide6 6.12.0 on Python < 3.12 loses a reference to ``None`` on every call of a method that
returns nothing (``label.setText(...)``, ``widget.setEnabled(...)``) and to ``True``/``False`` on
every emission of a signal (a token's ``(int, str)`` included).  Python 3.11 does not make these
singletons immortal (3.12 does), so after a few thousand calls -- under a minute of streaming --
the interpreter aborts with "Fatal Python error: none_dealloc / bool_dealloc".  Measured here:
``None`` starts with ~6,800 references and loses one per ``label.setText()``; 6.11.3 and 6.9.3
do not leak (tests/app/test_engine_worker.py::test_pyside_singleton_leak_is_guarded).

The fix belongs in the dependency pin (``PySide6-Essentials !=6.12.0``); until every install has
it, :func:`guard_singleton_refcounts` (run when this module is imported) gives the three
singletons a reference count so large that no leak can bring it to zero -- what Python 3.12
does for them by design.  It touches nothing else and only runs on the affected combination.
"""
from __future__ import annotations

import ctypes
import logging
import sys

AFFECTED = ("6.12.0",)
_IMMORTAL = 1 << 60
_done = False


def pyside_leaks_singletons() -> bool:
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    try:
        import PySide6
    except ImportError:
        return False
    return PySide6.__version__ in AFFECTED


def guard_singleton_refcounts() -> bool:
    """Make None/True/False immune to the leak; returns True when the guard was applied."""
    global _done
    if _done or not pyside_leaks_singletons():
        return _done
    for obj in (None, True, False):
        # ob_refcnt is the first field (Py_ssize_t) of every CPython 3.11 object
        ctypes.c_ssize_t.from_address(id(obj)).value = _IMMORTAL
    _done = True
    logging.getLogger(__name__).info(
        "PySide6 %s leaks references to None/True/False on Python %d.%d; guarded (install "
        "PySide6-Essentials 6.11.3 or a fixed release to drop this workaround)",
        __import__("PySide6").__version__, *sys.version_info[:2])
    return True


# Every Qt module of the app imports this one first, so the guard is in place before the first
# Qt call, whichever module a program (or a test) imports.
guard_singleton_refcounts()
