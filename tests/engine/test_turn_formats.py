"""A GGUF without a chat template chats in its family's own turn format (issue 21): chosen by the
family and by the special tokens its vocabulary really has, never in markers it lacks, said in
the CLI's stderr and --json, and stopped on that format's end of turn."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.chat_template import ChatTemplate
from engine.gguf_loader import load_model
from engine.turn_formats import FORMATS, choose_format
from tests.fixtures.family_gguf import FAMILY_SPECS, write_family_gguf

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {"llama3": "llama3", "qwen2": "chatml", "qwen3": "chatml", "gemma3": "gemma", "phi3": "phi3"}
MARKER = re.compile(r"<\|[a-z_]+\|>|<(?:start|end)_of_turn>|\[/?INST\]")
CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "question one"},
        {"role": "assistant", "content": "answer one"}, {"role": "user", "content": "question two"}]


@pytest.fixture(scope="module")
def bare_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bare")
    # eot_push: recalibrated where the built-in format's shorter prompt (Llama 3's published
    # template adds a dated preamble) made the random model end its reply at once
    push = {"llama3": 3.5}
    return {f: write_family_gguf(d / f"{f}-bare.gguf", f, template="", **({"eot_push": push[f]} if f in push else {}))
            for f in EXPECTED}


@pytest.mark.parametrize("family", EXPECTED)
def test_a_file_without_a_template_renders_its_familys_format_in_its_own_specials(bare_files, family):
    model = load_model(bare_files[family])
    tpl, tok = model.chat_template, model.tokenizer
    assert tpl.builtin == EXPECTED[family] and tpl.origin == f"built-in {EXPECTED[family]}: the file has none"
    text = tpl.render(CHAT, add_generation_prompt=True)
    assert "question two" in text and "You are terse." in text
    markers = MARKER.findall(text)
    assert markers, text
    for m in set(markers):  # every marker is one special token of this vocabulary ...
        assert tok.has_special(m), (family, m)
    ids = tok.encode(text, parse_special=True)
    for m in set(markers):  # ... and is read as that token, never spelled out in pieces
        assert ids.count(tok.encode(m, parse_special=True)[0]) == text.count(m)
    eot = FAMILY_SPECS[family].eot
    assert text.count(eot) == len(CHAT) and tok.encode(eot, parse_special=True)[0] in tok.eot_ids


def test_chatml_is_not_gemmas_format():
    """Today's silent fallback: ChatML's markers are not in Gemma's vocabulary."""
    gemma_has = {"<start_of_turn>", "<end_of_turn>"}.__contains__
    fmt, why = choose_format("chatml", gemma_has)  # even a wrong preference is not rendered
    assert fmt.name == "gemma" and why == "its vocabulary has <start_of_turn>"
    assert choose_format("gemma", gemma_has)[1] == "the family's format"


@pytest.mark.parametrize("specials, expected", [
    ({"<|im_start|>", "<|im_end|>"}, "chatml"),  # SmolLM: llama architecture, ChatML vocabulary
    ({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, "llama3"),
    ({"[INST]", "[/INST]"}, "mistral"),
    ({"<|user|>", "<|assistant|>", "<|end|>", "<|system|>"}, "phi3"),
    ({"<|im_start|>"}, "plain"),  # half a format is no format
    (set(), "plain"),
])
def test_the_vocabulary_decides_for_a_llama_file(specials, expected):
    assert choose_format("llama3", specials.__contains__)[0].name == expected


def test_the_plain_format_needs_no_markers():
    tpl = ChatTemplate(FORMATS["plain"].source, bos_token="<s>")
    assert tpl.render(CHAT, add_generation_prompt=True) == (
        "<s>System: You are terse.\n\nUser: question one\n\nAssistant: answer one\n\nUser: question two\n\n"
        "Assistant:")


def test_a_broken_template_falls_back_to_the_familys_format(tmp_path):
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for x in %}")
    model = load_model(write_family_gguf(tmp_path / "g.gguf", "gemma3", template=str(broken)))  # an absolute path
    tpl = model.chat_template
    assert tpl.builtin == "gemma" and "syntax error" in tpl.load_error
    assert tpl.origin == "built-in gemma: the file's own does not work"


@pytest.mark.parametrize("family", ["gemma3", "llama3", "phi3"])
def test_cli_chat_says_which_format_and_stops_on_its_end_of_turn(bare_files, family):
    r = subprocess.run(
        [sys.executable, "-m", "engine.cli", "chat", "--model", str(bare_files[family]), "--system", "You are terse.",
         "--prompt", "Hello, how are you today?", "--temperature", "1", "--seed", "1", "--max-tokens", "64", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["template"] == f"built-in {EXPECTED[family]}: the file has none"
    assert out["finish_reason"] == "eos" and 0 < out["generated_tokens"] < 64, out
    assert f"built-in {EXPECTED[family]}" in r.stderr and "base model" in r.stderr
