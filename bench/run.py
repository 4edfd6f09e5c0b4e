"""`pinwheel bench`: our engine and llama.cpp on the same GGUF, the same prompts, in one run.

    pinwheel bench                          # default model; llama.cpp too when importable
    pinwheel bench --long-tokens 1000,10000,50000   # the full long-conversation run (~1 h)
    pinwheel bench --quick --no-llamacpp --model tiny.gguf    # smoke run (seconds)
    python -m bench.run ...                 # the same

What is measured (each engine in its own worker processes, so RSS is per engine and JAX and
llama.cpp never share a process):

* speed: prefill tok/s of a ~200- and a ~2,000-token prompt, and greedy decode tok/s over 128
  and 1,024 tokens (end-of-text ignored). Both engines stay loaded in two persistent workers
  and take turns, repetition by repetition, so the machine's load (2 shared cores) hits both
  alike; ratios are the median of the per-repetition ratios. Our cache holds only `capacity`
  tokens (928 by default), so a prompt longer than that streams through the window: that is
  the design, not a shortcut. llama.cpp gets n_ctx >= our capacity and >= the longest prompt.
* long: one conversation decoded greedily to --long-tokens (window --window, 4 sinks), with ms
  per token and RSS sampled along the way; ms/token at each checkpoint as a ratio to the first,
  RSS growth from the first checkpoint to the end. llama.cpp runs with n_ctx = sinks + window
  and its own context shift (keep the 4 first tokens, drop half of the rest when full, as
  llama-cli does), the nearest thing it has to a bounded cache.
* turns: a scripted conversation of equal-length turns; time to first token of turn 2 and of
  the last turn. Ours through ChatSession; llama.cpp keeps its context and evaluates only the
  new tokens (the same template rendered, the same delta), context shift off: when its n_ctx
  (--llama-ctx, default the model's training context) is full the run notes the turn.
* memory: peak RSS (VmHWM; ru_maxrss off Linux) of every worker process, RSS curve of the long run.

Outputs: a table on stdout, bench-<stamp>.json and bench-<stamp>.png (RSS and ms/token against
tokens generated) under --out (default bench/results/).

Worker mode (used by the above, usable by hand; prints one JSON object):
    python -m bench.run --worker ours|llamacpp --task prefill|decode|long|turns --spec JSON
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path(__file__).resolve().parent / "results"
ENGINES = ("ours", "llamacpp")
PROTO_PREFIX = "@@bench "  # worker -> orchestrator lines on the private pipe

# --- settings ------------------------------------------------------------------------------

FULL = dict(
    prefill=(200, 2000), decode=(128, 1024), decode_prompt=200, repeat=3, long_repeat=2,
    long_tokens=(1000, 5000), window=512, sinks=4, long_prompt=200, turns=50, user_words=36,
    reply_tokens=32, rss_every=32,
)
QUICK = dict(
    prefill=(24, 160), decode=(8, 32), decode_prompt=16, repeat=1, long_repeat=1,
    long_tokens=(64, 160), window=32, sinks=4, long_prompt=16, turns=4, user_words=8,
    reply_tokens=6, rss_every=8,
)
FULL_LONG = (1000, 10000, 50000)

TARGETS = {  # issue 7, ratios in one run
    "decode_vs_llamacpp": 1.0,
    "prefill_vs_llamacpp": 2.0,
    "long_ms_ratio": 1.05,
    "ttft_ratio": 1.2,
    "rss_growth_mb": 2.0,
    "peak_rss_vs_llamacpp": 1.25,
}

# --- prompt text ---------------------------------------------------------------------------

_SENTENCES = (
    "The lighthouse stood at the end of a long stone pier, and every evening its keeper climbed",
    "the hundred and twelve steps to light the lamp before the fishing boats came home.",
    "She kept a notebook of the weather, the ships that passed and the birds that rested on the rail,",
    "and over the years the notebook grew into a history of the bay that nobody else had written.",
    "In winter the storms came from the north-west; waves broke over the pier and salt froze on the glass.",
    "The village below had a baker, a school with nine pupils, a church and a harbour master",
    "who measured the tide twice a day and argued with everyone about the accuracy of clocks.",
    "A language model reads such a story one token at a time and predicts the next one;",
    "its memory of what came before is the key-value cache, and on a small laptop that memory is precious.",
    "Numbers make the text less predictable: 17 boats, 3.5 metres of tide, 2,048 steps, 1907 and 2024.",
    "When the engineers measured the program, they counted tokens per second and megabytes of memory,",
    "and they repeated every measurement because other jobs shared the same two processor cores.",
    "The keeper's daughter learned to repair the lamp's clockwork, to splice rope and to read charts,",
    "and when the light was finally automated she wrote the last entry in the notebook herself.",
)


def corpus_text(min_words: int = 3000) -> tuple[str, str]:
    """A long English text and where it came from (bench/data/alice29.txt when present)."""
    alice = Path(__file__).resolve().parent / "data" / "alice29.txt"
    try:
        text = alice.read_text(encoding="utf-8", errors="replace")
        if len(text.split()) >= min_words:
            return " ".join(text.split()), "bench/data/alice29.txt"
    except OSError:
        pass
    parts, i = [], 0
    while sum(len(p.split()) for p in parts) < min_words:
        parts.append(f"Part {i // len(_SENTENCES) + 1}. {_SENTENCES[i % len(_SENTENCES)]}")
        i += 1
    return " ".join(parts), "built-in"


def turn_texts(n_turns: int, words: int) -> list[str]:
    """Equal-length user messages (the same number of words, different words each turn)."""
    pool = " ".join(_SENTENCES).split()
    out = []
    for t in range(n_turns):
        start = (t * 7) % len(pool)
        ws = [pool[(start + j) % len(pool)] for j in range(words)]
        out.append(f"Turn {t + 1}: " + " ".join(ws) + " Please continue the story.")
    return out


def ids_digest(ids) -> str:
    return hashlib.sha1(",".join(map(str, ids)).encode()).hexdigest()[:12]


def rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # pragma: no cover - psutil is a dependency
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """This process's peak RSS. On Linux the kernel's VmHWM: ru_maxrss carries over exec, so a
    worker started by a parent that had just written a 1.4 GB F16 file reported the parent's
    peak (both engines 1,956 MB in one ladder run)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(r) * (1 if sys.platform == "darwin" else 1024)


def loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def round_list(xs, nd=3):
    return [None if x is None else round(float(x), nd) for x in xs]


# --- engines (worker side) -----------------------------------------------------------------


class OutOfContext(Exception):
    pass


class Ours:
    """Our engine through engine.Decoder (speed, long) or engine.ChatSession (turns)."""

    name = "ours"

    def __init__(self, model_path: str, window: int | None = None, sinks: int = 4, model=None):
        t0 = time.perf_counter()
        from engine import load_model, plan_memory
        from engine.decoder import Decoder

        self.model = model if model is not None else load_model(model_path)
        self.plan = plan_memory(self.model.config, window=window, sinks=sinks)
        self.dec = Decoder(self.model, self.plan, n_sink=self.plan.sinks)
        self.load_s = time.perf_counter() - t0
        self.info = {
            "capacity": self.plan.capacity, "window": self.plan.window, "sinks": self.plan.sinks,
            "kv_bytes": self.plan.kv_bytes, "weight_bytes": self.model.weight_bytes,
            "prefill_chunk": self.dec.chunk, "model": self.model.name,
        }
        try:
            import jax

            self.info["jax"] = jax.__version__
            self.info["backend"] = jax.default_backend()
            self.info["devices"] = [str(d) for d in jax.devices()]
        except Exception:
            pass

    def tokenize(self, text: str) -> list[int]:
        return list(self.model.tokenizer.encode(text, add_bos=False, parse_special=False))

    def reset(self) -> None:
        self.dec.reset(self.plan.sinks)

    def feed(self, ids):
        return self.dec.feed(ids)

    def warmup(self, ids) -> None:
        self.reset()
        self.feed(ids[: self.dec.chunk + 1])  # the prefill-chunk shape
        self.feed(ids[:1])  # the decode-step shape
        self.feed(ids[:2])  # the 8-row shape (drafts, short prompt tails)
        self.reset()

    @property
    def position(self) -> int:
        return self.dec.ring.next_pos


class LlamaCpp:
    """llama.cpp through llama-cpp-python's low-level context (no sampler chain, no Python-side
    logits copy): eval = llama_decode over n_batch pieces, logits read in place."""

    name = "llamacpp"

    def __init__(self, model_path: str, n_ctx: int, threads: int = 2, shift_keep: int | None = None):
        t0 = time.perf_counter()
        import llama_cpp

        self.llm = llama_cpp.Llama(
            model_path=str(model_path), n_ctx=int(n_ctx), n_threads=threads, n_threads_batch=threads,
            n_batch=512, verbose=False,
        )
        self.ctx, self.batch = self.llm._ctx, self.llm._batch
        self.n_ctx, self.n_vocab, self.n_batch = self.llm.n_ctx(), self.llm.n_vocab(), 512
        self.shift_keep = shift_keep  # None: running out of context raises OutOfContext
        self.n_past = 0
        self.shifts = 0
        self.load_s = time.perf_counter() - t0
        self.info = {"n_ctx": self.n_ctx, "threads": threads, "n_batch": 512,
                     "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
                     "context_shift": shift_keep is not None}

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def reset(self) -> None:
        self.ctx.kv_cache_clear()
        self.n_past = 0

    def _shift(self) -> None:
        keep = self.shift_keep
        discard = (self.n_past - keep) // 2
        self.ctx.kv_cache_seq_rm(0, keep, keep + discard)
        self.ctx.kv_cache_seq_shift(0, keep + discard, self.n_past, -discard)
        self.n_past -= discard
        self.shifts += 1

    def feed(self, ids):
        import numpy as np

        ids = list(ids)
        for i in range(0, len(ids), self.n_batch):
            part = ids[i : i + self.n_batch]
            while self.n_past + len(part) > self.n_ctx:
                if self.shift_keep is None:
                    raise OutOfContext(f"n_ctx {self.n_ctx} full at {self.n_past} tokens")
                self._shift()
            self.batch.set_batch(part, self.n_past, False)
            self.ctx.decode(self.batch)
            self.n_past += len(part)
        return np.ctypeslib.as_array(self.ctx.get_logits_ith(-1), shape=(self.n_vocab,))

    def warmup(self, ids) -> None:
        self.reset()
        self.feed(ids[:32])
        self.feed(ids[32:33])
        self.reset()

    @property
    def position(self) -> int:
        return self.n_past


def make_engine(kind: str, spec: dict, purpose: str, reuse=None):
    """The engine set up for one purpose; `reuse` (an Ours) lends its loaded weights."""
    if kind == "ours":
        window = spec["window"] if purpose == "long" else None
        return Ours(spec["model"], window=window, sinks=spec["sinks"], model=getattr(reuse, "model", None))
    if purpose == "long":
        return LlamaCpp(spec["model"], spec["sinks"] + spec["window"], spec["threads"], shift_keep=spec["sinks"])
    if purpose == "turns":
        return LlamaCpp(spec["model"], spec["llama_ctx_turns"], spec["threads"])
    return LlamaCpp(spec["model"], spec["llama_ctx_speed"], spec["threads"])


# --- tasks (worker side) -------------------------------------------------------------------


def _argmax(logits) -> int:
    import numpy as np

    return int(np.argmax(logits))


def op_prefill(eng, ids, n: int) -> dict:
    eng.reset()
    la = loadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    eng.feed(ids[:n])
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"tokens": n, "seconds": dt, "tok_s": n / dt, "cpu_s": cpu, "load": la}


def op_decode(eng, ids, prompt: int, n: int) -> dict:
    eng.reset()
    tid = _argmax(eng.feed(ids[:prompt]))
    la = loadavg()
    out = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        tid = _argmax(eng.feed([tid]))
        out.append(tid)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"tokens": n, "seconds": dt, "tok_s": n / dt, "cpu_s": cpu, "load": la, "last_token": tid,
            "digest": ids_digest(out)}


def op_decode_spec(eng, ids, prompt: int, n: int) -> dict:
    """op_decode with prompt-lookup speculative decoding (ours only): the same n greedy tokens
    (the digest says whether they are), drafts copied from the prompt and the text so far,
    verified 8 rows per step by the engine's Decoder.verify/accept."""
    from engine.decoder import DRAFT_ROWS
    from engine.draft import PromptLookup, next_tokens
    from engine.sampler import GREEDY, Sampler

    eng.reset()
    dec, sampler = eng.dec, Sampler(GREEDY)
    drafter = PromptLookup(max_draft=DRAFT_ROWS - 1)
    drafter.extend(ids[:prompt])
    tid = _argmax(dec.feed(ids[:prompt]))
    drafter.extend([tid])
    la = loadavg()
    out = []
    t0, c0 = time.perf_counter(), time.process_time()
    while len(out) < n:
        # (a hybrid's decoder cannot verify drafts, the session decodes it plainly: so does this)
        new = next_tokens(dec, drafter if dec.can_verify else None, sampler, tid, (), n - len(out))
        out += new
        drafter.extend(new)
        tid = new[-1]
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"tokens": n, "seconds": dt, "tok_s": n / dt, "cpu_s": cpu, "load": la, "last_token": tid,
            "digest": ids_digest(out), **drafter.stats.to_dict()}


def task_long(eng, ids, spec: dict) -> dict:
    """One conversation to max(long_tokens) tokens; ms per token and RSS along the way."""
    import numpy as np

    total = max(spec["long_tokens"])
    prompt = ids[: spec["long_prompt"]]
    eng.warmup(ids)
    eng.reset()
    tid = _argmax(eng.feed(prompt))
    n_gen = max(0, total - len(prompt))
    ms = np.zeros(n_gen, np.float64)
    cpu_ms = np.zeros(n_gen, np.float64)  # process CPU time: steadier than wall time on a busy machine
    every = spec["rss_every"]
    rss_at, rss_val = [], []
    t_start = time.perf_counter()
    for i in range(n_gen):
        t0, c0 = time.perf_counter(), time.process_time()
        tid = _argmax(eng.feed([tid]))
        ms[i] = (time.perf_counter() - t0) * 1e3
        cpu_ms[i] = (time.process_time() - c0) * 1e3
        if (i + 1) % every == 0 or i + 1 == n_gen:
            rss_at.append(len(prompt) + i + 1)
            rss_val.append(rss_bytes())
    wall = time.perf_counter() - t_start
    pos = len(prompt) + np.arange(1, n_gen + 1)  # conversation length after each token
    span = max(8, min(256, n_gen // 8 or 1))
    checkpoints = []
    for c in spec["long_tokens"]:
        win = (pos > c - span) & (pos <= c)
        sel = ms[win]
        checkpoints.append({"tokens": c, "ms_per_token": float(np.median(sel)) if sel.size else None,
                            "mean_ms": float(sel.mean()) if sel.size else None, "n": int(sel.size),
                            "cpu_ms_per_token": float(np.median(cpu_ms[win])) if sel.size else None})
    first = checkpoints[0]["ms_per_token"]
    first_cpu = checkpoints[0]["cpu_ms_per_token"]
    for cp in checkpoints:
        cp["ratio"] = cp["ms_per_token"] / first if first and cp["ms_per_token"] else None
        cp["cpu_ratio"] = cp["cpu_ms_per_token"] / first_cpu if first_cpu and cp["cpu_ms_per_token"] else None
    # RSS at the first checkpoint (nearest sample at or after it) and at the end
    rss_arr = np.asarray(rss_val, np.float64)
    at = np.asarray(rss_at)
    k = int(np.searchsorted(at, spec["long_tokens"][0])) if at.size else 0
    k = min(k, max(at.size - 1, 0))
    rss_first = float(rss_arr[k]) if rss_arr.size else None
    rss_end = float(rss_arr[-1]) if rss_arr.size else None
    # Series for the plot: bins of `binw` tokens
    binw = max(1, min(256, n_gen // 200 or 1))
    series = {"tokens": [], "ms_median": [], "ms_mean": []}
    for s in range(0, n_gen, binw):
        chunk = ms[s : s + binw]
        series["tokens"].append(int(pos[min(s + binw, n_gen) - 1]))
        series["ms_median"].append(round(float(np.median(chunk)), 3))
        series["ms_mean"].append(round(float(chunk.mean()), 3))
    out = {
        "window": spec["window"], "sinks": spec["sinks"], "prompt_tokens": len(prompt),
        "generated": n_gen, "total_tokens": len(prompt) + n_gen, "wall_s": wall,
        "decode_tok_s": n_gen / wall if wall else None,
        "checkpoints": checkpoints, "ms_ratio_last": checkpoints[-1]["ratio"],
        "cpu_ms_ratio_last": checkpoints[-1]["cpu_ratio"],
        "rss_first_mb": rss_first / 1e6 if rss_first else None,
        "rss_end_mb": rss_end / 1e6 if rss_end else None,
        "rss_growth_mb": (rss_end - rss_first) / 1e6 if rss_first is not None else None,
        "series": series,
        "rss_series": {"tokens": [int(x) for x in rss_at], "rss_mb": round_list(rss_arr / 1e6, 2)},
    }
    if isinstance(eng, LlamaCpp):
        out["context_shifts"] = eng.shifts
    return out


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def task_turns_ours(eng: Ours, spec: dict) -> dict:
    from engine.events import Done, Token
    from engine.sampler import GREEDY
    from engine.session import ChatSession

    sampling = GREEDY.with_(max_tokens=spec["reply_tokens"], ignore_eos=True)
    session = ChatSession(eng.model, eng.plan, system=None, sampling=sampling)
    ttft, ttft_inner, prompt_tokens, decode_tok_s, rss = [], [], [], [], []
    for text in turn_texts(spec["turns"], spec["user_words"]):
        t0 = time.perf_counter()
        first = None
        done = None
        for ev in session.stream(text):
            if first is None and isinstance(ev, Token):
                first = time.perf_counter() - t0
            elif isinstance(ev, Done):
                done = ev
        ttft.append(first)
        ttft_inner.append(done.ttft_s if done else None)
        prompt_tokens.append(done.prompt_tokens if done else None)
        decode_tok_s.append(done.decode_tok_s if done else None)
        rss.append(rss_bytes() / 1e6)
    st = session.stats()
    return {
        "ttft_s": round_list(ttft, 5), "ttft_session_s": round_list(ttft_inner, 5),
        "prompt_tokens": prompt_tokens, "decode_tok_s": round_list(decode_tok_s, 2),
        "rss_mb": round_list(rss, 2), "tokens_seen": st.tokens_seen, "cache_tokens": st.cache_tokens,
        "out_of_context_at_turn": None,
    }


def task_turns_llamacpp(eng: LlamaCpp, spec: dict) -> dict:
    """The same conversation: render the GGUF's template over the whole conversation, feed only
    the text after what the context already holds (plus the reply's last token), context kept."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    md = eng.llm.metadata
    source = md.get("tokenizer.chat_template")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def _raise(msg):
        raise RuntimeError(msg)

    env.globals["raise_exception"] = _raise
    if source:
        template = env.from_string(source)
    else:
        template = env.from_string(
            "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
            " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
        )
    llm = eng.llm
    bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
    eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
    eng.reset()
    messages, rendered, pending = [], "", []
    ttft, prompt_tokens, decode_tok_s, rss = [], [], [], []
    out_of_ctx = None
    for t, text in enumerate(turn_texts(spec["turns"], spec["user_words"]), start=1):
        t0 = time.perf_counter()
        messages.append({"role": "user", "content": text})
        full = template.render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)
        delta = full[_common_prefix(full, rendered) :]
        ids = pending + eng.tokenize(delta, special=True)
        if eng.n_past + len(ids) + spec["reply_tokens"] > eng.n_ctx:
            out_of_ctx = t
            break
        tid = _argmax(eng.feed(ids))
        first = time.perf_counter() - t0
        reply = [tid]
        t1 = time.perf_counter()
        while len(reply) < spec["reply_tokens"]:
            tid = _argmax(eng.feed([tid]))
            reply.append(tid)
        dt = time.perf_counter() - t1
        pending = [reply[-1]]
        reply_text = llm.detokenize(reply).decode("utf-8", errors="replace")
        messages.append({"role": "assistant", "content": reply_text})
        rendered = full + reply_text
        ttft.append(first)
        prompt_tokens.append(len(ids))
        decode_tok_s.append((len(reply) - 1) / dt if dt > 0 and len(reply) > 1 else None)
        rss.append(rss_bytes() / 1e6)
    return {
        "ttft_s": round_list(ttft, 5), "prompt_tokens": prompt_tokens, "decode_tok_s": round_list(decode_tok_s, 2),
        "rss_mb": round_list(rss, 2), "tokens_seen": eng.n_past, "out_of_context_at_turn": out_of_ctx,
    }


def summarize_turns(res: dict, n_turns: int) -> dict:
    tt = res["ttft_s"]
    res["turns_done"] = len(tt)
    res["ttft_turn2_s"] = tt[1] if len(tt) >= 2 else None
    res["ttft_last_s"] = tt[-1] if len(tt) == n_turns else None
    res["last_turn"] = n_turns
    t2, tl = res["ttft_turn2_s"], res["ttft_last_s"]
    res["ttft_ratio"] = tl / t2 if t2 and tl else None
    # Less noisy: median of the last 5 turns over the median of turns 2-6
    if len(tt) == n_turns and n_turns >= 10:
        res["ttft_ratio_median5"] = statistics.median(tt[-5:]) / statistics.median(tt[1:6])
    return res


def run_task_in(kind: str, task: str, spec: dict, eng, ids) -> dict:
    if task == "long":
        res = task_long(eng, ids, spec)
    elif task == "turns":
        res = task_turns_ours(eng, spec) if kind == "ours" else task_turns_llamacpp(eng, spec)
        res = summarize_turns(res, spec["turns"])
    else:
        raise ValueError(f"unknown task {task!r}")
    res["load_s"], res["info"] = eng.load_s, eng.info
    return res


def worker_main(kind: str, task: str, spec: dict, proto) -> int:
    """One task in this process; prints {"ok": ..., "result": ...} on the protocol stream."""

    def send(obj):
        proto.write(PROTO_PREFIX + json.dumps(obj) + "\n")
        proto.flush()

    try:
        purpose = "long" if task == "long" else "turns" if task == "turns" else "speed"
        eng = make_engine(kind, spec, purpose)
        text = spec["text"]
        ids = eng.tokenize(text)
        need = max(*spec["prefill"], spec["decode_prompt"], spec["long_prompt"])
        if len(ids) < need:
            raise RuntimeError(f"the prompt text has {len(ids)} tokens, fewer than {need}")
        base = {"engine": kind, "task": task, "load_s": eng.load_s, "info": eng.info,
                "text_tokens": len(ids), "rss_after_load_mb": rss_bytes() / 1e6}
        if task == "serve":
            base["prompt_digests"] = {str(n): ids_digest(ids[:n]) for n in (*spec["prefill"], spec["decode_prompt"])}
            eng.warmup(ids)
            base["rss_after_warmup_mb"] = rss_bytes() / 1e6
            send({"ok": True, "ready": True, **base})
            for line in sys.stdin:
                cmd = json.loads(line)
                if cmd["op"] == "quit":
                    break
                if cmd["op"] == "prefill":
                    r = op_prefill(eng, ids, cmd["n"])
                elif cmd["op"] == "decode":
                    r = op_decode(eng, ids, cmd["prompt"], cmd["n"])
                elif cmd["op"] == "decode_spec":
                    r = op_decode_spec(eng, ids, cmd["prompt"], cmd["n"])
                elif cmd["op"] == "task":  # long / turns in this process (--quick: one process per engine)
                    r = run_task_in(kind, cmd["task"], spec, make_engine(kind, spec, cmd["task"], reuse=eng), ids)
                elif cmd["op"] == "stats":
                    r = {}
                else:
                    raise ValueError(f"unknown op {cmd['op']!r}")
                r["rss_mb"], r["peak_rss_mb"] = rss_bytes() / 1e6, peak_rss_bytes() / 1e6
                send({"ok": True, "result": r})
            return 0
        if task in ("long", "turns"):
            result = run_task_in(kind, task, spec, eng, ids)
        elif task == "prefill":
            eng.warmup(ids)
            result = {str(n): op_prefill(eng, ids, n) for n in spec["prefill"]}
        elif task == "decode":
            eng.warmup(ids)
            result = {str(n): op_decode(eng, ids, spec["decode_prompt"], n) for n in spec["decode"]}
        else:
            raise ValueError(f"unknown task {task!r}")
        result.update(base)
        result["peak_rss_mb"] = peak_rss_bytes() / 1e6
        result["rss_end_process_mb"] = rss_bytes() / 1e6
        send({"ok": True, "result": result})
        return 0
    except Exception as e:  # reported to the orchestrator, which prints it
        import traceback

        send({"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return 1


def _worker_entry(args) -> int:
    # Keep the protocol stream clean: whatever a library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    spec = json.loads(Path(args.spec[1:]).read_text() if args.spec.startswith("@") else args.spec)
    return worker_main(args.worker, args.task, spec, proto)


# --- orchestrator --------------------------------------------------------------------------


class WorkerError(RuntimeError):
    pass


class Worker:
    """A worker subprocess speaking JSON lines (stdout carries only protocol lines)."""

    def __init__(self, kind: str, task: str, spec_path: Path, log_dir: Path, env: dict):
        self.kind, self.task = kind, task
        self.log_path = log_dir / f"{kind}-{task}.log"
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen(
            [sys.executable, "-m", "bench.run", "--worker", kind, "--task", task, "--spec", f"@{spec_path}"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
        )

    def read(self) -> dict:
        while True:
            line = self.p.stdout.readline()
            if not line:
                self.p.wait()
                raise WorkerError(f"{self.kind} worker ({self.task}) exited with {self.p.returncode}: "
                                  f"{self.tail()}")
            if line.startswith(PROTO_PREFIX):
                msg = json.loads(line[len(PROTO_PREFIX):])
                if not msg.get("ok"):
                    raise WorkerError(f"{self.kind} worker ({self.task}): {msg.get('error')}\n{msg.get('traceback', '')}")
                return msg

    def call(self, cmd: dict) -> dict:
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        return self.read()["result"]

    def close(self) -> None:
        try:
            if self.p.poll() is None and self.task == "serve":
                self.p.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.p.stdin.flush()
            self.p.wait(timeout=60)
        except Exception:
            self.p.kill()
            self.p.wait()
        finally:
            self.log.close()

    def tail(self, n: int = 2000) -> str:
        try:
            self.log.flush()
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def llamacpp_available() -> tuple[bool, str]:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return False, "llama-cpp-python is not installed (pip install 'pinwheel-chat[bench]')"
    return True, ""


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _spread(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m if m else None


def run_speed(engines, spec, spec_path, log_dir, env, log, speed: bool = True, inline_tasks=()) -> dict:
    """Prefill and decode, both engines loaded at once in their own processes, interleaved;
    then `inline_tasks` (long, turns) in the same processes (--quick) instead of fresh ones."""
    workers, ready = {}, {}
    out = {e: {"prefill": {}, "decode": {}} if speed else {} for e in engines}
    if speed and "ours" in engines:
        out["ours"]["decode_spec"] = {}
    try:
        for e in engines:
            workers[e] = Worker(e, "serve", spec_path, log_dir, env)
            ready[e] = workers[e].read()
            log(f"  {e}: loaded in {ready[e]['load_s']:.1f}s, {ready[e]['text_tokens']} prompt-text tokens, "
                f"RSS {ready[e]['rss_after_warmup_mb']:.0f} MB")
        plan = [("prefill", n, spec["repeat"]) for n in spec["prefill"]] if speed else []
        plan += [("decode", n, spec["repeat"] if n <= 256 else spec["long_repeat"]) for n in spec["decode"]] if speed else []
        for op, n, reps in plan:
            runs = {e: [] for e in engines}
            spec_runs = []  # ours with speculative decoding, in the same repetitions
            for r in range(reps):
                order = engines if r % 2 == 0 else tuple(reversed(engines))
                for e in order:
                    cmd = {"op": op, "n": n, "prompt": spec["decode_prompt"]}
                    runs[e].append(workers[e].call(cmd))
                if op == "decode" and "ours" in engines:
                    spec_runs.append(workers["ours"].call({**cmd, "op": "decode_spec"}))
                log(f"  {op} {n}: " + ", ".join(f"{e} {runs[e][-1]['tok_s']:.1f} tok/s" for e in engines)
                    + (f", ours speculative {spec_runs[-1]['tok_s']:.1f} tok/s (acceptance "
                       f"{spec_runs[-1]['acceptance']:.0%})" if spec_runs else "")
                    + f"  (load avg {runs[engines[0]][-1]['load']})")
            if spec_runs:
                toks = [x["tok_s"] for x in spec_runs]
                d = out["ours"]["decode_spec"][str(n)] = {
                    "tokens": n, "tok_s_runs": round_list(toks, 2), "tok_s": _median(toks),
                    "cpu_ms_per_token": _median([x["cpu_s"] / n * 1e3 for x in spec_runs]),
                    "acceptance": spec_runs[-1]["acceptance"], "verifies": spec_runs[-1]["verifies"],
                    "drafted": spec_runs[-1]["drafted"], "accepted": spec_runs[-1]["accepted"],
                    # the same greedy tokens as our plain decode (float rounding may flip a near-tie)
                    "same_tokens_as_plain": all(a["digest"] == b["digest"] for a, b in zip(spec_runs, runs["ours"])),
                    "speedup_vs_plain": _median([a["tok_s"] / b["tok_s"] for a, b in zip(spec_runs, runs["ours"])]),
                }
                if "llamacpp" in engines:
                    d["vs_llamacpp"] = _median([a["tok_s"] / b["tok_s"] for a, b in zip(spec_runs, runs["llamacpp"])])
                    d["same_tokens_as_llamacpp"] = spec_runs[-1]["digest"] == runs["llamacpp"][-1]["digest"]
            for e in engines:
                toks = [x["tok_s"] for x in runs[e]]
                cpu_ms = [x["cpu_s"] / n * 1e3 for x in runs[e]]
                out[e][op][str(n)] = {
                    "tokens": n, "tok_s_runs": round_list(toks, 2), "tok_s": _median(toks), "tok_s_best": max(toks),
                    "spread": _spread(toks), "load_avg": [x["load"] for x in runs[e]],
                    "cpu_ms_per_token": _median(cpu_ms),
                    "cpu_utilisation": _median([x["cpu_s"] / x["seconds"] for x in runs[e]]),
                }
            if len(engines) == 2:
                pair = [a["tok_s"] / b["tok_s"] for a, b in zip(runs["ours"], runs["llamacpp"])]
                out["ours"][op][str(n)]["vs_llamacpp_runs"] = round_list(pair, 3)
                out["ours"][op][str(n)]["vs_llamacpp"] = _median(pair)
        for task in inline_tasks:
            for e in engines:
                t0 = time.perf_counter()
                out[e][task] = workers[e].call({"op": "task", "task": task})
                log(f"  {e} {task} done in {time.perf_counter() - t0:.0f}s")
        for e in engines:
            st = workers[e].call({"op": "stats"})
            out[e]["speed_process"] = {
                "load_s": ready[e]["load_s"], "info": ready[e]["info"], "text_tokens": ready[e]["text_tokens"],
                "prompt_digests": ready[e]["prompt_digests"], "rss_after_load_mb": ready[e]["rss_after_load_mb"],
                "rss_after_warmup_mb": ready[e]["rss_after_warmup_mb"], "rss_end_mb": st["rss_mb"],
                "peak_rss_mb": st["peak_rss_mb"],
            }
    finally:
        for w in workers.values():
            w.close()
    return out


def run_task(kind, task, spec_path, log_dir, env) -> dict:
    w = Worker(kind, task, spec_path, log_dir, env)
    try:
        return w.read()["result"]
    finally:
        w.close()


def build_spec(args, model: Path, s: dict) -> dict:
    need = max(*s["prefill"], s["decode_prompt"], s["long_prompt"])
    text, source = corpus_text()
    text = " ".join(text.split()[: int(need * 1.2) + 200])  # enough tokens, little tokenizing
    return {
        "model": str(model), "text": text, "text_source": source, "threads": args.threads,
        "prefill": list(s["prefill"]), "decode": list(s["decode"]), "decode_prompt": s["decode_prompt"],
        "repeat": s["repeat"], "long_repeat": s["long_repeat"], "long_tokens": list(s["long_tokens"]),
        "window": s["window"], "sinks": s["sinks"], "long_prompt": s["long_prompt"], "turns": s["turns"],
        "user_words": s["user_words"], "reply_tokens": s["reply_tokens"], "rss_every": s["rss_every"],
        "llama_ctx_speed": 0, "llama_ctx_turns": 0, "quick": bool(args.quick),
    }


def _parse_lengths(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(float(x)) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token counts, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals) or list(vals) != sorted(vals):
        raise argparse.ArgumentTypeError(f"expected increasing positive token counts, got {text!r}")
    return vals


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pinwheel bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", metavar="PATH", help="GGUF file (default: the default model, as `pinwheel chat`)")
    ap.add_argument("--out", metavar="DIR", default=str(DEFAULT_OUT), help="where the JSON and PNG go (default bench/results/)")
    ap.add_argument("--quick", action="store_true", help="tiny lengths: a smoke run in seconds")
    ap.add_argument("--no-llamacpp", action="store_true", help="measure our engine only")
    ap.add_argument("--long-tokens", type=_parse_lengths, metavar="N,N,...",
                    help=f"checkpoints of the long conversation (default {','.join(map(str, FULL['long_tokens']))}; "
                         f"the full run is {','.join(map(str, FULL_LONG))}, about an hour)")
    ap.add_argument("--full", action="store_true", help=f"long conversation to {FULL_LONG[-1]:,} tokens")
    ap.add_argument("--window", type=int, default=None, help="window of the long conversation (default 512)")
    ap.add_argument("--turns", type=int, default=None, help="turns of the scripted conversation (default 50)")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions of each speed measurement (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    ap.add_argument("--llama-ctx", type=int, default=None,
                    help="llama.cpp n_ctx for the turns conversation (default: the model's training context)")
    ap.add_argument("--tasks", default="speed,long,turns", help="which parts to run (default speed,long,turns)")
    ap.add_argument("--one-process", action="store_true",
                    help="run long and turns in the speed workers instead of fresh processes (--quick does); "
                         "peak RSS then covers every task")
    ap.add_argument("--ladder", action="store_true",
                    help="the size ladder: random-weight GGUFs at the shapes of bigger models (bench/ladder.py)")
    ap.add_argument("--rungs", default=None, metavar="NAME,...",
                    help="with --ladder: only these rungs (the 3-4B ones, llama-3.2-3b, qwen3-4b, phi-4-mini and "
                         "gemma-3-4b, run only when named)")
    ap.add_argument("--types", default=None, metavar="TYPE,...",
                    help="with --ladder: these file types (default Q4_0,Q8_0,Q4_K_M; also Q5_K_M, Q6_K, Q3_K_M, "
                         "IQ4_XS, made by llama.cpp's quantizer)")
    ap.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker:
        return _worker_entry(args)
    if args.ladder:
        from bench import ladder

        return ladder.run(args, sys.modules[__name__])
    return orchestrate(args)


def _gguf_context_length(model: Path) -> int | None:
    try:
        from engine.gguf_loader import config_from_metadata, metadata, read_gguf

        return config_from_metadata(metadata(read_gguf(model))).context_length
    except Exception:
        return None


def _capacity(model: Path) -> int | None:
    try:
        from engine.budget import plan_memory
        from engine.gguf_loader import config_from_metadata, metadata, read_gguf

        return plan_memory(config_from_metadata(metadata(read_gguf(model)))).capacity
    except Exception:
        return None


def orchestrate(args) -> int:
    t_all = time.perf_counter()
    from engine.model_locator import locate_model

    try:
        model = locate_model(args.model).resolve()
    except Exception as e:
        print(f"pinwheel bench: error: {e}", file=sys.stderr)
        return 2
    if not model.is_file():
        print(f"pinwheel bench: error: model file not found: {model}", file=sys.stderr)
        return 2
    s = dict(QUICK if args.quick else FULL)
    if args.full:
        s["long_tokens"] = FULL_LONG
    if args.long_tokens:
        s["long_tokens"] = args.long_tokens
    for k in ("window", "turns", "repeat"):
        if getattr(args, k) is not None:
            s[k] = getattr(args, k)
    if args.repeat is not None:
        s["long_repeat"] = max(1, min(args.repeat, s["long_repeat"]))
    if args.quick:
        args.one_process = True
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = set(tasks) - {"speed", "long", "turns"}
    if bad:
        print(f"pinwheel bench: error: unknown task(s) {', '.join(sorted(bad))}", file=sys.stderr)
        return 2
    engines = ("ours",)
    skipped = None
    if args.no_llamacpp:
        skipped = "--no-llamacpp"
    else:
        ok, why = llamacpp_available()
        if ok:
            engines = ("ours", "llamacpp")
        else:
            skipped = why
    spec = build_spec(args, model, s)
    ctx_train = _gguf_context_length(model) or 2048
    capacity = _capacity(model) or 0
    pad = lambda n: -(-n // 256) * 256  # noqa: E731
    spec["llama_ctx_speed"] = pad(max(capacity, max(s["prefill"]) + 8, s["decode_prompt"] + max(s["decode"]) + 8))
    spec["llama_ctx_turns"] = args.llama_ctx or ctx_train

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir.resolve() == DEFAULT_OUT.resolve() and not (out_dir / ".gitignore").exists():
        (out_dir / ".gitignore").write_text("*\n")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = Path(tempfile.mkdtemp(prefix="pinwheel-bench-"))
    spec_path = log_dir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    log(f"pinwheel bench: {model.name}; engines: {', '.join(engines)}"
        + (f" (llama.cpp skipped: {skipped})" if skipped else "") + f"; logs in {log_dir}")
    results = {e: {} for e in engines}
    errors = []
    inline = [t for t in ("long", "turns") if t in tasks] if args.one_process else []
    if "speed" in tasks or inline:
        log("speed (prefill, decode; engines interleaved)" + (" + " + ", ".join(inline) if inline else "") + ":")
        try:
            sp = run_speed(engines, spec, spec_path, log_dir, env, log, speed="speed" in tasks, inline_tasks=inline)
            for e in engines:
                results[e].update(sp[e])
        except WorkerError as e:
            errors.append(str(e))
            log(f"  failed: {e}")
    for task in ("long", "turns"):
        if task not in tasks or task in inline:
            continue
        for e in engines:
            log(f"{task}: {e} ...")
            t0 = time.perf_counter()
            try:
                r = run_task(e, task, spec_path, log_dir, env)
                results[e][task] = r
                log(f"  {e} {task} done in {time.perf_counter() - t0:.0f}s")
            except WorkerError as err:
                errors.append(str(err))
                log(f"  failed: {err}")
    report = assemble(results, engines, spec, s, model, skipped, errors, time.perf_counter() - t_all)
    json_path = out_dir / f"bench-{stamp}.json"
    png_path = out_dir / f"bench-{stamp}.png"
    try:
        plot(report, png_path)
        report["plot"] = str(png_path)
    except Exception as e:  # matplotlib missing: the numbers still count
        report["plot"] = None
        report["notes"].append(f"no plot: {type(e).__name__}: {e}")
    json_path.write_text(json.dumps(report, indent=1))
    print(format_table(report))
    print(f"\nJSON: {json_path}" + (f"\nPNG:  {png_path}" if report.get("plot") else ""))
    return 1 if errors else 0


# --- report --------------------------------------------------------------------------------


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def assemble(results, engines, spec, s, model, skipped, errors, wall) -> dict:
    ours = results.get("ours", {})
    llama = results.get("llamacpp", {}) if "llamacpp" in engines else {}
    # Peak RSS per engine: every process it ran in
    for e in engines:
        r = results[e]
        procs = {}
        if "speed_process" in r:
            procs["speed"] = r["speed_process"]["peak_rss_mb"]
        for t in ("long", "turns"):
            if t in r and "peak_rss_mb" in r[t]:
                procs[t] = r[t]["peak_rss_mb"]
        r["peak_rss_mb_by_process"] = procs
        r["peak_rss_mb"] = max(procs.values()) if procs else None
    ratios = {}
    if llama:
        for op in ("prefill", "decode"):
            for n in s[op]:
                ratios[f"{op}_{n}_vs_llamacpp"] = _get(ours, op, str(n), "vs_llamacpp")
        for n in s["decode"]:
            ratios[f"decode_spec_{n}_vs_llamacpp"] = _get(ours, "decode_spec", str(n), "vs_llamacpp")
        ratios["peak_rss_chat_vs_llamacpp"] = _ratio(_get(ours, "turns", "peak_rss_mb"), _get(llama, "turns", "peak_rss_mb"))
        ratios["peak_rss_long_vs_llamacpp"] = _ratio(_get(ours, "long", "peak_rss_mb"), _get(llama, "long", "peak_rss_mb"))
        ratios["steady_rss_long_vs_llamacpp"] = _ratio(_get(ours, "long", "rss_end_mb"), _get(llama, "long", "rss_end_mb"))
        ratios["long_decode_vs_llamacpp"] = _ratio(_get(ours, "long", "decode_tok_s"), _get(llama, "long", "decode_tok_s"))
        ratios["ttft_turn2_vs_llamacpp"] = _ratio(_get(ours, "turns", "ttft_turn2_s"), _get(llama, "turns", "ttft_turn2_s"))
    ratios["long_ms_last_vs_first"] = _get(ours, "long", "ms_ratio_last")
    ratios["ttft_last_vs_turn2"] = _get(ours, "turns", "ttft_ratio")
    targets = {}

    def target(name, value, limit, better="low"):
        targets[name] = {"value": value, "target": limit, "met": None if value is None else
                         (value <= limit if better == "low" else value >= limit)}

    if llama:
        target("decode_vs_llamacpp", _min_opt(ratios.get(f"decode_{n}_vs_llamacpp") for n in s["decode"]),
               TARGETS["decode_vs_llamacpp"], "high")
        target("decode_spec_vs_llamacpp", _min_opt(ratios.get(f"decode_spec_{n}_vs_llamacpp") for n in s["decode"]),
               TARGETS["decode_vs_llamacpp"], "high")
        target("prefill_vs_llamacpp", _min_opt(ratios.get(f"prefill_{n}_vs_llamacpp") for n in s["prefill"]),
               TARGETS["prefill_vs_llamacpp"], "high")
        target("peak_rss_vs_llamacpp", ratios.get("peak_rss_chat_vs_llamacpp"), TARGETS["peak_rss_vs_llamacpp"])
    target("long_ms_ratio", ratios["long_ms_last_vs_first"], TARGETS["long_ms_ratio"])
    target("ttft_ratio", ratios["ttft_last_vs_turn2"], TARGETS["ttft_ratio"])
    target("rss_growth_mb", _get(ours, "long", "rss_growth_mb"), TARGETS["rss_growth_mb"])
    notes = [
        "decode, speculative: ours with prompt-lookup drafts (python -m bench.speculative measures chat); "
        "a greedy continuation that falls into a loop is drafted almost perfectly, so this row is an "
        "upper end, and llama.cpp's column is its plain decode",
        f"our cache holds {_get(ours, 'speed_process', 'info', 'capacity')} tokens in the speed runs: a prompt "
        "longer than that streams through the window (the design), with constant cost per chunk",
        f"prefill runs in chunks of {_get(ours, 'speed_process', 'info', 'prefill_chunk')} tokens; the last chunk "
        "is padded, so short prompts pay for up to a chunk of padding",
        "speed numbers: medians over repetitions; the two engines alternate, repetition by repetition; "
        "vs_llamacpp = median of per-repetition ratios",
        "long: llama.cpp runs with n_ctx = sinks + window and llama-cli's context shift (keep the sinks, "
        "drop half of the rest); its ms/token includes the shifts",
    ]
    if s["long_tokens"][-1] < FULL_LONG[-1]:
        notes.append(f"long conversation to {s['long_tokens'][-1]:,} tokens only; the issue's full run is "
                     f"--long-tokens {','.join(map(str, FULL_LONG))} (or --full)")
    if llama:
        dg_o = _get(ours, "speed_process", "prompt_digests")
        dg_l = _get(llama, "speed_process", "prompt_digests")
        if dg_o and dg_l:
            same = dg_o == dg_l
            notes.append("prompt token ids identical in both engines" if same else
                         f"WARNING: prompt token ids differ between the engines: {dg_o} vs {dg_l}")
        ooc = _get(llama, "turns", "out_of_context_at_turn")
        if ooc:
            notes.append(f"llama.cpp ran out of context (n_ctx {spec['llama_ctx_turns']}) at turn {ooc} of the "
                         "scripted conversation")
    if skipped:
        notes.append(f"llama.cpp not measured: {skipped}")
    loads = [x for e in engines for op in ("prefill", "decode") for v in (_get(results[e], op) or {}).values()
             for x in v.get("load_avg", []) if x is not None]
    cpus = os.cpu_count() or 1
    if loads and max(loads) > cpus:
        notes.append(f"WARNING: the machine was busy (1-min load average up to {max(loads):.1f} on {cpus} CPUs): "
                     "wall-clock speeds are unreliable, llama.cpp's spinning threads suffer most; "
                     "compare cpu_ms_per_token and rerun on a quiet machine")
    import numpy

    return {
        "schema": 1,
        "meta": {
            "model": str(model), "model_bytes": model.stat().st_size, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "host": platform.node(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "numpy": numpy.__version__, "quick": spec["quick"],
            "engines": list(engines), "llamacpp_skipped": skipped, "wall_s": round(wall, 1),
            "load_avg_end": loadavg(), "text_source": spec["text_source"], "kernel": _kernel(),
        },
        "settings": {k: spec[k] for k in ("prefill", "decode", "decode_prompt", "repeat", "long_repeat", "long_tokens",
                                          "window", "sinks", "long_prompt", "turns", "user_words", "reply_tokens",
                                          "threads", "llama_ctx_speed", "llama_ctx_turns")},
        "engines": results,
        "ratios": ratios,
        "targets": targets,
        "notes": notes,
        "errors": errors,
    }


def _kernel() -> str:
    from engine import kernels

    return kernels.describe()


def _ratio(a, b):
    return a / b if a is not None and b else None


def _min_opt(xs):
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None


def _fmt(x, nd=1, unit=""):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}{unit}"
    return f"{x}{unit}"


def format_table(rep: dict) -> str:
    eng = rep["engines"]
    ours, llama = eng.get("ours", {}), eng.get("llamacpp")
    st = rep["settings"]
    rows = []

    def row(label, a, b=None, ratio=None, nd=1):
        rows.append((label, _fmt(a, nd), _fmt(b, nd) if llama is not None else "", _fmt(ratio, 2, "x") if llama is not None or ratio is not None else ""))

    for n in st["prefill"]:
        o, l_ = _get(ours, "prefill", str(n)), _get(llama, "prefill", str(n))
        row(f"prefill {n} tok (tok/s)", _get(o, "tok_s"), _get(l_, "tok_s"), _get(o, "vs_llamacpp"))
    for n in st["decode"]:
        o, l_ = _get(ours, "decode", str(n)), _get(llama, "decode", str(n))
        row(f"decode {n} tok (tok/s)", _get(o, "tok_s"), _get(l_, "tok_s"), _get(o, "vs_llamacpp"))
    for n in st["decode"][-1:]:
        o, l_ = _get(ours, "decode", str(n)), _get(llama, "decode", str(n))
        row(f"  CPU ms per token ({n})", _get(o, "cpu_ms_per_token"), _get(l_, "cpu_ms_per_token"),
            _ratio(_get(o, "cpu_ms_per_token"), _get(l_, "cpu_ms_per_token")))
    for n in st["decode"]:
        o, l_ = _get(ours, "decode_spec", str(n)), _get(llama, "decode", str(n))
        if o:
            row(f"decode {n}, speculative (tok/s)", _get(o, "tok_s"), _get(l_, "tok_s"), _get(o, "vs_llamacpp"))
            rows.append(("  drafts kept; tokens vs plain", f"{o['accepted']}/{o['drafted']}; "
                         + ("same" if o.get("same_tokens_as_plain") else "differ"), "", ""))
    lo, ll = _get(ours, "long"), _get(llama, "long")
    for i, c in enumerate(st["long_tokens"]):
        co = (_get(lo, "checkpoints") or [{}] * (i + 1))[i] if lo else {}
        cl = (_get(ll, "checkpoints") or [{}] * (i + 1))[i] if ll else {}
        row(f"ms/token at {c:,} (w{st['window']})", _get(co, "ms_per_token"), _get(cl, "ms_per_token"),
            _ratio(_get(co, "ms_per_token"), _get(cl, "ms_per_token")), nd=2)
    if lo:
        rows.append((f"  ratio {st['long_tokens'][-1]:,} / {st['long_tokens'][0]:,}", _fmt(lo.get("ms_ratio_last"), 3),
                     _fmt(_get(ll, "ms_ratio_last"), 3) if llama is not None else "", ""))
        rows.append(("  same, CPU ms/token", _fmt(lo.get("cpu_ms_ratio_last"), 3),
                     _fmt(_get(ll, "cpu_ms_ratio_last"), 3) if llama is not None else "", ""))
    to, tl = _get(ours, "turns"), _get(llama, "turns")
    row("TTFT turn 2 (ms)", _ms(_get(to, "ttft_turn2_s")), _ms(_get(tl, "ttft_turn2_s")),
        _ratio(_get(to, "ttft_turn2_s"), _get(tl, "ttft_turn2_s")))
    last = st["turns"]
    row(f"TTFT turn {last} (ms)", _ms(_get(to, "ttft_last_s")), _ms(_get(tl, "ttft_last_s")),
        _ratio(_get(to, "ttft_last_s"), _get(tl, "ttft_last_s")))
    if to:
        rows.append((f"  ratio turn {last} / turn 2", _fmt(to.get("ttft_ratio"), 2),
                     (_fmt(_get(tl, "ttft_ratio"), 2) if not _get(tl, "out_of_context_at_turn") else
                      f"out of ctx @{tl['out_of_context_at_turn']}") if llama is not None else "", ""))
    row("peak RSS, chat turns (MB)", _get(to, "peak_rss_mb"), _get(tl, "peak_rss_mb"),
        _ratio(_get(to, "peak_rss_mb"), _get(tl, "peak_rss_mb")), nd=0)
    row("peak RSS, long run (MB)", _get(lo, "peak_rss_mb"), _get(ll, "peak_rss_mb"),
        _ratio(_get(lo, "peak_rss_mb"), _get(ll, "peak_rss_mb")), nd=0)
    row("RSS end of long run (MB)", _get(lo, "rss_end_mb"), _get(ll, "rss_end_mb"),
        _ratio(_get(lo, "rss_end_mb"), _get(ll, "rss_end_mb")), nd=0)
    row(f"RSS growth {st['long_tokens'][0]:,}->end (MB)", _get(lo, "rss_growth_mb"), _get(ll, "rss_growth_mb"), None, nd=2)
    w0 = max(len(r[0]) for r in rows)
    head = f"{'':<{w0}}  {'ours':>10}  {'llama.cpp' if llama is not None else '':>10}  {'ratio' if llama is not None else '':>7}"
    lines = [f"kernel: {rep['meta'].get('kernel', '?')}", head, "-" * len(head)]
    lines += [f"{a:<{w0}}  {b:>10}  {c:>10}  {d:>7}" for a, b, c, d in rows]
    lines.append("")
    lines.append("targets (issue 7): " + ", ".join(
        f"{k} {_fmt(v['value'], 3)} ({'met' if v['met'] else 'NOT met' if v['met'] is not None else 'n/a'}; "
        f"{'>=' if k in ('decode_vs_llamacpp', 'decode_spec_vs_llamacpp', 'prefill_vs_llamacpp') else '<='} {v['target']})"
        for k, v in rep["targets"].items()))
    for n in rep["notes"]:
        lines.append(f"note: {n}")
    for e in rep["errors"]:
        lines.append(f"ERROR: {e.splitlines()[0]}")
    return "\n".join(lines)


def _ms(s):
    return None if s is None else s * 1e3


def plot(rep: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    colors = {"ours": "tab:blue", "llamacpp": "tab:orange"}
    labels = {"ours": "Pinwheel (JAX)", "llamacpp": "llama.cpp"}
    for e, r in rep["engines"].items():
        lg = r.get("long")
        if not lg:
            continue
        ser, rs = lg["series"], lg["rss_series"]
        ax1.plot(ser["tokens"], ser["ms_median"], color=colors.get(e), label=labels.get(e, e), lw=1)
        ax2.plot(rs["tokens"], rs["rss_mb"], color=colors.get(e), label=labels.get(e, e), lw=1.2)
    st = rep["settings"]
    ax1.set_ylabel("ms per decoded token\n(median per bin)")
    ax1.set_title(f"{Path(rep['meta']['model']).name}: one conversation, window {st['window']} + {st['sinks']} sinks")
    ax1.set_ylim(bottom=0)
    ax1.legend(loc="upper right")
    ax1.grid(alpha=0.3)
    ax2.set_ylabel("RSS (MB)")
    ax2.set_xlabel("tokens in the conversation")
    ax2.set_ylim(bottom=0)
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
