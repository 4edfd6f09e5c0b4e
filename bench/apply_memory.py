"""RSS across Applies of new memory settings (issues 11 and 13): one session, a cycle of six
settings a user might try (three KV types, four windows), each applied, compiled and used for a
short reply; RSS after each, once the heap's free pages are handed back.

    python -m bench.apply_memory                 # the default model, 20 Applies
    python -m bench.apply_memory --model m.gguf --applies 13
"""
from __future__ import annotations

import argparse

SETTINGS = [("int8", None), ("bf16", None), ("f32", 512), ("int8", 256), ("bf16", 300), ("int8", None)]


def _rss_parts() -> tuple[float, float]:
    """(anonymous, file-backed) resident MB, from /proc (Linux); the file-backed part is mostly
    shared libraries' code, which compiling touches and loading from the compile cache does not."""
    parts = {}
    try:
        for line in open("/proc/self/status"):
            if line.startswith(("RssAnon:", "RssFile:")):
                key, value = line.split(":")
                parts[key] = int(value.split()[0]) * 1024 / 1e6
    except OSError:
        pass
    return parts.get("RssAnon", float("nan")), parts.get("RssFile", float("nan"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.apply_memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: the default model)")
    ap.add_argument("--applies", type=int, default=20)
    args = ap.parse_args(argv)
    from engine import NEEDLE_BUDGET, load_model, plan_memory
    from engine.model_locator import default_model_path
    from engine.session import ChatSession
    from engine.sysmem import rss_bytes, trim

    m = load_model(args.model or default_model_path())
    s = ChatSession(m, plan_memory(m.config, budget_bytes=NEEDLE_BUDGET))  # one budget for every setting
    rss = []
    for i in range(args.applies):
        kv, window = SETTINGS[i % len(SETTINGS)]
        s.apply_plan(plan_memory(m.config, kv, NEEDLE_BUDGET, window=window))
        s.warmup()
        list(s.send("hello", max_tokens=4))
        trim()
        rss.append(rss_bytes() / 1e6)
        anon, file = _rss_parts()
        print(f"Apply {i + 1:2d}: {kv:>4} KV, window {window or 'largest':>7}: RSS {rss[-1]:7.1f} MB "
              f"(anonymous {anon:6.1f}, file-backed {file:6.1f})", flush=True)
    print(f"RSS after Apply {len(rss)} minus after Apply 1: {rss[-1] - rss[0]:+.1f} MB "
          f"(largest {max(rss) - rss[0]:+.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
