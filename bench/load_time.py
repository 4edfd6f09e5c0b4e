"""Load to first token, ours against llama.cpp, on the same files: each run a fresh process
(bench.footprint's children: import, load, compile or load the compiled steps, answer one short
prompt), the engines alternating, best of N each; the file is read once first, so both start
with it in the page cache (issue 22's target: <= 2 s at 1.7B).

    python -m bench.load_time                          # the cached ladder files (~/.cache/pinwheel/ladder)
    python -m bench.load_time --model FILE [--model FILE ...] [--repeat 3] [--no-llamacpp]

Per engine and file: the best load (ours: engine.load_model; llama.cpp: llama_cpp.Llama) and
the best load -> first token, in seconds from the start of loading (imports excluded: they
are the same for every file, see `pinwheel chat --prompt` for them); and the ratios of the
bests, ours / llama.cpp. The machine is shared: ratios in one run are what to compare.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.footprint import LLAMA, OURS, _capacity, _child

LADDER = Path.home() / ".cache" / "pinwheel" / "ladder"


def time_file(path: str, repeat: int, llamacpp: bool, prompt: str = "Hi") -> dict:
    """Best-of-`repeat` load and load -> first token of each engine on one file, alternating."""
    Path(path).read_bytes()  # into the page cache
    n_ctx = -(-_capacity(path) // 256) * 256  # llama.cpp's context: our plan's capacity, as bench.footprint
    engines = {"ours": (OURS, (path, prompt, "1"))}
    if llamacpp:
        engines["llamacpp"] = (LLAMA, (path, prompt, "1", str(n_ctx), "f16"))
    runs = {name: [] for name in engines}
    for _ in range(repeat):
        for name, (script, args) in engines.items():
            runs[name].append(_child(script, *args))
    best = {name: {k: min(r[k] for r in rs) for k in ("load_s", "first_token_s")} for name, rs in runs.items()}
    out = {"file": path, "n_ctx": n_ctx, "repeat": repeat, "best": best, "runs": runs}
    if llamacpp:
        out["ratio"] = {k: best["ours"][k] / best["llamacpp"][k] for k in ("load_s", "first_token_s")}
    return out


def report(r: dict) -> str:
    lines = [f"{Path(r['file']).name} (best of {r['repeat']}, alternating)"]
    for name, b in r["best"].items():
        lines.append(f"  {name:<9} load {b['load_s']:5.2f} s   load -> first token {b['first_token_s']:5.2f} s")
    if "ratio" in r:
        lines.append(f"  ours / llama.cpp: load {r['ratio']['load_s']:.2f}x, load -> first token "
                     f"{r['ratio']['first_token_s']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.load_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", metavar="FILE", help="default: every *.gguf in " + str(LADDER))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-llamacpp", dest="llamacpp", action="store_false")
    ap.add_argument("--json", metavar="FILE", help="also write the results here")
    args = ap.parse_args(argv)
    models = args.model or sorted(str(p) for p in LADDER.glob("*.gguf"))
    if not models:
        ap.error(f"no --model and no files in {LADDER} (make them with python -m bench.ladder)")
    if args.llamacpp:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            ap.error("llama-cpp-python is not installed (pip install 'pinwheel-chat[bench]'), or pass --no-llamacpp")
    results = []
    for path in models:
        results.append(time_file(path, args.repeat, args.llamacpp))
        print(report(results[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
