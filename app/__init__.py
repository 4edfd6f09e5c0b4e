"""Pinwheel's desktop app (PySide6).  ``import app`` stays light: no Qt, no JAX.

``app.MainWindow`` is imported on first use (``from app import MainWindow``).
"""
from __future__ import annotations

__all__ = ["MainWindow"]


def __getattr__(name: str):
    if name == "MainWindow":
        from .main_window import MainWindow

        return MainWindow
    raise AttributeError(f"module 'app' has no attribute {name!r}")
