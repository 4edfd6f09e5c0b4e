"""Soak one conversation: generate N tokens (default 100k) in one ChatSession on a bounded cache
and watch that RSS and ms/token stay flat and nothing raises.

    python -m bench.soak                       # default model, window 256, 100k tokens
    python -m bench.soak --tokens 30000 --out soak.json
    python -m bench.soak --model tiny.gguf --window 32 --tokens 3000

Each turn is a short user message answered with ``--turn-tokens`` generated tokens, end-of-turn
ignored, so the conversation keeps growing while the cache stays at sinks + window slots. Every
``--sample-every`` generated tokens the script records the process RSS and the mean decode time
per token over that stretch (time between consecutive tokens within a turn; the prefill of each
new user message is timed separately). It prints the first sample after warm-up against the last
one and writes every sample to ``--out`` as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path

PROMPTS = (
    "Tell me a long story about a lighthouse keeper.",
    "Keep going, and add more detail about the sea.",
    "Now describe the village near the lighthouse.",
    "What happened next? Continue the story.",
    "Write a few more paragraphs, please.",
)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def run_soak(
    model_path: str | os.PathLike | None = None,
    tokens: int = 100_000,
    window: int = 256,
    turn_tokens: int = 2000,
    sample_every: int = 1000,
    warmup: int | None = None,
    seed: int = 0,
    kv_dtype: str = "int8",
    progress=None,
    repeat_penalty: float | None = None,
    temperature: float | None = None,
    keep_session: bool = False,
) -> dict:
    """Run the soak and return its record (samples, start/end figures, error if any); with
    keep_session, also the soaked session and its plan under "_session" (not JSON)."""
    from engine.budget import NEEDLE_BUDGET
    from engine.budget import plan_memory
    from engine.events import Done, Token
    from engine.gguf_loader import load_model
    from engine.model_locator import locate_model
    from engine.sampler import SamplingParams
    from engine.session import ChatSession

    warmup = sample_every if warmup is None else warmup
    t_load = time.perf_counter()
    path = locate_model(model_path)
    model = load_model(path)
    load_s = time.perf_counter() - t_load
    plan = plan_memory(model.config, kv_dtype, NEEDLE_BUDGET, window=window, sinks=4)
    sampling = SamplingParams().with_(seed=seed, max_tokens=turn_tokens, ignore_eos=True,
                                      repetition_penalty=repeat_penalty, temperature=temperature)
    session = ChatSession(model, plan, sampling=sampling, sinks=4)
    rss0 = _rss()

    rec: dict = {
        "model": str(path), "model_name": model.name, "tokens_target": tokens, "window": plan.window,
        "sinks": plan.sinks, "kv_dtype": plan.kv_dtype, "kv_bytes": plan.kv_bytes, "turn_tokens": turn_tokens,
        "sample_every": sample_every, "sampling": sampling.__dict__, "warmup_tokens": warmup, "load_s": round(load_s, 2),
        "rss_after_load": rss0, "samples": [], "turns": 0, "error": None,
    }
    samples = rec["samples"]
    generated = 0
    interval_s, interval_n, dts = 0.0, 0, []
    cpu_mark = time.process_time()
    prefill_s_total = 0.0
    t_wall = time.perf_counter()
    try:
        turn = 0
        while generated < tokens:
            want = min(turn_tokens, tokens - generated)
            text = PROMPTS[turn % len(PROMPTS)]
            t_prev = None
            t_turn = time.perf_counter()
            done = None
            for ev in session.stream(text, max_tokens=want):
                if isinstance(ev, Token):
                    if ev.token_id < 0:  # the decoder's flush at the end of a reply, not a token
                        continue
                    now = time.perf_counter()
                    if t_prev is None:
                        prefill_s_total += now - t_turn
                    else:
                        interval_s += now - t_prev
                        interval_n += 1
                        dts.append(now - t_prev)
                    t_prev = now
                    generated += 1
                    if generated % sample_every == 0:
                        st = session.stats()
                        cpu = time.process_time()
                        samples.append({
                            "tokens": generated,
                            "rss": _rss(),
                            "ms_per_token": 1000.0 * interval_s / max(interval_n, 1),
                            # the median token: robust to pauses from other processes or a GC
                            "ms_per_token_p50": 1000.0 * statistics.median(dts) if dts else 0.0,
                            # CPU time of the whole process (all threads) per token since the last
                            # sample: less sensitive than wall time to other load on the machine
                            "cpu_ms_per_token": 1000.0 * (cpu - cpu_mark) / sample_every,
                            "loadavg_1m": round(os.getloadavg()[0], 2),
                            "cache_tokens": st.cache_tokens,
                            "tokens_seen": st.tokens_seen,
                            "elapsed_s": round(time.perf_counter() - t_wall, 2),
                        })
                        interval_s, interval_n, dts, cpu_mark = 0.0, 0, [], cpu
                        if progress:
                            progress(samples[-1], rec)
                elif isinstance(ev, Done):
                    done = ev
            turn += 1
            if done is None or done.generated_tokens != want:
                raise RuntimeError(f"turn {turn} ended early: {done and done.reason} "
                                   f"after {done and done.generated_tokens} of {want} tokens")
    except BaseException as e:  # noqa: BLE001 - a soak records whatever stopped it
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        if isinstance(e, KeyboardInterrupt):
            rec["error"] = "interrupted"
    rec["turns"] = len([m for m in session.messages if m["role"] == "assistant"])
    rec["tokens_run"] = generated
    rec["wall_s"] = round(time.perf_counter() - t_wall, 1)
    rec["prefill_s_total"] = round(prefill_s_total, 2)
    rec["messages"] = len(session.messages)
    rec.update(summarize(samples, warmup))
    if keep_session:
        rec["_session"] = session
    return rec


def summarize(samples: list[dict], warmup: int) -> dict:
    """Start (first sample after warm-up) vs end (last sample), plus medians of 3 at each end."""
    after = [s for s in samples if s["tokens"] > warmup] or samples
    if not after:
        return {}
    first, last = after[0], after[-1]
    k = min(3, len(after))
    med = lambda xs, key: statistics.median(x[key] for x in xs)  # noqa: E731
    return {
        "start": {"tokens": first["tokens"], "rss": first["rss"], "ms_per_token": round(first["ms_per_token"], 3)},
        "end": {"tokens": last["tokens"], "rss": last["rss"], "ms_per_token": round(last["ms_per_token"], 3)},
        "rss_growth": last["rss"] - first["rss"],
        "rss_max_after_warmup": max(s["rss"] for s in after),
        "cpu_ms_per_token_start_median3": round(med(after[:k], "cpu_ms_per_token"), 3),
        "cpu_ms_per_token_end_median3": round(med(after[-k:], "cpu_ms_per_token"), 3),
        "loadavg_start_end": [first.get("loadavg_1m"), last.get("loadavg_1m")],
        "ms_per_token_p50_start_min3": round(min(x["ms_per_token_p50"] for x in after[:k]), 3),
        "ms_per_token_p50_end_min3": round(min(x["ms_per_token_p50"] for x in after[-k:]), 3),
        "ms_per_token_start_median3": round(med(after[:k], "ms_per_token"), 3),
        "ms_per_token_end_median3": round(med(after[-k:], "ms_per_token"), 3),
        "ms_per_token_ratio_end_start": round(med(after[-k:], "ms_per_token") / med(after[:k], "ms_per_token"), 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: the default model)")
    ap.add_argument("--tokens", type=int, default=100_000, help="tokens to generate in total (default 100000)")
    ap.add_argument("--window", type=int, default=256, help="sliding window (default 256)")
    ap.add_argument("--turn-tokens", type=int, default=2000, help="tokens per reply, EOS ignored (default 2000)")
    ap.add_argument("--sample-every", type=int, default=1000, help="tokens between samples (default 1000)")
    ap.add_argument("--warmup", type=int, default=None, help="tokens before the start sample (default: one sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kv-dtype", default="int8")
    ap.add_argument("--repeat-penalty", type=float, default=None, help="override the default sampling's (1 = off)")
    ap.add_argument("--temperature", type=float, default=None, help="override the default sampling's (0 = greedy)")
    ap.add_argument("--out", default=None, help="write the JSON record here")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    def stop(signum, frame):  # SIGTERM (and SIGINT, even when started in the background) ends
        raise KeyboardInterrupt  # the soak early with its record written

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    out = Path(args.out) if args.out else None
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)

    def progress(s: dict, rec: dict) -> None:
        print(f"{s['tokens']:>8} tokens  rss {s['rss'] / 2**20:8.1f} MiB  {s['ms_per_token']:7.2f} ms/token "
              f"(cpu {s['cpu_ms_per_token']:7.2f})  load {s['loadavg_1m']:5.2f}  cache {s['cache_tokens']}  "
              f"{s['elapsed_s']:.0f} s", flush=True)
        if out:  # keep a readable record even if the soak is stopped early
            tmp = out.with_suffix(out.suffix + ".tmp")
            tmp.write_text(json.dumps({**rec, "partial": True}, indent=1))
            os.replace(tmp, out)

    rec = run_soak(args.model, tokens=args.tokens, window=args.window, turn_tokens=args.turn_tokens,
                   sample_every=args.sample_every, warmup=args.warmup, seed=args.seed, kv_dtype=args.kv_dtype,
                   progress=progress, repeat_penalty=args.repeat_penalty,
                   temperature=args.temperature)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1))
    if rec.get("start"):
        s, e = rec["start"], rec["end"]
        print(f"tokens run {rec['tokens_run']} of {rec['tokens_target']} in {rec['turns']} turns, window {rec['window']}")
        print(f"start (@{s['tokens']}): rss {s['rss'] / 2**20:.1f} MiB, {s['ms_per_token']:.2f} ms/token")
        print(f"end   (@{e['tokens']}): rss {e['rss'] / 2**20:.1f} MiB, {e['ms_per_token']:.2f} ms/token")
        print(f"rss growth {rec['rss_growth'] / 2**20:+.1f} MiB; ms/token end/start (median of 3) "
              f"{rec['ms_per_token_ratio_end_start']:.2f}; cpu ms/token start {rec['cpu_ms_per_token_start_median3']:.2f}"
              f" end {rec['cpu_ms_per_token_end_median3']:.2f}; load average {rec['loadavg_start_end']}")
    if rec["error"]:
        print(f"soak stopped: {rec['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
