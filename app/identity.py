"""Who this program is: its names and its version, for the launcher, the desktop files and the
About box (a leaf module: nothing here imports the rest of the app)."""
from __future__ import annotations

APP_ID = "pinwheel"  # desktop file name, icon name, Wayland app id
APP_NAME = "Pinwheel"  # QCoreApplication.applicationName() -> X11 WM_CLASS class
DIST_NAME = "pinwheel-chat"  # the installed distribution (pyproject.toml)


def get_version() -> str:
    """The version of this Pinwheel (engine/version.py is the one place it is written).

    Read from the installed distribution's metadata first, which is generated from
    engine/version.py at build time and needs no import of the engine package; a source
    checkout that is not installed falls back to engine.version itself.
    """
    from importlib import metadata

    try:
        return metadata.version(DIST_NAME)
    except metadata.PackageNotFoundError:
        from engine.version import __version__

        return __version__
