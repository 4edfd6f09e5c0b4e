"""Profile the decode step (or an 8-row draft verify) of a model with XLA's profiler, and name
each of the busiest kernels by the HLO it runs.

    python -m bench.profile_step                 # default model, default plan (928 slots)
    python -m bench.profile_step --window 256 --rows 8
    python -m bench.profile_step --rows 64       # a prefill chunk
    PINWHEEL_KERNELS=0 python -m bench.profile_step --fill 200   # the XLA path, 200 tokens cached

Prints the step's CPU and wall time, the summed kernel time per step (all threads), and the top
kernels with the first line of their HLO (which matrix, which fusion). This is how the README's
"what bounds decode" figures were read.
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile_step", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--window", type=int, default=None)
    ap.add_argument("--rows", type=int, default=1, choices=(1, 8, 64),
                    help="1: decode step, 8: draft verify, 64: prefill chunk")
    ap.add_argument("--fill", type=int, default=None,
                    help="tokens in the cache before the profiled steps (default: a full cache, as in a long chat)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import numpy as np

    from engine import forward
    from engine.budget import plan_memory
    from engine.decoder import Decoder
    from engine.gguf_loader import load_model
    from engine.model_locator import locate_model

    model = load_model(locate_model(args.model))
    plan = plan_memory(model.config, window=args.window)
    d = Decoder(model, plan, n_sink=plan.sinks)
    d.warmup()
    ids = np.random.default_rng(0).integers(10, min(1000, model.config.vocab_size), plan.capacity + 64)
    d.feed(ids[: plan.capacity + 10 if args.fill is None else args.fill])  # default: a full cache
    if args.rows == 1:
        _, batch = d._batch(ids[:1], 1)
        hlo = forward.step.lower(model.params, d.cache, batch, d.cfg, False).compile().as_text()

        def run():
            d.feed(ids[:1])
    elif args.rows == 64:
        _, batch = d._batch(ids[:64], 64)
        hlo = forward.step.lower(model.params, d.cache, batch, d.cfg, False).compile().as_text()

        def run():
            d.feed(ids[:64])
    else:
        _, batch = d._batch(ids[:8], 8)
        hlo = forward.verify.lower(model.params, d.cache, batch, d.cfg).compile().as_text()

        def run():
            d.verify(ids[:8])
            d.accept(8)
    for _ in range(3):
        run()
    c, t = time.process_time(), time.perf_counter()
    for _ in range(10):
        run()
    print(f"{model.name}: capacity {plan.capacity}, {args.rows} row(s): "
          f"CPU {(time.process_time() - c) * 100:.1f} ms, wall {(time.perf_counter() - t) * 100:.1f} ms per step")
    with tempfile.TemporaryDirectory() as out:
        jax.profiler.start_trace(out, create_perfetto_trace=True)
        for _ in range(args.steps):
            run()
        jax.profiler.stop_trace()
        trace = sorted(glob.glob(out + "/**/*.trace.json.gz", recursive=True))[-1]
        events = json.load(gzip.open(trace))["traceEvents"]
    total, count = collections.Counter(), collections.Counter()
    for e in events:  # XLA kernels only: not the Python frames, the executor or the host copy
        name = e.get("name", "")
        if e.get("ph") == "X" and not name.startswith(("$", "Thunk", "PjitFunction", "Common", "np.")) \
                and "wait" not in name:
            total[name] += e["dur"]
            count[name] += 1
    per = 1000.0 * args.steps
    print(f"kernel time per step (all threads): {sum(total.values()) / per:.1f} ms")
    for name, dur in total.most_common(args.top):
        m = re.search(r"^\s*(?:ROOT )?%?" + re.escape(name) + r" = ([^\n]{0,140})", hlo, re.M)
        print(f"{dur / per:7.2f} ms {count[name] // args.steps:4d}x  {name[:28]:<28} {m.group(1) if m else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
