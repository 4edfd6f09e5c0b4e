"""Which model wrote a reply, and with what settings: what is recorded with it (in the store's
message meta) and how its label and tooltip read. Pure Python, no Qt."""
from __future__ import annotations

from pathlib import Path
from typing import Any

# the sampling fields a tooltip names, in this order, with their plain names
SAMPLING_NAMES = (("temperature", "temperature"), ("top_p", "top-p"), ("top_k", "top-k"), ("min_p", "min-p"),
                  ("repetition_penalty", "repetition penalty"), ("max_tokens", "max reply tokens"),
                  ("seed", "seed"))


def reply_meta(info: Any, sampling: dict, plan: Any) -> dict:
    """The meta a new reply records: {"model": {...}} from the ModelInfo in service, the
    sampling it is asked with and the memory plan in force; {} when no model is loaded."""
    if info is None:
        return {}
    model = {"name": Path(info.path).stem, "gguf_name": info.name, "file": info.path, "device": info.device,
             "sampling": {k: sampling[k] for k, _ in SAMPLING_NAMES if sampling.get(k) is not None}}
    if plan is not None:
        model["memory"] = {"kv_dtype": plan.kv_dtype, "window": plan.window, "sinks": plan.sinks,
                           "kv_bytes": plan.kv_bytes}
    return {"model": model}


def label_text(meta: dict) -> str:
    """The label shown on a reply: the model's file name ("" when not recorded)."""
    model = meta.get("model") if isinstance(meta, dict) else None
    return str(model.get("name", "")) if isinstance(model, dict) else ""


def label_tooltip(meta: dict) -> str:
    """Hover text: the model, then how it sampled and how much it could remember."""
    model = meta.get("model") if isinstance(meta, dict) else None
    if not isinstance(model, dict):
        return ""
    lines = [f"Written by {model.get('gguf_name') or model.get('name', '?')}",
             f"File: {model.get('file', '?')}"]
    if model.get("device"):
        lines[-1] += f" ({str(model['device']).upper()})"
    sampling = model.get("sampling") or {}
    said = [f"{plain} {sampling[k]}" for k, plain in SAMPLING_NAMES if k in sampling]
    if said:
        lines.append("Sampling: " + ", ".join(said))
    mem = model.get("memory") or {}
    if mem:
        kib = int(mem.get("kv_bytes") or 0) / 2**20
        lines.append(f"Memory: it saw the last {int(mem.get('window') or 0):,} tokens of the chat plus "
                     f"{int(mem.get('sinks') or 0):,} always kept ({mem.get('kv_dtype', '?')} cache, {kib:,.1f} MiB)")
    return "\n".join(lines)


__all__ = ["reply_meta", "label_text", "label_tooltip"]
