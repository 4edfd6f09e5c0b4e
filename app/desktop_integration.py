"""Put Pinwheel into the desktop launcher, and give its windows a name, an icon and a class.

``pinwheel install-desktop`` writes a freedesktop entry and the icons into the user's XDG
data folder (no root needed); ``pinwheel uninstall-desktop`` removes exactly those files.

    $XDG_DATA_HOME/applications/pinwheel.desktop
    $XDG_DATA_HOME/icons/hicolor/<n>x<n>/apps/pinwheel.png     n in resources.ICON_SIZES
    $XDG_DATA_HOME/icons/hicolor/scalable/apps/pinwheel.svg

The entry's ``StartupWMClass=Pinwheel`` matches the X11 WM_CLASS class that Qt derives from
``QCoreApplication.applicationName()``, and the Wayland app id is the desktop file name
(``QGuiApplication.setDesktopFileName("pinwheel")``); the launcher sets both
(``app.launcher.set_app_identity``), so the shell groups the window under this entry.

Nothing here imports Qt at import time; ``app_icon`` and ``apply_style`` import it lazily.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import resources

from app.identity import APP_ID, APP_NAME  # noqa: E402,F401 (re-exported)
DESKTOP_FILE = f"{APP_ID}.desktop"

# Shared libraries Qt's xcb platform plugin loads (readelf -d on PySide6's libQt6Gui,
# libQt6XcbQpa and libqxcb), with the Debian/Ubuntu package that ships each. The same list
# is in scripts/ensure_env.sh for ./run.sh; tests/app/test_desktop_integration.py keeps
# the two in step.
QT_SYSTEM_LIBS = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libX11.so.6": "libx11-6",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
}


def qt_libs_hint() -> str:
    """The line that tells a user on Debian/Ubuntu how to get everything Qt needs."""
    return "sudo apt-get install " + " ".join(QT_SYSTEM_LIBS.values())


# -- where things go ---------------------------------------------------------------------------


def data_home(explicit: str | os.PathLike | None = None) -> Path:
    """``explicit``, else $XDG_DATA_HOME (when absolute, as the spec asks), else ~/.local/share."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get("XDG_DATA_HOME", "")
    if env and os.path.isabs(env):
        return Path(env)
    return Path.home() / ".local" / "share"


def installed_paths(home: str | os.PathLike | None = None) -> list[Path]:
    """Every file ``install_desktop`` writes under ``home`` (the data folder), in order."""
    base = data_home(home)
    icons = base / "icons" / "hicolor"
    paths = [base / "applications" / DESKTOP_FILE]
    paths += [icons / f"{n}x{n}" / "apps" / f"{APP_ID}.png" for n in resources.ICON_SIZES]
    paths.append(icons / "scalable" / "apps" / f"{APP_ID}.svg")
    return paths


# -- the Exec line -----------------------------------------------------------------------------

_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def quote_exec_arg(arg: str) -> str:
    """One argument of an Exec key, quoted and escaped as the Desktop Entry spec says.

    Arguments holding a reserved character are double-quoted with ``"`` ``\\`` ``$`` and
    `` ` `` backslash-escaped; then, because Exec is a string value, every backslash is
    doubled, and ``%`` becomes ``%%`` (no field codes are used).
    """
    if arg == "" or any(c in _RESERVED for c in arg):
        inner = "".join("\\" + c if c in '"`$\\' else c for c in arg)
        arg = f'"{inner}"'
    return arg.replace("\\", "\\\\").replace("%", "%%")


def parse_exec(value: str) -> list[str]:
    """The argument vector a launcher runs for an Exec value (the inverse of quote_exec_arg)."""
    chars, i = [], 0
    while i < len(value):  # undo the string-value escapes (\\ \s \n \t \r)
        c = value[i]
        if c == "\\" and i + 1 < len(value):
            chars.append({"s": " ", "n": "\n", "t": "\t", "r": "\r"}.get(value[i + 1], value[i + 1]))
            i += 2
        else:
            chars.append(c)
            i += 1
    text = "".join(chars)
    args: list[str] = []
    current: list[str] = []
    started = quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\" and i + 1 < len(text) and text[i + 1] in '"`$\\':
                current.append(text[i + 1])
                i += 1
            elif c == '"':
                quoted = False
            else:
                current.append(c)
        elif c == '"':
            quoted = started = True
        elif c in " \t\n":
            if started:
                args.append("".join(current))
                current, started = [], False
        else:
            current.append(c)
            started = True
        i += 1
    if quoted:
        raise ValueError(f"unterminated quote in Exec value {value!r}")
    if started:
        args.append("".join(current))
    return [a.replace("%%", "%") for a in args]


def pinwheel_command() -> list[str]:
    """The absolute command line that starts this Pinwheel.

    A PyInstaller bundle is its own executable; otherwise the ``pinwheel`` script that is
    running now (sys.argv[0]), the one beside this Python (the venv's bin/), the one on
    PATH, and finally ``python -m app.launcher`` with this interpreter.
    """
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable)]
    candidates = []
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if Path(argv0).name == APP_ID:
        candidates.append(Path(argv0))
    candidates.append(Path(sys.executable).parent / APP_ID)
    found = shutil.which(APP_ID)
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return [os.path.abspath(c)]
    return [os.path.abspath(sys.executable), "-m", "app.launcher"]


def render_desktop_entry(command: list[str] | None = None) -> str:
    """The desktop entry text with Exec set to ``command`` (default: pinwheel_command())."""
    from app.identity import get_version

    argv = command if command is not None else pinwheel_command()
    exec_value = " ".join(quote_exec_arg(a) for a in argv)
    return (
        resources.desktop_template()
        .replace("@EXEC@", exec_value)
        .replace("@VERSION@", get_version())
    )


# -- install / uninstall -----------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _refresh_caches(home: Path) -> None:
    """Refresh the desktop and icon caches that already exist in ``home``.

    A cache this user does not have is not created: it would be a file that
    uninstall_desktop then leaves behind, and launchers work without it (they watch the
    folders). Missing tools are skipped.
    """
    jobs = [
        (home / "applications" / "mimeinfo.cache", ["update-desktop-database", "-q", str(home / "applications")]),
        (home / "icons" / "hicolor" / "icon-theme.cache",
         ["gtk-update-icon-cache", "-q", "-f", "-t", str(home / "icons" / "hicolor")]),
    ]
    for cache, cmd in jobs:
        if not cache.exists() or shutil.which(cmd[0]) is None:
            continue
        try:
            subprocess.run(cmd, check=False, timeout=30, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            pass


def install_desktop(data_home_dir: str | os.PathLike | None = None, command: list[str] | None = None) -> list[Path]:
    """Write the desktop entry and the icons; return the files written (see installed_paths)."""
    home = data_home(data_home_dir)
    paths = installed_paths(home)
    entry, *icons, svg = paths
    for size, target in zip(resources.ICON_SIZES, icons):
        _write_atomic(target, resources.icon_png(size).read_bytes())
    _write_atomic(svg, resources.icon_svg().read_bytes())
    _write_atomic(entry, render_desktop_entry(command).encode("utf-8"))  # last: icons are there first
    _refresh_caches(home)
    return paths


def uninstall_desktop(data_home_dir: str | os.PathLike | None = None) -> list[Path]:
    """Remove what install_desktop wrote; return the files that were there and are gone now.

    Folders are left alone (the hicolor ones are shared with every other app).
    """
    home = data_home(data_home_dir)
    removed = []
    for path in installed_paths(home):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    _refresh_caches(home)
    return removed


def main(argv: list[str]) -> int:
    """``pinwheel install-desktop|uninstall-desktop [--data-home DIR]``."""
    command, rest = argv[0], argv[1:]
    install = command == "install-desktop"
    parser = argparse.ArgumentParser(
        prog=f"pinwheel {command}",
        description=(
            "Add Pinwheel to your desktop's application launcher: a desktop entry and icons in your "
            "XDG data folder, no root needed." if install else
            "Remove the desktop entry and icons that `pinwheel install-desktop` added."
        ),
    )
    parser.add_argument("--data-home", metavar="DIR",
                        help="data folder to use (default: $XDG_DATA_HOME, else ~/.local/share)")
    if install:
        parser.add_argument("--exec", dest="exec_cmd", metavar="COMMAND",
                            help="command line the launcher runs (default: the pinwheel running now)")
    args = parser.parse_args(rest)
    try:
        if install:
            cmd = shlex.split(args.exec_cmd) if args.exec_cmd else None
            paths = install_desktop(args.data_home, cmd)
            for p in paths:
                print(p)
            print(f"Pinwheel is in your application launcher now (Exec: {' '.join(cmd or pinwheel_command())}).")
            print("Remove it with: pinwheel uninstall-desktop")
        else:
            paths = uninstall_desktop(args.data_home)
            for p in paths:
                print(f"removed {p}")
            if not paths:
                print(f"nothing to remove under {data_home(args.data_home)}")
    except OSError as exc:
        print(f"pinwheel {command}: {exc}", file=sys.stderr)
        return 1
    return 0


# -- Qt side (imported lazily) -----------------------------------------------------------------


def app_icon():
    """A QIcon holding every packaged size (needs a QGuiApplication)."""
    from PySide6.QtGui import QIcon, QPixmap

    icon = QIcon()
    for size in resources.ICON_SIZES:
        pixmap = QPixmap()
        pixmap.loadFromData(resources.icon_png(size).read_bytes(), "PNG")
        icon.addPixmap(pixmap)
    return icon


def system_prefers_dark(app=None) -> bool:
    """True when the desktop asks for a dark scheme (or, when it says nothing, the palette is dark)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QPalette

    app = app or QGuiApplication.instance()
    scheme = app.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def apply_style(app=None, theme: str = "system") -> str:
    """Set the packaged stylesheet on ``app`` for ``theme`` ("system", "light" or "dark").

    Returns the sheet applied ("light" or "dark"). It only themes shapes and accents; the
    colours come from the palette, which the caller owns.
    """
    from PySide6.QtGui import QGuiApplication

    app = app or QGuiApplication.instance()
    name = theme if theme in resources.THEMES else ("dark" if system_prefers_dark(app) else "light")
    app.setStyleSheet(resources.stylesheet(name))
    return name
