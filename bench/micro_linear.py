"""Matrix-vector micro-benchmark: which spelling of the int8 linear is fastest on XLA:CPU.

    python -m bench.micro_linear                 # default shapes (SmolLM2-135M), 1 and 8 rows
    python -m bench.micro_linear --rows 1 --check    # exit 1 if the engine's spelling is not
                                                     # within --tolerance of the fastest one

Every variant runs the same work: `rows` activations through 30 stacked layers of int8 weights
with one f32 scale per output row, inside one `lax.scan` (the way engine/forward.py runs the
layers), jitted, timed as the median of interleaved rounds (all variants take turns, so the
load of a shared machine hits them alike). Variants:

  engine       the engine's XLA fallback spelling (dequantize the blocks, then dot), used when
               the native kernel cannot be built; the kernel itself: python -m bench.micro_kernel
  upcast_dot   jnp.dot(x, w.astype(f32).T) * scale     (XLA fuses the convert into the dot's loop)
  mul_reduce   (w.astype(f32) * x[:, None, :]).sum(-1) * scale
  f32          jnp.dot(x, w_f32.T)                      (weights stored dequantized, 4x the bytes)
  bf16         jnp.dot(x.astype(bf16), w_bf16.T, preferred_element_type=f32)   (--all)
  int8_dot     int8 x int8 -> int32 dot_general, x quantized per row            (--all)

Also reported: the temp bytes XLA allocates (a materialised f32 copy of the weights shows up
there) and the effective weight bandwidth (int8 bytes read per ms). The shapes are the four
per-layer matrices of the default model (q/k/v merged 960x576, output 576x576, gate/up merged
3072x576, down 576x1536), the whole layer (all four in one scan body), and the tied head
49152x576 (once, no scan).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

SHAPES = {  # name: (out, in)
    "qkv 960x576": (960, 576),
    "wo 576x576": (576, 576),
    "gate_up 3072x576": (3072, 576),
    "down 576x1536": (576, 1536),
}
HEAD = (49152, 576)


def _engine_linear():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    def fallback(x, q, s):  # engine.quant.matmul's XLA path for one q8_0 weight with scale s per row
        w = q.astype(jnp.float32).reshape(q.shape[0], -1, 32) * s[:, None, None]
        return jnp.dot(x, w.reshape(q.shape).T, preferred_element_type=jnp.float32)

    return fallback


def variants(all_: bool):
    def upcast_dot(x, q, s):
        return jnp.dot(x, q.astype(jnp.float32).T, preferred_element_type=jnp.float32) * s

    def mul_reduce(x, q, s):
        return (q.astype(jnp.float32)[None] * x[:, None, :]).sum(-1) * s

    def f32(x, wf, s):
        return jnp.dot(x, wf.T)

    def bf16(x, wb, s):
        return jnp.dot(x.astype(jnp.bfloat16), wb.T, preferred_element_type=jnp.float32) * s

    def int8_dot(x, q, s):
        xs = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / 127.0
        xq = jnp.round(x / jnp.where(xs == 0, 1, xs)).astype(jnp.int8)
        acc = lax.dot_general(xq, q, (((1,), (1,)), ((), ())), preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * xs * s

    out = {"engine": (_engine_linear(), "q"), "upcast_dot": (upcast_dot, "q"), "mul_reduce": (mul_reduce, "q"),
           "f32": (f32, "f32")}
    if all_:
        out["bf16"] = (bf16, "bf16")
        out["int8_dot"] = (int8_dot, "q")
    return out


def make_weights(shapes, layers, rng):
    ws = []
    for out, inp in shapes:
        q = rng.integers(-127, 128, size=(layers, out, inp), dtype=np.int8)
        s = (rng.random((layers, out), dtype=np.float32) * 0.01 + 0.001).astype(np.float32)
        ws.append((q, s))
    return ws


def as_kind(q, s, kind):
    if kind == "q":
        return jnp.asarray(q), jnp.asarray(s)
    wf = q.astype(np.float32) * s[..., None]
    if kind == "f32":
        return jnp.asarray(wf), jnp.asarray(s)
    return jnp.asarray(wf, dtype=jnp.bfloat16), jnp.asarray(s)


def build(fn, n_mats: int, scanned: bool):
    """jit: x [R, in0] through `n_mats` matrices per layer (scan over layers when scanned)."""

    def one_layer(x, ws):
        ys = []
        for i in range(n_mats):
            w, s = ws[2 * i], ws[2 * i + 1]
            xi = x if x.shape[-1] == w.shape[-1] else jnp.resize(x, (x.shape[0], w.shape[-1]))
            ys.append(fn(xi, w, s))
        return ys

    if not scanned:
        return jax.jit(lambda x, *ws: one_layer(x, ws))

    def run(x, *ws):
        def body(c, layer_ws):
            ys = one_layer(x, layer_ws)
            return c + sum(y[:, :1].sum() for y in ys), ys

        return lax.scan(body, jnp.float32(0), ws)

    return jax.jit(run)


def temp_bytes(compiled) -> int | None:
    try:
        return int(compiled.memory_analysis().temp_size_in_bytes)
    except Exception:
        return None


def bench_case(name, shapes, layers, rows, vs, rounds, min_time, rng, scanned=True):
    raw = make_weights(shapes, layers if scanned else 1, rng)
    if not scanned:
        raw = [(q[0], s[0]) for q, s in raw]
    x = jnp.asarray(rng.standard_normal((rows, shapes[0][1])).astype(np.float32))
    fns, args, tb = {}, {}, {}
    for vname, (fn, kind) in vs.items():
        ws = []
        for q, s in raw:
            ws.extend(as_kind(q, s, kind))
        f = build(fn, len(shapes), scanned)
        lowered = f.lower(x, *ws)
        compiled = lowered.compile()
        tb[vname] = temp_bytes(compiled)
        jax.block_until_ready(compiled(x, *ws))
        fns[vname], args[vname] = compiled, ws
    # how many calls per round: ~min_time seconds for the slowest variant's first call
    per = {}
    for v in fns:
        t0 = time.perf_counter()
        jax.block_until_ready(fns[v](x, *args[v]))
        per[v] = time.perf_counter() - t0
    times = {v: [] for v in fns}
    for _ in range(rounds):
        for v in fns:
            n = max(1, int(min_time / max(per[v], 1e-5)))
            t0 = time.perf_counter()
            for _ in range(n):
                r = fns[v](x, *args[v])
            jax.block_until_ready(r)
            times[v].append((time.perf_counter() - t0) / n * 1e3)
    int8_bytes = sum(o * i for o, i in shapes) * (layers if scanned else 1)
    res = {}
    for v in fns:
        med = statistics.median(times[v])
        res[v] = {"ms": med, "ms_min": min(times[v]), "spread": (max(times[v]) - min(times[v])) / med,
                  "temp_bytes": tb[v], "int8_GB_s": int8_bytes / med / 1e6}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro_linear", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1,8", help="activation rows (1 = a decode step, 8 = a draft to verify)")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median reported)")
    ap.add_argument("--min-time", type=float, default=0.15, help="seconds per variant per round")
    ap.add_argument("--all", action="store_true", help="also bf16 weights and int8 x int8 dots (slow)")
    ap.add_argument("--no-head", action="store_true", help="skip the 49152x576 head")
    ap.add_argument("--only", default=None, help="comma list of case names to run (substring match)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the engine's spelling is within "
                    "--tolerance of the fastest variant for every case and materialises no f32 weight copy")
    ap.add_argument("--tolerance", type=float, default=1.3)
    ap.add_argument("--json", metavar="FILE", help="write the results here too")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    vs = variants(args.all)
    cases = [(n, [s], True) for n, s in SHAPES.items()]
    cases.append(("layer (all four)", list(SHAPES.values()), True))
    if not args.no_head:
        cases.append(("head 49152x576", [HEAD], False))
    if args.only:
        keys = [k.strip() for k in args.only.split(",")]
        cases = [c for c in cases if any(k in c[0] for k in keys)]
    print(f"jax {jax.__version__} on {jax.default_backend()}, {os.cpu_count()} cpus; {args.layers} layers in lax.scan "
          f"(head: once); median of {args.rounds} interleaved rounds; ms per call")
    all_res, failures = {}, []
    for rows in [int(r) for r in args.rows.split(",")]:
        print(f"\nrows = {rows}")
        head = f"{'case':<20}" + "".join(f"{v:>12}" for v in vs) + "   fastest   engine/fastest  engine temp"
        print(head)
        for name, shapes, scanned in cases:
            res = bench_case(name, shapes, args.layers, rows, vs, args.rounds, args.min_time, rng, scanned)
            all_res[f"{name} rows={rows}"] = res
            best = min(res, key=lambda v: res[v]["ms"])
            ratio = res["engine"]["ms"] / res[best]["ms"]
            tbytes = res["engine"]["temp_bytes"]
            weight_f32 = max(o * i for o, i in shapes) * 4 * (args.layers if scanned else 1)
            copy = tbytes is not None and tbytes >= weight_f32 // max(1, args.layers if scanned else 1)
            print(f"{name:<20}" + "".join(f"{res[v]['ms']:>12.3f}" for v in vs)
                  + f"   {best:<10}{ratio:>8.2f}x    {tbytes if tbytes is not None else '?':>10}"
                  + ("  <- f32 weight copy!" if copy else ""))
            if ratio > args.tolerance:
                failures.append(f"{name} rows={rows}: engine {res['engine']['ms']:.3f} ms vs {best} {res[best]['ms']:.3f} ms")
            if copy:
                failures.append(f"{name} rows={rows}: engine spelling allocates {tbytes} temp bytes (f32 weight copy?)")
    print("\nspread (max-min)/median of the engine variant: "
          + ", ".join(f"{k}: {v['engine']['spread']:.0%}" for k, v in all_res.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_res, f, indent=1)
    if args.check:
        if failures:
            print("\nCHECK FAILED:\n  " + "\n  ".join(failures))
            return 1
        print("\ncheck passed: the engine's spelling is within "
              f"{args.tolerance}x of the fastest everywhere and copies no weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
