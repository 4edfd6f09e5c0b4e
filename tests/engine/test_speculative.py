"""Prompt-lookup speculative decoding: drafts, the sampler's acceptance rule, the decoder's
verify/accept, and the session producing plain decoding's output."""
import numpy as np
import pytest

from engine import kernels, load_model, plan_memory
from engine.decoder import DRAFT_ROWS, Decoder
from engine.draft import PromptLookup
from engine.events import Done, Token
from engine.sampler import GREEDY, Sampler, SamplingParams
from engine.session import ChatSession


@pytest.fixture(scope="module")
def tiny(tiny_bpe_gguf):
    return load_model(tiny_bpe_gguf)


# --- drafts ----------------------------------------------------------------------------------
def test_draft_copies_what_followed_the_latest_match():
    d = PromptLookup(max_draft=4, max_ngram=3, min_ngram=2)
    d.extend([1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 6, 6, 1, 2, 3])
    assert d.propose(10) == [7, 8, 6, 6]  # the later of the two "1 2 3"s
    assert d.propose(2) == [7, 8]


def test_a_match_near_the_end_drafts_the_repeat_again():
    d = PromptLookup(max_draft=7)
    d.extend([4, 5, 1, 2, 3, 1, 2, 3])  # "1 2 3" repeating: the draft continues the period
    assert d.propose(7) == [1, 2, 3, 1, 2, 3, 1]


def test_no_draft_without_a_long_enough_match():
    d = PromptLookup(min_ngram=2)
    d.extend([5, 6, 7, 8, 5])  # only a 1-token match
    assert d.propose(7) == []
    d.extend([6])  # now "5 6" occurred before, followed by 7 8 5 6 (and the period again)
    assert d.propose(7) == [7, 8, 5, 6, 7, 8, 5]


def test_drafts_back_off_after_failing():
    d = PromptLookup(backoff=4, min_ngram=2)
    d.extend([1, 2, 3, 1, 2])
    assert d.propose(7)
    d.record(3, 0)
    d.record(3, 0)  # two misses in a row: pause
    assert d.propose(7) == []
    d.extend([3] * 8)
    assert d._pause == 0
    assert d.propose(7) == [3] * 7  # drafting resumes once the pause is over


def test_history_is_bounded():
    d = PromptLookup(horizon=100)
    for i in range(50):
        d.extend(np.arange(37) + i)
    assert d._n <= 2 * 100 and d._hist.size <= 200


# --- the acceptance rule -----------------------------------------------------------------------
def test_greedy_keeps_drafts_up_to_the_first_disagreement():
    V = 6
    rows = np.full((4, V), -5.0, np.float32)
    for i, t in enumerate([2, 4, 1, 3]):
        rows[i, t] = 5.0
    s = Sampler(GREEDY)
    assert s.verify(rows, [2, 4, 1], []) == [2, 4, 1, 3]  # all kept, plus the bonus token
    assert s.verify(rows, [2, 5, 1], []) == [2, 4]  # the second draft is wrong: replaced


def test_sampling_from_drafts_keeps_the_distribution():
    """out[0] must be distributed as row 0's sampling distribution, and out[1] (given that the
    first draft was kept) as row 1's: speculative sampling is exact, not approximate."""
    rng = np.random.default_rng(0)
    V = 5
    rows = rng.normal(0, 1.5, (3, V)).astype(np.float32)
    params = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, seed=3)
    s = Sampler(params)
    p0 = np.exp(rows[0] - rows[0].max()); p0 /= p0.sum()
    p1 = np.exp(rows[1] - rows[1].max()); p1 /= p1.sum()
    draft = [int(np.argsort(p0)[-2]), 0]  # the second most likely token, then anything
    n = 40000
    first = np.zeros(V)
    second = np.zeros(V)
    for _ in range(n):
        out = s.verify(rows, draft, [])
        first[out[0]] += 1
        if out[0] == draft[0]:
            second[out[1]] += 1
    np.testing.assert_allclose(first / n, p0, atol=0.012)
    np.testing.assert_allclose(second / second.sum(), p1, atol=0.02)


def test_repetition_penalty_sees_the_kept_drafts():
    V = 4
    rows = np.zeros((2, V), np.float32)
    rows[0, 1] = 2.0
    rows[1, 1], rows[1, 2] = 2.0, 1.9  # token 1 wins unless it is penalised as a repeat
    s = Sampler(GREEDY.with_(repetition_penalty=1.5))
    assert s.verify(rows, [1], []) == [1, 2]


# --- verify / accept in the decoder ------------------------------------------------------------
def test_verify_rows_match_single_steps_and_reject_leaves_no_trace(tiny):
    """A small window, so the draft's rows would overwrite window slots that later tokens still
    need: a rejected draft must not have changed anything."""
    plan = plan_memory(tiny.config, "int8", window=12, sinks=2)
    ids = np.random.default_rng(5).integers(3, tiny.config.vocab_size, 40)
    ref = Decoder(tiny, plan, n_sink=2)
    spec = Decoder(tiny, plan, n_sink=2)
    ref.feed(ids[:20])
    spec.feed(ids[:20])
    steps = np.stack([ref.feed(ids[20 + i : 21 + i]) for i in range(DRAFT_ROWS)])
    rows = spec.verify(ids[20 : 20 + DRAFT_ROWS])
    np.testing.assert_allclose(rows, steps, atol=1e-3)
    # Pretend only 3 of the rows were right, then go on decoding the true stream.
    spec.accept(3)
    ref2 = Decoder(tiny, plan, n_sink=2)
    ref2.feed(ids[:23])
    for i in range(23, 40):
        np.testing.assert_allclose(spec.feed(ids[i : i + 1]), ref2.feed(ids[i : i + 1]), atol=1e-3)
    assert spec.ring.next_pos == ref2.ring.next_pos


# --- the session ---------------------------------------------------------------------------------
def _reply(model, speculative, prompts, sampling=GREEDY, window=None, kv="int8", max_tokens=120, ignore_eos=True):
    plan = plan_memory(model.config, kv, window=window)
    s = ChatSession(model, plan, system="Be brief.", sampling=sampling, speculative=speculative)
    replies, drafts = [], []
    for p in prompts:
        ids = []
        for ev in s.stream(p, max_tokens=max_tokens, ignore_eos=ignore_eos):
            if isinstance(ev, Token) and ev.token_id >= 0:
                ids.append(ev.token_id)
            elif isinstance(ev, Done):
                drafts.append(ev.draft)
                assert ev.generated_tokens == len(ids)
                assert len(ids) == max_tokens or not ignore_eos
        replies.append(ids)
    return replies, drafts, s


def test_greedy_session_output_is_plain_decodings(tiny):
    prompts = ["abc abc abc abc", "hello hello world hello"]
    plain, _, _ = _reply(tiny, False, prompts)
    spec, drafts, s = _reply(tiny, True, prompts)
    assert sum(d["verifies"] for d in drafts) > 0, "the test never exercised a draft"
    assert sum(d["accepted"] for d in drafts) > 0
    assert spec == plain
    # the cache holds exactly the stream, minus the last token (fed with the next turn)
    assert s.decoder.ring.next_pos == sum(len(c.ids) for c in s._chunks) - len(s._pending)


@pytest.mark.skipif(not kernels.available(), reason="bit-exact rows need the native kernels")
@pytest.mark.parametrize("kv", ["int8", "bf16", "f32"])
def test_multi_turn_greedy_chat_is_identical_with_and_without_speculation(tiny, kv):
    """Every token's cached K/V are bit-identical whether a 1-row step or an 8-row verify
    computed them, so a whole greedy chat -- five turns, the window wrapping -- is the same reply
    for reply, for every cache precision (issue 11: 3 of 5 replies used to differ with int8)."""
    prompts = ["abc abc abc abc", "now repeat: abc abc abc", "hello hello world hello",
               "and again, hello world hello", "abc hello abc hello"]
    plain, _, _ = _reply(tiny, False, prompts, kv=kv, window=96, max_tokens=60)
    spec, drafts, _ = _reply(tiny, True, prompts, kv=kv, window=96, max_tokens=60)
    assert sum(d["accepted"] for d in drafts) > 10, drafts
    assert spec == plain


def test_sampled_session_runs_with_drafts(tiny):
    prompts = ["abc abc abc abc"]
    replies, drafts, s = _reply(tiny, True, prompts, sampling=SamplingParams(seed=4))
    assert len(replies[0]) == 120
    assert drafts[0]["verifies"] > 0
    assert s.decoder.ring.next_pos == sum(len(c.ids) for c in s._chunks) - len(s._pending)


def test_default_model_speculation_keeps_greedy_reply(default_model_path):
    """On the real model a reply that copies from its prompt is mostly drafted, and the greedy
    reply is plain decoding's, with the default int8 cache too (rows are bit-exact)."""
    model = load_model(default_model_path)
    prompts = ["Fix the spelling and return only the corrected sentence: 'The quick brwn fox jumpd over "
               "the lazzy dog and ran into the forrest to find it's freinds.'",
               "Write a Python function that adds two numbers.", "Now rename it to plus and repeat it."]
    for kv in ("int8", "f32") if kernels.available() else ("f32",):
        kw = dict(window=256, kv=kv, max_tokens=60, ignore_eos=False)
        plain, _, _ = _reply(model, False, prompts, **kw)
        spec, drafts, _ = _reply(model, True, prompts, **kw)
        assert drafts[0]["accepted"] >= 5, drafts
        assert spec == plain, kv


def test_short_prompt_tails_run_as_8_row_steps_with_the_same_result(tiny):
    """feed() runs a short piece (<= SHORT_TAIL tokens) through verify/accept instead of a padded
    64-row chunk: same logits, same cache afterwards."""
    from engine.decoder import SHORT_TAIL

    plan = plan_memory(tiny.config, "int8", window=40, sinks=4)
    ids = np.random.default_rng(7).integers(3, tiny.config.vocab_size, 64 + SHORT_TAIL + 5)
    n = 64 + SHORT_TAIL - 3  # a full chunk, then a tail of several 8-row pieces
    short, padded = Decoder(tiny, plan, n_sink=4), Decoder(tiny, plan, n_sink=4)
    a = short.feed(ids[:n])
    b = padded.feed(ids[:n], all_logits=True)[-1]  # all_logits keeps the 64-row chunks
    np.testing.assert_allclose(a, b, atol=1e-3)
    for i in range(n, ids.size):
        np.testing.assert_allclose(short.feed(ids[i : i + 1]), padded.feed(ids[i : i + 1]), atol=1e-3)
    assert short.ring.next_pos == padded.ring.next_pos == ids.size
