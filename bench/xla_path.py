"""The XLA path against the native kernel: decode tok/s of each, and the ratio, at one model file.

    python -m bench.xla_path --model ~/.cache/pinwheel/ladder/smollm2-360m-Q4_0.gguf
    python -m bench.xla_path --model FILE --fill 200 --steps 64 --rounds 4

The XLA path is what runs where the kernel cannot (PINWHEEL_KERNELS=0, a GPU, a CPU no
prebuilt variant covers); its weights are then held in its own int8 form (engine.quant's
XLA_FORMS) instead of the kernel's layout. To time both under the same load of a shared machine,
this loads the file twice in one process, once in each form (only a bench does that: the engine
holds one form), fills both caches with the same --fill prompt tokens, then alternates rounds
of --steps single-token decode steps, native then XLA, --rounds times. Each path's figure is the
median step over all its rounds; the ratio is XLA tok/s / native tok/s (issue 24's target: at
least 0.4 at the 360M and 1.7B shapes). Also printed: the weight bytes each form holds (what
the gauge and `pinwheel models` report on that path) and the compiled step's temp bytes (a
dequantized f32 copy of a weight would show there).

Without the kernel (PINWHEEL_KERNELS=0) only the XLA path runs, and no ratio is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _decoder(model, plan, ids, fill: int):
    from engine.decoder import Decoder

    d = Decoder(model, plan, n_sink=plan.sinks)
    d.warmup()
    d.feed(ids[:fill])
    for i in range(3):  # the decode shape compiled and warm
        d.feed(ids[fill + i : fill + i + 1])
    return d


def _temp_bytes(d, ids) -> int | None:
    from engine import forward

    try:
        _, batch = d._batch(ids[:1], 1)
        c = forward.step.lower(d.model.params, d.cache, batch, d.cfg, False).compile()
        return int(c.memory_analysis().temp_size_in_bytes)
    except Exception:
        return None


def main(argv=None) -> int:
    import numpy as np

    from engine import kernels
    from engine.budget import plan_memory
    from engine.gguf_loader import load_model
    from engine.model_locator import locate_model

    ap = argparse.ArgumentParser(prog="python -m bench.xla_path", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: the default model)")
    ap.add_argument("--fill", type=int, default=200, help="prompt tokens in the cache before the steps")
    ap.add_argument("--steps", type=int, default=16, help="decode steps per round")
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds (native, XLA) ")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    args = ap.parse_args(argv)
    path = locate_model(args.model)
    native = kernels.available()
    models = {"xla": load_model(path, xla=True)}
    if native:
        models = {"native": load_model(path, xla=False), **models}
    cfg = models["xla"].config
    plan = plan_memory(cfg)
    n = args.fill + 3 + args.steps * args.rounds + 1
    ids = np.random.default_rng(0).integers(10, min(1000, cfg.vocab_size), n)
    decs = {k: _decoder(m, plan, ids, args.fill) for k, m in models.items()}
    temps = {k: _temp_bytes(d, ids) for k, d in decs.items()}
    times = {k: [] for k in decs}
    pos = args.fill + 3
    for _ in range(args.rounds):
        for k, d in decs.items():  # the same tokens for both paths, in turn
            for i in range(args.steps):
                t = time.perf_counter()
                d.feed(ids[pos + i : pos + i + 1])
                times[k].append(time.perf_counter() - t)
        pos += args.steps
    med = {k: statistics.median(t) for k, t in times.items()}
    res = {"model": models["xla"].name, "file": str(path), "kernel": kernels.status(), "capacity": plan.capacity,
           "fill": args.fill, "steps": args.steps * args.rounds,
           "paths": {k: {"decode_tok_s": 1.0 / med[k], "median_ms": med[k] * 1e3,
                         "p10_ms": sorted(times[k])[len(times[k]) // 10] * 1e3,
                         "weight_bytes": models[k].weight_bytes, "step_temp_bytes": temps[k]} for k in decs},
           "ratio": (med["native"] / med["xla"]) if native else None}
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"{res['model']}: {args.fill} tokens cached of {plan.capacity} slots, {res['steps']} decode steps per path "
          f"in {args.rounds} alternating rounds; kernel: {res['kernel']}")
    for k, r in res["paths"].items():
        print(f"  {k:<7} {r['decode_tok_s']:7.1f} tok/s  (median {r['median_ms']:.2f} ms, p10 {r['p10_ms']:.2f} ms)  "
              f"weights {r['weight_bytes'] / 1e6:,.0f} MB  step temp {(r['step_temp_bytes'] or 0) / 1e6:,.1f} MB")
    if native:
        print(f"  XLA / native decode: {res['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
