"""Tokenizer built from GGUF metadata, id-compatible with llama.cpp.

Two vocabulary kinds are supported, chosen by ``tokenizer.ggml.model``:

* ``gpt2``  -- byte-level BPE. Encoding runs on a ``tokenizers.Tokenizer`` whose BPE model
  is built from ``tokenizer.ggml.tokens``/``merges`` and whose pre-tokenizer applies the
  regex list llama.cpp uses for the ``tokenizer.ggml.pre`` name (llama-vocab.cpp).
* ``llama`` -- SentencePiece BPE. Encoding runs on a ``sentencepiece`` processor loaded
  from a ``ModelProto`` assembled from tokens/scores/token types (byte fallback on,
  identity normalisation); the leading space ("add_space_prefix") is added here, the way
  llama.cpp adds it: before the first text fragment and after every special token.

* ``gemma4`` -- Gemma 4's BPE (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4): merges over whole
  UTF-8 characters (no byte-level alphabet), every space written as "▁" first, the text split
  only into runs of newlines and runs of anything else (merges cross words), characters the
  vocabulary lacks as ``<0xXX>`` byte tokens; a BOS always (llama.cpp forces it).

Special tokens (control, user-defined and unknown types) are split out of the text
first, exactly like llama.cpp's ``tokenizer_st_partition``: longest token text first,
control/unknown ones only when ``parse_special`` is true, user-defined ones always.

Decoding is done here from a per-token byte table (so it never depends on a library
decoder): normal BPE tokens are mapped back through the GPT-2 byte alphabet, SPM tokens
have "▁" turned back into spaces and ``<0xXX>`` pieces become raw bytes.
"""

from __future__ import annotations

import codecs
import functools
import itertools
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.errors import ModelFileError

__all__ = ["Tokenizer", "StreamDecoder", "PRE_TOKENIZER_REGEXES", "EOT_TEXTS"]

# llama.cpp token types (gguf TokenType)
TT_UNDEFINED, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = range(7)

# Token texts that end a turn (llama.cpp's end-of-generation list, minus FIM tokens).
EOT_TEXTS = frozenset({
    "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<end_of_turn>", "<|end|>",
    "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>", "<eos>", "<|return|>", "<|call|>", "<|calls|>", "<|flush|>",
    "<turn|>", "<|tool_response>", "[e~[",
})

# Texts llama.cpp recognises (end of turn, fill-in-the-middle) and forces to control type,
# which changes how they are split out of text; mirrored so ids stay equal.
_FORCE_CONTROL_TEXTS = EOT_TEXTS | frozenset({
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>",
    "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
    "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
})

# ---------------------------------------------------------------------------------------------
# Pre-tokenizer regexes, copied from llama.cpp src/llama-vocab.cpp (llm_tokenizer_bpe).
# Each entry is the list of regexes applied one after the other; every regex splits each
# piece into matches and the (unmatched) gaps between them. ("deepseek-llm" is left out:
# its regex is a long literal letter class that could not be copied reliably.)

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
           r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN35 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+"
           r"|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_TEKKEN = (r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
           r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
           r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_GPT4O = (r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
          r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
          r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
          r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
          r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_DEEPSEEK3 = [
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]

PRE_TOKENIZER_REGEXES: dict[str, list[str]] = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "gpt2": [_GPT2],
    "starcoder": [r"\p{N}", _GPT2],
    "llama3": [_LLAMA3],
    "qwen2": [_QWEN2],
    "qwen35": [_QWEN35],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, r"[0-9][0-9][0-9]"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    "deepseek-v3": _DEEPSEEK3,
    "poro": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
    "chatglm4": [_LLAMA3],
    "tekken": [_TEKKEN],
    "gpt4o": [_GPT4O],
    "superbpe": [r"\p{N}+", r"(?=(\d{3})+(?!\d))"],
    "seed-coder": [
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
        r"|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "bailingmoe": [
        r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
    ],
}

# tokenizer.ggml.pre name -> (regex family, ignore_merges, default add_bos)
_PRE_ALIASES: dict[str, tuple[str, bool, bool]] = {}
for _names, _family, _ignore, _bos in [
    (("default",), "default", False, False),
    (("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
      "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais",
      "trillion", "granite-docling", "exaone4"), "gpt2", False, False),
    (("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"),
     "starcoder", False, False),
    (("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      "jina-v5-nano"), "llama3", True, True),
    (("dbrx", "smaug-bpe"), "llama3", False, False),
    (("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan",
      "solar-open"), "qwen2", False, False),
    (("qwen35",), "qwen35", False, False),
    (("falcon",), "falcon", False, False),
    (("deepseek-coder",), "deepseek-coder", False, False),
    (("deepseek-v3", "hunyuan-dense", "joyai-llm"), "deepseek-v3", False, False),
    (("poro-chat", "bloom", "gpt3-finnish"), "poro", False, False),
    (("glm4", "chatglm-bpe"), "chatglm4", False, False),
    (("tekken",), "tekken", True, True),
    (("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), "gpt4o", False, False),
    (("superbpe",), "superbpe", False, False),
    (("seed-coder",), "seed-coder", False, False),
    (("bailingmoe", "bailingmoe2", "llada-moe"), "bailingmoe", False, False),
]:
    for _n in _names:
        _PRE_ALIASES[_n] = (_family, _ignore, _bos)


# ---------------------------------------------------------------------------------------------
# GPT-2 byte <-> unicode alphabet

@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@functools.lru_cache(maxsize=1)
def _byte_translation() -> dict[int, int]:
    return {ord(ch): b for ch, b in _byte_decoder().items()}


def _bytelevel_to_bytes(text: str) -> bytes:
    try:
        return text.translate(_byte_translation()).encode("latin-1")
    except UnicodeEncodeError:
        dec = _byte_decoder()
        return b"".join(bytes([dec[c]]) if c in dec else c.encode("utf-8") for c in text)


def _bytelevel_split(texts: list[str]) -> list[bytes]:
    """_bytelevel_to_bytes of each text, in one pass when every character is of the alphabet."""
    try:
        raw = "".join(texts).translate(_byte_translation()).encode("latin-1")
    except UnicodeEncodeError:  # a character outside the byte alphabet: its UTF-8, text by text
        return [_bytelevel_to_bytes(t) for t in texts]
    ends = list(itertools.accumulate(map(len, texts)))
    return [raw[a:b] for a, b in zip([0] + ends, ends)]


def _fail(msg: str) -> ModelFileError:
    return ModelFileError(msg)


def _get_list(md: Mapping[str, Any], key: str, kind: type | tuple[type, ...], *,
              required: bool, min_len: int = 0) -> list | None:
    val = md.get(key)
    if val is None:
        if required:
            raise _fail(f"the model file has no {key} (its tokenizer is incomplete)")
        return None
    if isinstance(val, (str, bytes)) or not isinstance(val, Sequence):
        raise _fail(f"{key} should be a list, found {type(val).__name__}")
    val = list(val)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # the exact types first (one pass in C: ~50 ms less per start on a 49k vocabulary and its
    # merges), the isinstance walk only for what that does not settle (subclasses, bad values)
    if val and not set(map(type, val)) <= set(kinds) and \
            not all(isinstance(x, kind) and not isinstance(x, bool) for x in val):
        bad = next(x for x in val if not isinstance(x, kind) or isinstance(x, bool))
        raise _fail(f"{key} should hold {getattr(kind, '__name__', 'numbers')} values,"
                    f" found {type(bad).__name__}")
    if len(val) < min_len:
        raise _fail(f"{key} has {len(val)} entries but the vocabulary has {min_len} tokens")
    return val


def _get_id(md: Mapping[str, Any], key: str, n: int, default: int | None) -> int | None:
    val = md.get(key)
    if val is None:
        return default if default is not None and 0 <= default < n else None
    if isinstance(val, bool) or not isinstance(val, int):
        raise _fail(f"{key} should be an integer token id, found {type(val).__name__}")
    if not 0 <= val < n:
        # llama.cpp ignores an out-of-range id and keeps its default
        return default if default is not None and 0 <= default < n else None
    return val


def _get_bool(md: Mapping[str, Any], key: str, default: bool) -> bool:
    val = md.get(key)
    if val is None:
        return default
    if not isinstance(val, (bool, int)):
        raise _fail(f"{key} should be a boolean, found {type(val).__name__}")
    return bool(val)


_SPECIAL, _SKIPPED = 1, 2  # Tokenizer._flags bits


class _Table:
    """Byte strings i = 0..n-1 held as one buffer and an offset table: ~12 B a token where a
    list of bytes or str objects takes 45-100 B each (the per-token runtime a 262k vocabulary
    pays twice: token texts and decoded pieces)."""

    __slots__ = ("_buf", "_off")

    def __init__(self, items: Sequence[bytes]) -> None:
        self._buf = b"".join(items)
        self._off = array("q", itertools.accumulate(map(len, items), initial=0))

    def __getitem__(self, i: int) -> bytes:
        return self._buf[self._off[i]:self._off[i + 1]]

    def __len__(self) -> int:
        return len(self._off) - 1


# ---------------------------------------------------------------------------------------------

class Tokenizer:
    """Encode/decode text with the vocabulary stored in a GGUF file (see module doc)."""

    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    eot_ids: frozenset[int]
    add_bos: bool
    bos_text: str
    eos_text: str
    model: str            # "gpt2", "llama" or "gemma4"
    pre: str              # pre-tokenizer name actually used ("" for llama)

    def __init__(self) -> None:  # use from_metadata()
        raise TypeError("use Tokenizer.from_metadata(metadata)")

    def has_special(self, text: str) -> bool:
        """Whether the vocabulary has `text` as one special token (split out of rendered text
        whole, as a chat template's markers must be)."""
        return bool(self._special_positions([text]))

    def _special_text(self, k: int) -> str:
        """The text of the special token at position k of the splitting order."""
        return self._special_table[k].decode("utf-8", "surrogatepass")

    def _special_positions(self, texts: Sequence[str]) -> list[int]:
        """The splitting-order positions of those of texts that are special tokens: each text's
        hash looked up among the specials' (vectorised), then the text itself compared."""
        hashes = self._special_hashes
        if not texts or not len(hashes):
            return []
        h = np.fromiter(map(hash, texts), np.int64, len(texts))
        at = np.searchsorted(hashes, h)
        out = []
        for i in np.flatnonzero(hashes[np.minimum(at, len(hashes) - 1)] == h):
            j = int(at[i])
            while j < len(hashes) and hashes[j] == h[i]:  # (more than one where two hashes collide)
                k = int(self._special_by_hash[j])
                if self._special_text(k) == texts[i]:
                    out.append(k)
                    break
                j += 1
        return out

    # -------------------------------------------------------------- construction
    @classmethod
    def from_metadata(cls, md: Mapping[str, Any]) -> Tokenizer:
        if not isinstance(md, Mapping):
            raise _fail("tokenizer metadata must be a mapping of GGUF keys")
        model = md.get("tokenizer.ggml.model")
        if model is None:
            raise _fail("the model file has no tokenizer (tokenizer.ggml.model is missing)")
        if not isinstance(model, str):
            raise _fail(f"tokenizer.ggml.model should be a string, found {type(model).__name__}")
        if model not in ("gpt2", "llama", "gemma4"):
            raise _fail(f"unsupported tokenizer '{model}': Pinwheel reads 'gpt2' (BPE), 'llama'"
                        f" (SentencePiece) and 'gemma4' vocabularies")
        self = object.__new__(cls)
        self.model = model
        tokens = _get_list(md, "tokenizer.ggml.tokens", str, required=True)
        assert tokens is not None
        if not tokens:
            raise _fail("tokenizer.ggml.tokens is empty")
        n = len(tokens)
        types = _get_list(md, "tokenizer.ggml.token_type", int, required=False, min_len=n)
        types = [int(t) for t in types[:n]] if types is not None else [TT_NORMAL] * n
        tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        self._tokens = _Table([t.encode("utf-8", "surrogatepass") for t in tokens])
        self.vocab_size = n

        # text -> id, first occurrence wins (duplicates are never produced by encode); only
        # while building: kept, it would be the largest table of all (~120 B a token)
        text_to_id = dict(zip(reversed(tokens), range(n - 1, -1, -1)))  # the last write is the first id

        is_llama = model == "llama"
        self.bos_id = _get_id(md, "tokenizer.ggml.bos_token_id", n, 1 if is_llama else None)
        self.eos_id = _get_id(md, "tokenizer.ggml.eos_token_id", n, 2 if is_llama else None)
        eot = _get_id(md, "tokenizer.ggml.eot_token_id", n, None)
        eom = _get_id(md, "tokenizer.ggml.eom_token_id", n, None)

        # attributes, with llama.cpp's fix-ups: end-of-generation texts are forced to control
        eot_ids = {text_to_id[t] for t in EOT_TEXTS if t in text_to_id}
        for extra in (self.eos_id, eot, eom):
            if extra is not None:
                eot_ids.add(extra)
        for t in _FORCE_CONTROL_TEXTS:
            i = text_to_id.get(t)
            if i is not None:
                types[i] = TT_CONTROL
        self.eot_ids = frozenset(eot_ids)

        # special tokens for the pre-split, longest text first
        name = str(md.get("general.name") or "").lower()
        phi3 = "phi-3" in name or "phi3" in name
        specials = [i for i, ty in enumerate(types)
                    if ty in (TT_CONTROL, TT_USER_DEFINED, TT_UNKNOWN) and text_to_id.get(tokens[i]) == i]
        specials.sort(key=lambda i: (-len(tokens[i].encode("utf-8")), i))
        rstrip = set()
        if phi3:
            rstrip = {i for i in specials if tokens[i] not in ("<unk>", "<s>", "<|endoftext|>")}
            if "</s>" in text_to_id:
                rstrip.add(text_to_id["</s>"])
        # Held compactly: a vocabulary padded with 199k control tokens (the 248k-token ladder
        # file) took 40 MB as (text, id, rstrip) tuples plus a text -> id dict, then ~20 as a
        # list and a set of the texts; as one table of their bytes and the sorted hashes of the
        # texts (Python's, fixed within a process), ~6.
        texts = [tokens[i] for i in specials]  # in splitting order, longest first
        self._special_order = array("i", specials)
        self._special_table = _Table([t.encode("utf-8", "surrogatepass") for t in texts])
        hashes = np.fromiter(map(hash, texts), np.int64, len(texts))
        by_hash = np.argsort(hashes, kind="stable")
        self._special_hashes, self._special_by_hash = hashes[by_hash], by_hash.astype(np.int32)
        self._special_lengths = sorted({len(t) for t in texts})
        self._special_firsts = frozenset(t[0] for t in texts if t)
        self._special_few = texts if len(texts) <= 256 else None  # tested one by one
        self._rstrip = frozenset(rstrip)
        self._special_user = [(tokens[i], i, i in rstrip) for i in specials if types[i] == TT_USER_DEFINED]
        # one byte a token, where sets of ids took ~60 B each (a padded vocabulary can have
        # 100k+ control tokens): bit 1 special, bit 2 also skipped by skip_special
        flags = bytearray(n)
        for i in specials:
            flags[i] = _SPECIAL | (_SKIPPED if types[i] in (TT_CONTROL, TT_UNKNOWN) else 0)
        self._flags = bytes(flags)

        self.bos_text = tokens[self.bos_id] if self.bos_id is not None else ""
        self.eos_text = tokens[self.eos_id] if self.eos_id is not None else ""

        if is_llama:
            self.pre = ""
            self.add_bos = _get_bool(md, "tokenizer.ggml.add_bos_token", True)
            self._add_space_prefix = _get_bool(md, "tokenizer.ggml.add_space_prefix", True)
            scores = _get_list(md, "tokenizer.ggml.scores", (int, float), required=False, min_len=n)
            self._build_spm(tokens, types, [float(s) for s in scores[:n]] if scores else [0.0] * n)
        elif model == "gemma4":
            self.pre = "gemma4"
            self.add_bos = True  # llama.cpp adds Gemma 4's BOS whatever the file says
            self._add_space_prefix = False
            merges = _get_list(md, "tokenizer.ggml.merges", str, required=True)
            self._build_bpe(tokens, types, text_to_id, merges, [r"[^\n]+|[\n]+"], False, raw_utf8=True)
        else:
            pre = md.get("tokenizer.ggml.pre")
            if pre is None or pre == "":
                pre = "default"
            if not isinstance(pre, str):
                raise _fail(f"tokenizer.ggml.pre should be a string, found {type(pre).__name__}")
            if pre not in _PRE_ALIASES:
                raise _fail(f"unsupported pre-tokenizer '{pre}' (tokenizer.ggml.pre)")
            family, ignore_merges, bos_default = _PRE_ALIASES[pre]
            self.pre = pre
            self.add_bos = _get_bool(md, "tokenizer.ggml.add_bos_token", bos_default)
            self._add_space_prefix = False
            merges = _get_list(md, "tokenizer.ggml.merges", str, required=True)
            assert merges is not None
            self._build_bpe(tokens, types, text_to_id, merges, PRE_TOKENIZER_REGEXES[family], ignore_merges)
        if self.add_bos and self.bos_id is None:
            self.add_bos = False
        return self

    def _build_bpe(self, tokens: list[str], types: list[int], vocab: dict[str, int], merges: list[str],
                   regexes: list[str], ignore_merges: bool, raw_utf8: bool = False) -> None:
        """raw_utf8: Gemma 4's variant (module doc): characters as they are, spaces as "▁",
        <0xXX> byte fallback; else GPT-2's byte-level BPE."""
        from tokenizers import Regex
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import models, normalizers, pre_tokenizers

        def bpe_model(pairs):
            return models.BPE(vocab=vocab, merges=pairs, ignore_merges=ignore_merges, fuse_unk=False,
                              byte_fallback=raw_utf8)

        # Every merge well formed and naming known tokens (the library refuses any other): built
        # as read. Else the ones that are, when they are nearly all (a few stray merges are
        # skipped, as llama.cpp does); the check costs ~50 ms per start, so it runs only then.
        pairs = [(m[:p], m[p + 1:]) for m in merges if (p := m.find(" ", 1)) > 0]
        # Special tokens are split out of the text before BPE runs, so BPE never makes one unless
        # a merge spells it: the others stay out of its vocabulary, whose two Rust tables cost
        # ~200 B a token (41 MB for a 248k vocabulary padded with 199k control tokens).
        made = {a + b for a, b in pairs}
        vocab = {t: i for t, i in vocab.items()
                 if types[i] not in (TT_CONTROL, TT_USER_DEFINED) or t in made or len(t) == 1}
        del made
        try:
            bpe = bpe_model(pairs) if len(pairs) == len(merges) else None
        except Exception:  # noqa: BLE001 - a merge names an unknown token
            bpe = None
        if bpe is None:
            pairs = [(a, b) for a, b in pairs if a in vocab and b in vocab and (a + b) in vocab]
            bad = len(merges) - len(pairs)
            if merges and bad > max(10, len(merges) // 100):
                raise _fail(f"tokenizer.ggml.merges does not match the tokens ({bad} of {len(merges)}"
                            f" merges name unknown tokens)")
        try:
            hf = HFTokenizer(bpe or bpe_model(pairs))
            splits = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
            if raw_utf8:
                hf.normalizer = normalizers.Replace(" ", "\u2581")
                hf.pre_tokenizer = pre_tokenizers.Sequence(splits)
            else:
                hf.pre_tokenizer = pre_tokenizers.Sequence(
                    splits + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        except Exception as e:  # noqa: BLE001 - any library failure is a bad vocabulary
            raise _fail(f"cannot build the BPE tokenizer from the model file: {e}") from e
        self._hf = hf
        self._sp = None
        # Normal tokens are byte-level text: one character a byte, so all of them are mapped back
        # in one translate and cut at their lengths (a call per token cost ~40 ms per start).
        normal = iter(_bytelevel_split([t for t, ty in zip(tokens, types) if ty == TT_NORMAL]) if not raw_utf8
                      else (t.replace("\u2581", " ").encode("utf-8", "surrogatepass")
                            for t, ty in zip(tokens, types) if ty == TT_NORMAL))
        pieces: list[bytes] = []
        for t, ty in zip(tokens, types):
            if ty == TT_NORMAL:
                pieces.append(next(normal))
            elif ty in (TT_CONTROL, TT_UNKNOWN, TT_USER_DEFINED):
                pieces.append(t.encode("utf-8"))
            elif ty == TT_BYTE and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                pieces.append(bytes([int(t[3:5], 16)]))
            else:  # unused / undefined: llama.cpp renders nothing
                pieces.append(b"")
        self._pieces = _Table(pieces)

    def _build_spm(self, tokens: list[str], types: list[int], scores: list[float]) -> None:
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2 as pb

        SP = pb.ModelProto.SentencePiece
        proto = pb.ModelProto()
        ts = proto.trainer_spec
        ts.model_type = pb.TrainerSpec.BPE
        ts.vocab_size = len(tokens)
        ts.bos_id = -1
        ts.eos_id = -1
        ts.pad_id = -1
        ns = proto.normalizer_spec
        ns.name = "identity"
        ns.add_dummy_prefix = False
        ns.remove_extra_whitespaces = False
        ns.escape_whitespaces = True
        ns.precompiled_charsmap = b""

        def is_byte_piece(t: str) -> bool:
            if len(t) != 6 or not t.startswith("<0x") or not t.endswith(">"):
                return False
            try:
                int(t[3:5], 16)
            except ValueError:
                return False
            return True

        # One protobuf call a piece (add's keywords, where setting three fields one by one cost a
        # third more), the common case (a normal piece, seen once) first, and the duplicate check
        # only where the texts are not all distinct. The same proto and pieces as before; at a
        # 262,144-token vocabulary (bench.big_vocab) this build took 0.36-0.39 s and takes
        # 0.27-0.28, of which the protobuf calls are ~0.13 and SentencePiece's load ~0.05.
        add = proto.pieces.add
        NORMAL, UNUSED = SP.NORMAL, SP.UNUSED
        first = None
        if len(set(tokens)) != len(tokens):  # duplicate texts: only a text's first id is reachable
            seen: set[str] = set()
            first = [not (t in seen or seen.add(t)) for t in tokens]
        unk_id = -1
        byte_pieces: set[str] = set()
        pieces: list[bytes] = []
        keep = pieces.append
        for i, (t, ty, sc) in enumerate(zip(tokens, types, scores)):
            if first is not None and not first[i]:  # duplicate text: keep the id, make the piece unreachable
                add(piece=f"\U0010fffddup{i}\U0010fffd", score=0.0, type=UNUSED)
                keep(b"")
                continue
            sc = sc if sc == sc else 0.0  # NaN -> 0
            if ty == TT_NORMAL:
                add(piece=t, score=sc, type=NORMAL)
                keep(t.replace("\u2581", " ").encode("utf-8"))
            elif ty == TT_BYTE and is_byte_piece(t):
                add(piece=t, score=sc, type=SP.BYTE)
                byte_pieces.add(t.upper().replace("0X", "0x"))
                keep(bytes([int(t[3:5], 16)]))
            elif ty == TT_UNKNOWN and unk_id < 0:
                add(piece=t, score=sc, type=SP.UNKNOWN)
                unk_id = i
                keep(t.encode("utf-8"))
            elif ty in (TT_CONTROL, TT_UNKNOWN, TT_BYTE):
                add(piece=t, score=sc, type=SP.CONTROL)
                keep(t.encode("utf-8"))
            elif ty == TT_USER_DEFINED:
                add(piece=t, score=sc, type=SP.USER_DEFINED)
                keep(t.encode("utf-8"))
            else:  # unused / undefined: still usable for merges in llama.cpp, rendered as nothing
                add(piece=t, score=sc, type=NORMAL)
                keep(b"")
        if unk_id < 0:
            # sentencepiece needs exactly one unknown piece; add one past the vocabulary
            p = proto.pieces.add()
            p.piece = "\U0010fffdunk\U0010fffd"
            p.type = SP.UNKNOWN
            p.score = 0.0
            unk_id = len(tokens)
        ts.unk_id = unk_id
        ts.byte_fallback = len(byte_pieces) == 256
        ts.vocab_size = len(proto.pieces)
        try:
            sp = spm.SentencePieceProcessor()
            sp.LoadFromSerializedProto(proto.SerializeToString())
        except Exception as e:  # noqa: BLE001
            raise _fail(f"cannot build the SentencePiece tokenizer from the model file: {e}") from e
        self._sp = sp
        self._hf = None
        self._pieces = _Table(pieces)

    # -------------------------------------------------------------- encoding
    def _specials_in(self, text: str) -> list[tuple[str, int, bool]]:
        """The special tokens that occur in text, in splitting order. A few are tested one by one;
        for many (padded vocabularies), each window of text of a special's length that starts
        with a special's first character is looked up by hash, where testing 199k texts took
        ~10 ms a short message."""
        order, rstrip = self._special_order, self._rstrip
        if self._special_few is not None:
            return [(t, order[k], order[k] in rstrip) for k, t in enumerate(self._special_few) if t in text]
        # only windows that start with a character some special starts with ("<" in most
        # vocabularies: a few places in ordinary text)
        firsts, lengths, end = self._special_firsts, self._special_lengths, len(text)
        starts = [i for i, c in enumerate(text) if c in firsts]
        windows = list({text[i : i + n] for i in starts for n in lengths if i + n <= end})
        return [(self._special_text(k), order[k], order[k] in rstrip) for k in sorted(self._special_positions(windows))]

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        specials = self._specials_in(text) if parse_special else self._special_user
        frags: list[str | int] = [text]
        for stext, sid, rstrip in specials:
            if not any(type(f) is str and stext in f for f in frags):
                continue
            out: list[str | int] = []
            for f in frags:
                if type(f) is not str or stext not in f:
                    out.append(f)
                    continue
                parts = f.split(stext)
                for k, part in enumerate(parts):
                    if k:
                        out.append(sid)
                        if rstrip:
                            part = part.lstrip(" \t\n\v\f\r")
                    if part:
                        out.append(part)
            frags = out
        return frags

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode() needs a str, not {type(text).__name__}")
        if type(text) is not str:      # str subclasses (Markup, numpy.str_) -> plain str
            text = str.__str__(text)
        # lone surrogates cannot be UTF-8 encoded; llama.cpp sees U+FFFD for invalid input
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
        out: list[int] = []
        if add_bos and self.bos_id is not None:
            out.append(self.bos_id)
        if not text:
            return out
        frags = self._partition(text, parse_special)
        if self._sp is not None:
            texts: list[str] = []
            prev_special = True
            for f in frags:
                if type(f) is str:
                    texts.append(" " + f if (self._add_space_prefix and prev_special) else f)
                    prev_special = False
                else:
                    prev_special = True
            encoded = iter(self._sp.encode(texts) if texts else [])
            n = self.vocab_size
            for f in frags:
                if type(f) is str:
                    out.extend(i for i in next(encoded) if i < n)
                else:
                    out.append(f)
        else:
            texts = [f for f in frags if type(f) is str]
            if len(texts) == 1:
                enc = [self._hf.encode(texts[0], add_special_tokens=False)]
            else:
                enc = self._hf.encode_batch(texts, add_special_tokens=False) if texts else []
            encoded = iter(enc)
            for f in frags:
                if type(f) is str:
                    out.extend(next(encoded).ids)
                else:
                    out.append(f)
        return out

    # -------------------------------------------------------------- decoding
    def _check_id(self, i: int) -> int:
        if isinstance(i, bool) or not isinstance(i, int):
            try:
                i = int(i)  # numpy integers
            except (TypeError, ValueError):
                raise TypeError(f"token ids must be integers, not {type(i).__name__}") from None
        if not 0 <= i < self.vocab_size:
            raise ValueError(f"token id {i} is outside the vocabulary (0..{self.vocab_size - 1})")
        return i

    def _piece(self, i: int, skip_special: bool, strip: bool) -> tuple[bytes, bool]:
        """Bytes of token i and the new 'strip the next leading space' state."""
        flags = self._flags[i]
        if flags & _SPECIAL:
            if skip_special and flags & _SKIPPED:
                return b"", self._add_space_prefix
            return self._pieces[i], self._add_space_prefix
        b = self._pieces[i]
        if strip:
            if not b:
                return b, True
            if b[:1] == b" ":
                b = b[1:]
        return b, False

    def decode(self, ids: Sequence[int], *, skip_special: bool = False) -> str:
        parts: list[bytes] = []
        strip = self._add_space_prefix
        for i in ids:
            b, strip = self._piece(self._check_id(i), skip_special, strip)
            if b:
                parts.append(b)
        return b"".join(parts).decode("utf-8", errors="replace")

    def token_text(self, i: int) -> str:
        return self._tokens[self._check_id(i)].decode("utf-8", "surrogatepass")

    def token_bytes(self, i: int) -> bytes:
        """The bytes token ``i`` stands for (special tokens: their text)."""
        return self._pieces[self._check_id(i)]

    def is_special(self, i: int) -> bool:
        """True for control, user-defined and unknown tokens."""
        return bool(self._flags[self._check_id(i)] & _SPECIAL)

    def stream_decoder(self, *, skip_special: bool = False) -> StreamDecoder:
        return StreamDecoder(self, skip_special=skip_special)

    def __repr__(self) -> str:
        kind = {"gpt2": f"gpt2/{self.pre}", "gemma4": "gemma4/bpe"}.get(self.model, "llama/spm")
        return f"<Tokenizer {kind} vocab={self.vocab_size} bos={self.bos_id} eos={self.eos_id}>"


class StreamDecoder:
    """Incremental decoder: ``push(id)`` returns the text that is complete so far.

    Bytes of a character split over several tokens (emoji, CJK via byte fallback) are held
    back until the character is complete; ``flush()`` returns whatever is left (invalid
    sequences become U+FFFD). Concatenating every push() and flush() gives decode(ids).
    """

    def __init__(self, tokenizer: Tokenizer, *, skip_special: bool = False) -> None:
        self._tok = tokenizer
        self._skip = skip_special
        self._strip = tokenizer._add_space_prefix
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        b, self._strip = self._tok._piece(self._tok._check_id(token_id), self._skip, self._strip)
        return self._dec.decode(b) if b else ""

    def flush(self) -> str:
        out = self._dec.decode(b"", final=True)
        self._dec.reset()
        return out
