"""Peak memory and load-to-first-token time of a one-shot reply, ours against llama.cpp, each in a
fresh process, alternating, on the same file.

    python -m bench.footprint --model FILE [--model FILE ...] [--repeat 3] [--tokens 16]
    python -m bench.footprint --model FILE --no-llamacpp --stages   # where our memory goes

Each child does what `pinwheel chat --prompt` does: import, load, compile (ours: session.warmup on
the first run of a shape; later runs load the steps a reply uses from the compile cache), then
answer one short prompt greedily. Reported per engine:
peak RSS (the kernel's VmHWM: the whole process, interpreter and libraries included), RSS at the
end, and seconds from the start of loading to the first token (the file is read once before the
first repetition, so it is in the page cache). llama.cpp gets n_ctx = our plan's capacity
(rounded up to 256), 2 threads, its default f16 cache (--llama-kv q8_0: 8-bit, as ours); ours its
default (int8 cache, auto budget). Ratios are ours / llama.cpp per repetition, then their median.

--stages prints our process's RSS and peak after each step of loading (the high-water mark is
reset before each step), with the model's weights and cache for reference: the table behind
engine.library's runtime term.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_COMMON = r"""
import json, sys, time
t0 = time.perf_counter()
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
"""

OURS = _COMMON + r"""
from engine import load_model
from engine.events import Token
from engine.session import ChatSession, session_plan
t_import = time.perf_counter() - t0
m = load_model(sys.argv[1])
t_load = time.perf_counter() - t0 - t_import
s = ChatSession(m, session_plan(m, "int8", None))
if not s.decoder.compiled_before():  # as `pinwheel chat --prompt` does
    s.warmup()
first = None
n = 0
for ev in s.stream(sys.argv[2]):
    if isinstance(ev, Token):
        n += 1
        first = first or time.perf_counter() - t0 - t_import
        if n >= int(sys.argv[3]):
            break
print(json.dumps(dict(peak=status("VmHWM"), rss=status("VmRSS"), import_s=t_import, load_s=t_load,
                      first_token_s=first, weights=m.weight_bytes, kv=s.plan.kv_bytes)))
"""

LLAMA = _COMMON + r"""
import llama_cpp
t_import = time.perf_counter() - t0
kv = {} if sys.argv[5] == "f16" else dict(type_k=8, type_v=8, flash_attn=True)  # 8: GGML_TYPE_Q8_0
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[4]), n_threads=2, n_threads_batch=2,
                      n_batch=512, verbose=False, **kv)
t_load = time.perf_counter() - t0 - t_import
first = None
n = 0
msgs = [{"role": "user", "content": sys.argv[2]}]
for chunk in llm.create_chat_completion(msgs, max_tokens=int(sys.argv[3]), temperature=0.0, stream=True):
    if chunk["choices"][0]["delta"].get("content"):
        n += 1
        first = first or time.perf_counter() - t0 - t_import
print(json.dumps(dict(peak=status("VmHWM"), rss=status("VmRSS"), import_s=t_import, load_s=t_load,
                      first_token_s=first)))
"""

STAGES = _COMMON + r"""
from engine.sysmem import trim
def reset():
    trim()
    open("/proc/self/clear_refs", "w").write("5")
rows = []
def mark(name):
    rows.append((name, status("VmRSS"), status("VmHWM"), time.perf_counter() - t0))
    reset()
reset()
import jax.numpy as jnp
jnp.zeros(1).block_until_ready()
mark("import JAX, start its backend")
from engine import gguf_loader as gl
from engine.chat_template import ChatTemplate
from engine.tokenizer import Tokenizer
mark("import the engine")
m = gl.load_model(sys.argv[1])
mark("load_model")
from engine.session import ChatSession, session_plan
s = ChatSession(m, session_plan(m, "int8", None))
mark("ChatSession (its cache)")
s.warmup()
mark("warm-up (compile or cache)")
list(s.send(sys.argv[2], max_tokens=int(sys.argv[3])))
mark("one reply")
print(json.dumps(dict(rows=rows, weights=m.weight_bytes, kv=s.plan.kv_bytes, vocab=m.config.vocab_size)))
"""


def _capacity(path: str) -> int:
    from engine.budget import plan_memory
    from engine.gguf_loader import check_model_file

    return plan_memory(check_model_file(path)).capacity


def _child(script: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _mb(n) -> str:
    return f"{n / 1e6:7.1f}"


def stages(path: str, prompt: str, tokens: int) -> None:
    out = _child(STAGES, path, prompt, str(tokens))
    print(f"{Path(path).name}: vocabulary {out['vocab']:,}, weights {out['weights'] / 1e6:.1f} MB, "
          f"cache {out['kv'] / 1e6:.1f} MB")
    print(f"  {'step':<32} {'RSS MB':>8} {'peak MB':>8} {'at s':>6}")
    for name, rss, peak, t in out["rows"]:
        print(f"  {name:<32} {_mb(rss)} {_mb(peak)} {t:6.2f}")


def compare(path: str, prompt: str, tokens: int, repeat: int, llamacpp: bool, llama_kv: str = "f16") -> dict:
    Path(path).read_bytes()  # into the page cache: both engines start warm
    n_ctx = -(-_capacity(path) // 256) * 256
    runs = {"ours": [], "llamacpp": []}
    for _ in range(repeat):
        runs["ours"].append(_child(OURS, path, prompt, str(tokens)))
        if llamacpp:
            runs["llamacpp"].append(_child(LLAMA, path, prompt, str(tokens), str(n_ctx), llama_kv))
    print(f"{Path(path).name} (n_ctx {n_ctx}, llama.cpp's cache {llama_kv}, {repeat} runs each, alternating)")
    for eng, rs in runs.items():
        for r in rs:
            print(f"  {eng:<9} peak {_mb(r['peak'])} MB  end {_mb(r['rss'])} MB  import {r['import_s']:5.2f} s  "
                  f"load {r['load_s']:5.2f} s  load->first token {r['first_token_s']:5.2f} s")
    result = {"file": path, "n_ctx": n_ctx, "llama_kv": llama_kv, "runs": runs}
    if llamacpp:
        ratio = lambda k: statistics.median(o[k] / l[k] for o, l in zip(runs["ours"], runs["llamacpp"]))  # noqa: E731
        result["peak_ratio"] = ratio("peak")
        result["first_token_ratio"] = ratio("first_token_s")
        print(f"  ours / llama.cpp: peak RSS {result['peak_ratio']:.2f}x, load->first token "
              f"{result['first_token_ratio']:.2f}x (medians of per-run ratios)")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.footprint", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True, metavar="FILE")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    ap.add_argument("--prompt", default="Hi")
    ap.add_argument("--no-llamacpp", dest="llamacpp", action="store_false")
    ap.add_argument("--llama-kv", choices=("f16", "q8_0"), default="f16",
                    help="llama.cpp's cache type (default f16, its own default; q8_0: 8 bits like ours, "
                         "with flash attention, which quantized V needs)")
    ap.add_argument("--stages", action="store_true", help="our memory step by step instead")
    ap.add_argument("--json", metavar="FILE", help="also write the results here")
    args = ap.parse_args(argv)
    results = []
    for path in args.model:
        if args.stages:
            stages(path, args.prompt, args.tokens)
        else:
            results.append(compare(path, args.prompt, args.tokens, args.repeat, args.llamacpp, args.llama_kv))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
