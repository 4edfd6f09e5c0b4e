"""Built-in turn formats, for GGUF files that carry no chat template (or one that is broken).

Older conversions, base models and some re-uploads have no ``tokenizer.chat_template``. ChatML
is no answer for all of them: its markers are not in, say, Gemma's vocabulary, so they would go
in as plain text and the model would answer in kind. So the format is chosen by the family
first (engine.families.Family.turn_format) and then by the special tokens the vocabulary really
has, and a format whose markers the vocabulary lacks is never rendered. Where none fits, a
plain-text transcript ("User: …") is used: every vocabulary can spell it.

The sources are Pinwheel's own minimal renderings of each format's turns (the layout the
families' published templates produce for plain text messages); they run in the same sandbox
as a file's template. A system message is a turn of its own (Gemma's, as a user turn), so the
system prompt renders as a prefix of every conversation: it is what the cache pins as sinks.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TurnFormat", "FORMATS", "choose_format"]


@dataclass(frozen=True)
class TurnFormat:
    name: str
    source: str  # Jinja, rendered by engine.chat_template.ChatTemplate
    markers: tuple[str, ...]  # special tokens the vocabulary must have for this format
    end_of_turn: str  # the token that ends a reply ("" for the eos token)


_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
_GEMMA = (  # Gemma has no system role: the system prompt is a user turn of its own
    "{{ bos_token }}{% for m in messages %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n{{ m['content'] | trim }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
_GEMMA4 = (  # Gemma 4 has a system role; <|turn> and <turn|> are its markers
    "{{ bos_token }}{% for m in messages %}<|turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] | trim }}<turn|>\n{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)
_PHI3 = (  # Phi-3 mini's vocabulary has <|system|>, as do 3.5 and 4-mini
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_MISTRAL = (  # [INST] as control tokens (Mistral's v3 vocabularies); a system prompt is an instruction
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m['content'] | trim }}{{ eos_token }}"
    "{% else %}[INST] {{ m['content'] | trim }}[/INST]{% endif %}{% endfor %}"
)
_PLAIN = (  # no markers at all: a transcript any vocabulary can spell
    "{{ bos_token }}{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] | trim }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)

FORMATS: dict[str, TurnFormat] = {
    f.name: f
    for f in (
        TurnFormat("chatml", _CHATML, ("<|im_start|>", "<|im_end|>"), "<|im_end|>"),
        TurnFormat("llama3", _LLAMA3, ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"), "<|eot_id|>"),
        TurnFormat("gemma", _GEMMA, ("<start_of_turn>", "<end_of_turn>"), "<end_of_turn>"),
        TurnFormat("gemma4", _GEMMA4, ("<|turn>", "<turn|>"), "<turn|>"),
        TurnFormat("phi3", _PHI3, ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"), "<|end|>"),
        TurnFormat("mistral", _MISTRAL, ("[INST]", "[/INST]"), ""),
        TurnFormat("plain", _PLAIN, (), ""),
    )
}
# After the family's own format, the others in this order (the first whose markers all exist).
_ORDER = ("chatml", "llama3", "gemma", "gemma4", "phi3", "mistral")


def choose_format(preferred: str, has_special: Callable[[str], bool]) -> tuple[TurnFormat, str]:
    """The format to render and why: the family's own if the vocabulary has its markers as special
    tokens, else the first other format whose markers it has, else plain text."""
    names = ([preferred] if preferred in FORMATS and preferred != "plain" else []) + [
        n for n in _ORDER if n != preferred]
    for name in names:
        fmt = FORMATS[name]
        if all(has_special(m) for m in fmt.markers):
            family = "the family's format" if name == preferred else f"its vocabulary has {fmt.markers[0]}"
            return fmt, family
    return FORMATS["plain"], "its vocabulary has no turn markers"
