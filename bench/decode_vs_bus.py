"""Is a decode at the memory's rate? Ours and llama.cpp decode the same file in turn, with a
bare two-thread read of memory (bench/read_peak.cc) before and after each, so that every decode
is read against the rate the host gave at that moment (a shared host's moves 3x in minutes).

    python -m bench.decode_vs_bus --model FILE [--rounds 5] [--tokens 48] [--threads 2] [--read-gb 2]

Each engine runs in a process of its own (loaded once, warmed up); a turn resets its cache,
feeds the same 32-token prompt and decodes `--tokens` greedy tokens one step at a time. A
decode's rate in GB/s is the file's tensor bytes times its tokens a second: a step reads every
weight once (the embedding's one row aside, which a tied head reads whole). Prints each turn
and, per engine, the median of its rate over the mean of the two reads beside it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(kind: str, model: str, threads: int) -> None:
    """Load `kind`, then answer each "go N" line on stdin with the seconds of N decode steps."""
    import numpy as np

    from bench.run import LlamaCpp, Ours

    eng = Ours(model) if kind == "ours" else LlamaCpp(model, 512, threads)
    prompt = list(range(100, 132))
    eng.warmup(prompt * 3)
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line.split()[1])
        eng.reset()
        tok = int(np.argmax(eng.feed(prompt)))
        t0 = time.perf_counter()
        for _ in range(n):
            tok = int(np.argmax(eng.feed([tok])))
        print(time.perf_counter() - t0, flush=True)


def read_peak() -> Path:
    exe = Path(tempfile.mkdtemp(prefix="pinwheel-read-peak-")) / "read_peak"
    subprocess.run(["g++", "-O2", "-march=native", "-pthread", "-o", str(exe), str(ROOT / "bench/read_peak.cc")],
                   check=True)
    return exe


def read_rate(exe: Path, gb: int, threads: int) -> float:
    out = subprocess.run([str(exe), str(gb), str(threads), "1"], check=True, capture_output=True, text=True).stdout
    return float(out.split()[0])


def start(kind: str, args) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "bench.decode_vs_bus", "--model", args.model, "--worker", kind,
                          "--threads", str(args.threads)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        raise SystemExit(f"{kind}: the worker did not start")
    return p


def turns(procs: dict, exe: Path, args, tensor_bytes: int) -> tuple[dict, dict]:
    """Each round: a bare read, then each engine's decode followed by a bare read (the order
    swapped every round, so neither always comes first). Returns tok/s and share of the read."""
    rates = {k: [] for k in procs}
    shares = {k: [] for k in procs}
    for r in range(args.rounds):
        before = read_rate(exe, args.read_gb, args.threads)
        for kind in list(procs) if r % 2 == 0 else list(procs)[::-1]:
            p = procs[kind]
            p.stdin.write(f"go {args.tokens}\n")
            p.stdin.flush()
            tok_s = args.tokens / float(p.stdout.readline())
            after = read_rate(exe, args.read_gb, args.threads)
            gbs = tensor_bytes * tok_s / 1e9
            rates[kind].append(tok_s)
            shares[kind].append(gbs / ((before + after) / 2))
            print(f"  round {r + 1} {kind:8s} {tok_s:6.2f} tok/s = {gbs:5.1f} GB/s; reads {before:5.1f} / "
                  f"{after:5.1f} GB/s -> {shares[kind][-1]:.0%} of the bare read", flush=True)
            before = after
    return rates, shares


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.decode_vs_bus", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--read-gb", type=int, default=2, help="the bare read's buffer (far bigger than the caches)")
    ap.add_argument("--json", help="write the turns and the summary here")
    ap.add_argument("--worker", choices=("ours", "llamacpp"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.model, args.threads)
        return 0
    import gguf

    tensor_bytes = sum(int(t.n_bytes) for t in gguf.GGUFReader(args.model).tensors)
    exe = read_peak()
    procs = {}
    try:
        for kind in ("ours", "llamacpp"):  # loaded one after the other: two loads at once would race
            procs[kind] = start(kind, args)
        print(f"{Path(args.model).name}: {tensor_bytes / 1e9:.2f} GB of tensors; {args.tokens} steps a turn")
        rates, shares = turns(procs, exe, args, tensor_bytes)
    finally:
        for p in procs.values():
            p.kill()
    summary = {k: {"tok_s_median": statistics.median(rates[k]), "of_bare_read_median": statistics.median(shares[k])}
               for k in procs}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "tensor_bytes": tensor_bytes, "summary": summary,
                                               "tok_s": rates, "of_bare_read": shares}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
