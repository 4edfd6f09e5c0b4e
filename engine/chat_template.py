"""Chat templates: sandboxed Jinja2 rendering of the template stored in a GGUF file.

A GGUF's ``tokenizer.chat_template`` is untrusted input (CVE-2024-34359 was a template
that escaped a plain Jinja2 environment), so it is rendered in an
``ImmutableSandboxedEnvironment`` with the same options and helpers Hugging Face
transformers uses (``trim_blocks``, ``lstrip_blocks``, ``loopcontrols``, ``raise_exception``,
``strftime_now``, a non-escaping ``tojson``; ``tools`` and ``documents`` None unless given),
plus limits:

* output size: rendering is streamed with ``Template.generate()`` and stops once the text
  passes ``max_chars``; string repetition/concatenation/joins/padding that would build a
  string past the limit are refused before they allocate it;
* time: a trace function checks a deadline on every line of template code and on every
  Python call the render makes, so tight loops without output are stopped too;
* memory: the same trace function stops a render whose process memory grows by more than
  ``max_memory_bytes``.

Every failure comes out as :class:`engine.errors.TemplateError` with a one-line message.
"""

from __future__ import annotations

import datetime
import functools
import gc
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.errors import TemplateError

__all__ = ["CHATML", "ChatTemplate"]

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

MAX_SOURCE_CHARS = 200_000          # longest template source accepted
MAX_CALL_INT = 100_000              # largest int a filter / string method may be given
DEFAULT_MAX_MEMORY = 512 * 1024 * 1024


class _Abort(Exception):
    """Raised from the trace function; carries the user-facing message."""


def _one_line(text: object, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _rss() -> int | None:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except Exception:  # noqa: BLE001 - memory guard is best effort
        return None


class _Guard:
    """sys.settrace hook enforcing a deadline and a memory ceiling on the current thread."""

    def __init__(self, timeout_s: float, max_memory: int) -> None:
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.max_memory = max_memory
        self.base_rss = _rss()
        self.next_mem_check = time.monotonic() + 0.01

    def check(self) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise _Abort(f"chat template took longer than {self.timeout_s:g} s to render")
        if now > self.next_mem_check and self.base_rss is not None:
            self.next_mem_check = now + 0.01
            rss = _rss()
            if rss is not None and rss - self.base_rss > self.max_memory:
                raise _Abort(f"chat template used more than {self.max_memory // (1024 * 1024)} MiB"
                             f" of memory")

    def __call__(self, frame: Any, event: str, arg: Any) -> Callable | None:
        # 'call' events come for every Python frame; line events only for template code
        self.check()
        return self._local if frame.f_code.co_filename == "<template>" else None

    def _local(self, frame: Any, event: str, arg: Any) -> Callable | None:
        self.check()
        return self._local

    def run(self, fn: Callable[[], Any]) -> Any:
        old = sys.gettrace()
        sys.settrace(self)
        try:
            return fn()
        finally:
            sys.settrace(old)


def _make_env(max_chars: int):
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    max_int = min(MAX_CALL_INT, max_chars)

    def too_long(n: int) -> SecurityError:
        return SecurityError(f"the template tried to build a string or list of {n} items"
                             f" (limit {max_chars})")

    def sized(x: Any) -> bool:
        return isinstance(x, (str, list, tuple, bytes))

    def check_args(args: Sequence[Any], kwargs: Mapping[str, Any], what: str) -> None:
        for v in list(args) + list(kwargs.values()):
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > max_int:
                raise SecurityError(f"{what} was given {v}, more than the allowed {max_int}")

    fmt_width = re.compile(r"%[-+ #0]*(\d{6,}|\*)|%[-+ #0]*\d*\.(\d{6,}|\*)")

    def check_percent_format(fmt: Any) -> None:
        if isinstance(fmt, str) and fmt_width.search(fmt):
            raise SecurityError("the template used a %-format with a huge or '*' width")

    def checked_join(parts: Any, sep: str = "") -> str:
        parts = [p if isinstance(p, str) else str(p) for p in parts]
        total = sum(map(len, parts)) + len(sep) * max(len(parts) - 1, 0)
        if total > max_chars:
            raise too_long(total)
        return sep.join(parts)

    class Env(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "+", "**", "%"})

        def call_binop(self, context, operator, left, right):  # noqa: ANN001
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if sized(seq) and isinstance(n, int) and len(seq) * max(n, 0) > max_chars:
                        raise too_long(len(seq) * n)
            elif operator == "+":
                if sized(left) and sized(right) and len(left) + len(right) > max_chars:
                    raise too_long(len(left) + len(right))
            elif operator == "**":
                if (isinstance(left, int) and isinstance(right, int) and abs(left) > 1
                        and right > 0 and abs(left).bit_length() * right > 4096):
                    raise SecurityError("the template tried to compute a number with more"
                                        " than 4096 bits")
            elif operator == "%":
                check_percent_format(left)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805, ANN001
            owner = getattr(__obj, "__self__", None)
            if isinstance(owner, (str, bytes)):
                check_args(args, kwargs, f"str.{getattr(__obj, '__name__', 'method')}()")
                if getattr(__obj, "__name__", "") == "join" and args:
                    return checked_join(list(args[0]), owner)
            elif callable(__obj) and getattr(__obj, "__name__", "") in ("lipsum",):
                raise SecurityError("lipsum() is not available in chat templates")
            return super().call(__context, __obj, *args, **kwargs)

    env = Env(trim_blocks=True, lstrip_blocks=True, autoescape=False, extensions=[loopcontrols],
              keep_trailing_newline=False)
    env.concat = checked_join  # used for macro bodies, {% set %} blocks, filter blocks

    def wrap_filter(name: str, fn: Callable) -> Callable:
        n_pass = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            check_args(args[n_pass + 1:], kwargs, f"the '{name}' filter")
            return fn(*args, **kwargs)

        return wrapper

    for name, fn in list(env.filters.items()):
        env.filters[name] = wrap_filter(name, fn)

    base_join = env.filters["join"]

    @functools.wraps(base_join)
    def join_filter(eval_ctx, value, d="", attribute=None):  # noqa: ANN001
        items = list(value)
        if not isinstance(d, str):
            d = str(d)
        total = len(d) * max(len(items) - 1, 0)
        if total > max_chars:
            raise too_long(total)
        out = base_join(eval_ctx, items, d, attribute)
        if len(out) > max_chars:
            raise too_long(len(out))
        return out

    env.filters["join"] = join_filter
    base_format = env.filters["format"]

    @functools.wraps(base_format)
    def format_filter(value, *args, **kwargs):  # noqa: ANN001
        check_percent_format(value)
        return base_format(value, *args, **kwargs)

    env.filters["format"] = format_filter

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
               separators: Any = None, sort_keys: bool = False) -> str:
        if isinstance(indent, int) and indent > max_int:
            raise SecurityError(f"tojson indent {indent} is too large")
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message: Any = "") -> None:
        from jinja2.exceptions import TemplateError as JinjaTemplateError

        raise JinjaTemplateError(str(message))

    def strftime_now(fmt: str) -> str:
        return datetime.datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals.pop("lipsum", None)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env, checked_join


class ChatTemplate:
    """A compiled, sandboxed chat template. ``source`` None or empty -> :data:`CHATML`."""

    def __init__(self, source: str | None, *, bos_token: str = "", eos_token: str = "",
                 max_chars: int = 1_000_000, timeout_s: float = 2.0,
                 max_memory_bytes: int = DEFAULT_MAX_MEMORY) -> None:
        if source is not None and not isinstance(source, str):
            raise TemplateError(f"chat template must be text, not {type(source).__name__}")
        self.is_fallback = source is None or not source.strip()
        self.source = CHATML if self.is_fallback else source
        self.bos_token = bos_token or ""
        self.eos_token = eos_token or ""
        self.max_chars = int(max_chars)
        self.timeout_s = float(timeout_s)
        self.max_memory_bytes = int(max_memory_bytes)
        if len(self.source) > MAX_SOURCE_CHARS:
            raise TemplateError(f"chat template is too long ({len(self.source)} characters,"
                                f" limit {MAX_SOURCE_CHARS})")
        self._lock = threading.Lock()
        self._env, checked_join = _make_env(self.max_chars)
        self._template = self._guarded(lambda: self._env.from_string(self.source), "compile")
        # `a ~ b` compiles to str_join/markup_join from the template's own namespace
        namespace = self._template.root_render_func.__globals__
        namespace["str_join"] = checked_join
        namespace["markup_join"] = checked_join

    @classmethod
    def with_fallback(cls, source: str | None, **kwargs: Any) -> ChatTemplate:
        """Like the constructor, but a template that does not compile gives the ChatML
        fallback; the reason is kept in ``load_error``."""
        try:
            tpl = cls(source, **kwargs)
            tpl.load_error = None
            return tpl
        except TemplateError as e:
            tpl = cls(None, **kwargs)
            tpl.load_error = str(e)
            return tpl

    @classmethod
    def for_model(cls, source: str | None, *, family_format: str, has_special: Callable[[str], bool],
                  **kwargs: Any) -> ChatTemplate:
        """The file's own template; where it has none, or one that does not compile, the built-in
        turn format (engine.turn_formats) its family and its vocabulary's special tokens call
        for, never one whose markers the vocabulary lacks. ``origin`` says which and why."""
        from .turn_formats import choose_format

        load_error = None
        if source is not None and not (isinstance(source, str) and not source.strip()):
            try:
                return cls(source, **kwargs)
            except TemplateError as e:
                load_error = str(e)
        fmt, why = choose_format(family_format, has_special)
        tpl = cls(fmt.source, **kwargs)
        tpl.is_fallback, tpl.load_error, tpl.builtin, tpl.end_of_turn = True, load_error, fmt.name, fmt.end_of_turn
        lacks = "the file has none" if load_error is None else "the file's own does not work"
        tpl.origin = f"built-in {fmt.name}: {lacks}"
        tpl.why = why
        tpl.reason = f"{tpl.origin} ({why})"
        return tpl

    load_error: str | None = None
    origin = "the file's own"  # or "built-in gemma: the file has none", ...
    why = ""  # why that built-in format: "the family's format", "its vocabulary has <|im_start|>"
    reason = origin  # origin, with why
    builtin: str | None = None  # the built-in turn format's name, when one is used
    end_of_turn = ""  # the built-in format's end-of-turn token ("": the file's own rules)

    def _guarded(self, fn: Callable[[], Any], what: str) -> Any:
        from jinja2.exceptions import TemplateSyntaxError, UndefinedError
        from jinja2.exceptions import TemplateError as JinjaTemplateError
        from jinja2.sandbox import SecurityError

        guard = _Guard(self.timeout_s, self.max_memory_bytes)
        # No garbage collection inside the template: a template that recurses to the limit would
        # otherwise run other objects' finalizers at that depth, where they fail as "unraisable"
        # RecursionErrors far from here. The guard bounds the time and memory a render can take.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return guard.run(fn)
        except _Abort as e:
            raise TemplateError(str(e)) from None
        except TemplateSyntaxError as e:
            where = f" on line {e.lineno}" if e.lineno else ""
            raise TemplateError(f"chat template has a syntax error{where}: {_one_line(e.message)}") from None
        except SecurityError as e:
            raise TemplateError(f"chat template refused: {_one_line(e)}") from None
        except UndefinedError as e:
            raise TemplateError(f"chat template failed: {_one_line(e)}") from None
        except JinjaTemplateError as e:   # includes raise_exception()
            raise TemplateError(f"chat template error: {_one_line(e)}") from None
        except RecursionError:
            raise TemplateError("chat template recursed too deeply") from None
        except MemoryError:
            raise TemplateError("chat template ran out of memory") from None
        except TemplateError:
            raise
        except Exception as e:  # noqa: BLE001 - anything else the template provoked
            raise TemplateError(f"chat template failed to {what}: {type(e).__name__}:"
                                f" {_one_line(e)}") from None
        finally:
            if gc_was_on:
                gc.enable()

    def render(self, messages: list[dict], *, add_generation_prompt: bool, **extra: Any) -> str:
        """Render the conversation; ``extra`` adds template variables (e.g. ``tools``)."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise TypeError("messages must be a list of {'role', 'content'} dicts")
        msgs = []
        for m in messages:
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
                raise TypeError("each message must be a dict with a str 'role' and 'content'")
            msgs.append(dict(m))
        # as transformers renders: tools and documents are always defined (None when not given)
        variables = {"tools": None, "documents": None, **extra}
        variables.update(messages=msgs, add_generation_prompt=bool(add_generation_prompt),
                         bos_token=self.bos_token, eos_token=self.eos_token)

        def work() -> str:
            parts: list[str] = []
            total = 0
            for chunk in self._template.generate(**variables):
                total += len(chunk)
                if total > self.max_chars:
                    raise _Abort(f"chat template output is longer than {self.max_chars} characters")
                parts.append(chunk)
            return "".join(parts)

        with self._lock:   # Jinja templates are thread-safe, but keep one render per template
            return self._guarded(work, "render")

    PROBE = "\x01"  # the stand-in user turn render_head appends (a character no chat contains)

    def render_head(self, messages: list[dict]) -> str:
        """The text `messages` (a system prompt, say) take at the start of a conversation, for a
        session's sinks. That is their render where the template renders them on their own; a
        template that refuses a conversation without a user turn (Qwen3.5's raises "No user
        query found in messages." for a system prompt alone, as it does in transformers) gives
        the text before a stand-in user turn instead. Raises the template's own error when that
        does not work either."""
        try:
            return self.render(messages, add_generation_prompt=False)
        except TemplateError as refused:
            probe = [{"role": "user", "content": self.PROBE}]
            try:
                with_probe = self.render(list(messages) + probe, add_generation_prompt=False)
                alone = self.render(probe, add_generation_prompt=False)
            except TemplateError:
                raise refused from None
            # the stand-in turn's text is `alone`, less the BOS the template may open every
            # conversation with: the head is what comes before that text
            bos = self.bos_token
            for opening in ([bos] if bos and alone.startswith(bos) else []) + [""]:
                turn = alone[len(opening):]
                if self.PROBE in turn and with_probe.endswith(turn) and with_probe.startswith(opening):
                    return with_probe[: len(with_probe) - len(turn)]
            raise refused from None

    def __repr__(self) -> str:
        kind = "ChatML fallback" if self.is_fallback else f"{len(self.source)} chars"
        return f"<ChatTemplate {kind}>"
