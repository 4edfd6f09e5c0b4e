"""ChatSession: streaming turns over the bounded cache, stats, cancel, regenerate, pinning."""
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine import ChatSession, SamplingParams, load_model, plan_memory
from engine.events import Done, Rebuilt, Token
from engine.sampler import GREEDY

ROOT = Path(__file__).resolve().parents[2]

LONG = SamplingParams(temperature=0.0, max_tokens=60, ignore_eos=True, repetition_penalty=1.0,
                      top_k=0, top_p=1.0, min_p=0.0)


@pytest.fixture(scope="module")
def tiny(tiny_bpe_gguf):
    return load_model(tiny_bpe_gguf)


def run(events):
    toks, done = [], None
    for ev in events:
        if isinstance(ev, Token):
            toks.append(ev)
        elif isinstance(ev, Done):
            done = ev
    return toks, done


def test_reply_streams_and_reports(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=64), system="Be brief.", sampling=LONG)
    toks, done = run(s.stream("hello there"))
    assert done.reason == "max_tokens" and done.generated_tokens == 60 == len([t for t in toks if t.token_id >= 0])
    assert "".join(t.text for t in toks) == done.reply == s.messages[-1]["content"]
    st = s.stats()
    assert st.kv_bytes == s.plan.kv_bytes and st.capacity == s.plan.capacity
    assert st.sink_tokens == len(s._system_ids) > 0  # auto sinks = the rendered system turn
    assert st.sink_tokens == s.count_sink_tokens("Be brief.")
    user_turn = tiny.tokenizer.decode(s._chunks[1].ids)
    assert "Be brief" not in user_turn and "hello there" in user_turn  # the system turn is fed once
    assert st.cache_tokens <= st.capacity and st.evicted_tokens == st.tokens_seen - st.cache_tokens
    # +1: the last token is fed with the next turn (in view, not in the cache yet)
    assert sum(m.tokens_in_cache for m in st.messages) == st.cache_tokens + 1 == st.cache_tokens + len(s._pending)
    assert sum(m.tokens for m in st.messages) == st.tokens_seen + 1


def test_second_turn_prefills_only_new_tokens(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG)
    _, d1 = run(s.stream("first message " * 20))
    seen = s.stats().tokens_seen
    _, d2 = run(s.stream("ok"))
    new_chunk = len(s._chunks[-2].ids)  # the user turn's own tokens (template markers included)
    assert d2.prompt_tokens == new_chunk + 1  # + the last reply token, fed with this turn
    assert d2.prompt_tokens < seen / 3  # history is never re-read
    assert s.stats().evicted_tokens > 0


def test_same_reply_whatever_the_chunking_of_history(tiny):
    a = ChatSession(tiny, plan_memory(tiny.config, window=48), sampling=LONG)
    run(a.stream("one two three")); run(a.stream("four five"))
    b = ChatSession(tiny, plan_memory(tiny.config, window=48), sampling=LONG)
    b.load_history(a.messages[:-1])
    _, d = run(b.regenerate())
    assert d.reply == a.messages[-1]["content"]


def test_cancel_from_another_thread(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=64),
                    sampling=LONG.with_(max_tokens=10_000))
    seen = []
    for ev in s.stream("go"):
        if isinstance(ev, Token):
            seen.append(ev)
            if len(seen) == 5:
                threading.Thread(target=s.cancel).start()
        if isinstance(ev, Done):
            done = ev
    assert done.reason == "cancelled" and 5 <= done.generated_tokens < 10_000
    assert s.messages[-1].get("interrupted") is True
    run(s.stream("and again"))  # the session is still usable


def test_cancel_while_the_prompt_is_read_shows_no_token(tiny):
    """A Stop that lands after stream() began (it clears the flag) but before the first token, as
    the window's Stop does when the worker is already on the turn: no token after it, no reply
    kept, the question left for Regenerate."""
    from engine.events import Stats

    s = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG)
    run(s.stream("first"))
    events = []
    for ev in s.stream("a question stopped at once"):
        events.append(ev)
        if isinstance(ev, Stats) and len(events) == 1:  # the first event: the prompt is read
            s.cancel()
    assert not [e for e in events if isinstance(e, Token)]
    done = events[-1]
    assert isinstance(done, Done) and done.reason == "cancelled" and done.reply == "" and done.generated_tokens == 0
    assert [m["role"] for m in s.messages] == ["user", "assistant", "user"]
    _, d = run(s.regenerate())  # the question answered after all, from a re-read cache
    assert d.reason == "max_tokens" and d.reply == s.messages[-1]["content"]
    ref = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG)
    ref.load_history(s.messages[:-1])
    _, r = run(ref.regenerate())
    assert r.reply == d.reply  # the same answer as a session that never saw the Stop


def test_regenerate_and_edit(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG.with_(temperature=0.9, seed=1))
    _, d1 = run(s.stream("tell me"))
    _, d2 = run(s.regenerate(seed=2))
    assert len(s.messages) == 2 and s.messages[-1]["content"] == d2.reply
    _, d3 = run(s.edit_last("tell me something else"))
    assert [m["content"] for m in s.messages][0] == "tell me something else" and len(s.messages) == 2


def test_pinning_keeps_a_message_in_view_within_the_budget(tiny):
    plan = plan_memory(tiny.config, budget_bytes=160 * 144)  # 160 slots, no user window
    assert plan.capacity == 160
    s = ChatSession(tiny, plan, sampling=LONG)
    run(s.stream("remember the word pineapple"))
    for _ in range(3):
        run(s.stream("more"))
    first = s.stats().messages
    user0 = next(m for m in first if m.index == 0)
    assert user0.tokens_in_cache < user0.tokens  # it has scrolled out of the window
    rebuilt = s.set_pinned(0, True)
    assert isinstance(rebuilt, Rebuilt) and rebuilt.tokens <= s.plan.capacity
    st = s.stats()
    user0 = next(m for m in st.messages if m.index == 0)
    assert user0.pinned and user0.tokens_in_cache == user0.tokens
    assert st.capacity == plan.capacity and st.sink_tokens >= user0.tokens  # window shrank instead
    run(s.stream("still there?"))
    assert next(m for m in s.stats().messages if m.index == 0).tokens_in_cache == user0.tokens
    s.set_pinned(0, False)
    assert s.stats().sink_tokens == 4


def test_apply_plan_reallocates_only_when_needed(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG)
    run(s.stream("hi"))
    assert s.apply_plan(plan_memory(tiny.config, window=64)) is False
    assert s.apply_plan(plan_memory(tiny.config, "bf16", window=32)) is True
    assert s.stats().kv_bytes == s.plan.kv_bytes
    _, d = run(s.stream("after"))
    assert d.generated_tokens == 60


LONG_RUN_PROBE = """
import gc, psutil
from engine import ChatSession, SamplingParams, load_model, plan_memory
from engine.events import Token
m = load_model({path!r})
s = ChatSession(m, plan_memory(m.config, window=32), sampling={sampling})
rss, n = [], 0
for ev in s.stream("start"):
    if isinstance(ev, Token) and ev.token_id >= 0:
        n += 1
        if n % 250 == 0:
            gc.collect()
            rss.append(psutil.Process().memory_info().rss)
print(s.stats().evicted_tokens, *rss)
"""


def test_rss_stays_flat_over_a_long_run(tiny_bpe_gguf):
    """2,500 tokens through a 32-slot window hold RSS flat after warm-up, in a process of their
    own: after the rest of the suite, test order decided it (a one-off +16 MB jump in the
    suite's 700 MB heap landed before or after the warm-up sample, at any commit)."""
    probe = LONG_RUN_PROBE.format(path=str(tiny_bpe_gguf), sampling=repr(LONG.with_(max_tokens=2500)))
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    evicted, *rss = (int(x) for x in r.stdout.split())
    growth = rss[-1] - rss[1]  # after warm-up (compile, first allocations)
    assert growth < 4 * 1024 * 1024, [x // 1024 for x in rss]
    assert evicted > 2000


def test_default_model_knows_paris(default_model_path):
    model = load_model(default_model_path)
    # With no system prompt of its own, greedy SmolLM2-135M answers this with a French word salad,
    # in llama.cpp too ("L'Étoile, la Cité, ..."); told to answer in a sentence, both say Paris.
    s = ChatSession(model, plan_memory(model.config), system="Answer in one sentence.",
                    sampling=GREEDY.with_(max_tokens=40))
    reply = "".join(s.send("What is the capital of France?"))
    assert "Paris" in reply


def test_sinks_are_not_penalised_as_repetitions(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=64), system="Your name is Zorba.", sampling=LONG)
    run(s.stream("hi"))
    n_sys = len(s._system_ids)
    assert list(s._recent)[: len(s._chunks[1].ids)] == list(s._chunks[1].ids)  # starts after the sinks
    s.resync()  # the re-encoded cache keeps the same rule
    rest = [t for c in s._chunks[1:] for t in c.ids]
    assert list(s._recent) == rest[-256:] and n_sys > 0


def test_ttft_after_an_edit_counts_the_re_encoding(tiny, monkeypatch):
    """An edit re-reads the conversation before the first token: that wait is in the TTFT (it
    showed 1-5 ms while the user had waited seconds)."""
    import time as _time

    s = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG)
    run(s.stream("tell me"))
    real = s._resync

    def slow_resync(*a, **k):
        _time.sleep(0.3)  # a re-encoding that takes a while, as a long chat's does
        return (yield from real(*a, **k))

    monkeypatch.setattr(s, "_resync", slow_resync)
    _, done = run(s.edit_last("tell me something else"))
    assert done.ttft_s >= 0.3 and done.prompt_tokens > 0


def test_the_first_token_carries_the_ttft(tiny):
    """The wait for the first token is known when it comes, and said with it (a window showed
    it only when the reply ended): the reply's first token carries Done's ttft_s, no other does."""
    s = ChatSession(tiny, plan_memory(tiny.config, window=64), sampling=LONG)
    for events in (s.stream("hello"), s.regenerate(), s.stream("and more")):
        toks, done = run(events)
        timed = [t for t in toks if t.ttft_s is not None]
        assert len(timed) == 1 and timed[0] is toks[0], [t.ttft_s for t in toks]
        assert timed[0].ttft_s == done.ttft_s > 0


def test_a_reply_cut_at_max_tokens_is_all_in_view(tiny):
    """The reply's last token waits to be fed with the next turn: it is not out of view (every
    last reply read as "partly out of view", and its pin preview said it had left the window)."""
    s = ChatSession(tiny, plan_memory(tiny.config, window=200), sampling=LONG.with_(max_tokens=8))
    _, done = run(s.stream("hello"))
    assert done.reason == "max_tokens" and s._pending
    last = s.stats().messages[-1]
    assert last.index == 1 and last.tokens_in_cache == last.tokens > 0, last
    run(s.stream("and then"))  # fed now, and still all in view
    assert all(m.tokens_in_cache == m.tokens for m in s.stats().messages)


def test_a_message_counts_the_same_tokens_before_and_after_a_pin(tiny):
    """What the pin preview promises (the message's tokens as the stats count them) is what the
    pin takes: the previous reply's closing markers are that reply's and the generation prompt
    the next reply's, whether just prefilled or re-encoded (the preview said 18, the pin took 12)."""
    s = ChatSession(tiny, plan_memory(tiny.config, window=200), sampling=LONG.with_(max_tokens=8))
    run(s.stream("remember the word pineapple, please"))
    run(s.stream("and now something else"))
    chunk = next(c for c in s._chunks if c.msg == 2)
    assert chunk.lead > 0 and chunk.tail > 0  # the tiny template has both markers
    before = {m.index: m.tokens for m in s.stats().messages}
    assert sum(before.values()) == s.stats().tokens_seen + len(s._pending)  # (the last token is fed next turn)
    s.set_pinned(2, True)
    after = {m.index: m.tokens for m in s.stats().messages}
    # (the last reply, not yet closed in the cache, gains its closing markers when re-encoded)
    assert {i: n for i, n in after.items() if i < 3} == {i: n for i, n in before.items() if i < 3}
    assert sum(m.tokens for m in s.stats().messages if m.pinned) == before[2]


def test_a_message_counts_the_same_tokens_after_a_re_encoding_for_a_new_reply(tiny):
    """Regenerate re-encodes the conversation with the generation prompt at its end: that
    opening is the coming reply's there too, so the last user message keeps its size."""
    s = ChatSession(tiny, plan_memory(tiny.config, window=200), sampling=LONG.with_(max_tokens=8))
    run(s.stream("remember the word pineapple, please"))
    run(s.stream("and now something else"))
    before = {m.index: m.tokens for m in s.stats().messages}
    run(s.regenerate())
    after = {m.index: m.tokens for m in s.stats().messages}
    assert {i: after[i] for i in (0, 1, 2)} == {i: before[i] for i in (0, 1, 2)}


# --- Continue and versions (issue 23) ----------------------------------------------------------


def rebuilt(events):
    """(tokens, Done, whether the cache was re-encoded on the way)."""
    toks, done, again = [], None, False
    for ev in events:
        if isinstance(ev, Token):
            toks.append(ev)
        elif isinstance(ev, Done):
            done = ev
        elif isinstance(ev, Rebuilt):
            again = True
    return toks, done, again


def test_continue_extends_the_same_reply_as_one_longer_reply_would(tiny):
    short, longer = LONG.with_(max_tokens=12), LONG.with_(max_tokens=24)
    one = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=longer)
    _, whole = run(one.stream("tell me more"))
    two = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=short)
    _, first = run(two.stream("tell me more"))
    assert first.reason == "max_tokens" and first.reply_tokens == 12
    toks, more, again = rebuilt(two.continue_reply())
    assert not again and more.prompt_tokens == 1  # only the held-back last token is fed: no re-read
    assert more.generated_tokens == 12 and more.reply_tokens == 24 == whole.generated_tokens
    assert len(two.messages) == 2 and two.messages[-1]["content"] == more.reply == whole.reply
    assert first.reply + "".join(t.text for t in toks) == whole.reply  # the stream carries on the text
    assert two.stats().tokens_seen == one.stats().tokens_seen
    assert [list(c.ids) for c in two._chunks] == [list(c.ids) for c in one._chunks]
    # the next turn goes on from there as after one reply
    _, d1 = run(one.stream("and?"))
    _, d2 = run(two.stream("and?", max_tokens=24))
    assert d1.reply == d2.reply and d1.prompt_tokens == d2.prompt_tokens


def test_continue_on_a_stored_reply_re_encodes_it_left_open(tiny):
    one = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG.with_(max_tokens=24))
    _, whole = run(one.stream("tell me more"))
    two = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG.with_(max_tokens=12))
    run(two.stream("tell me more"))
    restored = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG.with_(max_tokens=12))
    restored.load_history(two.messages)
    _, more, again = rebuilt(restored.continue_reply())
    assert again and len(restored.messages) == 2
    assert more.reply.startswith(two.messages[-1]["content"]) and more.generated_tokens == 12
    with pytest.raises(Exception, match="no reply to continue"):
        fresh = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG)
        run(fresh.continue_reply())


def test_stepping_back_to_the_cached_version_re_reads_nothing(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG.with_(max_tokens=8))
    run(s.stream("first"))
    v1 = [dict(m) for m in s.messages]
    run(s.regenerate(temperature=5.0, seed=3, repetition_penalty=1.5))
    v2 = [dict(m) for m in s.messages]
    assert v1[-1]["content"] != v2[-1]["content"]
    seen = s.stats().tokens_seen
    assert not s.select_history(v1)  # another version: the cache still holds v2, nothing read
    pending = s.stats()
    assert pending.tokens_seen == seen and pending.reread_pending
    # its sizes are known before the re-read (a pin is priced from them), the same as after it
    sizes = {m.index: m.tokens for m in pending.messages}
    assert set(sizes) >= {0, 1}
    check = ChatSession(tiny, plan_memory(tiny.config, window=256))
    check.load_history(v1)
    check.resync()
    assert {m.index: m.tokens for m in check.stats().messages} == sizes and not check.stats().reread_pending
    assert s.select_history(v2)  # back to what the cache holds: free
    _, d, again = rebuilt(s.stream("next"))
    assert not again and d.prompt_tokens < 40
    # a version the cache does not hold is re-encoded at the next turn
    v3 = [dict(m) for m in s.messages]
    assert not s.select_history(v1)
    _, d, again = rebuilt(s.stream("other"))
    assert again and [m["content"] for m in s.messages[:2]] == [m["content"] for m in v1]
    assert not s.select_history(v3)  # (what the cache held then is gone now)


def test_a_stopped_reply_continues_on_the_same_cache(tiny):
    s = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG.with_(max_tokens=10_000))
    n = 0
    for ev in s.stream("go on"):
        if isinstance(ev, Token):
            n += 1
            if n == 5:
                s.cancel()
    stopped = s.messages[-1]["content"]
    _, more, again = rebuilt(s.continue_reply(max_tokens=6))
    assert not again and more.prompt_tokens == 1  # the stopped reply's last token, nothing re-read
    assert more.reply.startswith(stopped) and more.reply_tokens == len(s._chunks[-1].ids)
    assert s.stats().tokens_seen == sum(len(c.ids) for c in s._chunks) - 1  # (the last one is fed next turn)


def test_stop_while_a_regenerate_re_reads_the_chat(tiny):
    """Stop pressed while a Regenerate re-reads the conversation ends it as cancelled (no reply,
    no error), and the next Regenerate answers. Before, the re-read's missing logits went on to
    the sampler: an IndexError, seen in the window with a Qwen3.5 file, whose re-read is long."""
    from engine.events import PrefillProgress

    s = ChatSession(tiny, plan_memory(tiny.config, window=256), sampling=LONG.with_(max_tokens=8))
    run(s.stream("a long message to read again " * 12))
    events = []
    for ev in s.regenerate():
        events.append(ev)
        if isinstance(ev, PrefillProgress):
            s.cancel()
    assert any(isinstance(ev, PrefillProgress) for ev in events)  # it was stopped mid re-read
    done = events[-1]
    assert isinstance(done, Done) and done.reason == "cancelled" and done.generated_tokens == 0
    assert s.messages[-1]["role"] == "user"  # the old reply is gone, no new one began
    _, again = run(s.regenerate())
    assert again.reason == "max_tokens" and again.generated_tokens == 8
    assert [m["role"] for m in s.messages] == ["user", "assistant"]


def test_a_stop_does_not_outlive_the_reply_it_stopped(tiny):
    """After Stop, Apply (new memory settings) and Pin re-read the conversation into the cache.
    Before, the stop flag stayed set until the next message, so their re-read quit at once: the
    cache held nothing (found by QA in the window: 'cache 0 / 75' after Apply), and the next
    message re-read the whole chat."""
    s = ChatSession(tiny, plan_memory(tiny.config, window=256), system="Be brief.",
                    sampling=LONG.with_(max_tokens=10_000))
    n = 0
    for ev in s.stream("hello there " * 8):
        if isinstance(ev, Token):
            n += 1
            if n == 20:
                s.cancel()
    held = s.stats().cache_tokens
    assert held > 20
    s.apply_plan(plan_memory(tiny.config, window=128))
    assert s.stats().cache_tokens >= min(held, 128) - 1
    s.cancel()  # another Stop, then a pin
    s.set_pinned(0, True)
    assert s.stats().cache_tokens >= min(held, 128) - 1
