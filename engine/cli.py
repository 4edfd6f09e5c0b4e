"""`pinwheel chat | plan | score`: the engine from a terminal (`pinwheel bench` is bench/run.py).

Every user error (bad model file, impossible setting) prints one line and exits 2; anything
unexpected prints one line and exits 1 (PINWHEEL_DEBUG=1 shows the traceback).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

from .budget import KV_DTYPES, MIB, short_window_warning
from .config import GLOBAL
from .errors import PinwheelError, SettingsError

BUDGET_HELP = ("KV cache budget in MiB, or 'auto' (default: a 4,096-token window, or the model's trained "
               "context if shorter, at most 10%% of RAM); 11.5 is Needle 2's budget")


def _budget_mib(text: str) -> float | None:
    """--kv-budget-mib: a size in MiB, or 'auto' (None)."""
    if text.strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in MiB or 'auto', not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive size in MiB (got {text})")
    return value


def _model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and memory")
    g.add_argument("--model", metavar="PATH|NAME",
                   help="GGUF file, or a name `pinwheel models` lists (default: $PINWHEEL_MODEL, the models "
                        "folder, SmolLM2-135M)")
    g.add_argument("--kv-dtype", choices=KV_DTYPES, default="int8", help="KV cache precision (default int8)")
    g.add_argument("--kv-budget-mib", type=_budget_mib, default=None, metavar="X", help=BUDGET_HELP)
    g.add_argument("--window", type=int, default=None, metavar="N", help="cap the sliding window (tokens)")
    g.add_argument("--sinks", default=None, metavar="N", help="pinned sink tokens (chat default: the system prompt)")


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__

    ap = argparse.ArgumentParser(prog="pinwheel", description="Local chat on a bounded KV cache.")
    ap.add_argument("--version", action="version", version=f"pinwheel {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser("chat", help="chat in the terminal (REPL, or one --prompt)")
    _model_options(c)
    c.add_argument("--system", metavar="TEXT", help="system prompt (pinned as sinks)")
    c.add_argument("--prompt", metavar="TEXT", help="answer this once and exit")
    c.add_argument("--max-tokens", type=int, default=512, metavar="N")
    c.add_argument("--ignore-eos", action="store_true", help="keep generating past end-of-turn")
    c.add_argument("--temperature", type=float, default=0.0, metavar="T",
                   help="0 (default) = greedy and reproducible; 0.2-0.7 for more varied replies")
    c.add_argument("--top-p", type=float, default=None, metavar="P")
    c.add_argument("--top-k", type=int, default=None, metavar="K")
    c.add_argument("--min-p", type=float, default=None, metavar="P")
    c.add_argument("--repeat-penalty", type=float, default=None, metavar="R")
    c.add_argument("--seed", type=int, default=None, metavar="S")
    c.add_argument("--no-speculative", dest="speculative", action="store_false",
                   help="decode one token per step (default: also verify drafts copied from the "
                        "conversation, several tokens per step; same output)")
    c.add_argument("--json", action="store_true", help="print one JSON object per reply")

    p = sub.add_parser("plan", help="show the memory plan for a model and setting")
    _model_options(p)
    p.add_argument("--json", action="store_true")

    s = sub.add_parser("score", help="perplexity of a text under a memory setting (StreamingLLM eval)")
    s.add_argument("file", metavar="FILE", help="UTF-8 text file ('-' for stdin)")
    _model_options(s)
    s.add_argument("--chunk", type=int, default=64, metavar="N", help="tokens per forward (default 64)")
    s.add_argument("--max-tokens", type=int, default=None, metavar="N", help="score only the first N tokens")
    s.add_argument("--json", action="store_true")

    m = sub.add_parser("models", help="the GGUF models on this machine (other apps' folders too), and what each "
                                      "needs in memory")
    m.add_argument("--json", action="store_true", help="one JSON object per model")
    m.add_argument("--dir", action="append", default=[], metavar="DIR", help="also look in DIR (repeatable)")
    m.add_argument("--kv-dtype", choices=KV_DTYPES, default="int8", help="KV cache precision of the plan (default int8)")
    m.add_argument("--kv-budget-mib", type=_budget_mib, default=None, metavar="X", help=BUDGET_HELP)
    m.add_argument("--window", type=int, default=None, metavar="N", help="cap the sliding window (tokens)")
    m.add_argument("--all", action="store_true", help="also list files Pinwheel cannot run")
    return ap


def _sinks_arg(value, default):
    if value is None or value == "auto":
        return default
    try:
        n = int(value)
    except ValueError:
        raise SettingsError(f"--sinks must be a number or 'auto' (got {value!r})") from None
    if n < 0:
        raise SettingsError(f"--sinks must be 0 or more (got {n})")
    return n


def _load(args):
    from .gguf_loader import load_model
    from .library import locate

    return load_model(locate(args.model))


def _budget_bytes(args) -> int | None:
    return None if args.kv_budget_mib is None else int(args.kv_budget_mib * MIB)


def _check_window(args) -> None:
    if args.window is not None and args.window <= 0:
        raise SettingsError(f"--window must be positive (got {args.window})")


def _plan(args, config, sinks):
    from .budget import plan_memory

    _check_window(args)
    return plan_memory(config, args.kv_dtype, _budget_bytes(args), window=args.window, sinks=sinks)


def _warn_short(plan, config) -> None:
    """A window too short to chat in is said on stderr as well as in the plan."""
    warning = short_window_warning(plan, config.context_length)
    if warning:
        print(f"pinwheel: note: {warning}", file=sys.stderr)


def cmd_plan(args) -> int:
    from .gguf_loader import check_header, config_from_metadata, metadata, read_gguf
    from .library import locate

    path = locate(args.model)
    check_header(path)
    cfg = config_from_metadata(metadata(read_gguf(path)))  # no weights needed for a plan
    plan = _plan(args, cfg, _sinks_arg(args.sinks, 4))
    _warn_short(plan, cfg)
    d = plan.to_dict()
    if args.json:
        print(json.dumps(d))
    else:
        print(f"model              {cfg.name or path.name} ({cfg.arch}, {cfg.n_layers} layers, kv_dim {cfg.kv_dim})")
        for k in ("kv_dtype", "budget_bytes", "budget_rule", "bytes_per_position", "slots", "sinks", "window",
                  "kv_bytes"):
            print(f"{k:<18} {d[k]:,}" if isinstance(d[k], int) else f"{k:<18} {d[k]}")
        if plan.local_layers:
            glob = cfg.cache_layers(GLOBAL)
            print(f"{'local_layers':<18} {plan.local_layers} of {cfg.n_layers} (sliding window {cfg.sliding_window}), "
                  f"{plan.local_slots:,} slots each; {glob} global layer{'s hold' if glob != 1 else ' holds'} {plan.capacity:,}")
        if plan.shared_kv_layers:
            print(f"{'shared_kv_layers':<18} {plan.shared_kv_layers}: read the cache of an earlier layer, hold none")
        if plan.recurrent_layers:
            print(f"{'recurrent_layers':<18} {plan.recurrent_layers}: a fixed state of {plan.state_bytes:,} bytes "
                  f"(in kv_bytes), whatever the chat's length")
    return 0


def _note_template(template) -> None:
    """A file without a working chat template chats in a built-in format: say which, and why."""
    if template.builtin is None:
        return
    print(f"pinwheel: note: using the {template.reason}.", file=sys.stderr)
    if template.load_error:
        print(f"pinwheel: note: the file's template: {template.load_error}", file=sys.stderr)
    else:
        print("pinwheel: note: a file without a chat template may be a base model: its replies may not "
              "follow a conversation.", file=sys.stderr)


def cmd_chat(args) -> int:
    from . import kernels
    from .events import Done, Token
    from .sampler import SamplingParams
    from .session import ChatSession

    model = _load(args)
    sampling = SamplingParams().with_(
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, min_p=args.min_p,
        repetition_penalty=args.repeat_penalty, seed=args.seed, max_tokens=args.max_tokens,
        ignore_eos=args.ignore_eos,
    )
    from .session import session_plan

    _check_window(args)
    sinks = _sinks_arg(args.sinks, "auto")
    plan = session_plan(model, args.kv_dtype, _budget_bytes(args), window=args.window, system=args.system,
                        sinks=sinks)
    session = ChatSession(model, plan, system=args.system, sampling=sampling, sinks=sinks,
                          speculative=args.speculative)
    _warn_short(session.plan, model.config)
    _note_template(model.chat_template)
    # Compile every step shape now, so the reported speeds are the model's, not XLA's compiler;
    # but not for one --prompt on steps an earlier run compiled: the warm-up would load every
    # shape from the compiled-step store (~55 ms on the default model) where one short prompt
    # needs two or three, each loaded at its first use (~15 ms).
    if args.prompt is None or not session.decoder.compiled_before():
        session.warmup()
    # JAX, the weights and the compiled steps are hundreds of thousands of long-lived objects:
    # out of the collector's sight (as the app does after a load), replies don't pause for full
    # passes over them, and neither does the exit (~0.1 s of a one-shot reply).
    gc.collect(1)
    gc.freeze()

    def answer(text: str) -> None:
        done = None
        for ev in session.stream(text):
            if isinstance(ev, Token) and not args.json:
                sys.stdout.write(ev.text)
                sys.stdout.flush()
            elif isinstance(ev, Done):
                done = ev
        st = session.stats()
        if args.json:
            print(json.dumps({
                "reply": done.reply, "finish_reason": done.reason,
                "prompt_tokens": done.prompt_tokens, "generated_tokens": done.generated_tokens,
                "prefill_tok_s": round(done.prefill_tok_s, 2), "decode_tok_s": round(done.decode_tok_s, 2),
                "ttft_s": round(done.ttft_s, 4), "kv_bytes": st.kv_bytes, "cache_tokens": st.cache_tokens,
                "evicted_tokens": st.evicted_tokens, "tokens_seen": st.tokens_seen,
                "sinks": st.sink_tokens, "window": st.window, "rss_bytes": st.rss_bytes,
                "weight_bytes": st.weight_bytes, "speculative": done.draft if args.speculative else None,
                "template": model.chat_template.origin, "budget_rule": session.plan.budget_rule,
                "kernel": kernels.status(),
            }), flush=True)
        else:
            sys.stdout.write("\n")
            sys.stdout.flush()

    if args.prompt is not None:
        answer(args.prompt)
        return 0
    interactive = sys.stdin.isatty()
    if interactive:
        print(f"Pinwheel — {model.name}; KV {session.plan.kv_bytes:,} B, window {session.plan.window}, "
              f"sinks {session.plan.sinks}. Empty line or Ctrl-D quits; /stats shows memory.", file=sys.stderr)
    while True:
        if interactive:
            print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line or (interactive and not line.strip()):
            return 0
        line = line.rstrip("\n")
        if line.strip() == "/stats":
            print(json.dumps(session.stats().to_dict()), file=sys.stderr)
            continue
        if line.strip():
            answer(line)


def cmd_score(args) -> int:
    import math

    from .scoring import score

    if args.chunk < 1:
        raise SettingsError(f"--chunk must be at least 1 (got {args.chunk})")
    text = sys.stdin.read() if args.file == "-" else _read_text(args.file)
    model = _load(args)
    ids = model.tokenizer.encode(text, add_bos=model.tokenizer.add_bos, parse_special=False)
    if args.max_tokens:
        ids = ids[: args.max_tokens]
    if len(ids) < 2:
        raise SettingsError("the text is too short to score (fewer than 2 tokens)")
    plan = _plan(args, model.config, _sinks_arg(args.sinks, 4))
    t0 = time.perf_counter()
    logp = score(model, ids, plan, chunk=args.chunk)
    nll = float(-logp.mean())
    out = {"tokens": len(ids), "nll": nll, "ppl": math.exp(nll), "window": plan.window, "sinks": plan.sinks,
           "kv_dtype": plan.kv_dtype, "kv_bytes": plan.kv_bytes, "seconds": round(time.perf_counter() - t0, 2)}
    print(json.dumps(out) if args.json else "\n".join(f"{k:<10} {v}" for k, v in out.items()))
    return 0


def _read_text(path: str) -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError(f"text file not found: {p}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{p} is not UTF-8 text") from None
    except OSError as e:
        raise SettingsError(f"cannot read {p}: {e.strerror}") from None


def _size(n: int | None) -> str:
    if n is None:
        return "—"
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _count(n: int | None) -> str:
    if not n:
        return "—"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


VERDICTS = {"fits": "fits", "tight": "tight", "no": "does not fit", None: ""}


def cmd_models(args) -> int:
    from .library import library

    rows = library(args.dir, kv_dtype=args.kv_dtype, budget_bytes=_budget_bytes(args), window=args.window)
    if not args.all and not args.json:
        rows = [r for r in rows if r.supported] + [r for r in rows if not r.supported and not r.note.startswith(
            ("vision projector", "LoRA adapter"))]
    if args.json:
        for r in rows:
            print(json.dumps(r.to_dict()))
        return 0
    if not rows:
        print("no GGUF models found (looked in Pinwheel's models folder and in LM Studio's, Jan's, GPT4All's, "
              "Ollama's, llama.cpp's and the Hugging Face cache; add folders with --dir)")
        return 0
    head = ("name", "family", "params", "quant", "file", "context", "from", "needs", "")
    table = [head] + [(r.name, r.arch or "?", _count(r.params), r.quant or "—", _size(r.file_bytes),
                       f"{r.context_length:,}" if r.context_length else "—", r.source, _size(r.total_bytes),
                       VERDICTS[r.fits] if r.supported else r.note) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head) - 1)]
    for row in table:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)) + "  " + str(row[-1]))
    print("\nneeds = the weights as Pinwheel holds them + the KV cache of this plan + the runtime; "
          "it does not grow during a chat")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"chat": cmd_chat, "plan": cmd_plan, "score": cmd_score, "models": cmd_models}[args.command](args)
    except PinwheelError as e:
        print(f"pinwheel: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pinwheel chat ... | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        print("pinwheel: error: out of memory (try a smaller --kv-budget-mib or model)", file=sys.stderr)
        return 1
    except Exception as e:  # never a traceback for a user; PINWHEEL_DEBUG=1 shows it
        if os.environ.get("PINWHEEL_DEBUG"):
            raise
        print(f"pinwheel: internal error: {type(e).__name__}: {e} (PINWHEEL_DEBUG=1 for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
