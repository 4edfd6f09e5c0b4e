"""Real chat templates of the supported families render in the sandbox exactly as transformers
renders them.

The templates in tests/fixtures/templates/ are the ``chat_template`` strings the models ship in
their tokenizer_config.json / chat_template.jinja / GGUF (see the README there). The reference
renderer below is what Hugging Face transformers' ``apply_chat_template`` does: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loopcontrols, its helpers
raise_exception, strftime_now and a non-escaping tojson, and ``tools`` and ``documents`` passed
as None when not given. (Its AssistantTracker extension only adds a ``{% generation %}`` tag,
which none of these templates uses.)
"""

from __future__ import annotations

import datetime
import hashlib
import json
import pathlib

import jinja2
import pytest
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.chat_template import ChatTemplate
from engine.errors import TemplateError

TEMPLATES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "templates"

# family -> (bos_token, eos_token) as the models' tokenizers define them
TOKENS = {
    "qwen2": ("", "<|im_end|>"),
    "qwen3": ("", "<|im_end|>"),
    "gemma3": ("<bos>", "<eos>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "phi4mini": ("<|endoftext|>", "<|endoftext|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen35": ("", "<|im_end|>"),
    "gemma4": ("<bos>", "<eos>"),
}

# the files are byte-exact copies; an editor adding a final newline would change renders
SHA256 = {
    "qwen2": "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f",
    "qwen3": "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5",
    "gemma3": "7de1c58e208eda46e9c7f86397df37ec49883aeece39fb961e0a6b24088dd3c4",
    "phi3": "78d976a442bcde2f0be15aafbb8e3050e1104f86732266f68403251b89982a90",
    "phi4mini": "febf589225c9728ab791f52e8897d7607a823d45368f0a4c92fa68997b40cce9",
    "llama3": "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4",
    "qwen35": "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715",
    "gemma4": "944e74c5fb3a9ae02bb1f93251ae749b2266b69cfacc1257534f9b57b3efbf11",
}

FAMILIES = sorted(TOKENS)

THINK = "<think>\nreasoning\n</think>\n\nanswer"

# system + 3 user/assistant exchanges, ending on a user turn
CONVO = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi!"},
    {"role": "assistant", "content": THINK},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
]

# Llama 3.2 puts today's date in the system turn; pin it so two renders agree across midnight
FIXED_DATE = {"date_string": "26 Jul 2024"}

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city (\u00b0C)",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]


def source(family: str) -> str:
    return (TEMPLATES / f"{family}.jinja").read_bytes().decode("utf-8")


def sandboxed(family: str, messages, **kw) -> str:
    bos, eos = TOKENS[family]
    return ChatTemplate(source(family), bos_token=bos, eos_token=eos).render(messages, **kw)


def reference(family: str, messages, *, add_generation_prompt: bool, **extra) -> str:
    """transformers' rendering (its environment, helpers and render call)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    bos, eos = TOKENS[family]
    extra = {"tools": None, "documents": None, **extra}  # transformers always passes both
    return env.from_string(source(family)).render(
        messages=messages, add_generation_prompt=add_generation_prompt, bos_token=bos,
        eos_token=eos, **extra)


def both(family: str, messages, **kw) -> str:
    got = sandboxed(family, messages, **kw)
    want = reference(family, messages, **kw)
    assert got == want
    return got


# --------------------------------------------------------------------------- fixtures are exact

@pytest.mark.parametrize("family", FAMILIES)
def test_fixture_is_the_shipped_bytes(family):
    data = (TEMPLATES / f"{family}.jinja").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256[family]
    assert b"\r" not in data


# --------------------------------------------------------------------------- sandbox == reference

@pytest.mark.parametrize("family", FAMILIES)
def test_conversation_renders_like_transformers(family):
    out = both(family, CONVO, add_generation_prompt=True, **FIXED_DATE)
    assert "You are terse." in out and "And 3+3?" in out


@pytest.mark.parametrize("family", FAMILIES)
def test_without_generation_prompt_renders_like_transformers(family):
    both(family, CONVO[:5], add_generation_prompt=False, **FIXED_DATE)


@pytest.mark.parametrize("family", FAMILIES)
def test_without_system_message_renders_like_transformers(family):
    both(family, CONVO[1:], add_generation_prompt=True, **FIXED_DATE)


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama3"])
def test_tools_render_like_transformers(family):
    # exercises tojson (Llama 3.2 uses indent=4) and the tool-call branches
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function",
                            "function": {"name": "get_weather",
                                         "arguments": {"city": "Z\u00fcrich"}}}]}
    tool = {"role": "tool", "content": "{\"temp\": 21}"}
    msgs = CONVO[:2] + [call, tool] if family != "llama3" else CONVO[:2]
    out = both(family, msgs, add_generation_prompt=True, tools=TOOLS, **FIXED_DATE)
    assert "get_weather" in out and "\u00b0C" in out   # tojson does not escape non-ASCII


def test_llama3_date_comes_from_strftime_now():
    before = datetime.datetime.now().strftime("%d %b %Y")
    out = sandboxed("llama3", CONVO, add_generation_prompt=True)
    after = datetime.datetime.now().strftime("%d %b %Y")
    assert f"Today Date: {before}\n" in out or f"Today Date: {after}\n" in out


def test_qwen3_enable_thinking_false():
    out = both("qwen3", CONVO, add_generation_prompt=True, enable_thinking=False)
    assert out.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


# --------------------------------------------------------------------------- family facts

def test_gemma3_folds_system_into_first_user_turn():
    out = sandboxed("gemma3", CONVO, add_generation_prompt=True)
    assert out == (
        "<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
        f"<start_of_turn>model\n{THINK}<end_of_turn>\n"
        "<start_of_turn>user\n2+2?<end_of_turn>\n"
        "<start_of_turn>model\n4<end_of_turn>\n"
        "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert "system" not in out


def test_gemma3_rejects_non_alternating_roles():
    with pytest.raises(TemplateError, match="Conversation roles must alternate"):
        sandboxed("gemma3", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                  add_generation_prompt=True)


def test_qwen3_drops_reasoning_of_earlier_assistant_turns():
    out = sandboxed("qwen3", CONVO, add_generation_prompt=True)
    # the earlier assistant turn keeps only the text after </think> (leading newlines stripped)
    assert "<|im_start|>assistant\nanswer<|im_end|>\n" in out
    assert "reasoning" not in out and "<think>" not in out
    assert out == (
        "<|im_start|>system\nYou are terse.<|im_end|>\n"
        "<|im_start|>user\nHi!<|im_end|>\n"
        "<|im_start|>assistant\nanswer<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
        "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_qwen3_keeps_reasoning_after_the_last_user_turn():
    # an assistant turn after the last user query (the one being continued) keeps its <think>
    msgs = CONVO[:2] + [{"role": "assistant", "content": THINK}]
    out = both("qwen3", msgs, add_generation_prompt=False)
    assert out.endswith("<|im_start|>assistant\n<think>\nreasoning\n</think>\n\nanswer<|im_end|>\n")


def test_qwen2_default_system_prompt():
    out = sandboxed("qwen2", [{"role": "user", "content": "Hi!"}], add_generation_prompt=True)
    assert out == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful"
        " assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    )
    # a given system message replaces it, and Qwen2.5 does not strip <think> blocks
    out = sandboxed("qwen2", CONVO, add_generation_prompt=True)
    assert "You are Qwen" not in out and "reasoning" in out


@pytest.mark.parametrize("family", ["phi3", "phi4mini"])
def test_phi_uses_end_tokens(family):
    out = sandboxed(family, CONVO, add_generation_prompt=True)
    assert out.count("<|end|>") == len(CONVO)
    assert out.endswith("<|assistant|>\n" if family == "phi3" else "<|assistant|>")
    assert "<|system|>" in out and "<|user|>" in out
    # without a generation prompt both end the text with eos_token
    assert sandboxed(family, CONVO, add_generation_prompt=False).endswith("<|endoftext|>")


def test_phi4mini_exact():
    out = sandboxed("phi4mini", CONVO[:4], add_generation_prompt=True)
    assert out == ("<|system|>You are terse.<|end|><|user|>Hi!<|end|>"
                   f"<|assistant|>{THINK}<|end|><|user|>2+2?<|end|><|assistant|>")


def test_llama3_headers_and_eot():
    out = sandboxed("llama3", CONVO, add_generation_prompt=True, **FIXED_DATE)
    assert out.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                          "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                          "You are terse.<|eot_id|>")
    assert out.count("<|eot_id|>") == len(CONVO)
    assert out.count("<|start_header_id|>") == len(CONVO) + 1
    assert out.endswith("<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert out.count("<|begin_of_text|>") == 1


# --------------------------------------------------------------------------- the 2026 families

def test_qwen35_thinks_unless_told_not_to():
    # Qwen3.5 opens a <think> block in the generation prompt; enable_thinking=False closes it empty
    default = both("qwen35", CONVO, add_generation_prompt=True)
    assert default.endswith("<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n")
    on = both("qwen35", CONVO, add_generation_prompt=True, enable_thinking=True)
    assert on == default
    off = both("qwen35", CONVO, add_generation_prompt=True, enable_thinking=False)
    assert off == default[:-len("<think>\n")] + "<think>\n\n</think>\n\n"


def test_qwen35_drops_earlier_reasoning_and_keeps_the_current_turns():
    out = both("qwen35", CONVO, add_generation_prompt=False)
    assert "reasoning" not in out and "<|im_start|>assistant\nanswer<|im_end|>\n" in out
    # an answer after the last user turn keeps its thinking, given inline or as reasoning_content
    inline = both("qwen35", CONVO[:3], add_generation_prompt=False)
    assert inline.endswith("<|im_start|>assistant\n<think>\nreasoning\n</think>\n\nanswer<|im_end|>\n")
    field = both("qwen35", CONVO[:2] + [{"role": "assistant", "content": "answer",
                                         "reasoning_content": "reasoning"}], add_generation_prompt=False)
    assert field == inline


def test_qwen35_refuses_a_conversation_without_a_user_turn():
    # transformers raises too: a system prompt cannot be rendered on its own with this template
    with pytest.raises(jinja2.exceptions.TemplateError, match="No user query found"):
        reference("qwen35", CONVO[:1], add_generation_prompt=False)
    with pytest.raises(TemplateError, match="No user query found"):
        sandboxed("qwen35", CONVO[:1], add_generation_prompt=False)


def test_gemma4_turns_and_thinking():
    default = both("gemma4", CONVO, add_generation_prompt=True)
    assert default.startswith("<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nHi!<turn|>\n")
    assert default.count("<|turn>model\n") == 3 and default.count("<turn|>\n") == len(CONVO)
    # without thinking the prompt ends in an empty, closed thought channel
    assert default.endswith("<|turn>user\nAnd 3+3?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>")
    assert both("gemma4", CONVO, add_generation_prompt=True, enable_thinking=False) == default
    on = both("gemma4", CONVO, add_generation_prompt=True, enable_thinking=True)
    assert on.startswith("<bos><|turn>system\n<|think|>You are terse.<turn|>\n")
    assert on.endswith("<|turn>model\n") and "<|channel>" not in on
    # thinking on opens a system turn of its own when the chat has none
    bare = both("gemma4", CONVO[1:], add_generation_prompt=True, enable_thinking=True)
    assert bare.startswith("<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nHi!")
    assert both("gemma4", CONVO[1:], add_generation_prompt=True).startswith("<bos><|turn>user\nHi!")


def test_gemma4_strips_the_thought_channel_from_earlier_model_turns():
    msgs = CONVO[:2] + [{"role": "assistant", "content": "<|channel>thought\nplan it<channel|>Hello."}]
    out = both("gemma4", msgs + [{"role": "user", "content": "Again?"}], add_generation_prompt=True)
    assert "<|turn>model\nHello.<turn|>\n" in out and "plan it" not in out


NULLABLE_TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city (\u00b0C)",
        "parameters": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "City"},
            "unit": {"type": ["string", "null"], "enum": ["c", "f"]},
            "days": {"type": "array", "items": {"type": "integer"}}}},
    },
}]


@pytest.mark.parametrize("family", ["qwen35", "gemma4"])
@pytest.mark.parametrize("gen", [True, False])
def test_2026_tool_calls_render_like_transformers(family, gen):
    args = {"city": "Z\u00fcrich", "days": [1, 2], "hot": True}
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": args}}]}
    if family == "qwen35":
        result = {"role": "tool", "content": "{\"temp\": 21}"}
    else:  # Gemma 4 takes tool results as tool_responses on a turn
        result = {"role": "user", "content": "", "tool_responses": [
            {"name": "get_weather", "response": {"temp": 21, "sky": "clear"}}]}
    out = both(family, CONVO[:2] + [call, result], add_generation_prompt=gen, tools=NULLABLE_TOOLS)
    assert "get_weather" in out and "\u00b0C" in out and "Z\u00fcrich" in out
    if family == "gemma4":  # a ["string", "null"] type is declared as its string type
        assert "unit:{enum:[<|\"|>c<|\"|>,<|\"|>f<|\"|>],type:<|\"|>STRING<|\"|>}" in out
        assert "<|tool_call>call:get_weather{city:<|\"|>Z\u00fcrich<|\"|>,days:[1,2],hot:true}<tool_call|>" in out
    else:
        assert "<parameter=days>\n[1, 2]\n</parameter>" in out and "<tool_response>\n{\"temp\": 21}" in out


def test_qwen35_system_head_is_the_system_turn():
    # what a session pins as its sinks: the system turn the conversation starts with, though the
    # template refuses to render a system prompt alone
    head = ChatTemplate(source("qwen35"), eos_token="<|im_end|>").render_head(CONVO[:1])
    assert head == "<|im_start|>system\nYou are terse.<|im_end|>\n"
    assert reference("qwen35", CONVO, add_generation_prompt=True).startswith(head)
