"""The model library: every GGUF chat model already on this machine, wherever another app put it,
with what it will take in memory in Pinwheel before a byte of its weights is read.

Discovery is read-only and in place (nothing is copied, moved or written): Pinwheel's own
models folder, the folders of the other local-LLM apps (engine.model_sources), and folders the
user adds. Each file is described from its header alone (engine.gguf_header: bounded, hostile
files become one unreadable row): name, family, parameters, quantization, trained context, and
the footprint = the weights as the engine will hold them (exact: gguf_loader.weight_bytes) + the
KV cache of the plan (exact: budget.plan_memory) + the runtime (measured, below). That figure
never grows during a chat, so it can be checked against what the machine has now.
"""
from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from .errors import ModelFileError, PinwheelError
from .gguf_header import ArrayInfo, HeaderError, read_header
from .model_sources import Found, jan_models, ollama_models, source_dirs

# What the process holds besides the weights and the KV cache, measured (RSS after loading,
# compiling and one short reply, minus weights and cache; tests/engine/test_library.py checks
# the total within 5% on the default model, 10% on a tiny test model): ~150 MB of JAX, XLA and
# Python, plus ~215 B per vocabulary token, plus ~95 MB for the window (Qt) in the app. The
# per-token part is the tokenizer: SentencePiece's or the tokenizers library's own tables
# (~180 B) and Pinwheel's compact texts, pieces and flags (~25 B); measured between Gemma-3-270M
# shapes with 49,152 and 262,144 tokens (231.0 and 276.5 MB, bench.big_vocab; 292.4 and 412.5
# MB, 564 B a token, before the tables were compacted). A tiny test model measures 141.9 MB and
# the default model 313.5 MB (153 MB of runtime); 196.0 and 365.5 MB before the steps were
# loaded whole from engine.compile_cache's store instead of traced and lowered at every start.
# Part of the runtime is jaxlib's code pages (the loader lets go of the ~97 MB that starting
# JAX leaves, engine.code_pages; what runs comes back), whose residency depends on the OS page
# cache: the main reason one start differs from another. Those are starts whose compiled steps
# come from the store: the first start of a model's shape compiles and holds ~85 MB more.
RUNTIME_BASE = 150_000_000
RUNTIME_PER_TOKEN = 215
WINDOW_RUNTIME = 95_000_000
TIGHT = 0.85  # above this share of the available memory the verdict is "tight"

# llama.cpp's split files (gguf-split): NAME-00001-of-00003.gguf
SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


@dataclass
class ModelEntry:
    path: str
    name: str
    source: str  # which app's folder it was found in ("pinwheel", "lmstudio", "ollama", ... or "folder")
    file_bytes: int
    arch: str | None = None
    supported: bool = False
    params: int | None = None
    quant: str | None = None
    context_length: int | None = None
    weight_bytes: int | None = None
    kv_bytes: int | None = None
    runtime_bytes: int | None = None
    total_bytes: int | None = None
    fits: str | None = None  # "fits" | "tight" | "no" | None (unknown: not runnable or unreadable)
    note: str = ""  # why it is not runnable, or what it is (a vision projector, a split part)
    parts: int = 1  # files of a split model
    extra: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        return d


def _quant(md: dict, tensors: dict) -> str | None:
    """The file's quantization as its maker named it (general.file_type: Q4_K_M, IQ4_XS, F16);
    without that key, the type most of the weight matrices are stored in. A mixed file's largest
    tensor is not its name: a Q4_K_M with a Q8_0 embedding would read "Q8_0"."""
    named = _file_type_name(md.get("general.file_type"))
    return named if named is not None else _largest_type(tensors)


def _file_type_name(value) -> str | None:
    """llama.cpp's file type number -> its name (gguf.LlamaFileType: MOSTLY_Q4_K_M -> Q4_K_M,
    ALL_F32 -> F32); None for a missing, odd or unknown value."""
    import gguf

    if not isinstance(value, int) or isinstance(value, bool):
        return None
    try:
        # GUESSED is a flag llama.cpp ORs in when it guessed the type itself
        name = gguf.LlamaFileType(value & ~gguf.LlamaFileType.GUESSED).name
    except ValueError:
        return None
    return name.split("_", 1)[1] if name.startswith(("MOSTLY_", "ALL_")) else None


def _largest_type(tensors: dict) -> str | None:
    """The type most of the weight matrices are stored in."""
    counts = Counter()
    for t, shape in tensors.values():
        if len(shape) == 2:
            counts[t] += math.prod(shape)
    return counts.most_common(1)[0][0] if counts else None


def _params(tensors: dict) -> int:
    return sum(math.prod(shape) for _, shape in tensors.values())


def runtime_bytes(vocab: int, window: bool = True) -> int:
    return RUNTIME_BASE + RUNTIME_PER_TOKEN * int(vocab) + (WINDOW_RUNTIME if window else 0)


def verdict(total: int, available: int) -> str:
    if total > available:
        return "no"
    return "tight" if total > TIGHT * available else "fits"


def describe(path: str | Path, source: str = "folder", *, kv_dtype: str = "int8", budget_bytes: int | None = None,
             window: int | None = None, sinks: int = 4, available: int | None = None, name: str | None = None,
             parts: list[Path] | None = None, app_window: bool = True) -> ModelEntry:
    """One row of the library, from the header alone; never raises for a bad file."""
    from .budget import plan_memory
    from .families import SUPPORTED_ARCHS
    from .gguf_loader import config_from_metadata, weight_bytes

    p = Path(path)
    files = parts or [p]
    try:
        size = sum(f.stat().st_size for f in files)
    except OSError:
        size = 0
    e = ModelEntry(str(p), name or _display_name(p), source, size, parts=len(files))
    try:
        h = read_header(p)
    except HeaderError as exc:
        e.note = f"unreadable: {exc}"
        return e
    md = h.metadata
    tensors = dict(h.tensors)
    for extra_part in files[1:]:  # a split model: the other parts' tensors count too
        try:
            tensors.update(read_header(extra_part).tensors)
        except HeaderError as exc:
            e.note = f"unreadable part {extra_part.name}: {exc}"
            return e
    arch = md.get("general.architecture")
    e.arch = arch if isinstance(arch, str) else None
    gname = md.get("general.name")
    if isinstance(gname, str) and gname.strip() and name is None:
        e.extra["general_name"] = gname.strip()
    e.params = _params(tensors) or None
    e.quant = _quant(md, tensors)
    if e.arch is not None:
        ctx = md.get(f"{e.arch}.context_length")
        e.context_length = int(ctx) if isinstance(ctx, int) and not isinstance(ctx, bool) else None
    kind = md.get("general.type")
    if e.arch == "clip" or kind == "mmproj" or "mmproj" in p.name.lower():
        e.note = "vision projector (not a chat model)"
        return e
    if kind == "adapter":
        e.note = "LoRA adapter (not a chat model)"
        return e
    if kind == "imatrix" or "imatrix" in p.name.lower():
        e.note = "importance matrix (not a chat model)"
        return e
    if len(files) > 1:
        e.note = f"split into {len(files)} files: Pinwheel loads single-file models (merge it with llama-gguf-split)"
        return e
    if e.arch not in SUPPORTED_ARCHS:
        e.note = f"architecture {e.arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})"
        return e
    tokens = md.get("tokenizer.ggml.tokens")
    vocab = len(tokens) if isinstance(tokens, ArrayInfo) else 0
    try:
        cfg = config_from_metadata(md, n_vocab_tokens=vocab or None)
        e.weight_bytes = weight_bytes(cfg, lambda n: tensors[n][0] if n in tensors else None)
        plan = plan_memory(cfg, kv_dtype, budget_bytes,  # None: the auto budget
                           window=window, sinks=sinks)
    except (PinwheelError, KeyError, ValueError, TypeError) as exc:
        e.note = " ".join(str(exc).split())[:200]
        return e
    e.supported = True
    e.kv_bytes = plan.kv_bytes
    e.runtime_bytes = runtime_bytes(vocab or cfg.vocab_size, window=app_window)
    e.total_bytes = e.weight_bytes + e.kv_bytes + e.runtime_bytes
    if available is None:
        import psutil

        available = psutil.virtual_memory().available
    e.fits = verdict(e.total_bytes, available)
    return e


def _display_name(p: Path) -> str:
    m = SPLIT.match(p.name)
    return m.group("prefix") if m else p.stem


# --- finding files ------------------------------------------------------------------------------


def _gguf_files(folder: Path, limit: int = 5000) -> Iterable[Path]:
    """*.gguf under folder (symlinks followed: the HF cache links into its blobs), bounded."""
    n = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.lower().endswith(".gguf"):
                yield Path(root) / f
                n += 1
                if n >= limit:
                    return


def _group_splits(paths: list[Path]) -> list[tuple[Path, tuple[Path, ...]]]:
    """Split parts as one model (its first part, all parts in order); other files alone."""
    groups: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    alone = []
    for p in paths:
        m = SPLIT.match(p.name)
        if m:
            groups.setdefault((p.parent, m.group("prefix")), []).append((int(m.group("no")), p))
        else:
            alone.append((p, (p,)))
    for parts in groups.values():
        parts.sort()
        alone.append((parts[0][1], tuple(p for _, p in parts)))
    return alone


def find_models(extra_dirs: Iterable[str | Path] = (), home: Path | None = None) -> list[Found]:
    """Every GGUF in the known apps' folders and in extra_dirs, each file once."""
    seen: set[Path] = set()
    found: list[Found] = []

    def add(f: Found) -> None:
        try:
            key = f.path.resolve()
        except OSError:
            key = f.path
        if key not in seen:
            seen.add(key)
            found.append(f)

    from .model_locator import default_model_path

    default = default_model_path()
    if default is not None and home is None:
        add(Found(default, "pinwheel", None))  # the model Pinwheel ships with
    for f in ollama_models(home):  # blobs named by their manifests
        add(f)
    dirs = [(source, d) for source, d in source_dirs(home)] + [("folder", Path(d).expanduser()) for d in extra_dirs]
    for source, d in dirs:
        try:
            if not d.is_dir():
                continue
            files = sorted(p for p in _gguf_files(d) if not p.name.startswith("incomplete-"))  # GPT4All's partials
        except OSError:  # a folder we may not read (another user's Ollama): skipped
            continue
        for first, parts in _group_splits(files):
            add(Found(first, source, _hub_name(first) if source == "huggingface" else None, parts))
        if source == "jan":  # files Jan imported in place, elsewhere on the disk
            for f in jan_models(d):
                add(f)
    return found


def _hub_name(p: Path) -> str | None:
    """The Hugging Face cache's models--org--repo/snapshots/<rev>/file.gguf as org/repo/file."""
    for parent in p.parents:
        if parent.name.startswith("models--"):
            repo = parent.name[len("models--"):].replace("--", "/")
            return f"{repo}/{_display_name(p)}"
    return None


def library(extra_dirs: Iterable[str | Path] = (), home: Path | None = None, **plan) -> list[ModelEntry]:
    """Every model found, described; the runnable ones first, then by name."""
    import psutil

    available = psutil.virtual_memory().available
    rows = [describe(f.path, f.source, name=f.name, parts=list(f.parts) or None, available=available, **plan)
            for f in find_models(extra_dirs, home)]
    rows.sort(key=lambda e: (not e.supported, e.name.lower()))
    return rows


def locate(explicit: str | os.PathLike | None = None) -> Path:
    """--model as the commands take it: a path, or a name `pinwheel models` lists; without one,
    model_locator's order ($PINWHEEL_MODEL, the models folder, the default model)."""
    from .model_locator import locate_model

    if explicit and not Path(explicit).expanduser().exists() and os.sep not in str(explicit) \
            and not str(explicit).lower().endswith(".gguf"):
        found = resolve(str(explicit))
        if found is not None:
            return found
        raise ModelFileError(f"no model file or library model named {explicit!r} (see `pinwheel models`)")
    return locate_model(explicit)


def resolve(name: str, extra_dirs: Iterable[str | Path] = ()) -> Path | None:
    """A library name (as `pinwheel models` lists it) -> its file; None when no model has it."""
    want = name.strip().lower()
    for f in find_models(extra_dirs):
        names = {(f.name or "").lower(), _display_name(f.path).lower(), f.path.name.lower()}
        if want in names:
            return f.path
    return None


__all__ = ["ModelEntry", "describe", "find_models", "library", "resolve", "verdict", "runtime_bytes"]
