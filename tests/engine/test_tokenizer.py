"""engine.tokenizer: ids like llama.cpp, lossless decode, streaming, clear errors."""

from __future__ import annotations

import functools
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import ModelFileError
from engine.tokenizer import PRE_TOKENIZER_REGEXES, Tokenizer
from tests.fixtures.tiny_gguf import read_gguf_metadata

# Tricky strings for the id comparisons with llama.cpp.
CORPUS = [
    "",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\t",
    "Hello world",
    " Hello world",
    "Hello  world   ",
    "Hello, world! How are you?",
    "   leading and trailing   ",
    "tabs\tand\nnewlines\r\nand \n mixed \t\n spaces",
    "12345 67 8.90 1,000,000 3.14159 -42 +7 1e-5 0x1F",
    "I'm sure you're right; they've said we'll see, and he'd agree. It's the cat's.",
    "I'M SURE YOU'RE RIGHT'S 'S 'T",
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i)\n",
    "if (x > 0 && y < 10) { return x * y; } // comment",
    '{"name": "pinwheel", "list": [1, 2, 3], "nested": {"k": null}}',
    "<html><body><p class=\"x\">Hello</p></body></html>",
    "emoji 😀 🎉 👍🏽 🇫🇷 👨‍👩‍👧 ❤️ ✨",
    "😀😀😀",
    "日本語のテキストです。東京は大きな都市です。",
    "中文：你好，世界！",
    "한국어 문장입니다.",
    "Ελληνικά καλημέρα, Русский привет, Grüße, Ça va, naïve café",
    "e\u0301 combining accents a\u0308o\u0308",
    "مرحبا بالعالم",
    "שלום עולם",
    "mixed RTL: hello مرحبا world שלום 123",
    "non-breaking\u00a0space, ideographic\u3000space, zero\u200bwidth, nel\x85x",
    "control \x00 \x01 \x7f chars",
    "▁ lower one eighth block",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
    "text<|im_end|>text <|im_start|> text",
    "<|endoftext|><|endoftext|>",
    "<|im_end",
    "<s> hello </s> <unk>",
    "<|im_start|> leading space after special",
    "a" * 300,
    " ".join(["word"] * 200),
]


@functools.cache
def read_metadata(path: str) -> dict:
    return read_gguf_metadata(path)


@pytest.fixture(scope="module")
def bpe_md(tiny_bpe_gguf) -> dict:
    return read_metadata(str(tiny_bpe_gguf))


@pytest.fixture(scope="module")
def spm_md(tiny_spm_gguf) -> dict:
    return read_metadata(str(tiny_spm_gguf))


@pytest.fixture(scope="module")
def real_md(default_model_metadata) -> dict:
    return default_model_metadata


@pytest.fixture(scope="module")
def bpe(bpe_md) -> Tokenizer:
    return Tokenizer.from_metadata(bpe_md)


@pytest.fixture(scope="module")
def spm(spm_md) -> Tokenizer:
    return Tokenizer.from_metadata(spm_md)


@pytest.fixture(scope="module")
def real(real_md) -> Tokenizer:
    return Tokenizer.from_metadata(real_md)


# --------------------------------------------------------------------------- real model

def test_real_model_builds_fast_and_has_expected_specials(real_md):
    t0 = time.process_time()       # CPU time: robust on a shared, busy machine
    tok = Tokenizer.from_metadata(real_md)
    assert time.process_time() - t0 < 2.0
    assert tok.vocab_size == 49152
    assert (tok.bos_id, tok.eos_id) == (1, 2)
    assert tok.bos_text == "<|im_start|>" and tok.eos_text == "<|im_end|>"
    assert tok.add_bos is False
    assert tok.eot_ids == frozenset({0, 2})     # <|endoftext|>, <|im_end|>
    assert tok.model == "gpt2" and tok.pre == "smollm"


def test_real_model_known_ids(real):
    # ids checked against llama.cpp (llama_tokenize, add_special=False, parse_special=True)
    assert real.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n") == [
        1, 4093, 198, 6004, 2, 198, 1, 520, 9531, 198]
    assert real.encode("Hello world, 12345 how's it   going?\n\n  x 😀") == [
        19556, 905, 28, 216, 33, 34, 35, 36, 37, 638, 506, 357, 256, 2045, 47, 8866, 1792, 40303, 218]
    assert real.encode("hi", add_bos=True) == [1, 6004]


def test_real_model_special_text_without_parse_special(real):
    ids = real.encode("<|im_end|>", parse_special=False)
    assert 2 not in ids and len(ids) > 1
    assert real.decode(ids) == "<|im_end|>"


@pytest.mark.parametrize("text", CORPUS)
def test_real_model_round_trip(real, text):
    assert real.decode(real.encode(text)) == text


def test_real_model_streams_emoji_without_broken_utf8(real):
    text = "Tea 🍵 and 👨‍👩‍👧 with 日本語!"
    ids = real.encode(text)
    sd = real.stream_decoder()
    pieces = [sd.push(i) for i in ids] + [sd.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    assert "" in pieces   # some emoji span several tokens and were held back


def test_real_model_skip_special(real):
    ids = real.encode("<|im_start|>assistant\nHi there<|im_end|>")
    assert real.decode(ids, skip_special=True) == "assistant\nHi there"
    assert real.token_text(2) == "<|im_end|>"


# --------------------------------------------------------------------------- tiny vocabularies

def test_tiny_bpe_properties(bpe):
    assert bpe.model == "gpt2"
    assert 400 <= bpe.vocab_size <= 600
    assert (bpe.bos_id, bpe.eos_id, bpe.add_bos) == (1, 2, False)
    assert bpe.eot_ids == frozenset({0, 2})
    assert bpe.encode("<|im_start|>x<|im_end|>")[0] == 1
    assert bpe.encode("<|im_start|>x<|im_end|>")[-1] == 2


def test_tiny_spm_properties(spm):
    assert spm.model == "llama"
    assert (spm.bos_id, spm.eos_id, spm.add_bos) == (1, 2, True)
    assert spm.bos_text == "<s>" and spm.eos_text == "</s>"
    assert spm.eot_ids == frozenset({2, 4})        # </s>, <|im_end|>
    assert spm.encode("hi", add_bos=True)[0] == 1


def test_spm_leading_space_like_llama_cpp(spm):
    # llama.cpp prefixes a space to the first text fragment and to each one after a special token
    ids = spm.encode("the cat")
    assert spm.token_text(ids[0]).startswith("\u2581")
    ids = spm.encode("<|im_start|>the")
    assert ids[0] == 3 and spm.token_text(ids[1]).startswith("\u2581")
    # ... and decode removes it again
    assert spm.decode(ids) == "<|im_start|>the"
    assert spm.decode(spm.encode("  two spaces")) == "  two spaces"


def test_spm_byte_fallback(spm):
    ids = spm.encode("∑")          # not in the tiny vocabulary: three byte pieces
    assert [spm.token_text(i) for i in ids][-3:] == ["<0xE2>", "<0x88>", "<0x91>"]
    assert spm.decode(ids) == "∑"


@pytest.mark.parametrize("which", ["bpe", "spm"])
@pytest.mark.parametrize("text", CORPUS)
def test_tiny_round_trip_corpus(request, which, text):
    tok = request.getfixturevalue(which)
    if which == "spm":
        text = text.replace("\u2581", "_")   # '▁' is the SPM space marker, as in llama.cpp
    assert tok.decode(tok.encode(text)) == text


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
_mixed = st.lists(st.one_of(_text, st.sampled_from(
    ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", " ", "\n", "😀", "日本"])),
    max_size=6).map("".join)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_mixed)
def test_round_trip_random_bpe(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text
    assert bpe.decode(bpe.encode(text, parse_special=False)) == text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_mixed)
def test_round_trip_random_spm(spm, text):
    text = text.replace("\u2581", "_")
    assert spm.decode(spm.encode(text)) == text
    assert spm.decode(spm.encode(text, parse_special=False)) == text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_mixed)
def test_stream_decoder_matches_decode(bpe, spm, text):
    for tok in (bpe, spm):
        ids = tok.encode(text)
        sd = tok.stream_decoder()
        pieces = [sd.push(i) for i in ids]
        tail = sd.flush()
        assert "".join(pieces) + tail == tok.decode(ids)
        # nothing is emitted that is not in the final text: no replacement characters
        if "\ufffd" not in text:
            assert all("\ufffd" not in p for p in pieces)


def test_stream_decoder_invalid_bytes_become_replacement(bpe):
    # a lone UTF-8 lead byte (the first token of a split emoji) followed by plain text
    ids = bpe.encode("😀")
    assert len(ids) > 1
    sd = bpe.stream_decoder()
    out = sd.push(ids[0]) + sd.push(bpe.encode("a")[0]) + sd.flush()
    assert out == "\ufffda"


def test_skip_special_tiny(bpe, spm):
    assert bpe.decode(bpe.encode("<|im_start|>hi<|im_end|>"), skip_special=True) == "hi"
    assert spm.decode(spm.encode("<s>hi</s>"), skip_special=True) == "hi"


def test_parse_special_false_keeps_text(bpe, spm):
    for tok, marker, sid in ((bpe, "<|im_end|>", 2), (spm, "</s>", 2)):
        assert sid in tok.encode(f"a{marker}b")
        assert sid not in tok.encode(f"a{marker}b", parse_special=False)


def test_many_specials_split_as_testing_each_in_turn(bpe_md):
    """A vocabulary padded with hundreds of control tokens (overlapping texts of many lengths)
    is split exactly as testing every special in turn, longest first (llama.cpp's order)."""
    rng = random.Random(5)
    extra = sorted({"<" + "".join(rng.choice("ab|") for _ in range(rng.randint(1, 9))) + ">" for _ in range(900)})
    md = dict(bpe_md)
    md["tokenizer.ggml.tokens"] = list(bpe_md["tokenizer.ggml.tokens"]) + extra
    types = list(bpe_md.get("tokenizer.ggml.token_type") or [1] * len(bpe_md["tokenizer.ggml.tokens"]))
    md["tokenizer.ggml.token_type"] = types + [3] * len(extra)
    tok = Tokenizer.from_metadata(md)
    assert tok._special_few is None  # the windowed (hashed) lookup, not the short list

    def each_in_turn(text):
        order = sorted((i for i, t in enumerate(md["tokenizer.ggml.tokens"]) if tok.has_special(t)),
                       key=lambda i: (-len(md["tokenizer.ggml.tokens"][i].encode()), i))
        frags = [text]
        for i in order:
            s = md["tokenizer.ggml.tokens"][i]
            out = []
            for f in frags:
                if type(f) is not str or s not in f:
                    out.append(f)
                    continue
                for k, part in enumerate(f.split(s)):
                    out += ([i] if k else []) + ([part] if part else [])
            frags = out
        return frags

    for _ in range(200):
        text = "".join(rng.choice(["x", " ", "<", ">", "a", "b", "|", "<|im_end|>", rng.choice(extra)])
                       for _ in range(rng.randint(0, 40)))
        assert tok._partition(text, True) == each_in_turn(text), text


def test_decode_rejects_bad_ids(bpe):
    with pytest.raises(ValueError):
        bpe.decode([bpe.vocab_size])
    with pytest.raises(ValueError):
        bpe.token_text(-1)
    with pytest.raises(TypeError):
        bpe.encode(b"bytes")   # type: ignore[arg-type]


def test_encode_accepts_str_subclasses(bpe):
    from markupsafe import Markup

    assert bpe.encode(Markup("<|im_end|>hi")) == bpe.encode("<|im_end|>hi")


def test_decode_accepts_numpy_ints(bpe):
    np = pytest.importorskip("numpy")
    ids = bpe.encode("hello")
    assert bpe.decode(np.array(ids, dtype=np.int32)) == "hello"


# --------------------------------------------------------------------------- special tokens

def _with_extra_tokens(md: dict, extra: list[tuple[str, int]]) -> dict:
    md = dict(md)
    md["tokenizer.ggml.tokens"] = list(md["tokenizer.ggml.tokens"]) + [t for t, _ in extra]
    md["tokenizer.ggml.token_type"] = list(md["tokenizer.ggml.token_type"]) + [ty for _, ty in extra]
    if "tokenizer.ggml.scores" in md:
        md["tokenizer.ggml.scores"] = list(md["tokenizer.ggml.scores"]) + [0.0] * len(extra)
    return md


def test_longest_special_first_like_llama_cpp(bpe_md):
    tok = Tokenizer.from_metadata(_with_extra_tokens(bpe_md, [("<ab", 3), ("bcd>", 3), ("<abcd", 3)]))
    n = len(bpe_md["tokenizer.ggml.tokens"])
    ab, bcd, abcd = n, n + 1, n + 2
    # llama.cpp splits on the longest special text first, wherever it is
    assert tok.encode("<abcd>") == [abcd] + tok.encode(">")
    ids = tok.encode("x<ab bcd>")
    assert ab in ids and bcd in ids


def test_user_defined_tokens_always_split(bpe_md, spm_md):
    for md in (bpe_md, spm_md):
        tok = Tokenizer.from_metadata(_with_extra_tokens(md, [("<tool>", 4), ("<ctl>", 3)]))
        n = len(md["tokenizer.ggml.tokens"])
        assert n in tok.encode("a<tool>b", parse_special=False)
        assert n + 1 not in tok.encode("a<ctl>b", parse_special=False)
        assert n + 1 in tok.encode("a<ctl>b")
        assert tok.decode(tok.encode("a<tool>b<ctl>c")) == "a<tool>b<ctl>c"


def test_eot_ids_from_texts_and_keys(bpe_md):
    md = _with_extra_tokens(bpe_md, [("<|eot_id|>", 1), ("<end_of_turn>", 3), ("<|custom_end|>", 3)])
    n = len(bpe_md["tokenizer.ggml.tokens"])
    md["tokenizer.ggml.eot_token_id"] = n + 2
    tok = Tokenizer.from_metadata(md)
    assert {0, 2, n, n + 1, n + 2} <= tok.eot_ids
    # an end-of-turn text stored as a normal token is still treated as special (llama.cpp does)
    assert tok.encode("<|eot_id|>") == [n]


def test_missing_special_ids(bpe_md):
    md = dict(bpe_md)
    for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token"):
        md.pop(k)
    tok = Tokenizer.from_metadata(md)
    assert tok.bos_id is None and tok.eos_id is None and tok.add_bos is False
    assert tok.bos_text == "" and tok.eos_text == ""
    assert tok.encode("x", add_bos=True) == tok.encode("x")
    assert tok.eot_ids == frozenset({0, 2})       # found by text


@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2", "default", "gpt-2", "tekken", "gpt-4o",
                                 "deepseek-v3", "falcon", "starcoder", "chatglm-bpe", None])
def test_pre_tokenizers_build_and_round_trip(bpe_md, pre):
    md = dict(bpe_md)
    if pre is None:
        md.pop("tokenizer.ggml.pre")
    else:
        md["tokenizer.ggml.pre"] = pre
    tok = Tokenizer.from_metadata(md)
    for text in CORPUS[:25]:
        assert tok.decode(tok.encode(text)) == text


def test_every_regex_compiles():
    from tokenizers import Regex

    for family, regexes in PRE_TOKENIZER_REGEXES.items():
        for r in regexes:
            Regex(r)


# --------------------------------------------------------------------------- malformed metadata

def _broken(md: dict, **changes) -> dict:
    md = dict(md)
    for k, v in changes.items():
        key = "tokenizer.ggml." + k
        if v is _DROP:
            md.pop(key, None)
        else:
            md[key] = v
    return md


_DROP = object()


@pytest.mark.parametrize("changes, words", [
    (dict(model=_DROP), "tokenizer.ggml.model"),
    (dict(model="bert"), "unsupported tokenizer 'bert'"),
    (dict(model=3), "should be a string"),
    (dict(tokens=_DROP), "tokenizer.ggml.tokens"),
    (dict(tokens=[]), "empty"),
    (dict(tokens="abc"), "should be a list"),
    (dict(tokens=[1, 2, 3]), "should hold str"),
    (dict(token_type=[1, 1]), "entries but the vocabulary has"),
    (dict(token_type=["x"] * 600), "should hold int"),
    (dict(merges=_DROP), "tokenizer.ggml.merges"),
    (dict(merges=["zz qq"] * 100), "merges does not match"),
    (dict(pre="no-such-pre"), "unsupported pre-tokenizer"),
    (dict(bos_token_id="1"), "integer token id"),
    (dict(add_bos_token="yes"), "boolean"),
])
def test_malformed_bpe_metadata(bpe_md, changes, words):
    with pytest.raises(ModelFileError) as ei:
        Tokenizer.from_metadata(_broken(bpe_md, **changes))
    msg = str(ei.value)
    assert words in msg and "\n" not in msg


@pytest.mark.parametrize("changes, words", [
    (dict(scores=[0.0] * 3), "entries but the vocabulary has"),
    (dict(scores=["a"] * 600), "should hold"),
])
def test_malformed_spm_metadata(spm_md, changes, words):
    with pytest.raises(ModelFileError) as ei:
        Tokenizer.from_metadata(_broken(spm_md, **changes))
    assert words in str(ei.value)


def test_metadata_must_be_mapping():
    with pytest.raises(ModelFileError):
        Tokenizer.from_metadata([1, 2])   # type: ignore[arg-type]


def test_spm_without_scores_or_unk_still_works(spm_md):
    md = dict(spm_md)
    md.pop("tokenizer.ggml.scores")
    md["tokenizer.ggml.token_type"] = [1 if t == 2 else t for t in md["tokenizer.ggml.token_type"]]
    tok = Tokenizer.from_metadata(md)
    assert tok.decode(tok.encode("hello world 😀")) == "hello world 😀"


def test_duplicate_and_empty_tokens_are_tolerated(bpe_md):
    md = _with_extra_tokens(bpe_md, [("the", 1), ("", 1)])
    tok = Tokenizer.from_metadata(md)
    n = len(bpe_md["tokenizer.ggml.tokens"])
    assert n not in tok.encode("the the")
    assert tok.token_text(n + 1) == f"[EMPTY_{n + 1}]"


def test_spm_duplicate_texts_and_nan_scores_change_nothing_reachable(spm_md):
    """The SentencePiece build keeps a repeated text's first id (the later ones unreachable,
    rendered as nothing) and reads a NaN score as 0: with a normal piece repeated, a NaN score
    on another, a repeated control text and a stray unused piece, every text encodes as before."""
    tokens = list(spm_md["tokenizer.ggml.tokens"])
    types = list(spm_md["tokenizer.ggml.token_type"])
    n = len(tokens)
    normal = next(i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 1 and len(t) > 1)
    control = next(i for i, ty in enumerate(types) if ty == 3)
    md = _with_extra_tokens(spm_md, [(tokens[normal], 1), (tokens[control], 3), ("\u2581stray", 5)])
    scores = list(md["tokenizer.ggml.scores"])
    other = next(i for i, ty in enumerate(types) if ty == 1 and i != normal)
    scores[other] = float("nan")
    md["tokenizer.ggml.scores"] = scores
    base_md = dict(spm_md)
    base_md["tokenizer.ggml.scores"] = [0.0 if s != s else s for s in scores[:n]]  # (NaN read as 0)
    base, tok = Tokenizer.from_metadata(base_md), Tokenizer.from_metadata(md)
    text = "hello world " + tokens[normal].replace("\u2581", " ") + " 😀"
    ids = tok.encode(text)
    assert ids == base.encode(text) and n not in ids and n + 1 not in ids
    assert tok.decode(ids) == base.decode(ids)
    assert tok.decode([n, n + 2]) == ""  # the repeated and the unused piece render as nothing
    assert tok._sp.GetScore(other) == 0.0 and tok._sp.GetScore(normal) == base._sp.GetScore(normal)


# --------------------------------------------------------------------------- llama.cpp agreement

def _fuzz_strings(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    pool = list("abcXYZ  \t\n\r'sdtmlrve0123456789.,!?-_()[]{}<>|$+^~`\"") + [
        "<|im_end|>", "<|im_start|>", "<s>", "</s>", "<unk>", "<|endoftext|>", "😀", "🇫🇷",
        "👨‍👩‍👧", "日本", "語", "한국", "é", "e\u0301", "ß", "Ω", "١٢٣", "²", "½", "Ⅻ", "\u00a0",
        "\u3000", "\u2028", "\x85", "\x0b", "\x0c", "\x1c", "\u200b", "\ufeff", "مرحبا", "שלום",
        "\ue000", "▁", "…", "—", "“", "€", "\x00", "\x7f", "'S", "'ll", " 's"]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 25))) for _ in range(count)]


def _llama_vocab(path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    return llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)


def _compare_with_llama_cpp(tok: Tokenizer, llm, texts: list[str]) -> list[str]:
    bad = []
    for text in texts:
        for special in (True, False):
            ours = tok.encode(text, parse_special=special)
            theirs = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
            if ours != theirs:
                bad.append(f"{text!r} special={special}: ours={ours} llama.cpp={theirs}")
    return bad


@pytest.mark.llamacpp
@pytest.mark.parametrize("which", ["tiny_bpe_gguf", "tiny_spm_gguf", "default_model_path"])
def test_ids_match_llama_cpp(request, which):
    path = request.getfixturevalue(which)
    llm = _llama_vocab(path)
    tok = Tokenizer.from_metadata(read_metadata(str(path)))
    assert tok.vocab_size == llm.n_vocab()
    bad = _compare_with_llama_cpp(tok, llm, CORPUS + _fuzz_strings(1, 300))
    assert not bad, "\n".join(bad[:10])


@pytest.mark.llamacpp
@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2", "default", "gpt-2", "tekken", "deepseek-v3"])
def test_ids_match_llama_cpp_other_pre_tokenizers(tmp_path, pre):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / f"{pre}.gguf", vocab="bpe", pre=pre, n_layers=1)
    llm = _llama_vocab(path)
    tok = Tokenizer.from_metadata(read_metadata(str(path)))
    bad = _compare_with_llama_cpp(tok, llm, CORPUS + _fuzz_strings(2, 150))
    assert not bad, "\n".join(bad[:10])


@pytest.mark.llamacpp
def test_spm_without_space_prefix_matches_llama_cpp(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "nospace.gguf", vocab="spm", n_layers=1,
                           extra_metadata={"tokenizer.ggml.add_space_prefix": False})
    tok = Tokenizer.from_metadata(read_metadata(str(path)))
    bad = _compare_with_llama_cpp(tok, _llama_vocab(path), CORPUS + _fuzz_strings(3, 100))
    assert not bad, "\n".join(bad[:10])
    assert tok.decode(tok.encode(" x<s> y")) == " x<s> y"


# --------------------------------------------------------------------------- the fixture itself

def test_fixture_metadata_like_llama_cpp_converter(bpe_md, spm_md):
    for md in (bpe_md, spm_md):
        for key in ("general.architecture", "general.name", "llama.block_count", "llama.context_length",
                    "llama.embedding_length", "llama.feed_forward_length", "llama.attention.head_count",
                    "llama.attention.head_count_kv", "llama.rope.freq_base",
                    "llama.attention.layer_norm_rms_epsilon", "llama.rope.dimension_count",
                    "llama.vocab_size", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
                    "tokenizer.ggml.token_type", "tokenizer.chat_template"):
            assert key in md, key
        assert md["llama.vocab_size"] == len(md["tokenizer.ggml.tokens"])
    assert bpe_md["tokenizer.ggml.tokens"][:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert spm_md["tokenizer.ggml.tokens"][:3] == ["<unk>", "<s>", "</s>"]
    assert spm_md["tokenizer.ggml.token_type"].count(6) == 256


@pytest.mark.parametrize("qtype, tol", [("Q4_K", 0.02), ("Q5_K", 0.01), ("Q6_K", 0.006),
                                        ("Q8_0", 0.002), ("Q4_1", 0.02)])
def test_fixture_quantizers_round_trip(qtype, tol):
    np = pytest.importorskip("numpy")
    from gguf import GGMLQuantizationType, quants

    from tests.fixtures.tiny_gguf import quantize_matrix

    x = (np.random.default_rng(0).standard_normal((4, 512)) * 0.08).astype(np.float32)
    data, raw = quantize_matrix(x, qtype)
    y = quants.dequantize(data, GGMLQuantizationType[qtype])
    assert y.shape == x.shape
    assert float(np.abs(y - x).max()) < tol


def test_fixture_rejects_bad_shapes(tmp_path):
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    with pytest.raises(ValueError, match="multiples of 256"):
        write_tiny_gguf(tmp_path / "k.gguf", tensor_type="Q4_K")      # d_model 64
    with pytest.raises(ValueError, match="not supported"):
        write_tiny_gguf(tmp_path / "x.gguf", tensor_type="IQ2_XXS")


@pytest.mark.llamacpp
@pytest.mark.parametrize("tensor_type", ["Q8_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"])
def test_fixture_weights_decode_in_llama_cpp(tmp_path, tensor_type):
    """llama.cpp loads the quantized fixture and its logits track the F32 twin."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    np = pytest.importorskip("numpy")
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    def logits(ttype: str):
        path = write_tiny_gguf(tmp_path / f"{ttype}.gguf", vocab="spm", d_model=256, ffn_dim=512,
                               tensor_type=ttype, tied=False, n_layers=1)
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=32, n_batch=32, logits_all=True,
                              n_threads=1, verbose=False)
        toks = [5, 100, 200, 300, 17, 42]
        llm.eval(toks)
        return np.array(llm.scores[: len(toks)])

    ref, got = logits("F32"), logits(tensor_type)
    assert np.isfinite(got).all()
    assert np.corrcoef(ref.ravel(), got.ravel())[0, 1] > 0.9
