"""Tests for app/settings.py: validated settings, tolerant loading, atomic saving."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import app.settings as settings_mod  # noqa: E402
from app.settings import (  # noqa: E402
    AppSettings,
    SettingsFileError,
    default_settings_path,
    load_settings,
    packaged_defaults,
    save_settings,
)
from engine.errors import PinwheelError, SettingsError  # noqa: E402

FIELDS = AppSettings.field_names()

EXPECTED_DEFAULTS = {
    "model_path": "", "device": "cpu", "kv_dtype": "int8", "kv_budget_mib": 0.0, "window": 0,
    "sinks": -1, "system_prompt": "You are a helpful assistant.", "temperature": 0.2, "top_p": 0.9,
    "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "max_tokens": 512, "seed": -1,
    "theme": "system",
}


# --------------------------------------------------------------------------- defaults


def test_defaults_are_the_specified_ones():
    assert AppSettings().to_dict() == EXPECTED_DEFAULTS
    assert list(FIELDS) == list(EXPECTED_DEFAULTS)
    assert AppSettings().validate() == []


def test_defaults_equal_the_packaged_file():
    shipped = packaged_defaults()
    assert shipped == AppSettings().to_dict()
    # same JSON types too (0.0 stays a float, 512 an int, "" a string)
    assert {k: type(v) for k, v in shipped.items()} == {k: type(v) for k, v in AppSettings().to_dict().items()}
    # and it is the file in resources/ (what the wheel ships)
    on_disk = json.loads((ROOT / "resources" / "default_settings.json").read_text(encoding="utf-8"))
    assert on_disk == shipped


def test_engine_arguments():
    s = AppSettings()
    assert s.budget_bytes is None  # auto: sized to the model
    assert s.replace(kv_budget_mib=11.5).budget_bytes == int(11.5 * 1024 * 1024)
    assert s.window_arg is None and s.sinks_arg == "auto"
    assert s.sampling_kwargs() == {"temperature": 0.2, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
                                   "repetition_penalty": 1.1, "seed": None, "max_tokens": 512}
    t = s.replace(window=1024, sinks=4, seed=7)
    assert (t.window_arg, t.sinks_arg, t.sampling_kwargs()["seed"]) == (1024, 4, 7)
    assert s.window == 0  # replace made a copy


def test_default_settings_path(monkeypatch, tmp_path: Path):
    import platformdirs

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert default_settings_path() == platformdirs.user_config_path("pinwheel", appauthor=False) / "settings.json"
    if sys.platform.startswith("linux"):
        assert default_settings_path() == tmp_path / "cfg" / "pinwheel" / "settings.json"


# --------------------------------------------------------------------------- validation

BAD_VALUES = [
    ("device", "tpu"), ("kv_dtype", "int4"), ("kv_budget_mib", -0.5), ("kv_budget_mib", -3.0),
    ("kv_budget_mib", math.nan), ("kv_budget_mib", math.inf), ("kv_budget_mib", "11"),
    ("window", -1), ("window", 1.5), ("window", 2**40), ("sinks", -2), ("sinks", 10**6),
    ("system_prompt", None), ("system_prompt", "x" * 100_001), ("model_path", 3), ("model_path", "a\x00b"),
    ("temperature", 9), ("temperature", -0.1), ("temperature", True), ("top_p", 1.5), ("top_k", -1),
    ("top_k", 40.0), ("min_p", 2), ("repetition_penalty", 0), ("repetition_penalty", 11),
    ("max_tokens", 0), ("max_tokens", False), ("seed", -5), ("seed", 2**32), ("seed", "42"),
    ("theme", "Dark"), ("theme", None),
]


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_each_bad_value_gets_one_clear_line(name, value):
    problems = AppSettings(**{name: value}).validate()
    assert len(problems) == 1, problems
    line = problems[0]
    assert line.startswith(name + " must ") and "\n" not in line and len(line) < 200
    assert "(got " in line or "NUL" in line


def test_problem_messages_say_what_would_fit():
    assert AppSettings(temperature=9).validate() == ["temperature must be between 0 and 5 (got 9)"]
    assert AppSettings(device="tpu").validate() == ["device must be one of cpu, gpu (got 'tpu')"]
    assert "-1 (random)" in AppSettings(seed=-9).validate()[0]
    assert "0 (largest that fits" in AppSettings(window=-9).validate()[0]
    many = AppSettings(temperature=9, top_p=2, theme="pink").validate()
    assert [p.split()[0] for p in many] == ["temperature", "top_p", "theme"]


@pytest.mark.parametrize("name,value", [("temperature", 0), ("temperature", 5), ("top_p", 1), ("min_p", 0),
                                        ("window", 4096), ("sinks", 0), ("seed", 0), ("seed", 2**32 - 1),
                                        ("kv_budget_mib", 0.001), ("kv_budget_mib", 0), ("device", "gpu"),
                                        ("kv_dtype", "bf16"),
                                        ("kv_dtype", "f32"), ("theme", "dark"), ("top_k", 0),
                                        ("model_path", "/models/x.gguf"), ("system_prompt", "")])
def test_edge_values_are_accepted(name, value):
    assert AppSettings(**{name: value}).validate() == []


def test_ensure_valid_raises_a_settings_error():
    with pytest.raises(SettingsError) as e:
        AppSettings(temperature=9, top_p=2).ensure_valid()
    assert str(e.value) == "temperature must be between 0 and 5 (got 9) (and 1 more)"
    assert isinstance(e.value, PinwheelError)
    s = AppSettings()
    assert s.ensure_valid() is s


# --------------------------------------------------------------------------- from_dict


def test_from_dict_keeps_good_values_and_reports_the_rest():
    d = {"temperature": 1.2, "top_k": 5, "theme": "dark", "nonsense": 1, "top_p": "high",
         "max_tokens": 256.0, "kv_budget_mib": 64, "seed": True, "device": "tpu"}
    sink: list[str] = []
    s = AppSettings.from_dict(d, sink)
    assert (s.temperature, s.top_k, s.theme) == (1.2, 5, "dark")
    assert s.max_tokens == 256 and type(s.max_tokens) is int  # 256.0 from JSON is fine
    assert s.kv_budget_mib == 64.0 and type(s.kv_budget_mib) is float
    assert (s.top_p, s.seed, s.device) == (0.9, -1, "cpu")  # defaults restored
    assert s.validate() == []
    assert sink == s.notices and len(s.notices) == 4
    assert any("Unknown setting 'nonsense'" in n for n in s.notices)
    assert any(n.startswith("top_p must be") and "using the default 0.9" in n for n in s.notices)
    assert any(n.startswith("seed must be") for n in s.notices)
    assert any(n.startswith("device must be") for n in s.notices)
    assert all("\n" not in n for n in s.notices)


def test_from_dict_of_a_non_object():
    for bad in ([1, 2], "text", None, 3.5):
        s = AppSettings.from_dict(bad)
        assert s == AppSettings() and len(s.notices) == 1 and "JSON object" in s.notices[0]


def test_from_dict_with_nothing_to_fix_has_no_notices():
    s = AppSettings.from_dict(EXPECTED_DEFAULTS)
    assert s == AppSettings() and s.notices == []
    assert AppSettings.from_dict({}).notices == []


def test_notices_are_not_a_setting():
    s = AppSettings.from_dict({"bogus": 1})
    assert s.notices and s == AppSettings() and "notices" not in s.to_dict()
    assert "notices" not in repr(s)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
NEAR_VALID = st.one_of(JSON, st.sampled_from(["cpu", "gpu", "int8", "bf16", "f32", "light", "dark", "system"]),
                       st.integers(-3, 70_000), st.floats(-1, 12), st.integers(-(2**70), 2**70))


@settings(max_examples=150, deadline=None)
@given(st.one_of(JSON, st.dictionaries(st.sampled_from(FIELDS + ("extra",)), NEAR_VALID, max_size=len(FIELDS))))
def test_from_dict_never_raises_and_always_yields_valid_settings(data):
    s = AppSettings.from_dict(data)
    assert isinstance(s, AppSettings)
    assert s.validate() == []
    if isinstance(data, dict):
        for key, value in data.items():
            if key in FIELDS and getattr(s, key) != value:
                assert any(n.startswith(key + " must") for n in s.notices), (key, value, s.notices)
    for n in s.notices:
        assert isinstance(n, str) and "\n" not in n


VALID = st.fixed_dictionaries({
    "model_path": st.text(max_size=30).filter(lambda t: "\x00" not in t),
    "device": st.sampled_from(["cpu", "gpu"]),
    "kv_dtype": st.sampled_from(["int8", "bf16", "f32"]),
    "kv_budget_mib": st.floats(0.001, 1_048_576),
    "window": st.integers(0, 16_777_216),
    "sinks": st.integers(-1, 65_536),
    "system_prompt": st.text(max_size=50),
    "temperature": st.floats(0, 5),
    "top_p": st.floats(0, 1),
    "top_k": st.integers(0, 1_000_000),
    "min_p": st.floats(0, 1),
    "repetition_penalty": st.floats(0.1, 10),
    "max_tokens": st.integers(1, 1_000_000),
    "seed": st.integers(-1, 2**32 - 1),
    "theme": st.sampled_from(["system", "light", "dark"]),
})


@settings(max_examples=60, deadline=None)
@given(VALID)
def test_valid_settings_roundtrip_through_dict_and_file(d):
    s = AppSettings.from_dict(d)
    assert s.notices == [] and s.to_dict() == d and s.validate() == []
    # and through a real file
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "settings.json"
        save_settings(s, path)
        loaded, notices = load_settings(path)
        assert notices == [] and loaded == s


# --------------------------------------------------------------------------- load / save


def test_missing_file_gives_defaults_silently(tmp_path: Path):
    path = tmp_path / "nope" / "settings.json"
    s, notices = load_settings(path)
    assert s == AppSettings() and notices == []
    assert not path.exists() and not path.parent.exists()


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2, 3]", b'"just a string"', b"", b"\xff\xfe\x00garbage",
                                     b"null", b"[" * 100_000, b'{"a": "' + b"x" * (1 << 20) + b'"}'])
def test_corrupt_file_is_kept_as_bak_and_defaults_restored(tmp_path: Path, content: bytes):
    path = tmp_path / "settings.json"
    path.write_bytes(content)
    s, notices = load_settings(path)
    assert s == AppSettings()
    bak = tmp_path / "settings.json.bak"
    assert len(notices) == 1
    line = notices[0]
    assert line.startswith(f"Settings file {path} was unreadable") and "defaults restored" in line
    assert f"a copy was kept at {bak}" in line and "\n" not in line
    if len(content) > settings_mod.MAX_SETTINGS_FILE_BYTES:
        assert "(far too large)" in line
    assert bak.read_bytes() == content
    assert not path.exists()
    # the next start is quiet: the bad file is out of the way
    assert load_settings(path) == (AppSettings(), [])


def test_second_corrupt_file_replaces_the_old_bak(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text("{bad 1")
    load_settings(path)
    path.write_text("{bad 2")
    load_settings(path)
    assert (tmp_path / "settings.json.bak").read_text() == "{bad 2"


def test_corrupt_file_that_cannot_be_moved(tmp_path: Path, monkeypatch):
    path = tmp_path / "settings.json"
    path.write_text("{bad")

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(settings_mod.os, "replace", refuse)
    s, notices = load_settings(path)
    assert s == AppSettings() and len(notices) == 1
    assert "no copy could be kept: Permission denied" in notices[0]
    assert path.read_text() == "{bad"


def test_unreadable_path_gives_defaults_and_a_notice(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.mkdir()  # a folder where the file should be
    s, notices = load_settings(path)
    assert s == AppSettings() and len(notices) == 1 and "couldn't be read" in notices[0]
    assert path.is_dir() and not (tmp_path / "settings.json.bak").exists()


def test_partly_bad_file_keeps_the_good_values(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"temperature": 0.2, "top_k": "many", "from_the_future": True}))
    s, notices = load_settings(path)
    assert s.temperature == 0.2 and s.top_k == 40
    assert len(notices) == 2 and all(n.startswith(f"Settings file {path}: ") for n in notices)
    assert path.exists() and not (tmp_path / "settings.json.bak").exists()  # not corrupt, not moved


def test_save_writes_all_fields_and_creates_folders(tmp_path: Path):
    path = tmp_path / "a" / "b" / "settings.json"
    s = AppSettings(theme="dark", temperature=0.1, system_prompt="Réponds en français.")
    assert save_settings(s, path) == path
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data.pop("version") == 2  # the file's format: kv_budget_mib 0 means auto
    assert data == s.to_dict() and list(data) == list(FIELDS)
    assert load_settings(path) == (s, [])
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temp files left


def test_the_old_fixed_default_budget_becomes_auto_and_a_chosen_one_stays(tmp_path: Path):
    """Version 1 files (no "version" key) saved 11.5 MiB whether or not the user chose it: that
    value becomes auto (CHANGELOG); any other budget stays; 11.5 chosen since then stays too."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"kv_budget_mib": 11.5, "theme": "dark"}))
    s, notices = load_settings(path)
    assert (s.kv_budget_mib, s.budget_bytes, s.theme, notices) == (0.0, None, "dark", [])
    path.write_text(json.dumps({"kv_budget_mib": 64}))
    assert load_settings(path)[0].kv_budget_mib == 64.0
    save_settings(AppSettings(kv_budget_mib=11.5), path)  # the Needle 2 preset, chosen now
    assert load_settings(path)[0].kv_budget_mib == 11.5


def test_save_refuses_invalid_settings(tmp_path: Path):
    path = tmp_path / "settings.json"
    with pytest.raises(SettingsError):
        save_settings(AppSettings(max_tokens=0), path)
    assert not path.exists()


def test_save_is_atomic_when_the_final_rename_fails(tmp_path: Path, monkeypatch):
    path = tmp_path / "settings.json"
    save_settings(AppSettings(theme="light"), path)
    before = path.read_bytes()

    def refuse(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(settings_mod.os, "replace", refuse)
    with pytest.raises(SettingsFileError) as e:
        save_settings(AppSettings(theme="dark"), path)
    assert "No space left on device" in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, PinwheelError)
    assert path.read_bytes() == before  # old file intact
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # temp file cleaned up


def test_save_goes_through_a_temp_file_and_os_replace(tmp_path: Path, monkeypatch):
    path = tmp_path / "settings.json"
    calls = []
    real_replace = os.replace

    def spy(src, dst):
        calls.append((Path(src), Path(dst)))
        assert Path(src).parent == path.parent and Path(src) != path
        assert json.loads(Path(src).read_text()) == {"version": 2, **AppSettings().to_dict()}  # complete before the swap
        return real_replace(src, dst)

    monkeypatch.setattr(settings_mod.os, "replace", spy)
    save_settings(AppSettings(), path)
    assert len(calls) == 1 and calls[0][1] == path


def test_dataclass_is_plain_and_comparable():
    assert dataclasses.is_dataclass(AppSettings)
    assert AppSettings(top_k=3) != AppSettings()
    assert AppSettings(top_k=3) == AppSettings(top_k=3)
