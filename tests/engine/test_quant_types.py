"""Every quantization type Pinwheel reads, in a file made by llama.cpp's own quantizer
(llama_cpp.llama_model_quantize, the same code as llama-quantize) from one F16 random-weight
file: it loads, is held as predicted, and agrees with llama.cpp on the same file (f32 KV on both
sides). IQ3_XXS and the IQ2 and IQ1 types, which llama_model_quantize makes only with an importance
matrix, are made by the same quantizer tensor by tensor with a uniform one
(quantize_with_unit_imatrix)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from engine import load_model
from engine import kernels
from engine.gguf_loader import SUPPORTED_TYPES, check_model_file, params_nbytes, read_gguf, weight_bytes
from tests.fixtures.tiny_gguf import write_tiny_gguf

pytestmark = pytest.mark.llamacpp

# llama.cpp's file types (LLAMA_FTYPE_MOSTLY_*) that need no importance matrix, and the tensor
# type each must bring in (beside the Q6_K/Q4_K/Q5_K its mixes use for some tensors)
FTYPES = {"Q2_K": "Q2_K", "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K", "Q4_K_S": "Q4_K",
          "Q4_K_M": "Q4_K", "Q5_K_M": "Q5_K", "Q6_K": "Q6_K", "Q5_0": "Q5_0", "Q5_1": "Q5_1",
          "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "IQ3_S": "IQ3_S", "IQ3_M": "IQ3_S", "IQ3_XXS": "IQ3_XXS",
          "F16": "F16", "BF16": "BF16", "IQ2_XXS": "IQ2_XXS", "IQ2_XS": "IQ2_XS", "IQ2_S": "IQ2_S", "IQ1_S": "IQ1_S",
          "IQ1_M": "IQ1_M"}
MAX_MEAN_ABS_DLOGP = 0.064  # the family tests' bound (tests/engine/test_families.py)
MIN_TOP1 = 0.9  # this flat-ish model: its Q8_0 file, weights identical on both sides, reads 93%


@pytest.fixture(scope="module")
def f16_file(tmp_path_factory):
    # 256 wide (K-quant rows); weight_std 0.04: peaked enough, and F16 itself agrees to ~0.015
    return write_tiny_gguf(tmp_path_factory.mktemp("types") / "f16.gguf", d_model=256, n_heads=4, n_kv_heads=2,
                           ffn_dim=512, n_layers=4, tensor_type="F16", tied=False, context_length=1024,
                           weight_std=0.04)


# Types llama_model_quantize makes only with an importance matrix (llama.cpp's
# tensor_requires_imatrix: IQ3_XXS and the IQ2/IQ1 types), which it takes only as a C++ map: these
# are made by llama.cpp's own quantizer one tensor at a time (ggml_quantize_chunk, the code
# llama_model_quantize calls) with a uniform importance matrix, every 2-D tensor in the type
# (its pure mode), and written with gguf-py.
WITH_IMATRIX = {"IQ3_XXS": 23, "IQ2_XXS": 19, "IQ2_XS": 20, "IQ2_S": 28, "IQ1_S": 24, "IQ1_M": 31}  # type -> LLAMA_FTYPE_MOSTLY_*


def quantize_with_unit_imatrix(src, dst, ftype: str):
    """src's F16/F32 2-D tensors quantized to GGML type ftype by llama.cpp's ggml_quantize_chunk
    (importance 1 for every column), everything else copied; general.file_type set to match."""
    import gguf
    from pathlib import Path

    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    chunk = lib.ggml_quantize_chunk
    chunk.restype = ctypes.c_size_t
    chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                      ctypes.c_void_p]
    qtype = gguf.GGMLQuantizationType[ftype]
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = WITH_IMATRIX[ftype] if name == "general.file_type" else field.contents()
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, field.types[0], sub_type=sub)
    if "general.file_type" not in reader.fields:
        w.add_file_type(WITH_IMATRIX[ftype])
    for t in reader.tensors:
        data = np.array(t.data)
        if data.ndim == 2 and t.tensor_type.name in ("F16", "F32") and data.shape[1] % 32 == 0:
            x = np.ascontiguousarray(data, np.float32)
            rows, n = x.shape
            # rows not a whole number of super-blocks: IQ4_NL, as llama.cpp's own fallback for them
            to = qtype if n % block == 0 else gguf.GGMLQuantizationType.IQ4_NL
            b, sz = gguf.GGML_QUANT_SIZES[to]
            out = np.zeros((rows, n // b * sz), np.uint8)
            ones = np.ones(n, np.float32)
            assert chunk(to.value, x.ctypes.data, out.ctypes.data, 0, rows, n, ones.ctypes.data) == out.nbytes
            w.add_tensor(t.name, out, raw_dtype=to)
        else:
            w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def quantize(src, dst, ftype: str):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    if ftype in WITH_IMATRIX:
        return quantize_with_unit_imatrix(src, dst, ftype)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = 2
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) == 0
    return dst


@pytest.mark.parametrize("ftype", FTYPES)
def test_type_loads_and_agrees_with_llama_cpp(f16_file, tmp_path, ftype):
    from bench import quality as q
    from tests.engine.test_families import text_ids

    path = quantize(f16_file, tmp_path / f"{ftype}.gguf", ftype)
    types = {t.name: t.tensor_type.name for t in read_gguf(path).tensors}
    assert FTYPES[ftype] in types.values() and set(types.values()) <= set(SUPPORTED_TYPES), types
    model = load_model(path)
    assert params_nbytes(model.params) == weight_bytes(model.config, types.get) == model.weight_bytes
    ids = text_ids(model, 120)
    ref = q.llama_logits(path, ids, n_ctx=512, n_threads=2, type_kv=0)
    r = q.compare_logits(ref, q.engine_logits(model, ids, "f32"), ids)
    print(f"{ftype}: mean |dlogp| {r['mean_abs_dlogp']:.4f}, top-1 {r['top1_agree']:.3f}")
    assert r["mean_abs_dlogp"] < MAX_MEAN_ABS_DLOGP, r["mean_abs_dlogp"]
    assert r["top1_agree"] >= MIN_TOP1, r["top1_agree"]
    assert np.isfinite(r["max_abs_dlogp"])


@pytest.mark.parametrize("ftype", ["Q3_K_S", "Q3_K_M", "Q3_K_L", "Q2_K"])
def test_low_bit_k_quants_are_held_as_stored(f16_file, tmp_path, ftype):
    """A Q3_K or Q2_K file takes no more memory than its tensors do on disk (within 2%: the F32
    norms, which the file's count leaves out): every tensor is held in its own format where the
    kernel multiplies it, not re-quantized to q8_0 (2.5-3.2x these types' bytes)."""
    if not {"q3_k", "q2_k", "q4_k", "q5_k", "q6_k"} <= set(kernels.formats() or ()):
        pytest.skip(f"this kernel build does not multiply the K-quants at speed: {kernels.status()}")
    _assert_held_as_stored(f16_file, tmp_path, ftype)


@pytest.mark.parametrize("ftype", ["IQ3_XXS", "IQ3_S", "IQ3_M"])
def test_iq3_types_are_held_as_stored(f16_file, tmp_path, ftype):
    """An IQ3_XXS or IQ3_S file (IQ3_M: IQ3_S with Q4_K/IQ4 beside it) takes no more memory than
    its tensors do on disk (within 2%: the F32 norms): held in its own format where the kernel
    multiplies it, not re-quantized to q8_0 (2.5-2.8x these types' bytes; IQ3_XXS was refused)."""
    if not {"iq3_xxs", "iq3_s"} <= set(kernels.formats() or ()):
        pytest.skip(f"this kernel build does not multiply the IQ3 types at speed: {kernels.status()}")
    _assert_held_as_stored(f16_file, tmp_path, ftype)


@pytest.mark.parametrize("ftype", ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M"])
def test_iq2_and_iq1_types_are_held_as_stored(f16_file, tmp_path, ftype):
    """An IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S or IQ1_M file takes no more memory than its tensors do on
    disk (within 2%: the F32 norms): held in its own format where the kernel multiplies it (the
    types were refused)."""
    if not {"iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m"} <= set(kernels.formats() or ()):
        pytest.skip(f"this kernel build does not multiply the IQ2 and IQ1 types at speed: {kernels.status()}")
    _assert_held_as_stored(f16_file, tmp_path, ftype)


def _assert_held_as_stored(f16_file, tmp_path, ftype):
    """The file quantized to ftype by llama.cpp holds at most 1.02x its tensor bytes."""
    path = quantize(f16_file, tmp_path / f"{ftype}.gguf", ftype)
    tensors = read_gguf(path).tensors
    types = {t.name: t.tensor_type.name for t in tensors}
    assert FTYPES[ftype] in types.values(), types
    file_bytes = sum(int(t.n_bytes) for t in tensors if t.tensor_type.name != "F32")
    held = weight_bytes(check_model_file(path), types.get)
    print(f"{ftype}: held / file {held / file_bytes:.4f}")
    assert held <= 1.02 * file_bytes, (ftype, held / file_bytes)
