"""Weights held against the file's tensor bytes, per llama.cpp file type.

    python -m bench.held_bytes                      # every type llama.cpp quantizes without an imatrix
    python -m bench.held_bytes --types Q4_K_M,IQ4_XS

One random-weight F16 file (8 layers, d 256) is quantized by llama.cpp's own quantizer
(llama_cpp.llama_model_quantize, the code of llama-quantize) to each type, and the engine's
prediction of what it holds (gguf_loader.weight_bytes, which the tests check equals what
load_model allocates) is divided by the file's quantized tensor bytes. The F32 norms are not in
the file's count and are in the held one (~0.5% at this size). Needs llama-cpp-python.
"""
from __future__ import annotations

import argparse
import ctypes
import tempfile
from collections import Counter
from pathlib import Path

FTYPES = ("Q4_0", "Q4_1", "Q8_0", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
          "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_M")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.held_bytes", description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", default=",".join(FTYPES))
    args = ap.parse_args(argv)
    import llama_cpp

    from engine import kernels
    from engine.gguf_loader import check_model_file, read_gguf, weight_bytes
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    print(f"kernel: {kernels.status()}")
    with tempfile.TemporaryDirectory() as tmp:
        src = write_tiny_gguf(Path(tmp) / "f16.gguf", d_model=256, n_heads=4, n_kv_heads=2, ffn_dim=512, n_layers=8,
                              tensor_type="F16", tied=False, context_length=1024, weight_std=0.04)
        for ftype in args.types.split(","):
            dst = Path(tmp) / f"{ftype}.gguf"
            p = llama_cpp.llama_model_quantize_default_params()
            p.ftype, p.nthread = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}"), 2
            if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p)) != 0:
                print(f"{ftype:7} quantizing failed")
                continue
            tensors = read_gguf(dst).tensors
            types = {t.name: t.tensor_type.name for t in tensors}
            file_bytes = sum(int(t.n_bytes) for t in tensors if t.tensor_type.name != "F32")
            held = weight_bytes(check_model_file(dst), types.get)
            mix = ", ".join(f"{n} {k}" for k, n in Counter(t for t in types.values() if t != "F32").most_common())
            print(f"{ftype:7} held / file {held / file_bytes:5.3f}   ({mix})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
