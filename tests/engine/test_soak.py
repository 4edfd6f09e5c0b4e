"""A short soak on the tiny model (issue 5, "Long runs"): one conversation, many ignore-EOS turns
through a small window; RSS and ms/token stay flat and nothing raises. `python -m bench.soak`
runs the long one (100k tokens on the default model)."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.soak import run_soak, summarize

TOKENS, WINDOW, TURN, EVERY, WARMUP = 3000, 32, 500, 250, 500
SOAK = dict(tokens=TOKENS, window=WINDOW, turn_tokens=TURN, sample_every=EVERY, warmup=WARMUP, seed=3)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def soak(tiny_bpe_gguf):
    return run_soak(tiny_bpe_gguf, **SOAK, keep_session=True)


def test_soak_runs_every_token_without_error(soak):
    assert soak["error"] is None, soak.get("traceback")
    assert soak["tokens_run"] == TOKENS and soak["turns"] == TOKENS // TURN
    assert len(soak["samples"]) == TOKENS // EVERY
    # the cache stays at sinks + window however long the conversation gets
    assert {s["cache_tokens"] for s in soak["samples"]} == {soak["sinks"] + soak["window"]}
    assert soak["samples"][-1]["tokens_seen"] > TOKENS


@pytest.fixture(scope="module")
def soak_alone(tiny_bpe_gguf):
    """The same soak in a process of its own, for RSS: after the rest of the suite, a one-off jump
    of ~16 MB in its 700 MB heap could land on any sample (test order decided it)."""
    code = (f"import json; from bench.soak import run_soak; "
            f"print(json.dumps(run_soak({str(tiny_bpe_gguf)!r}, **{SOAK!r})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_soak_rss_is_flat_after_warmup(soak_alone):
    soak = soak_alone
    assert soak["error"] is None, soak.get("traceback")
    after = [s["rss"] for s in soak["samples"] if s["tokens"] > WARMUP]
    # the conversation's own text and token ids grow by a few bytes per token; the cache does not
    assert after[-1] - after[0] < 4 * 2**20, [round(r / 2**20, 1) for r in after]
    assert max(after) - after[0] < 6 * 2**20


def _decode_ms(session, n: int = 120) -> float:
    """Median ms between consecutive tokens of one n-token reply."""
    from engine.events import Token

    dts, prev = [], None
    for ev in session.stream("Go on.", max_tokens=n):
        if isinstance(ev, Token) and ev.token_id >= 0:
            now = time.perf_counter()
            if prev is not None:
                dts.append(now - prev)
            prev = now
    return 1000.0 * statistics.median(dts)


def test_soak_ms_per_token_is_flat(soak):
    """After 3,000 tokens the conversation decodes as fast as a fresh one (<= 1.5x). Measured
    side by side, alternating, best of three each, so load from other processes on a small CI
    machine hits both alike (the soak's own start/end samples are minutes apart)."""
    from engine.session import ChatSession

    soaked = soak["_session"]
    fresh = ChatSession(soaked.model, soaked.base_plan, sampling=soaked.sampling, sinks=4)
    ends, starts = [], []
    for _ in range(3):
        ends.append(_decode_ms(soaked))
        starts.append(_decode_ms(fresh))
    assert min(ends) <= 1.5 * min(starts), (ends, starts)
    # and the soak's own samples stayed within a loose band (they include other load)
    assert soak["ms_per_token_p50_end_min3"] <= 4 * soak["ms_per_token_p50_start_min3"], soak["samples"]


def test_summary_compares_first_sample_after_warmup_with_the_last():
    samples = [{"tokens": t, "rss": 100 + t, "ms_per_token": 2.0, "ms_per_token_p50": 1.0,
                "cpu_ms_per_token": 3.0, "loadavg_1m": 1.0} for t in (100, 200, 300, 400)]
    s = summarize(samples, warmup=100)
    assert (s["start"]["tokens"], s["end"]["tokens"], s["rss_growth"]) == (200, 400, 200)
    assert s["ms_per_token_ratio_end_start"] == 1.0
