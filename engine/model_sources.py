"""Where the other local-LLM apps keep their GGUF files (read-only: the library lists them in
place). Each entry says which app, and where it looks on Linux, macOS and Windows, with the
environment variables that move it; a folder that does not exist is skipped. The layouts are
the apps' own (see the README's "Where the model library looks" for the sources).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping


@dataclass(frozen=True)
class Found:
    """A model file found on disk, and where."""

    path: Path  # the file (the first part of a split model)
    source: str  # "pinwheel", "lmstudio", "jan", "gpt4all", "ollama", "llama.cpp", "huggingface", "folder"
    name: str | None = None  # a name the app gives it (Ollama's model:tag), else one from the file
    parts: tuple[Path, ...] = ()  # every file of a split model, in order


def _env(env: Mapping[str, str], key: str) -> Path | None:
    v = env.get(key)
    return Path(v).expanduser() if v else None


def source_dirs(home: Path | None = None, env: Mapping[str, str] | None = None,
                platform: str | None = None) -> list[tuple[str, Path]]:
    """(source, folder) for every app whose files are plain GGUFs under a folder."""
    from .model_locator import user_models_dir

    home = Path(home) if home is not None else Path.home()
    env = os.environ if env is None else env
    plat = platform or sys.platform
    xdg_data = _env(env, "XDG_DATA_HOME") or home / ".local" / "share"
    xdg_cache = _env(env, "XDG_CACHE_HOME") or home / ".cache"
    out: list[tuple[str, Path]] = [("pinwheel", user_models_dir() if home == Path.home() else
                                    xdg_data / "pinwheel" / "models")]
    lmstudio = _lmstudio_home(home)
    if plat == "darwin":
        support = home / "Library" / "Application Support"
        caches = home / "Library" / "Caches"
        out += [*[("lmstudio", d / "models") for d in lmstudio],
                *_jan(support / "Jan", env),
                ("jan", home / "jan" / "models"),
                ("gpt4all", support / "nomic.ai" / "GPT4All"),
                *_gpt4all_setting(home / "Library" / "Preferences"),
                ("llama.cpp", _env(env, "LLAMA_CACHE") or caches / "llama.cpp")]
    elif plat.startswith("win"):
        appdata = _env(env, "APPDATA") or home / "AppData" / "Roaming"
        local = _env(env, "LOCALAPPDATA") or home / "AppData" / "Local"
        out += [*[("lmstudio", d / "models") for d in lmstudio],
                *_jan(appdata / "Jan", env),
                ("gpt4all", local / "nomic.ai" / "GPT4All"),
                ("llama.cpp", _env(env, "LLAMA_CACHE") or local / "llama.cpp")]
    else:
        out += [*[("lmstudio", d / "models") for d in lmstudio],
                *_jan(xdg_data / "Jan", env),
                ("jan", home / "jan" / "models"),
                ("gpt4all", xdg_data / "nomic.ai" / "GPT4All"), *_gpt4all_setting(home / ".config"),
                ("llama.cpp", _env(env, "LLAMA_CACHE") or xdg_cache / "llama.cpp")]
    hf = _env(env, "HF_HUB_CACHE") or ((_env(env, "HF_HOME") / "hub") if env.get("HF_HOME") else
                                       xdg_cache / "huggingface" / "hub")
    out.append(("huggingface", hf))
    return out


def _lmstudio_home(home: Path) -> list[Path]:
    """LM Studio's home: the folder named in ~/.lmstudio-home-pointer, else ~/.cache/lm-studio,
    else ~/.lmstudio (lmstudio-ai/lms src/lmstudioPaths.ts); models sit in <home>/models."""
    out = []
    try:
        pointed = (home / ".lmstudio-home-pointer").read_text(encoding="utf-8").strip()
        if pointed:
            out.append(Path(pointed).expanduser())
    except OSError:
        pass
    return out + [home / ".cache" / "lm-studio", home / ".lmstudio"]


def _jan(app_dir: Path, env: Mapping[str, str]) -> list[tuple[str, Path]]:
    """Jan's data folder (janhq/jan: <data dir>/Jan/data, moved by settings.json's
    `data_folder` or $JAN_DATA_FOLDER): models under llamacpp/models (current) and models."""
    roots = [_env(env, "JAN_DATA_FOLDER")]
    try:
        data = json.loads((app_dir / "settings.json").read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("data_folder"), str):
            roots.append(Path(data["data_folder"]).expanduser())
    except (OSError, ValueError):
        pass
    roots.append(app_dir / "data")
    return [("jan", r / sub) for r in roots if r is not None for sub in ("llamacpp/models", "models")]


def _gpt4all_setting(config_dir: Path) -> list[tuple[str, Path]]:
    """A models folder the user chose in GPT4All (modelPath= in nomic.ai/GPT4All.ini)."""
    try:
        for line in (config_dir / "nomic.ai" / "GPT4All.ini").read_text(encoding="utf-8").splitlines():
            if line.strip().startswith("modelPath="):
                value = line.split("=", 1)[1].strip().strip('"')
                return [("gpt4all", Path(value).expanduser())] if value else []
    except OSError:
        pass
    return []


def ollama_dirs(home: Path | None = None, env: Mapping[str, str] | None = None) -> list[Path]:
    home = Path(home) if home is not None else Path.home()
    env = os.environ if env is None else env
    dirs = [_env(env, "OLLAMA_MODELS"), home / ".ollama" / "models"]
    if home == Path.home():
        dirs.append(Path("/usr/share/ollama/.ollama/models"))  # the Linux service's own home
    return [d for d in dirs if d is not None]


_OLLAMA_MODEL = "application/vnd.ollama.image.model"


def ollama_models(home: Path | None = None, env: Mapping[str, str] | None = None) -> Iterable[Found]:
    """Ollama keeps weights as content-addressed blobs; its manifests say which blob is which
    model: manifests/<registry>/<namespace>/<model>/<tag> (JSON, `layers`), blobs/sha256-<hex>.
    Yields rows named model:tag ("library/" and the default registry left out)."""
    for root in ollama_dirs(home, env):
        manifests = root / "manifests"
        if not manifests.is_dir():
            continue
        for path in sorted(manifests.rglob("*")):
            if not path.is_file():
                continue
            try:
                if path.stat().st_size > 1 << 20:
                    continue
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            layers = data.get("layers") if isinstance(data, dict) else None
            digest = next((layer.get("digest") for layer in layers or []
                           if isinstance(layer, dict) and layer.get("mediaType") == _OLLAMA_MODEL), None)
            if not isinstance(digest, str) or not digest.startswith("sha256:"):
                continue
            blob = root / "blobs" / digest.replace(":", "-")
            try:  # a single GGUF (newer models may be one blob per tensor: not ours to list)
                with open(blob, "rb") as f:
                    if f.read(4) != b"GGUF":
                        continue
            except OSError:
                continue
            rel = path.relative_to(manifests).parts  # registry, namespace, model, tag
            if len(rel) < 4:
                continue
            registry, *middle, model, tag = rel
            namespace = "/".join(middle)
            name = f"{model}:{tag}"
            if namespace and namespace != "library":
                name = f"{namespace}/{name}"
            if registry != "registry.ollama.ai":
                name = f"{registry}/{name}"
            yield Found(blob, "ollama", name)



def jan_models(folder: Path, limit: int = 2000) -> Iterable[Found]:
    """Jan's llamacpp/models/<id>/model.yml: `model_path` (relative to the data folder, or an
    absolute path to a file Jan imported without copying) and `name` (janhq/jan). Only the
    files outside the folder are new here: the ones inside are found by the folder walk."""
    n = 0
    for yml in folder.rglob("model.yml"):
        n += 1
        if n > limit:
            return
        try:
            text = yml.read_text(encoding="utf-8")[:65536]
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():  # flat `key: value` lines (no YAML library needed)
            key, sep, value = line.partition(":")
            if sep and not line.startswith((" ", "\t")):
                fields[key.strip()] = value.strip().strip("'\"")
        path = fields.get("model_path")
        if not path or not path.lower().endswith(".gguf"):
            continue
        p = Path(path)
        if not p.is_absolute():
            continue
        if p.is_file():
            yield Found(p, "jan", fields.get("name") or yml.parent.name)
