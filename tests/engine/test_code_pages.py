"""engine.code_pages: jaxlib's start-up code leaves the process's resident set, and nothing
writable or modified is ever advised away."""
import subprocess
import sys
from pathlib import Path

import pytest

from engine.code_pages import _clean_readonly_mappings

ROOT = Path(__file__).resolve().parents[2]

SMAPS = """\
7f0000000000-7f0000100000 r--p 00000000 08:01 42 /venv/jaxlib/libjax_common.so
Rss:                 400 kB
Private_Dirty:         0 kB
Shared_Dirty:          0 kB
7f0000100000-7f0000900000 r-xp 00100000 08:01 42 /venv/jaxlib/libjax_common.so
Rss:                8000 kB
Private_Dirty:         0 kB
Shared_Dirty:          0 kB
7f0000900000-7f0000a00000 r--p 00900000 08:01 42 /venv/jaxlib/libjax_common.so
Private_Dirty:       120 kB
Shared_Dirty:          0 kB
7f0000a00000-7f0000b00000 rw-p 00a00000 08:01 42 /venv/jaxlib/libjax_common.so
Private_Dirty:         0 kB
7f0000b00000-7f0000c00000 r-xp 00000000 08:01 43 /usr/lib/libc.so.6
Private_Dirty:         0 kB
7f0000c00000-7f0000d00000 r--p 00000000 00:00 0
Private_Dirty:         0 kB
"""


def test_only_read_only_unmodified_mappings_of_the_library_are_chosen():
    assert _clean_readonly_mappings(SMAPS, "jaxlib") == [(0x7F0000000000, 0x7F0000100000),
                                                         (0x7F0000100000, 0x7F0000900000)]


PROBE = """
import jax.numpy as jnp
jnp.zeros(1).block_until_ready()
def jaxlib_rss():
    total, cur = 0, ""
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
            cur = parts[5] if len(parts) > 5 else ""
        elif parts[0] == "Rss:" and "jaxlib" in cur:
            total += int(parts[1]) * 1024
    return total
before = jaxlib_rss()
from engine import load_model
from engine.session import ChatSession, session_plan
m = load_model({path!r})
reply = "".join(ChatSession(m, session_plan(m, "int8", None)).send("hi", max_tokens=4))
print(before, jaxlib_rss())
"""


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_jaxlib_start_up_code_is_not_resident_after_loading(tiny_bpe_gguf):
    """~97 MB of jaxlib's code is resident once JAX's backend is up; loading a model lets it go,
    and answering brings back only what runs (measured ~50 MB with the Gemma-3-270M shape)."""
    r = subprocess.run([sys.executable, "-c", PROBE.format(path=str(tiny_bpe_gguf))], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    before, after = map(int, r.stdout.split())
    assert before > 40e6, before  # what there is to let go of
    assert after < 0.75 * before, (before, after)
