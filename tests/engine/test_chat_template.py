"""engine.chat_template: HF-compatible rendering in a sandbox with size/time limits."""

from __future__ import annotations

import threading
import time

import pytest

from engine.chat_template import CHATML, ChatTemplate
from engine.errors import TemplateError

CONVO = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi!"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "2+2?"},
]

EXPECTED_CHATML = (
    "<|im_start|>system\nBe brief.<|im_end|>\n"
    "<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\nHello.<|im_end|>\n"
    "<|im_start|>user\n2+2?<|im_end|>\n"
)

LLAMA3_LIKE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


# --------------------------------------------------------------------------- rendering

def test_smollm2_template_renders_chatml(default_model_metadata):
    tpl = ChatTemplate(default_model_metadata["tokenizer.chat_template"], bos_token="<|im_start|>",
                       eos_token="<|im_end|>")
    assert not tpl.is_fallback
    assert tpl.render(CONVO, add_generation_prompt=True) == EXPECTED_CHATML + "<|im_start|>assistant\n"
    # without a system message SmolLM2's template adds its own
    out = tpl.render(CONVO[1:2], add_generation_prompt=False)
    assert out == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by"
                   " Hugging Face<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n")


@pytest.mark.parametrize("source", [None, "", "   \n"])
def test_chatml_fallback(source):
    tpl = ChatTemplate(source)
    assert tpl.is_fallback and tpl.source == CHATML
    assert tpl.render(CONVO, add_generation_prompt=False) == EXPECTED_CHATML
    assert tpl.render(CONVO, add_generation_prompt=True).endswith("<|im_start|>assistant\n")
    assert tpl.render([], add_generation_prompt=True) == "<|im_start|>assistant\n"


def test_fixture_template_is_chatml():
    from tests.fixtures.tiny_gguf import CHATML_TEMPLATE

    assert ChatTemplate(CHATML_TEMPLATE).render(CONVO, add_generation_prompt=False) == EXPECTED_CHATML


def test_bos_eos_variables_and_filters():
    tpl = ChatTemplate(LLAMA3_LIKE, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    out = tpl.render([{"role": "user", "content": "  hi  "}], add_generation_prompt=True)
    assert out == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_trim_and_lstrip_blocks_like_hf():
    src = "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}"
    assert ChatTemplate(src).render(CONVO, add_generation_prompt=False) == "[Hi!]\n[2+2?]\n"


def test_hf_helpers():
    src = ("{{ messages | tojson }}|{{ strftime_now('%Y') }}|"
           "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}|"
           "{{ tools | tojson(indent=2) if tools else 'none' }}")
    out = ChatTemplate(src).render([{"role": "user", "content": "héllo <b>"}], add_generation_prompt=False)
    body, year, first, tools = out.split("|")
    assert body == '[{"role": "user", "content": "héllo <b>"}]'     # no ASCII/HTML escaping
    assert year == time.strftime("%Y")
    assert first == "user" and tools == "none"


def test_tools_and_documents_are_none_unless_given_as_in_transformers():
    # transformers renders with tools=None and documents=None when the caller has none, so a
    # template may test them against none (Mistral's `{%- if tools is not none and ... %}`):
    # undefined, that test is true and such a template writes an empty tools block
    src = ("{% if tools is not none %}[TOOLS]{% for t in tools %}{{ t.name }}{% endfor %}[/TOOLS]{% endif %}"
           "{{ 'docs' if documents is not none else '' }}{{ messages[-1].content }}")
    tpl = ChatTemplate(src)
    assert tpl.render(CONVO, add_generation_prompt=False) == "2+2?"
    assert tpl.render(CONVO, add_generation_prompt=False, tools=[{"name": "calc"}]) == "[TOOLS]calc[/TOOLS]2+2?"
    assert tpl.render(CONVO, add_generation_prompt=False, documents=[]) == "docs2+2?"


NEEDS_A_USER = ("{{ bos_token }}{% if not (messages | selectattr('role', 'equalto', 'user') | list) %}"
                "{{ raise_exception('No user query found in messages.') }}{% endif %}"
                "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}")


@pytest.mark.parametrize("bos", ["", "<s>"])
def test_the_head_of_a_template_that_needs_a_user_turn(bos):
    tpl = ChatTemplate(NEEDS_A_USER, bos_token=bos)
    with pytest.raises(TemplateError, match="No user query"):
        tpl.render(CONVO[:1], add_generation_prompt=False)
    head = tpl.render_head(CONVO[:1])
    assert head == f"{bos}<system>Be brief.</system>"
    assert tpl.render(CONVO, add_generation_prompt=False).startswith(head)


def test_the_head_is_the_render_where_a_template_renders_it():
    tpl = ChatTemplate(LLAMA3_LIKE, bos_token="<|begin_of_text|>")
    assert tpl.render_head(CONVO[:1]) == tpl.render(CONVO[:1], add_generation_prompt=False)


def test_the_head_keeps_a_templates_other_refusals():
    src = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    with pytest.raises(TemplateError, match="System role not supported"):
        ChatTemplate(src).render_head(CONVO[:1])


def test_extra_message_keys_are_passed_through():
    src = "{% for m in messages %}{{ m.role }}{{ '*' if m.pinned else '' }} {% endfor %}"
    msgs = [{"role": "user", "content": "a", "pinned": True}, {"role": "assistant", "content": "b"}]
    assert ChatTemplate(src).render(msgs, add_generation_prompt=False) == "user* assistant "


def test_raise_exception_becomes_template_error():
    src = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    with pytest.raises(TemplateError, match="System role not supported"):
        ChatTemplate(src).render(CONVO, add_generation_prompt=False)


def test_bad_messages_are_a_caller_error():
    tpl = ChatTemplate(None)
    with pytest.raises(TypeError):
        tpl.render("hello", add_generation_prompt=True)   # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tpl.render([{"content": "no role"}], add_generation_prompt=True)


def test_render_from_several_threads():
    tpl = ChatTemplate(None)
    results: list[str] = []

    def work():
        for _ in range(20):
            results.append(tpl.render(CONVO, add_generation_prompt=False))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [EXPECTED_CHATML] * 80


def test_long_history_renders_quickly():
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "word " * 50} for i in range(1000)]
    t0 = time.process_time()
    out = ChatTemplate(None).render(msgs, add_generation_prompt=True)
    assert time.process_time() - t0 < 1.5
    assert out.count("<|im_start|>") == 1001


# --------------------------------------------------------------------------- hostile templates

def _fails(src: str, match: str, **kw) -> float:
    t0 = time.perf_counter()
    with pytest.raises(TemplateError, match=match) as ei:
        ChatTemplate(src, **kw).render(CONVO, add_generation_prompt=True)
    assert "\n" not in str(ei.value)
    return time.perf_counter() - t0


@pytest.mark.parametrize("src", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{{ c.__name__ }}{% endfor %}",
    "{{ cycler.__init__.__globals__.os.system('echo pwned') }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os }}",
    "{{ messages.__class__.__base__.__subclasses__() }}",
    "{{ raise_exception.__globals__['sys'].modules }}",
    "{% set l = [] %}{{ l.append(1) }}",
    "{{ messages.pop() }}",
])
def test_sandbox_escapes_are_refused(src):
    _fails(src, "refused|failed")


@pytest.mark.parametrize("src", [
    "{{ '{0.__class__}'.format('') }}",
    "{{ ''.__class__ }}{{ messages.__class__ }}",
    "{{ '%s'|format(''.__class__) }}",
])
def test_unsafe_attributes_render_as_nothing(src):
    out = ChatTemplate(src).render(CONVO, add_generation_prompt=False)
    assert "class" not in out and "str" not in out


def test_sandbox_escape_does_not_run_code(tmp_path):
    marker = tmp_path / "pwned"
    src = ("{{ ''.__class__.__mro__[1].__subclasses__()[0].__init__.__globals__['os']"
           f".system('touch {marker}') }}}}")
    with pytest.raises(TemplateError):
        ChatTemplate(src).render(CONVO, add_generation_prompt=False)
    assert not marker.exists()


def test_huge_loop_is_stopped_quickly():
    src = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    assert _fails(src, "longer than 0.3 s", timeout_s=0.3) < 3.0


def test_huge_loop_in_macro_is_stopped_quickly():
    src = ("{% macro spin(n) %}{% for i in range(n) %}{% for j in range(n) %}{% endfor %}{% endfor %}"
           "{% endmacro %}{{ spin(100000) }}")
    assert _fails(src, "longer than", timeout_s=0.3) < 3.0


@pytest.mark.parametrize("src", [
    "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",            # gigabytes of output
    "{{ 'x' * 10 ** 10 }}",
    "{{ [messages] * 100000000 }}",
    "{{ 'x'|center(10 ** 10) }}",
    "{{ 'x'.ljust(10 ** 10) }}",
    "{{ range(100000)|join('x' * 1000000) }}",
    "{{ '%0999999999d' % 1 }}",
    "{{ '%0999999999d'|format(1) }}",
    "{{ messages|tojson(indent=10 ** 9) }}",
    "{{ 2 ** (10 ** 10) }}",
    "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
    "{% macro big() %}{% for i in range(2000) %}{{ 'y' * 1000 }}{% endfor %}{% endmacro %}{{ big() }}",
])
def test_gigabyte_outputs_are_stopped_quickly(src):
    assert _fails(src, "refused|longer than|characters", timeout_s=2.0) < 3.0


def test_output_limit_is_configurable():
    tpl = ChatTemplate("{{ 'x' * 500 }}", max_chars=100)
    with pytest.raises(TemplateError, match="refused"):
        tpl.render([], add_generation_prompt=False)
    tpl = ChatTemplate("{% for i in range(50) %}{{ 'abc' }}{% endfor %}", max_chars=100)
    with pytest.raises(TemplateError, match="longer than 100 characters"):
        tpl.render([], add_generation_prompt=False)


def test_infinite_recursion_is_caught():
    _fails("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", "recursed|longer than")


@pytest.mark.parametrize("src, line", [
    ("{% for x in %}", 1),
    ("hello\n{% if x %}\n{{ x }", 3),
    ("{% for m in messages %}{{ m.content }}", None),
    ("{{ 'unterminated }}", 1),
])
def test_syntax_errors_are_clear(src, line):
    with pytest.raises(TemplateError) as ei:
        ChatTemplate(src)
    msg = str(ei.value)
    assert msg.startswith("chat template has a syntax error") and "\n" not in msg
    if line is not None:
        assert f"line {line}" in msg


def test_undefined_attribute_access_fails_cleanly():
    assert ChatTemplate("{{ nothing }}x").render([], add_generation_prompt=False) == "x"
    _fails("{{ nothing.deeper.still }}", "failed")


def test_with_fallback_on_broken_template():
    tpl = ChatTemplate.with_fallback("{% for x in %}", bos_token="<s>")
    assert tpl.is_fallback and "syntax error" in tpl.load_error
    assert tpl.render(CONVO, add_generation_prompt=False) == EXPECTED_CHATML
    ok = ChatTemplate.with_fallback(LLAMA3_LIKE)
    assert not ok.is_fallback and ok.load_error is None


def test_source_size_limit():
    with pytest.raises(TemplateError, match="too long"):
        ChatTemplate("x" * 300_000)


def test_non_string_source():
    with pytest.raises(TemplateError):
        ChatTemplate(123)   # type: ignore[arg-type]


def test_trace_function_is_restored():
    import sys

    sentinel = sys.gettrace()
    ChatTemplate(None).render(CONVO, add_generation_prompt=True)
    assert sys.gettrace() is sentinel
    with pytest.raises(TemplateError):
        ChatTemplate("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                     timeout_s=0.1).render([], add_generation_prompt=False)
    assert sys.gettrace() is sentinel
