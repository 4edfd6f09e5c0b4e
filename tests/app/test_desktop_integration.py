"""Desktop entry + icons in the XDG folders, the packaged resources, and the Qt-side helpers."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import resources
from app import desktop_integration as di
from engine.version import __version__

ROOT = Path(__file__).resolve().parents[2]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def read_entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(path.read_text(encoding="utf-8"))
    assert parser.sections() == ["Desktop Entry"]
    return dict(parser["Desktop Entry"])


# -- packaged resources -------------------------------------------------------------------------


def test_every_icon_size_is_a_png_of_that_size():
    for size in resources.ICON_SIZES:
        assert png_size(resources.icon_png(size).read_bytes()) == (size, size)
    svg = resources.icon_svg().read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<svg") and 'viewBox="0 0 256 256"' in svg


def test_resource_lookups_fail_loudly():
    with pytest.raises(FileNotFoundError):
        resources.path("icons/nope.png")
    with pytest.raises(ValueError):
        resources.icon_png(17)
    with pytest.raises(ValueError):
        resources.stylesheet("sepia")


def test_committed_pngs_match_the_svg(tmp_path, qapp):
    """The PNGs are rendered from the SVG by packaging/make_icons.py; a stale one fails here."""
    import importlib.util

    from PySide6.QtGui import QImage

    spec = importlib.util.spec_from_file_location("make_icons", ROOT / "packaging" / "make_icons.py")
    make_icons = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_icons)
    for out in make_icons.render(ROOT / "resources" / "icons" / "pinwheel.svg", tmp_path):
        fresh = QImage(str(out))
        committed = QImage()
        assert committed.loadFromData(resources.read_bytes(f"icons/{out.name}"))
        assert (fresh.width(), fresh.height()) == (committed.width(), committed.height())
        diffs = []
        for y in range(fresh.height()):
            for x in range(fresh.width()):
                a, b = fresh.pixelColor(x, y), committed.pixelColor(x, y)
                diffs.append(max(abs(a.red() - b.red()), abs(a.green() - b.green()),
                                 abs(a.blue() - b.blue()), abs(a.alpha() - b.alpha())))
        # Loose enough for another Qt's anti-aliasing, far too tight for an edited drawing.
        mean = sum(diffs) / len(diffs)
        assert mean <= 1.0 and max(diffs) <= 64, (
            f"{out.name} differs from the SVG rendering (mean {mean:.2f}, max {max(diffs)}): run packaging/make_icons.py")


def test_stylesheets_parse(qapp):
    """Qt warns "Could not parse stylesheet" for a broken sheet; none may appear."""
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import (QComboBox, QLineEdit, QListWidget, QPlainTextEdit, QProgressBar,
                                   QPushButton, QVBoxLayout, QWidget)

    messages = []
    previous = qInstallMessageHandler(lambda _mode, _ctx, msg: messages.append(msg))
    try:
        for theme in resources.THEMES:
            sheet = resources.stylesheet(theme)
            assert "palette(highlight)" in sheet
            w = QWidget()
            w.setStyleSheet(sheet)
            lay = QVBoxLayout(w)
            for child in (QLineEdit(), QPlainTextEdit(), QPushButton("Send"), QListWidget(), QComboBox(), QProgressBar()):
                lay.addWidget(child)
            lay.itemAt(2).widget().setObjectName("sendButton")
            w.show()
            qapp.processEvents()
            w.close()
    finally:
        qInstallMessageHandler(previous)
    assert not [m for m in messages if "stylesheet" in m.lower()], messages


def test_apply_style_picks_the_sheet(qapp):
    from PySide6.QtGui import QColor, QPalette

    before_sheet, before_palette = qapp.styleSheet(), qapp.palette()
    try:
        assert di.apply_style(qapp, "dark") == "dark"
        assert qapp.styleSheet() == resources.stylesheet("dark")
        assert di.apply_style(qapp, "light") == "light"
        assert qapp.styleSheet() == resources.stylesheet("light")
        dark = QPalette(before_palette)
        dark.setColor(QPalette.ColorRole.Window, QColor("#202124"))
        qapp.setPalette(dark)
        expected = "dark" if di.system_prefers_dark(qapp) else "light"
        assert di.apply_style(qapp, "system") == expected
    finally:
        qapp.setStyleSheet(before_sheet)
        qapp.setPalette(before_palette)


def test_app_icon_has_every_size(qapp):
    icon = di.app_icon()
    assert not icon.isNull()
    assert sorted(s.width() for s in icon.availableSizes()) == list(resources.ICON_SIZES)


# -- the Exec line ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["/usr/bin/pinwheel"],
    ["/opt/my apps/pinwheel", "--model", "/home/a b/model.gguf"],
    ["/x/python", "-m", "app.launcher", "--model", 'we"ird $HOME `x` \\ 100%.gguf'],
    ["/x/pinwheel", ""],
])
def test_exec_quoting_round_trips(argv, tmp_path):
    value = " ".join(di.quote_exec_arg(a) for a in argv)
    assert di.parse_exec(value) == argv
    if shutil.which("desktop-file-validate"):
        entry = tmp_path / "pinwheel.desktop"
        entry.write_text(di.render_desktop_entry(argv), encoding="utf-8")
        proc = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
        assert proc.returncode == 0 and "error:" not in proc.stdout, proc.stdout


def test_exec_quoting_examples():
    assert di.quote_exec_arg("/usr/bin/pinwheel") == "/usr/bin/pinwheel"
    assert di.quote_exec_arg("/a b/pinwheel") == '"/a b/pinwheel"'
    assert di.quote_exec_arg("$x") == '"\\\\$x"'  # "\$x", then the string escape of the backslash
    assert di.quote_exec_arg("50%") == "50%%"


def test_pinwheel_command_is_an_absolute_runnable_command():
    cmd = di.pinwheel_command()
    assert os.path.isabs(cmd[0]) and os.access(cmd[0], os.X_OK)
    proc = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"pinwheel {__version__}"


# -- install / uninstall ------------------------------------------------------------------------


def test_install_writes_entry_and_icons(tmp_path):
    written = di.install_desktop(tmp_path)
    assert written == di.installed_paths(tmp_path)
    assert all(p.is_file() and tmp_path in p.parents for p in written)
    entry = tmp_path / "applications" / "pinwheel.desktop"
    assert written[0] == entry
    for size in resources.ICON_SIZES:
        png = tmp_path / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "pinwheel.png"
        assert png_size(png.read_bytes()) == (size, size)
    svg = tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "pinwheel.svg"
    assert svg.read_bytes() == resources.icon_svg().read_bytes()

    keys = read_entry(entry)
    assert keys["Type"] == "Application"
    assert keys["Name"] == "Pinwheel"
    assert keys["GenericName"] == "Local AI Chat"
    assert keys["Icon"] == "pinwheel"
    assert keys["Terminal"] == "false"
    assert keys["StartupWMClass"] == di.APP_NAME
    assert "Utility" in keys["Categories"].split(";") and "Chat" in keys["Categories"].split(";")
    assert keys["X-Pinwheel-Version"] == __version__
    assert "@" not in entry.read_text(encoding="utf-8")
    assert di.parse_exec(keys["Exec"]) == di.pinwheel_command()


def test_installed_entry_validates(tmp_path):
    if shutil.which("desktop-file-validate") is None:
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils); "
                    "test_install_writes_entry_and_icons still parses the entry")
    di.install_desktop(tmp_path)
    proc = subprocess.run(["desktop-file-validate", str(tmp_path / "applications" / "pinwheel.desktop")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "error:" not in proc.stdout and "warning:" not in proc.stdout, proc.stdout


def test_installed_entry_starts_pinwheel(tmp_path):
    di.install_desktop(tmp_path)
    argv = di.parse_exec(read_entry(tmp_path / "applications" / "pinwheel.desktop")["Exec"])
    proc = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"pinwheel {__version__}"


def test_uninstall_removes_exactly_what_install_wrote(tmp_path):
    neighbours = [tmp_path / "applications" / "other.desktop",
                  tmp_path / "icons" / "hicolor" / "48x48" / "apps" / "other.png",
                  tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "other.svg"]
    for p in neighbours:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("not ours")
    before = {p for p in tmp_path.rglob("*") if p.is_file()}
    written = di.install_desktop(tmp_path)
    assert {p for p in tmp_path.rglob("*") if p.is_file()} == before | set(written)
    assert sorted(di.uninstall_desktop(tmp_path)) == sorted(written)
    assert {p for p in tmp_path.rglob("*") if p.is_file()} == before
    assert all(p.read_text() == "not ours" for p in neighbours)
    assert di.uninstall_desktop(tmp_path) == []


def test_xdg_data_home_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert di.data_home() == tmp_path / "xdg"
    di.install_desktop()
    assert (tmp_path / "xdg" / "applications" / "pinwheel.desktop").is_file()
    assert len(di.uninstall_desktop()) == len(di.installed_paths())
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # the spec says: ignore a relative one
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert di.data_home() == tmp_path / "home" / ".local" / "share"


def test_caches_are_refreshed_only_where_they_exist(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(di.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(di.subprocess, "run", lambda cmd, **kw: ran.append(cmd[0]))
    di.install_desktop(tmp_path)
    assert ran == []  # no caches here: none created
    (tmp_path / "applications" / "mimeinfo.cache").write_text("")
    (tmp_path / "icons" / "hicolor" / "icon-theme.cache").write_text("")
    di.install_desktop(tmp_path)
    assert ran == ["update-desktop-database", "gtk-update-icon-cache"]
    ran.clear()
    di.uninstall_desktop(tmp_path)
    assert ran == ["update-desktop-database", "gtk-update-icon-cache"]


def test_missing_cache_tools_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(di.shutil, "which", lambda name: None)
    (tmp_path / "icons" / "hicolor").mkdir(parents=True)
    (tmp_path / "icons" / "hicolor" / "icon-theme.cache").write_text("")
    assert len(di.install_desktop(tmp_path)) == len(di.installed_paths(tmp_path))


def test_cli_main(tmp_path, capsys):
    assert di.main(["install-desktop", "--data-home", str(tmp_path), "--exec", "/opt/pw/pinwheel --model '/m/a b.gguf'"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "applications" / "pinwheel.desktop") in out
    exec_value = read_entry(tmp_path / "applications" / "pinwheel.desktop")["Exec"]
    assert di.parse_exec(exec_value) == ["/opt/pw/pinwheel", "--model", "/m/a b.gguf"]
    assert di.main(["uninstall-desktop", "--data-home", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("removed ") == len(di.installed_paths(tmp_path))
    assert di.main(["uninstall-desktop", "--data-home", str(tmp_path)]) == 0
    assert "nothing to remove" in capsys.readouterr().out


# -- system libraries ---------------------------------------------------------------------------


def test_qt_library_lists_agree():
    """run.sh (scripts/ensure_env.sh) and the launcher's hint name the same libraries and packages."""
    text = (ROOT / "scripts" / "ensure_env.sh").read_text(encoding="utf-8")
    block = re.search(r"PINWHEEL_QT_LIBS=\((.*?)\)", text, re.S).group(1)
    pairs = dict(line.strip().split(":") for line in block.splitlines() if line.strip())
    assert pairs == di.QT_SYSTEM_LIBS
    assert di.qt_libs_hint().split()[3:] == list(di.QT_SYSTEM_LIBS.values())


def test_qt_library_list_covers_what_qt_links(tmp_path):
    """Every non-Qt library that PySide6's xcb stack links directly is in the list (or is basic)."""
    import PySide6

    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    qt = Path(PySide6.__file__).parent / "Qt"
    files = [qt / "lib" / "libQt6Gui.so.6", qt / "lib" / "libQt6XcbQpa.so.6", qt / "plugins" / "platforms" / "libqxcb.so"]
    files = [f for f in files if f.exists()]
    if not files:
        pytest.skip("this PySide6 has no xcb platform files")
    needed = set()
    for f in files:
        out = subprocess.run(["readelf", "-d", str(f)], capture_output=True, text=True, check=True).stdout
        needed |= set(re.findall(r"Shared library: \[(.+?)\]", out))
    basic = re.compile(r"^(libQt6|libc\.|libm\.|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl|librt|libz\.|libzstd|libicu|"
                       r"libgthread|libxcb\.so|libxcb-(render|shm|util)\.so)")
    uncovered = sorted(n for n in needed if not basic.match(n) and n not in di.QT_SYSTEM_LIBS)
    assert uncovered == []
