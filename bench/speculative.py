"""Prompt-lookup speculative decoding on chat: acceptance and speed-up, plain vs speculative.

    python -m bench.speculative                      # default model, greedy and default sampling
    python -m bench.speculative --out bench/results/spec.json
    python -m bench.speculative --model tiny.gguf --max-tokens 40     # smoke run

One scripted conversation (copy-heavy turns such as "fix the grammar of this", follow-ups that
rework an earlier answer, and free writing) is run twice in one process, by a session with
speculation and one without, turn by turn in alternation so the machine's load hits both
alike. For each turn: tokens, decode seconds (first token to last, prefill excluded), CPU
seconds, drafts proposed/kept. Greedy runs also check that both sessions wrote the same tokens
(the float rounding of an 8-row verify differs from a 1-row step, so a near-tie may resolve
the other way: the first difference is reported with the plain run's top-2 logit margin).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

TURNS = (
    "Fix the spelling and grammar of this paragraph and return only the corrected text: "
    "'Their are many reason why peoples enjoys walking in the forrest. The air is fresh, the "
    "trees is tall and quite, and you can here the birds singing all the day long.'",
    "Write a short Python function that returns the n-th Fibonacci number, with a docstring.",
    "Now add type hints to that function and rename it to fib. Show the whole function again.",
    "Tell me a short story about a lighthouse keeper and a storm.",
    "Summarize the story you just told in two sentences.",
    "Turn this into a numbered list: apples, pears, plums, cherries, grapes, lemons, limes, figs.",
    "What is the capital of France? Answer in one sentence, then repeat the sentence in capitals.",
    "Rewrite this sentence in the passive voice: 'The committee approved the new budget on Monday "
    "after a long debate about the cost of the bridge.'",
)


def run(model_path=None, max_tokens: int = 200, window: int | None = None, kv_dtype: str = "int8",
        modes=("greedy", "sampled"), turns=TURNS, progress=print) -> dict:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from engine.budget import plan_memory
    from engine.events import Done, Token
    from engine.gguf_loader import load_model
    from engine.model_locator import locate_model
    from engine.sampler import GREEDY, SamplingParams
    from engine.session import ChatSession

    model = load_model(locate_model(model_path))
    plan = plan_memory(model.config, kv_dtype, window=window)
    rec = {"model": model.name, "max_tokens": max_tokens, "kv_dtype": kv_dtype, "window": plan.window, "modes": {}}
    for mode in modes:
        sampling = GREEDY if mode == "greedy" else SamplingParams(seed=0)
        sessions = {spec: ChatSession(model, plan, system="You are a helpful assistant.", sampling=sampling,
                                      speculative=spec) for spec in (False, True)}
        for s in sessions.values():
            s.warmup()
        rows = []
        for i, text in enumerate(turns):
            row = {"turn": i + 1}
            for spec in ((False, True) if i % 2 == 0 else (True, False)):  # alternate who goes first
                s = sessions[spec]
                ids, t_first, t_last, c0 = [], None, None, time.process_time()
                done = None
                for ev in s.stream(text, max_tokens=max_tokens):
                    if isinstance(ev, Token) and ev.token_id >= 0:
                        now = time.perf_counter()
                        t_first = t_first or now
                        t_last = now
                        ids.append(ev.token_id)
                    elif isinstance(ev, Done):
                        done = ev
                key = "spec" if spec else "plain"
                row[key] = {"tokens": len(ids), "decode_s": (t_last - t_first) if len(ids) > 1 else 0.0,
                            "cpu_s": time.process_time() - c0, "draft": done.draft, "ids": ids}
            if mode == "greedy":
                a, b = row["plain"]["ids"], row["spec"]["ids"]
                row["identical"] = a == b
                if a != b:
                    row["first_difference"] = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            for k in ("plain", "spec"):
                row[k].pop("ids")
            rows.append(row)
            p, q = row["plain"], row["spec"]
            progress(f"{mode:8} turn {i + 1}: plain {p['tokens']:4d} tok {_tps(p):6.1f} tok/s | spec {q['tokens']:4d} tok "
                     f"{_tps(q):6.1f} tok/s, kept {q['draft']['accepted']}/{q['draft']['drafted']} drafts in "
                     f"{q['draft']['verifies']} verifies" + ("" if row.get("identical", True) else
                                                             f"  (differs from token {row['first_difference']})"))
        tot = {k: {"tokens": sum(r[k]["tokens"] for r in rows), "decode_s": sum(r[k]["decode_s"] for r in rows),
                   "cpu_s": sum(r[k]["cpu_s"] for r in rows)} for k in ("plain", "spec")}
        d = {f: sum(r["spec"]["draft"][f] for r in rows) for f in ("verifies", "drafted", "accepted")}
        summary = {
            "plain_tok_s": _tps(tot["plain"]), "spec_tok_s": _tps(tot["spec"]),
            "speedup": _tps(tot["spec"]) / max(_tps(tot["plain"]), 1e-9),
            "cpu_ms_per_token_plain": 1000 * tot["plain"]["cpu_s"] / max(tot["plain"]["tokens"], 1),
            "cpu_ms_per_token_spec": 1000 * tot["spec"]["cpu_s"] / max(tot["spec"]["tokens"], 1),
            "acceptance": d["accepted"] / d["drafted"] if d["drafted"] else 0.0,
            "tokens_per_verify": (d["accepted"] + d["verifies"]) / d["verifies"] if d["verifies"] else 0.0,
            **d,
        }
        if mode == "greedy":
            summary["identical_turns"] = f"{sum(r['identical'] for r in rows)}/{len(rows)}"
        rec["modes"][mode] = {"turns": rows, "summary": summary}
        progress(f"{mode:8} total: plain {summary['plain_tok_s']:.1f} tok/s, speculative {summary['spec_tok_s']:.1f} "
                 f"tok/s ({summary['speedup']:.2f}x); acceptance {summary['acceptance']:.0%}, "
                 f"{summary['tokens_per_verify']:.2f} tokens per verify"
                 + (f"; identical turns {summary['identical_turns']}" if mode == "greedy" else ""))
    return rec


def _tps(r: dict) -> float:
    return (r["tokens"] - 1) / r["decode_s"] if r["decode_s"] > 0 else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.speculative", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--window", type=int, default=None)
    ap.add_argument("--kv-dtype", default="int8")
    ap.add_argument("--modes", default="greedy,sampled")
    ap.add_argument("--out", default=None, help="write the JSON record here")
    args = ap.parse_args(argv)
    rec = run(args.model, args.max_tokens, args.window, args.kv_dtype, tuple(args.modes.split(",")))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
