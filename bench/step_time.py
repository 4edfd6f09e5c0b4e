"""Wall time of single decode steps, as a chat's reply sees them: the median and the 10th
percentile over many steps after a prompt of --fill tokens. --rows 8 times 8-row steps instead (a
prompt's tail or a short turn: a verify and its accept, as the decoder runs them), --rows 64
prefill chunks.

    python -m bench.step_time --model ~/.cache/pinwheel/ladder/smollm2-1.7b-Q4_0.gguf --fill 200
    python -m bench.step_time --model ~/.cache/pinwheel/ladder/smollm2-1.7b-Q4_0.gguf --rows 8 --steps 10

One process, one engine: use it to compare two builds of the engine step by step (run them in
turn, several times: the shared machine drifts); `pinwheel bench` gives the ratio to llama.cpp.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main(argv=None) -> int:
    import numpy as np

    from engine.budget import plan_memory
    from engine.decoder import Decoder
    from engine.gguf_loader import load_model
    from engine.model_locator import locate_model

    ap = argparse.ArgumentParser(prog="python -m bench.step_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: the default model)")
    ap.add_argument("--fill", type=int, default=200, help="prompt tokens in the cache before the steps")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rows", type=int, choices=(1, 8, 64), default=1,
                    help="tokens a step: 1 decode, 8 a verify and accept (a plain 8-row step where the model cannot verify), 64 a prefill chunk")
    args = ap.parse_args(argv)
    model = load_model(locate_model(args.model))
    plan = plan_memory(model.config)
    d = Decoder(model, plan, n_sink=plan.sinks)
    d.warmup()
    n = args.rows
    ids = np.random.default_rng(0).integers(10, min(1000, model.config.vocab_size), args.fill + (args.steps + 5) * n)

    def step(part):
        if n == 8 and d.can_verify:
            d.verify(part)
            d.accept(n)
        else:
            d.feed(part, chunk=n if n > 1 else None)

    d.feed(ids[: args.fill])
    at = args.fill
    times = []
    for i in range(args.steps + 5):  # the first 5 untimed
        t = time.perf_counter()
        step(ids[at : at + n])
        if i >= 5:
            times.append(time.perf_counter() - t)
        at += n
    times.sort()
    kind = {1: "decode steps", 8: "8-row steps", 64: "64-row chunks"}[n]
    print(f"{model.name}: {args.fill} tokens cached, {args.steps} {kind}: "
          f"median {times[len(times) // 2] * 1e3:.2f} ms, p10 {times[len(times) // 10] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
