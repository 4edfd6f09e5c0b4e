"""`pinwheel bench --quick` end to end on the tiny test model, llama.cpp off: it must finish well
under a minute and write the JSON report the issue asks for (and a PNG when matplotlib is there)."""
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(120)
def test_quick_bench_json(tiny_bpe_gguf, tmp_path):
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--no-llamacpp", "--model", str(tiny_bpe_gguf),
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert elapsed < 60, f"quick bench took {elapsed:.0f}s"
    files = sorted(tmp_path.glob("bench-*.json"))
    assert len(files) == 1
    d = json.loads(files[0].read_text())
    assert {"meta", "settings", "engines", "ratios", "targets", "notes", "errors"} <= d.keys()
    assert d["errors"] == [] and d["meta"]["quick"] is True and d["meta"]["engines"] == ["ours"]
    assert "llamacpp" not in d["engines"]
    ours = d["engines"]["ours"]
    for n in d["settings"]["prefill"]:
        assert ours["prefill"][str(n)]["tok_s"] > 0
    for n in d["settings"]["decode"]:
        assert ours["decode"][str(n)]["tok_s"] > 0
    long = ours["long"]
    assert [c["tokens"] for c in long["checkpoints"]] == d["settings"]["long_tokens"]
    assert all(c["ms_per_token"] > 0 for c in long["checkpoints"]) and long["checkpoints"][0]["ratio"] == 1.0
    assert long["generated"] > 0 and long["rss_growth_mb"] is not None and long["series"]["tokens"]
    turns = ours["turns"]
    assert turns["turns_done"] == d["settings"]["turns"]
    assert turns["ttft_turn2_s"] > 0 and turns["ttft_last_s"] > 0 and turns["ttft_ratio"] > 0
    assert ours["peak_rss_mb"] > 0
    for k in ("long_ms_ratio", "ttft_ratio", "rss_growth_mb"):
        assert k in d["targets"]
    assert "prefill 24 tok" in r.stdout and "TTFT turn 2" in r.stdout  # the printed table
    if importlib.util.find_spec("matplotlib"):
        assert d["plot"] and Path(d["plot"]).is_file()


def test_speculative_bench_runs_and_reports(tiny_bpe_gguf):
    from bench.speculative import TURNS, run

    lines = []
    rec = run(tiny_bpe_gguf, max_tokens=16, turns=TURNS[:2], progress=lines.append)
    for mode in ("greedy", "sampled"):
        summary = rec["modes"][mode]["summary"]
        assert summary["plain_tok_s"] > 0 and summary["spec_tok_s"] > 0
        assert summary["verifies"] >= 0 and 0 <= summary["acceptance"] <= 1
    assert all("identical" in t for t in rec["modes"]["greedy"]["turns"])
    assert any("total" in line for line in lines)


def test_profile_step_names_kernels(tiny_bpe_gguf, capsys):
    from bench.profile_step import main

    assert main(["--model", str(tiny_bpe_gguf), "--steps", "1", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "kernel time per step" in out and "per step" in out


@pytest.mark.llamacpp
def test_held_bytes_bench_reports_a_type(capsys):
    """bench.held_bytes quantizes with llama.cpp and prints held / file (Q4_K_M: held as stored)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from bench import held_bytes

    assert held_bytes.main(["--types", "Q4_K_M"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Q4_K_M"))
    assert float(line.split("held / file")[1].split()[0]) <= 1.02, line


@pytest.mark.timeout(300)
def test_load_time_bench_times_both_engines(tiny_bpe_gguf, tmp_path, capsys):
    """bench.load_time: best load and load -> first token of each engine, and their ratios (ours
    against this same checkout as "before", and llama.cpp where llama-cpp-python is installed)."""
    from bench import load_time

    llama = importlib.util.find_spec("llama_cpp") is not None
    out = tmp_path / "load.json"
    args = ["--model", str(tiny_bpe_gguf), "--repeat", "1", "--before", str(ROOT), "--json", str(out)]
    assert load_time.main(args + ([] if llama else ["--no-llamacpp"])) == 0
    r, = json.loads(out.read_text())
    assert 0 < r["best"]["ours"]["load_s"] <= r["best"]["ours"]["first_token_s"]
    assert r["ratio_before"]["load_s"] > 0
    if llama:
        assert r["ratio_llamacpp"]["first_token_s"] > 0 and "ours / llama.cpp" in capsys.readouterr().out


@pytest.mark.parametrize("rung", ["qwen3.5-0.8b", "gemma-4-e2b"])
def test_ladder_writes_a_family_rung_both_engines_load(rung, tiny_bpe_gguf, tmp_path):
    """The ladder's family rungs (their tensors from engine.families, their own metadata), cut
    down to a few narrow layers of the same layout, load in the engine with the config their
    metadata names, and in llama.cpp where it is installed."""
    from dataclasses import replace

    from bench.ladder import RUNGS, write
    from engine import load_model

    full = {r.name: r for r in RUNGS}[rung]
    layers = 8 if full.arch == "qwen35" else 10
    meta = dict(full.meta)
    if full.arch == "gemma4":  # 4 sliding to 1 global; the last 5 share K/V (layers 3 and 4 hold it)
        meta.update({"attention.sliding_window_pattern": [i % 5 < 4 for i in range(layers)],
                     "attention.shared_kv_layers": 5, "feed_forward_length": [256] * 5 + [512] * 5,
                     "embedding_length_per_layer_input": 32, "attention.key_length_swa": 64,
                     "attention.value_length_swa": 64, "rope.dimension_count_swa": 64})
    else:
        meta.update({"ssm.state_size": 32, "ssm.inner_size": 32 * 16, "rope.dimension_count": 32})
    small = replace(full, name="tiny", n_layers=layers, d_model=256, ffn_dim=256, head_dim=128 if full.arch == "gemma4"
                    else 64, vocab=0, meta=tuple(meta.items()))
    path = write(small, "Q8_0", tiny_bpe_gguf, tmp_path / f"{rung}.gguf")
    cfg = load_model(path).config
    assert cfg.arch == full.arch and cfg.n_layers == layers
    if full.arch == "gemma4":
        assert cfg.shared_kv_layers == 5 and cfg.local_head_dim == 64 and cfg.per_layer_dim == 32
    else:
        assert cfg.recurrent_layers == 6 and cfg.ssm_state == 32
    if importlib.util.find_spec("llama_cpp"):
        from llama_cpp import Llama

        llm = Llama(str(path), n_ctx=64, verbose=False)
        llm.eval(llm.tokenize(b"Hello there"))


@pytest.mark.skipif(not importlib.util.find_spec("llama_cpp"), reason="rungs of these types are made by llama.cpp")
def test_a_rungs_quantized_types_share_one_f16_source(tiny_bpe_gguf, tmp_path, monkeypatch):
    """Writing the F16 source takes longer than quantizing it: the types of one rung are made
    from one source, which is gone once the rung is done; each file holds its own type."""
    from dataclasses import replace

    from bench import ladder
    from engine.gguf_header import read_header

    monkeypatch.setattr(ladder, "cache_dir", lambda: tmp_path)
    rung = replace(ladder.RUNGS[0], name="tiny", n_layers=2, d_model=256, ffn_dim=512, n_heads=4, n_kv_heads=2)
    made = []
    orig = ladder._random_blocks
    monkeypatch.setattr(ladder, "_random_blocks", lambda rng, qt, *a: made.append(qt.name) or orig(rng, qt, *a))
    q6 = ladder.write(rung, "Q6_K", tiny_bpe_gguf, keep_source=True)
    assert (tmp_path / "tiny-F16-source.gguf").exists()
    n_written = len(made)
    assert n_written > 0
    q2 = ladder.write(rung, "Q2_K", tiny_bpe_gguf)
    assert len(made) == n_written  # the second type wrote no new random F16 blocks
    assert not (tmp_path / "tiny-F16-source.gguf").exists()
    assert read_header(q6).type_of("blk.0.ffn_up.weight") == "Q6_K"
    assert read_header(q2).type_of("blk.0.ffn_up.weight") in ("Q2_K", "Q3_K")


def test_tile_ceiling_cuts_still_match_the_kernel():
    """bench.tile_ceiling builds its upper bound by cutting tile512's float steps out of a copy of
    the kernel, by exact text: when the tile changes and the cuts no longer match, the tool stops
    working (it did, after the Q6_K change). Compiling both builds is for the benchmark, not the
    suite; that each cut still finds its text, and changes it, is checked here."""
    from bench import tile_ceiling

    text = (Path(tile_ceiling.ROOT) / "engine/kernels/qmatmul.cc").read_text()
    for old, new in tile_ceiling.CUTS:
        assert text.count(old) == 1, old
        assert new != old


@pytest.mark.timeout(300)
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="needs llama-cpp-python (.ci/run installs it)")
def test_decode_vs_bus_reads_both_engines_against_the_bare_read(tiny_bpe_gguf, tmp_path, capsys):
    """bench.decode_vs_bus: each engine's decode, in turn, as a share of the bare read beside it."""
    from bench import decode_vs_bus

    out = tmp_path / "bus.json"
    assert decode_vs_bus.main(["--model", str(tiny_bpe_gguf), "--rounds", "2", "--tokens", "4", "--read-gb", "1",
                               "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert set(r["summary"]) == {"ours", "llamacpp"} and r["tensor_bytes"] > 0
    assert all(len(v) == 2 and min(v) > 0 for v in r["of_bare_read"].values())
    assert "of the bare read" in capsys.readouterr().out

