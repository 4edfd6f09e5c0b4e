"""The app's settings: a validated dataclass persisted as JSON.

Pure Python (json + platformdirs); never imports Qt or JAX.

* :class:`AppSettings` holds every setting with its default; the defaults equal
  ``resources/default_settings.json`` (a test keeps them in step).
* ``AppSettings.validate()`` lists one-line problems that say what would fit.
* ``AppSettings.from_dict(d)`` never raises: unknown keys, wrong types and out-of-range
  values fall back to the field's default and are reported in ``.notices``.
* :func:`load_settings` never raises for a bad file either: a corrupt file is moved to
  ``<name>.bak`` and the defaults are used, with a notice for the user.
* :func:`save_settings` writes atomically (temp file in the same folder + ``os.replace``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources as _resources
from pathlib import Path
from typing import Any, Callable

import platformdirs

from engine.errors import PinwheelError, SettingsError

__all__ = [
    "AppSettings",
    "SettingsFileError",
    "load_settings",
    "save_settings",
    "default_settings_path",
    "packaged_defaults",
    "DEVICES",
    "KV_DTYPES",
    "THEMES",
]

DEVICES = ("cpu", "gpu")
KV_DTYPES = ("int8", "bf16", "f32")
THEMES = ("system", "light", "dark")

SETTINGS_VERSION = 2  # 2: kv_budget_mib 0 means auto (version 1 had a fixed 11.5 MiB default)
MAX_SETTINGS_FILE_BYTES = 1 << 20  # a settings file larger than this is treated as corrupt


class SettingsFileError(PinwheelError):
    """The settings file couldn't be written; ``str()`` is one line."""


# --------------------------------------------------------------------------- rules


def _show(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long to print (sys.set_int_max_str_digits)
        return "a very large number"
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    if _is_int(v):
        return True  # (math.isfinite would overflow on huge ints)
    return isinstance(v, float) and math.isfinite(v)


def _choice(*options: str) -> Callable[[str, Any], str | None]:
    def check(name: str, v: Any) -> str | None:
        if isinstance(v, str) and v in options:
            return None
        return f"{name} must be one of {', '.join(options)} (got {_show(v)})"
    return check


def _number(lo: float, hi: float, *, lo_open: bool = False, hint: str = "") -> Callable[[str, Any], str | None]:
    def check(name: str, v: Any) -> str | None:
        ok = _is_number(v) and (v > lo if lo_open else v >= lo) and v <= hi
        if ok:
            return None
        rule = hint or (f"more than {lo:g} and at most {hi:g}" if lo_open else f"between {lo:g} and {hi:g}")
        return f"{name} must be {rule} (got {_show(v)})"
    return check


def _integer(lo: int, hi: int, *, hint: str = "") -> Callable[[str, Any], str | None]:
    def check(name: str, v: Any) -> str | None:
        if _is_int(v) and lo <= v <= hi:
            return None
        return f"{name} must be {hint or f'a whole number between {lo} and {hi}'} (got {_show(v)})"
    return check


def _text(max_len: int, *, path: bool = False) -> Callable[[str, Any], str | None]:
    def check(name: str, v: Any) -> str | None:
        if not isinstance(v, str):
            return f"{name} must be text (got {_show(v)})"
        if len(v) > max_len:
            return f"{name} must be at most {max_len} characters (got {len(v)})"
        if path and "\x00" in v:
            return f"{name} must not contain NUL characters"
        return None
    return check


_RULES: dict[str, Callable[[str, Any], str | None]] = {
    "model_path": _text(4096, path=True),
    "device": _choice(*DEVICES),
    "kv_dtype": _choice(*KV_DTYPES),
    "kv_budget_mib": _number(0, 1_048_576,
                             hint="0 (auto: sized to the model) or a size in MiB up to 1048576"),
    "window": _integer(0, 16_777_216,
                       hint="0 (largest that fits the budget) or a number of tokens up to 16777216"),
    "sinks": _integer(-1, 65_536, hint="-1 (auto: the system prompt) or a number of tokens from 0 to 65536"),
    "system_prompt": _text(100_000),
    "temperature": _number(0, 5),
    "top_p": _number(0, 1),
    "top_k": _integer(0, 1_000_000, hint="a whole number between 0 (off) and 1000000"),
    "min_p": _number(0, 1),
    "repetition_penalty": _number(0.1, 10, hint="between 0.1 and 10 (1 = off)"),
    "max_tokens": _integer(1, 1_000_000),
    "seed": _integer(-1, 2**32 - 1, hint="-1 (random) or a whole number between 0 and 4294967295"),
    "theme": _choice(*THEMES),
}

_FLOAT_FIELDS = frozenset({"kv_budget_mib", "temperature", "top_p", "min_p", "repetition_penalty"})
_INT_FIELDS = frozenset({"window", "sinks", "top_k", "max_tokens", "seed"})


def _coerce(name: str, v: Any) -> Any:
    """JSON-friendly leniency: 1 -> 1.0 for float fields, 512.0 -> 512 for int fields."""
    try:
        if name in _FLOAT_FIELDS and _is_int(v):
            return float(v)
        if name in _INT_FIELDS and isinstance(v, float) and math.isfinite(v) and v.is_integer():
            return int(v)
    except (OverflowError, ValueError):
        pass
    return v


# --------------------------------------------------------------------------- settings


SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_tokens", "seed")


@dataclass
class AppSettings:
    model_path: str = ""  # empty: the default model
    device: str = "cpu"  # "cpu" | "gpu"
    kv_dtype: str = "int8"  # "int8" | "bf16" | "f32"
    kv_budget_mib: float = 0.0  # 0: auto, sized to the model (11.5 is Needle 2's preset)
    window: int = 0  # 0: the largest window that fits the budget
    sinks: int = -1  # -1: auto (the system prompt)
    system_prompt: str = "You are a helpful assistant."
    temperature: float = 0.2  # SmolLM2 card: small models stay on topic at low temperature
    top_p: float = 0.9
    top_k: int = 40
    min_p: float = 0.05
    repetition_penalty: float = 1.1
    max_tokens: int = 512
    seed: int = -1  # -1: random
    theme: str = "system"  # "system" | "light" | "dark"
    #: what from_dict had to fix (not a setting; not saved, not compared)
    notices: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ validation

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)

    def validate(self) -> list[str]:
        """One line per problem, each saying what would fit; empty when valid."""
        problems = []
        for name in self.field_names():
            problem = _RULES[name](name, getattr(self, name))
            if problem:
                problems.append(problem)
        return problems

    def ensure_valid(self) -> "AppSettings":
        """Return self, or raise SettingsError with the first problem."""
        problems = self.validate()
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise SettingsError(problems[0] + more)
        return self

    # ------------------------------------------------------------------ conversion

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.field_names()}

    @classmethod
    def from_dict(cls, data: Any, notices: list[str] | None = None) -> "AppSettings":
        """Build valid settings from anything; never raises.

        Each unusable entry falls back to its default and adds a one-line notice to
        ``result.notices`` (and to ``notices`` when given).
        """
        found: list[str] = []
        values: dict[str, Any] = {}
        defaults = cls()
        if not isinstance(data, Mapping):
            found.append(f"Settings must be a JSON object (got {type(data).__name__}); defaults restored")
            data = {}
        names = cls.field_names()
        for key, raw in data.items():
            if key not in names:
                found.append(f"Unknown setting {_show(key)} ignored")
                continue
            value = _coerce(key, raw)
            problem = _RULES[key](key, value)
            if problem:
                found.append(f"{problem}; using the default {_show(getattr(defaults, key))}")
                continue
            values[key] = value
        result = cls(**values)
        result.notices = found
        if notices is not None:
            notices.extend(found)
        return result

    def replace(self, **changes: Any) -> "AppSettings":
        """A copy with some fields changed (not validated: call validate())."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ engine arguments

    @property
    def budget_bytes(self) -> int | None:
        """For plan_memory(budget_bytes=...): None means auto (sized to the model)."""
        return int(round(self.kv_budget_mib * 1024 * 1024)) or None

    @property
    def window_arg(self) -> int | None:
        """For plan_memory(window=...): None means the largest that fits."""
        return None if self.window == 0 else self.window

    @property
    def sinks_arg(self) -> int | str:
        """For ChatSession(sinks=...): "auto" means the system prompt."""
        return "auto" if self.sinks < 0 else self.sinks

    def sampling_fields(self) -> dict[str, Any]:
        """The sampling settings by their own names: they take effect at the next reply, with no
        Apply (nothing in the engine has to change for them)."""
        return {k: getattr(self, k) for k in SAMPLING_FIELDS}

    def sampling_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for engine.session.SamplingParams."""
        return {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "seed": None if self.seed < 0 else self.seed,
            "max_tokens": self.max_tokens,
        }


# --------------------------------------------------------------------------- files


def packaged_defaults() -> dict[str, Any]:
    """The defaults shipped in ``resources/default_settings.json``."""
    text = _resources.files("resources").joinpath("default_settings.json").read_text(encoding="utf-8")
    return json.loads(text)


def default_settings_path() -> Path:
    """``settings.json`` in the per-user config folder (e.g. ``~/.config/pinwheel``)."""
    return platformdirs.user_config_path("pinwheel", appauthor=False) / "settings.json"


def _backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def load_settings(path: str | Path | None = None) -> tuple[AppSettings, list[str]]:
    """Read settings; never raises for a missing, unreadable or corrupt file.

    * missing file: defaults, no notices;
    * corrupt file (not UTF-8 JSON, not an object, absurdly large): it is moved to
      ``<name>.bak`` and the defaults are used, with one notice saying so;
    * unreadable (permissions, a folder): defaults, with a notice; the file is left alone;
    * a valid object: each unusable entry falls back to its default, with a notice.
    """
    path = Path(path) if path is not None else default_settings_path()
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SETTINGS_FILE_BYTES + 1)
    except FileNotFoundError:
        return AppSettings(), []
    except OSError as exc:
        return AppSettings(), [
            f"Settings file {path} couldn't be read ({exc.strerror or exc}); using the defaults for now"]

    reason = None
    data: Any = None
    if len(raw) > MAX_SETTINGS_FILE_BYTES:
        reason = "far too large"
    else:
        try:
            data = json.loads(raw.decode("utf-8-sig"))
        except UnicodeDecodeError:
            reason = "not UTF-8 text"
        except (ValueError, RecursionError):
            reason = "not valid JSON"
        else:
            if not isinstance(data, dict):
                reason = f"a JSON {type(data).__name__}, not an object"
    if reason is not None:
        bak = _backup_path(path)
        try:
            os.replace(path, bak)
            kept = f"a copy was kept at {bak}"
        except OSError as exc:
            kept = f"no copy could be kept: {exc.strerror or exc}"
        return AppSettings(), [
            f"Settings file {path} was unreadable ({reason}); defaults restored ({kept})"]

    notices: list[str] = []
    settings = AppSettings.from_dict(_migrate(data), notices)
    return settings, [f"Settings file {path}: {n}" for n in notices]


def _migrate(data: dict) -> dict:
    """Bring a file written by an older version up to this one (a copy; the file is rewritten
    at the next save). Version 1 (no "version" key) saved the fixed 11.5 MiB default whether or
    not the user chose it, so that value becomes auto; a budget chosen since is kept as it is."""
    data = dict(data)
    version = data.pop("version", 1)
    if version == 1 and data.get("kv_budget_mib") == 11.5:
        data["kv_budget_mib"] = 0.0
    return data


def save_settings(settings: AppSettings, path: str | Path | None = None) -> Path:
    """Write ``settings`` atomically; returns the path written.

    Raises SettingsError when the settings are invalid (nothing is written) and
    SettingsFileError when the file can't be written (the old file is left intact).
    """
    settings.ensure_valid()
    path = Path(path) if path is not None else default_settings_path()
    text = json.dumps({"version": SETTINGS_VERSION, **settings.to_dict()}, indent=2, ensure_ascii=False) + "\n"
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise SettingsFileError(
            f"Couldn't save settings to {path} ({exc.strerror or exc}); check that the folder is "
            "writable and the disk isn't full.") from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    try:  # make the rename itself durable (POSIX); harmless to skip elsewhere
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path
