"""How much faster could the AVX-512 prefill tile be with less float work a block? A ceiling.

Each 32-value block costs tile512, per x row and pair of row groups, 8 VNNI dot products plus
the float steps that apply the scales: a multiply of the weights' scales by x's block scale and
a fused multiply-add into the sum, and (formats with a stored min: q4_1, q5_1, the K-quants) a
second one for the min term, in a pass of its own over the blocks (the constant offsets of
q8_0, q4_0, q5_0, iq4 and iq3 start the integer sums, as q6_k's per 16 values do). A super-block formulation (x quantized per 256 values as llama.cpp's
Q8_K, the scales applied to integer sums, the mins summed once a super-block) removes part of
that work, never all of it: each block's integer sum still needs its own scale. This builds
`bench/qmatmul_rows.cc` twice, from the kernel as it is and from a copy with those steps simply
dropped (wrong outputs: a timing only), and runs the two in turn. The second is an upper bound
on what any such formulation of this tile could gain; it is not a kernel to ship.

    python -m bench.tile_ceiling [O I C T] [--rounds 3]     # default 2048 2048 64 1 (in cache)
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-std=c++17", "-O3", "-march=x86-64-v4", "-mavx512vnni", "-mtune=generic", "-pthread"]  # the avx512vnni variant's

# (as the kernel has it, with the per-block float steps that a super-block form would shed)
CUTS = [
    # 4-bit, 5-bit, IQ4 and Q8_0 blocks: no offset term, no x-scale multiply
    ("""          const __m512i s = sum_steps512<8, R>(w, xq, -block_offset<F>() * bi[10 * R + r]);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(join_ps(lo.dw, hi.dw), dx), acc[r]);""",
     """          const __m512i s = sum_steps512<8, R>(w, xq);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), join_ps(lo.dw, hi.dw), acc[r]);"""),
    # ... and no min term (q4_1, q5_1, the K-quants' pass over their mins)
    ("""    if constexpr (mins_pass<F>()) min_pass512<F, R, G>(wd, wm, xf, nb, p, tail);\n""", ""),
    # Q6_K's halves: no offset term, no x-scale multiply (each half's sum still takes its scale)
    ("""          const __m512i s0 = sum_steps512<4, R>(w, xq, -half_offset<F>() * n16[0]);
          const __m512i s1 = sum_steps512<4, R>(w + 4, xq + 4 * R, -half_offset<F>() * n16[1]);
          const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), join_ps(lo.hdw[1], hi.hdw[1]),
                                           _mm512_mul_ps(_mm512_cvtepi32_ps(s0), join_ps(lo.hdw[0], hi.hdw[0])));
          acc[r] = _mm512_fmadd_ps(t, dx, acc[r]);""",
     """          const __m512i s0 = sum_steps512<4, R>(w, xq);
          const __m512i s1 = sum_steps512<4, R>(w + 4, xq + 4 * R);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), join_ps(lo.hdw[1], hi.hdw[1]),
                                   _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), join_ps(lo.hdw[0], hi.hdw[0]), acc[r]));"""),
]
LINE = re.compile(r"^(\S+)\s.*?([\d.]+) ms\s+([\d.]+) G MAC/s")


def build(src_dir: Path, out: Path) -> None:
    subprocess.run(["g++", *FLAGS, "-isystem", str(ROOT / "engine/kernels/include"), f"-I{src_dir}",
                    "-o", str(out), str(ROOT / "bench/qmatmul_rows.cc")], check=True)


def run(exe: Path, shape: list[str]) -> dict[str, float]:
    text = subprocess.run([str(exe), *shape], check=True, capture_output=True, text=True).stdout
    return {m.group(1): float(m.group(3)) for m in map(LINE.match, text.splitlines()) if m}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", nargs="*", default=["2048", "2048", "64", "1"], help="O I C T")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cut = tmp / "cut"
        shutil.copytree(ROOT / "engine/kernels", cut, ignore=shutil.ignore_patterns("lib", "__pycache__"))
        text = (cut / "qmatmul.cc").read_text()
        for old, new in CUTS:
            if old not in text:
                raise SystemExit("tile512 no longer reads as this script expects: update CUTS\n" + old)
            text = text.replace(old, new)
        (cut / "qmatmul.cc").write_text(text)
        build(ROOT / "engine/kernels", tmp / "as_is")
        build(cut, tmp / "ceiling")
        best: dict[str, dict[str, float]] = {"as_is": {}, "ceiling": {}}
        for _ in range(a.rounds):  # in turn: the machine's load falls on both alike
            for name in best:
                for fmt, gmac in run(tmp / name, a.shape).items():
                    best[name][fmt] = max(best[name].get(fmt, 0.0), gmac)
    print(f"shape O I C T = {' '.join(a.shape)}; G MAC/s, best of {a.rounds} rounds in turn")
    print(f"{'format':8} {'as is':>8} {'ceiling':>8} {'ratio':>6}")
    for fmt, g in best["as_is"].items():
        c = best["ceiling"][fmt]
        print(f"{fmt:8} {g:8.1f} {c:8.1f} {c / g:6.2f}x")


if __name__ == "__main__":
    main()
