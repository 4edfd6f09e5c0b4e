// Block-quantized matrix products for XLA:CPU, called from JAX through the FFI.
//
// y[c, o] = sum_i x[c, i] * W[o, i] for weights kept in GGUF's own block layouts, 32 values
// per block with f16 scales (llama.cpp's Q8_0, Q4_0, Q4_1), read straight from the packed
// bytes. XLA:CPU has no fast path for int8 or 4-bit weights (it converts as it reads, at a
// fraction of the memory bandwidth, and at some shapes materialises an f32 copy of the weight
// on every step); here each row of x is quantized to int8 per 32 values, as llama.cpp does,
// and the products run on the integer dot-product units (AVX-512 VNNI, else AVX2; on ARM64
// i8mm's usdot/usmmla, else dotprod's sdot, else NEON's widening multiplies; else plain C++ the
// compiler vectorises).
//
// Exactness: every output element is computed by the same instruction sequence whatever the
// number of rows C and however the work is split across threads, so a token's result does not
// depend on whether it was computed in a 1-row decode step or an 8-row speculative verify.
//
// The weights of every layer are stacked ([L, O, ...]) and the kernel takes the layer index as
// an operand: inside the layer scan XLA then passes the whole stacked array through untouched
// instead of materialising the layer's slice for the call.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#if !defined(_WIN32)
#include <pthread.h>
#endif

#if defined(__AVX2__) || defined(__F16C__) || defined(__SSE4_1__)
#include <immintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define PW_NEON 1
#endif
#if defined(_MSC_VER) && !defined(__clang__) && (defined(_M_X64) || defined(_M_IX86))
#include <intrin.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int QK = 32;

// (Q4_KX and Q5_KX are q4_k and q5_k with a chunk's scales decoded to f32 first: qmatmul_rows'
// choice, not layouts.)
enum class Fmt { Q8_0, Q4_0, Q4_1, Q4_K, Q4_KX, Q6_K, Q5_0, Q5_1, Q5_K, Q5_KX, IQ4_NL, IQ4_XS, Q3_K, Q2_K, IQ3_XXS, IQ3_S, F16, BF16,
                 IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M };

[[maybe_unused]] inline float half_to_float(uint16_t h) {  // (the generic tile's)
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    const float f = std::ldexp((float)man, -24);
    return sign ? -f : f;
  }
  const uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

// A prefetch hint and a spin-wait hint, where the compiler has them (GCC and clang spell the
// first alike; MSVC has its own intrinsics for both).
#if defined(__GNUC__) || defined(__clang__)
#define PW_PREFETCH(p) __builtin_prefetch(p)
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#define PW_PREFETCH(p) _mm_prefetch((const char*)(p), _MM_HINT_T0)
#else
#define PW_PREFETCH(p) ((void)(p))
#endif

inline void cpu_relax() {
#if defined(__AVX2__)
  _mm_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  __asm__ __volatile__("yield");
#endif
}

// The vector helpers below are as much a part of their callers as the intrinsics they wrap (which
// the compilers' own headers force inline): so are they, where the compiler lets us say so.
#if defined(__GNUC__) || defined(__clang__)
#define PW_INLINE inline __attribute__((always_inline))
#define PW_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define PW_INLINE __forceinline
#define PW_NOINLINE __declspec(noinline)
#else
#define PW_INLINE inline
#define PW_NOINLINE
#endif

// Eight f32 lanes: one AVX register, or two NEON registers (lo = lanes 0-3, hi = 4-7). The
// attention code below is written once against these, and every operation is the same IEEE
// operation on both (one rounding per add, mul and fused multiply-add, the same horizontal-sum
// order), so an ARM build computes what the x86 one does, bit for bit, and both keep the
// chunk invariance the same way.
#if defined(__AVX2__)
#define PW_VEC8 1
using vf8 = __m256;
PW_INLINE vf8 v8_zero() { return _mm256_setzero_ps(); }
PW_INLINE vf8 v8_set1(float a) { return _mm256_set1_ps(a); }
PW_INLINE vf8 v8_load(const float* p) { return _mm256_loadu_ps(p); }
PW_INLINE vf8 v8_load_a(const float* p) { return _mm256_load_ps(p); }  // 32-byte aligned
PW_INLINE void v8_store(float* p, vf8 v) { _mm256_storeu_ps(p, v); }
PW_INLINE void v8_store_a(float* p, vf8 v) { _mm256_store_ps(p, v); }
PW_INLINE vf8 v8_add(vf8 a, vf8 b) { return _mm256_add_ps(a, b); }
PW_INLINE vf8 v8_sub(vf8 a, vf8 b) { return _mm256_sub_ps(a, b); }
PW_INLINE vf8 v8_mul(vf8 a, vf8 b) { return _mm256_mul_ps(a, b); }
PW_INLINE vf8 v8_min(vf8 a, vf8 b) { return _mm256_min_ps(a, b); }
PW_INLINE vf8 v8_max(vf8 a, vf8 b) { return _mm256_max_ps(a, b); }
PW_INLINE vf8 v8_fma(vf8 a, vf8 b, vf8 c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, one rounding
PW_INLINE vf8 v8_floor(vf8 v) { return _mm256_floor_ps(v); }
// 2^n for whole n held as floats (the exponent bits of int(n) + 127)
PW_INLINE vf8 v8_pow2i(vf8 n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23));
}
PW_INLINE vf8 v8_from_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)));
}
PW_INLINE vf8 v8_from_bf16(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
}
PW_INLINE float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#if defined(__AVX512F__) && defined(__AVX512DQ__)
// Attention also in 512-bit registers where a step's lanes are independent (two keys' or 16
// values' sums side by side): each lane's arithmetic is the 8-lane code's, so the bits are too.
#define PW_ATT512 1
#endif
#elif defined(PW_NEON)
#define PW_VEC8 1
struct vf8 {
  float32x4_t lo, hi;
};
PW_INLINE vf8 v8_zero() { return {vdupq_n_f32(0.f), vdupq_n_f32(0.f)}; }
PW_INLINE vf8 v8_set1(float a) { return {vdupq_n_f32(a), vdupq_n_f32(a)}; }
PW_INLINE vf8 v8_load(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
PW_INLINE vf8 v8_load_a(const float* p) { return v8_load(p); }
PW_INLINE void v8_store(float* p, vf8 v) { vst1q_f32(p, v.lo), vst1q_f32(p + 4, v.hi); }
PW_INLINE void v8_store_a(float* p, vf8 v) { v8_store(p, v); }
PW_INLINE vf8 v8_add(vf8 a, vf8 b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
PW_INLINE vf8 v8_sub(vf8 a, vf8 b) { return {vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)}; }
PW_INLINE vf8 v8_mul(vf8 a, vf8 b) { return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
PW_INLINE vf8 v8_min(vf8 a, vf8 b) { return {vminq_f32(a.lo, b.lo), vminq_f32(a.hi, b.hi)}; }
PW_INLINE vf8 v8_max(vf8 a, vf8 b) { return {vmaxq_f32(a.lo, b.lo), vmaxq_f32(a.hi, b.hi)}; }
PW_INLINE vf8 v8_fma(vf8 a, vf8 b, vf8 c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
PW_INLINE vf8 v8_floor(vf8 v) { return {vrndmq_f32(v.lo), vrndmq_f32(v.hi)}; }
PW_INLINE vf8 v8_pow2i(vf8 n) {
  const int32x4_t e = vdupq_n_s32(127);
  return {vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n.lo), e), 23)),
          vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n.hi), e), 23))};
}
PW_INLINE vf8 v8_from_i8(const int8_t* p) {
  const int16x8_t w = vmovl_s8(vld1_s8(p));
  return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), vcvtq_f32_s32(vmovl_high_s16(w))};
}
PW_INLINE vf8 v8_from_bf16(const uint16_t* p) {
  const uint16x8_t w = vld1q_u16(p);
  return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(w), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(w, 16))};
}
// x86's hsum8 order: lanes i and i + 4, then i and i + 2, then the two halves.
PW_INLINE float hsum8(vf8 v) {
  const float32x4_t s = vaddq_f32(v.lo, v.hi);
  return vpadds_f32(vadd_f32(vget_low_f32(s), vget_high_f32(s)));
}
#endif

// One row of x quantized as llama.cpp's Q8_0/Q8_1 activations: int8 values, a scale per block
// and (for the weights' offsets) the scaled sum of each block's values.
struct QRow {
  const int8_t* q;
  const float* d;
  const float* s;  // d * sum(q) per block
  const int32_t* n;  // sum(q) per block (the ARM paths without an unsigned x signed dot use it)
  const int32_t* n16;  // sum(q) per 16 values (q6_k's, q3_k's and q2_k's offsets and mins, per their scales' 16 values), or null
  const float* f;  // the row itself, f32 (the f16 and bf16 weights' products), or null
};

// x's values rounded to int8 per block of 32 (llama.cpp's quantize_row_q8_0): d = max|x| / 127,
// q = round-half-even(x / d). Also each block's sum(q) (n) and d * sum(q) (s), and where n16 is
// given the sums of its two halves of 16. The scalar form is the definition; the AVX2 and NEON
// forms compute the same bits (a max is exact in any order, each rounding is the same single
// operation, the integer sums are exact), about 4x faster: at 64 rows this serial step had
// grown to ~7-12% of a prefill product (I = 2,048 / 8,192). For finite x, that is: a NaN or an
// infinity in x gives each form its own garbage.
// 1 / d, or 0 where d is 0 or so small (max |x| below ~1e-37) that 1 / d overflows: such a block
// rounds to zeros in every form (x * inf would be inf, which each form converts differently).
inline float inverse_scale(float db) {
  const float id = db != 0.f ? 1.f / db : 0.f;
  return id <= std::numeric_limits<float>::max() ? id : 0.f;
}
// A block's scale and sums as every form of quantize_row stores them (h0, h1: its halves' sums).
PW_INLINE void store_block(int b, float db, int32_t h0, int32_t h1, float* d, float* s, int32_t* n, int32_t* n16) {
  const int sum = h0 + h1;
  d[b] = db;
  s[b] = db * (float)sum;
  n[b] = sum;
  if (n16) n16[2 * b] = h0, n16[2 * b + 1] = h1;
}
[[maybe_unused]] void quantize_row_scalar(const float* x, int n_blocks, int8_t* q, float* d, float* s, int32_t* n, int32_t* n16) {
  for (int b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * QK;
    float amax = 0.f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float db = amax / 127.f, id = inverse_scale(db);
    int half[2] = {0, 0};
    for (int j = 0; j < QK; ++j) {
      const int v = (int)std::nearbyint(xb[j] * id);
      q[b * QK + j] = (int8_t)v;
      half[j / (QK / 2)] += v;
    }
    store_block(b, db, half[0], half[1], d, s, n, n16);
  }
}
#if defined(__AVX2__)
PW_INLINE int32_t hsum8_epi32(__m256i v) {
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
}
void quantize_row(const float* x, int n_blocks, int8_t* q, float* d, float* s, int32_t* n, int32_t* n16 = nullptr) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  for (int b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * QK;
    __m256 v[4], m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m);  // (a NaN lane leaves m as std::max does)
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = std::max(_mm_cvtss_f32(m4), _mm_cvtss_f32(_mm_movehdup_ps(m4)));
    const float db = amax / 127.f, id = inverse_scale(db);
    __m256i iv[4];
    for (int k = 0; k < 4; ++k)
      iv[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(id)),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // int32 -> int8 in value order: the packs interleave 128-bit lanes, the permute undoes it
    const __m256i w16 = _mm256_packs_epi32(iv[0], iv[1]), x16 = _mm256_packs_epi32(iv[2], iv[3]);
    const __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, x16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i*)(q + b * QK), b8);
    const int32_t h0 = hsum8_epi32(_mm256_add_epi32(iv[0], iv[1])), h1 = hsum8_epi32(_mm256_add_epi32(iv[2], iv[3]));
    store_block(b, db, h0, h1, d, s, n, n16);
  }
}
#elif defined(PW_NEON)
void quantize_row(const float* x, int n_blocks, int8_t* q, float* d, float* s, int32_t* n, int32_t* n16 = nullptr) {
  for (int b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * QK;
    float32x4_t v[8], m = vdupq_n_f32(0.f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(xb + 4 * k);
      m = vmaxnmq_f32(m, vabsq_f32(v[k]));  // (maxNum: a NaN lane leaves m, as std::max does)
    }
    const float amax = vmaxnmvq_f32(m);
    const float db = amax / 127.f, id = inverse_scale(db);
    int32x4_t iv[8];
    for (int k = 0; k < 8; ++k) iv[k] = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));  // (ties to even)
    for (int k = 0; k < 4; ++k) {
      const int16x8_t h = vcombine_s16(vqmovn_s32(iv[2 * k]), vqmovn_s32(iv[2 * k + 1]));
      vst1_s8(q + b * QK + 8 * k, vqmovn_s16(h));
    }
    const int32_t h0 = vaddvq_s32(vaddq_s32(vaddq_s32(iv[0], iv[1]), vaddq_s32(iv[2], iv[3])));
    const int32_t h1 = vaddvq_s32(vaddq_s32(vaddq_s32(iv[4], iv[5]), vaddq_s32(iv[6], iv[7])));
    store_block(b, db, h0, h1, d, s, n, n16);
  }
}
#else
void quantize_row(const float* x, int n_blocks, int8_t* q, float* d, float* s, int32_t* n, int32_t* n16 = nullptr) {
  quantize_row_scalar(x, n_blocks, q, d, s, n, n16);
}
#endif

// The weight layout (engine/quant.py writes it): output rows in groups of 8, and inside a
// group, block by block, the values of all 8 rows interleaved 4 bytes at a time, so that one
// 32-byte load holds 4 consecutive values of each of the 8 rows and one dot-product
// instruction against 4 broadcast x values advances all 8 outputs (llama.cpp's repacked Q4_0
// kernels work the same way). Per group and block:
//   q8_0: 256 bytes, [8 steps][8 rows][4 values], each value stored as w + 128 (unsigned);
//   q4_x: 128 bytes, [4 steps][8 rows][4 bytes]; the low nibbles of step k are values 4k..4k+3,
//         the high nibbles values 16+4k..16+4k+3 of that row's block (GGUF's nibble order);
//   scales (and q4_1 offsets): [8 rows] f16.
// Groups come in chunks of K (4, or 2 or 1 where the group count is not a multiple of 4), and a
// chunk is stored block by block: [block][K groups][group and block bytes], scales the same. A
// chunk's tile then reads one sequential stream instead of K streams a group apart (and K more
// for the scales): in a harness of this tile over 151 MB (the 1.7B up projection's shape), one
// core drew 12-16 GB/s from DRAM through four streams and 14-19 GB/s through one.
// Every weight value is then unsigned (0..255 or 0..15) and the offset is applied through the x
// block's sum: a constant one (128, 8, 16) on the integers, sum(w q_x) = sum(u q_x) - 128 sum(q_x)
// (block_offset), and q4_1's stored min m in float: sum(w x) = d_w d_x sum(u q_x) + m d_x sum(q_x).
//
// q4_k is llama.cpp's Q4_K as stored, 4.5 bits a value: super-blocks of 256 values (8 blocks of
// 32), w = d * scale[j] * q - dmin * min[j] with f16 d and dmin per super-block and 6-bit scale
// and min per block. Its nibbles are q4_x's (re-ordered at load: Q4_K packs blocks 2j and 2j + 1
// into one 32-byte run); per group and super-block it keeps:
//   d: 16 f16, [d of the 8 rows, dmin of the 8 rows];
//   m: 96 bytes of 6-bit scales and mins, laid out for decoding 8 rows at once: bytes 8j + row
//      hold the low 4 bits of block j's scale (low nibble) and min (high nibble), and the 32-bit
//      word at byte 64 + 4j their high 2 bits, the scale's at bits 2 row, the min's at 16 + 2 row.
// That is the file's 144 bytes a row and super-block, byte for byte in number (holding the
// scales as bytes, 16 a row, would make the weights 1.03x the file). A chunk's scales are decoded
// once a call into f32 (expand_q4k: dw = d * scale and coef = -dmin * min, 8 rows each, per
// block and group), and the tile reads those as q4_1's: decoding them in the tile, per block and
// row tile, made a 16384x2048 product 1.4x slower than q4_1 at 8 rows (1.5x in L2 at 1 row).
//
// q6_k is llama.cpp's Q6_K as stored, 6.56 bits a value: super-blocks of 256 values, w = d *
// scale[i] * (q - 32) with an f16 d per super-block, an int8 scale per 16 values and q in 0..63.
// Per group and block it keeps 192 bytes: q's low 4 bits as q4_x's nibbles (128 bytes), then
// its high 2 bits in two 32-byte steps laid as the nibbles' (row, byte j) lanes: the first holds
// values 4k + j at bits 2k (k < 4), the second values 16 + 4k + j; OR-ed in above the nibble,
// they make each step's 4 values of each row one dot product's operand, as for q4_x. Per group
// and super-block: d, 8 f16; m, 128 int8 scales, [block][its two halves][8 rows]. With the
// (q - 32) offset applied to each half's integer sum (32 times the x values' sum over its 16),
// that is the file's 210 bytes a row and super-block.
//
// q5_0, q5_1 and q5_k are Q5_0, Q5_1 and Q5_K as stored: q4_0's, q4_1's and q4_k's layouts with
// each value's 5th bit in one more 32-byte step per group and block (lane (row, j): bit k for
// value 4k + j, bit 4 + k for value 16 + 4k + j), OR-ed in as bit 4 of the nibble's byte; q5_0's
// offset is 16. The files' 22, 24 and 176 bytes a row and 32 or 256 values.
//
// iq4_nl and iq4_xs are IQ4_NL and IQ4_XS as stored: 4-bit indices into llama.cpp's 16
// non-linear values, in q4_x's nibble layout, looked up in the tile with one byte shuffle per
// step; iq4_nl has q4_0's f16 scale per 32, iq4_xs an f16 d per super-block and a 6-bit scale
// per 32 (iq4xs_at). The files' 18 and 136 bytes a row and 32 or 256 values.
//
// q3_k is llama.cpp's Q3_K as stored, 3.44 bits a value: super-blocks of 256 values, w = d *
// (ls[i] - 32) * (q - 4) with an f16 d per super-block, a 6-bit ls per 16 values and q in 0..7.
// Per group and block it keeps 96 bytes: q's low 2 bits in two 32-byte steps laid as q6_k's high
// bits (lane (row, j) of the first: values 4k + j at bits 2k; of the second: 16 + 4k + j), then
// its high bit in one 32-byte step laid as q5's 5th bit (value 4k + j at bit k, 16 + 4k + j at
// 4 + k). Per group and super-block: d, 8 f16; m, 96 bytes of the 16 scales, 12 a block
// (q3k_at). A block's two halves' integer sums, each with the (q - 4) offset through the x
// values' sum over its 16, are combined exactly with their scales, sum((ls - 32) (sum(q x) -
// 4 sum(x))) (one pmaddwd of 16-bit pairs on x86), then scaled once by d d_x. The file's 110
// bytes a row and super-block.
//
// q2_k is Q2_K as stored, 2.63 bits a value: w = d * sc[i] * q - dmin * mn[i] with f16 d and
// dmin per super-block, 4-bit sc and mn per 16 values and q in 0..3. Per group and block: q's 2
// bits as q3_k's low bits (64 bytes); per group and super-block d, 16 f16 (d of the 8 rows, then
// dmin), and m, the file's 16 scale bytes (sc | mn << 4) of each row as [scale][8 rows]. As for
// q3_k, a block's halves combine as integers, sum(sc sum(q x)) scaled by d d_x into acc, and
// the mins' -sum(mn sum(x)) scaled by dmin d_x into the tail (q4_1's offset term). The file's
// 84 bytes a row and super-block.
//
// iq3_xxs and iq3_s are IQ3_XXS and IQ3_S as stored: per 32 values 8 indices into llama.cpp's
// grids of 4 unsigned values (IQ3XXS_GRID, 256 entries, values 4..62; IQ3S_GRID, 512, 1..15), a
// sign per value and a 4-bit scale ls, w = db * sign * grid value with an f16 d per super-block
// (iq3_xxs: db = d (2 ls + 1) / 4; iq3_s: db = d (2 ls + 1)). Per group and block:
//   bytes 8k + row: the index of row's step k (values 4k..4k+3), low 8 bits (64 bytes);
//   iq3_s: bytes 64 + row: the 9th bits, bit k for step k (8 bytes);
//   bytes S + 4 row (S = 64 iq3_xxs, 72 iq3_s): row's 32-bit sign word: iq3_s, the file's 4
//     sign bytes (bit i of byte l: value 8l + i); iq3_xxs, byte l the file's 7-bit index into
//     ksigns_iq2xs for values 8l..8l+7 (its 8th sign is the parity of the 7: an even count of
//     minus signs) and, at bit 7, bit l of ls;
//   iq3_s: bytes 104 + row / 2: ls, rows 2i and 2i + 1 in the low and high nibble (4 bytes).
// Per group and super-block: d, 8 f16. The tiles look the grid up per step (a gather of the 8
// rows' entries on AVX2), give each value its sign, and multiply as q8_0's unsigned w + 128
// (NEON's dotprod and baseline and the SSE tile: signed w, as iq4's) with dw = db, the 128
// coming off the integer sum as q8_0's. The files' 98 and 110 bytes a row and super-block.
//
// iq2_xxs, iq2_xs, iq2_s, iq1_s and iq1_m are IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M as stored:
// per 32 values 4 indices into llama.cpp's grids of 8 values (IQ2XXS_GRID, 256 entries;
// IQ2XS_GRID, 512; IQ2S_GRID, 1024: values 8, 25, 43; IQ1S_GRID, 2048: values -1, 0, 1), a scale
// ls per 16 values (4 bits for iq2, 3 for iq1; iq2_xxs and iq1_s have one for all 32) and an f16
// d per super-block. iq2: w = d (2 ls + 1) / 8 * sign * grid value; iq1: w = d (2 ls + 1) (grid
// value + delta), delta = -1/8 or +1/8 per 32 values (iq1_s) or per 8 (iq1_m). Both are
// d / 8 (2 ls + 1) w8, with w8 = sign * grid value (iq2) or 8 grid value +- 1 (iq1): an int8 (|w8|
// <= 43). Per group and block:
//   bytes 8l + row (32 bytes): the low 8 bits of row's index l (values 8l..8l+7);
//   iq2_xxs: bytes 32 + 4 row: row's sign word as iq3_xxs's: byte l the file's 7-bit index into
//     ksigns_iq2xs for values 8l..8l+7 (its 8th sign the parity of the 7), bit l of ls at its bit 7;
//   iq2_xs: bytes 32 + 4 row: the same sign word, with index l's 9th bit at bit 7 of byte l;
//     bytes 64 + row: the file's scale byte (ls of values 0-15 in the low nibble, 16-31 the high);
//   iq2_s: bytes 32 + 4 row: the file's 4 sign bytes (bit i of byte l: value 8l + i); bytes
//     64 + row: the file's qh byte (index l's bits 8-9 at bits 2l, 2l + 1); bytes 72 + row: the
//     scale byte, as iq2_xs's;
//   iq1_s: bytes 32 + 2 row: the file's 16-bit qh (index l's bits 8-10 at bits 3l..3l+2, ls at
//     bits 12-14, bit 15 set: delta negative);
//   iq1_m: bytes 32 + 3h (6 bytes): the 3-bit ls of rows 4h..4h+3, 6 bits a row (row 4h + i's at
//     bit 6i: values 0-15's ls, then 16-31's); bytes 38 + 2 row: the file's two qh bytes as a
//     16-bit word (index l's bits 8-10 at bits 4l..4l+2, its delta negative where bit 4l + 3 is set).
// Per group and super-block: d, 8 f16 (iq1_m: the f16 the file spreads over its scale words' top
// nibbles). The files' 66, 74, 82, 50 and 56 bytes a row and super-block. The tiles look the
// grid up per 4 values (a gather of the 8 rows' entries on AVX2), give each value its sign (iq2)
// or make 8 g +- 1 (iq1), and sum a block's halves of 16 apart, as integers: sum(w8 x) over each
// (AVX2 and i8mm: sum((w8 + 128) x) - 128 sum(x), q6_k's offset per 16), combined exactly as
// (2 ls0 + 1) s0 + (2 ls1 + 1) s1, then scaled once by d / 8 d_x into acc (q3_k's chain; no tail).
//
// f16 and bf16 are F16 and BF16 weights as stored, 2 bytes a value: per group and block of 32,
// [value j][8 rows] (512 bytes: one 16-byte load is value j of the 8 rows). x stays f32 (not
// quantized) and each row's product is one fused multiply-add chain over the values in order,
// w converted to f32 exactly: acc = fma(w_j, x_j, acc), the same on every path (SSE: fma_exact),
// so the builds agree bit for bit. No scales (d and m hold nothing).
constexpr int GROUP = 8;
constexpr int QK_K = 256, BLOCKS_K = QK_K / QK;

template <Fmt F>
constexpr bool five_bit() { return F == Fmt::Q5_0 || F == Fmt::Q5_1 || F == Fmt::Q5_K || F == Fmt::Q5_KX; }
template <Fmt F>
constexpr bool iq4() { return F == Fmt::IQ4_NL || F == Fmt::IQ4_XS; }
// IQ4's 16 values (llama.cpp's kvalues_iq4nl) plus 128: the unsigned byte the dot product takes
// (the 128 comes off through the x block's sum, as q8_0's).
alignas(16) constexpr uint8_t IQ4_U[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
template <Fmt F>
constexpr bool iq3() { return F == Fmt::IQ3_XXS || F == Fmt::IQ3_S; }
template <Fmt F>
constexpr bool float_w() { return F == Fmt::F16 || F == Fmt::BF16; }  // f16 / bf16 weights: f32 products
// IQ3_XXS's and IQ3_S's grids: llama.cpp's iq3xxs_grid and iq3s_grid, copied verbatim from
// ggml/src/ggml-common.h (ggml-org/llama.cpp, MIT licence, Copyright (c) 2023-2024 The ggml
// authors). Each entry is 4 unsigned values, the first in the low byte.
alignas(64) constexpr uint32_t IQ3XXS_GRID[256] = {
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414,
    0x04041c0c, 0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14,
    0x040c140c, 0x040c142c, 0x040c1c04, 0x040c1c14, 0x040c240c, 0x040c2c24, 0x040c3e04, 0x04140404,
    0x04140414, 0x04140424, 0x04140c0c, 0x04141404, 0x04141414, 0x04141c0c, 0x04141c1c, 0x04141c3e,
    0x04142c0c, 0x04142c3e, 0x04143e2c, 0x041c040c, 0x041c043e, 0x041c0c04, 0x041c0c14, 0x041c142c,
    0x041c3e04, 0x04240c1c, 0x04241c3e, 0x04242424, 0x04242c3e, 0x04243e1c, 0x04243e2c, 0x042c040c,
    0x042c043e, 0x042c1c14, 0x042c2c14, 0x04341c2c, 0x04343424, 0x043e0c04, 0x043e0c24, 0x043e0c34,
    0x043e241c, 0x043e340c, 0x0c04040c, 0x0c04041c, 0x0c040c04, 0x0c040c14, 0x0c04140c, 0x0c04141c,
    0x0c041c04, 0x0c041c14, 0x0c041c24, 0x0c04243e, 0x0c042c04, 0x0c0c0404, 0x0c0c0414, 0x0c0c0c0c,
    0x0c0c1404, 0x0c0c1414, 0x0c14040c, 0x0c14041c, 0x0c140c04, 0x0c140c14, 0x0c14140c, 0x0c141c04,
    0x0c143e14, 0x0c1c0404, 0x0c1c0414, 0x0c1c1404, 0x0c1c1c0c, 0x0c1c2434, 0x0c1c3434, 0x0c24040c,
    0x0c24042c, 0x0c242c04, 0x0c2c1404, 0x0c2c1424, 0x0c2c2434, 0x0c2c3e0c, 0x0c34042c, 0x0c3e1414,
    0x0c3e2404, 0x14040404, 0x14040414, 0x14040c0c, 0x14040c1c, 0x14041404, 0x14041414, 0x14041434,
    0x14041c0c, 0x14042414, 0x140c040c, 0x140c041c, 0x140c042c, 0x140c0c04, 0x140c0c14, 0x140c140c,
    0x140c1c04, 0x140c341c, 0x140c343e, 0x140c3e04, 0x14140404, 0x14140414, 0x14140c0c, 0x14140c3e,
    0x14141404, 0x14141414, 0x14141c3e, 0x14142404, 0x14142c2c, 0x141c040c, 0x141c0c04, 0x141c0c24,
    0x141c3e04, 0x141c3e24, 0x14241c2c, 0x14242c1c, 0x142c041c, 0x142c143e, 0x142c240c, 0x142c3e24,
    0x143e040c, 0x143e041c, 0x143e0c34, 0x143e242c, 0x1c04040c, 0x1c040c04, 0x1c040c14, 0x1c04140c,
    0x1c04141c, 0x1c042c04, 0x1c04342c, 0x1c043e14, 0x1c0c0404, 0x1c0c0414, 0x1c0c1404, 0x1c0c1c0c,
    0x1c0c2424, 0x1c0c2434, 0x1c14040c, 0x1c14041c, 0x1c140c04, 0x1c14142c, 0x1c142c14, 0x1c143e14,
    0x1c1c0c0c, 0x1c1c1c1c, 0x1c241c04, 0x1c24243e, 0x1c243e14, 0x1c2c0404, 0x1c2c0434, 0x1c2c1414,
    0x1c2c2c2c, 0x1c340c24, 0x1c341c34, 0x1c34341c, 0x1c3e1c1c, 0x1c3e3404, 0x24040424, 0x24040c3e,
    0x24041c2c, 0x24041c3e, 0x24042c1c, 0x24042c3e, 0x240c3e24, 0x24141404, 0x24141c3e, 0x24142404,
    0x24143404, 0x24143434, 0x241c043e, 0x241c242c, 0x24240424, 0x24242c0c, 0x24243424, 0x242c142c,
    0x242c241c, 0x242c3e04, 0x243e042c, 0x243e0c04, 0x243e0c14, 0x243e1c04, 0x2c040c14, 0x2c04240c,
    0x2c043e04, 0x2c0c0404, 0x2c0c0434, 0x2c0c1434, 0x2c0c2c2c, 0x2c140c24, 0x2c141c14, 0x2c143e14,
    0x2c1c0414, 0x2c1c2c1c, 0x2c240c04, 0x2c24141c, 0x2c24143e, 0x2c243e14, 0x2c2c0414, 0x2c2c1c0c,
    0x2c342c04, 0x2c3e1424, 0x2c3e2414, 0x34041424, 0x34042424, 0x34042434, 0x34043424, 0x340c140c,
    0x340c340c, 0x34140c3e, 0x34143424, 0x341c1c04, 0x341c1c34, 0x34242424, 0x342c042c, 0x342c2c14,
    0x34341c1c, 0x343e041c, 0x343e140c, 0x3e04041c, 0x3e04042c, 0x3e04043e, 0x3e040c04, 0x3e041c14,
    0x3e042c14, 0x3e0c1434, 0x3e0c2404, 0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c,
    0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c, 0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04,
};
alignas(64) constexpr uint32_t IQ3S_GRID[512] = {
    0x01010101, 0x01010103, 0x01010105, 0x0101010b, 0x0101010f, 0x01010301, 0x01010303, 0x01010305,
    0x01010309, 0x0101030d, 0x01010501, 0x01010503, 0x0101050b, 0x01010707, 0x01010901, 0x01010905,
    0x0101090b, 0x0101090f, 0x01010b03, 0x01010b07, 0x01010d01, 0x01010d05, 0x01010f03, 0x01010f09,
    0x01010f0f, 0x01030101, 0x01030103, 0x01030105, 0x01030109, 0x01030301, 0x01030303, 0x0103030b,
    0x01030501, 0x01030507, 0x0103050f, 0x01030703, 0x0103070b, 0x01030909, 0x01030d03, 0x01030d0b,
    0x01030f05, 0x01050101, 0x01050103, 0x0105010b, 0x0105010f, 0x01050301, 0x01050307, 0x0105030d,
    0x01050503, 0x0105050b, 0x01050701, 0x01050709, 0x01050905, 0x0105090b, 0x0105090f, 0x01050b03,
    0x01050b07, 0x01050f01, 0x01050f07, 0x01070107, 0x01070303, 0x0107030b, 0x01070501, 0x01070505,
    0x01070703, 0x01070707, 0x0107070d, 0x01070909, 0x01070b01, 0x01070b05, 0x01070d0f, 0x01070f03,
    0x01070f0b, 0x01090101, 0x01090307, 0x0109030f, 0x01090503, 0x01090509, 0x01090705, 0x01090901,
    0x01090907, 0x01090b03, 0x01090f01, 0x010b0105, 0x010b0109, 0x010b0501, 0x010b0505, 0x010b050d,
    0x010b0707, 0x010b0903, 0x010b090b, 0x010b090f, 0x010b0d0d, 0x010b0f07, 0x010d010d, 0x010d0303,
    0x010d0307, 0x010d0703, 0x010d0b05, 0x010d0f03, 0x010f0101, 0x010f0105, 0x010f0109, 0x010f0501,
    0x010f0505, 0x010f050d, 0x010f0707, 0x010f0b01, 0x010f0b09, 0x03010101, 0x03010103, 0x03010105,
    0x03010109, 0x03010301, 0x03010303, 0x03010307, 0x0301030b, 0x0301030f, 0x03010501, 0x03010505,
    0x03010703, 0x03010709, 0x0301070d, 0x03010b09, 0x03010b0d, 0x03010d03, 0x03010f05, 0x03030101,
    0x03030103, 0x03030107, 0x0303010d, 0x03030301, 0x03030309, 0x03030503, 0x03030701, 0x03030707,
    0x03030903, 0x03030b01, 0x03030b05, 0x03030f01, 0x03030f0d, 0x03050101, 0x03050305, 0x0305030b,
    0x0305030f, 0x03050501, 0x03050509, 0x03050705, 0x03050901, 0x03050907, 0x03050b0b, 0x03050d01,
    0x03050f05, 0x03070103, 0x03070109, 0x0307010f, 0x03070301, 0x03070307, 0x03070503, 0x0307050f,
    0x03070701, 0x03070709, 0x03070903, 0x03070d05, 0x03070f01, 0x03090107, 0x0309010b, 0x03090305,
    0x03090309, 0x03090703, 0x03090707, 0x03090905, 0x0309090d, 0x03090b01, 0x03090b09, 0x030b0103,
    0x030b0301, 0x030b0307, 0x030b0503, 0x030b0701, 0x030b0705, 0x030b0b03, 0x030d0501, 0x030d0509,
    0x030d050f, 0x030d0909, 0x030d090d, 0x030f0103, 0x030f0107, 0x030f0301, 0x030f0305, 0x030f0503,
    0x030f070b, 0x030f0903, 0x030f0d05, 0x030f0f01, 0x05010101, 0x05010103, 0x05010107, 0x0501010b,
    0x0501010f, 0x05010301, 0x05010305, 0x05010309, 0x0501030d, 0x05010503, 0x05010507, 0x0501050f,
    0x05010701, 0x05010705, 0x05010903, 0x05010907, 0x0501090b, 0x05010b01, 0x05010b05, 0x05010d0f,
    0x05010f01, 0x05010f07, 0x05010f0b, 0x05030101, 0x05030105, 0x05030301, 0x05030307, 0x0503030f,
    0x05030505, 0x0503050b, 0x05030703, 0x05030709, 0x05030905, 0x05030b03, 0x05050103, 0x05050109,
    0x0505010f, 0x05050503, 0x05050507, 0x05050701, 0x0505070f, 0x05050903, 0x05050b07, 0x05050b0f,
    0x05050f03, 0x05050f09, 0x05070101, 0x05070105, 0x0507010b, 0x05070303, 0x05070505, 0x05070509,
    0x05070703, 0x05070707, 0x05070905, 0x05070b01, 0x05070d0d, 0x05090103, 0x0509010f, 0x05090501,
    0x05090507, 0x05090705, 0x0509070b, 0x05090903, 0x05090f05, 0x05090f0b, 0x050b0109, 0x050b0303,
    0x050b0505, 0x050b070f, 0x050b0901, 0x050b0b07, 0x050b0f01, 0x050d0101, 0x050d0105, 0x050d010f,
    0x050d0503, 0x050d0b0b, 0x050d0d03, 0x050f010b, 0x050f0303, 0x050f050d, 0x050f0701, 0x050f0907,
    0x050f0b01, 0x07010105, 0x07010303, 0x07010307, 0x0701030b, 0x0701030f, 0x07010505, 0x07010703,
    0x07010707, 0x0701070b, 0x07010905, 0x07010909, 0x0701090f, 0x07010b03, 0x07010d07, 0x07010f03,
    0x07030103, 0x07030107, 0x0703010b, 0x07030309, 0x07030503, 0x07030507, 0x07030901, 0x07030d01,
    0x07030f05, 0x07030f0d, 0x07050101, 0x07050305, 0x07050501, 0x07050705, 0x07050709, 0x07050b01,
    0x07070103, 0x07070301, 0x07070309, 0x07070503, 0x07070507, 0x0707050f, 0x07070701, 0x07070903,
    0x07070907, 0x0707090f, 0x07070b0b, 0x07070f07, 0x07090107, 0x07090303, 0x0709030d, 0x07090505,
    0x07090703, 0x07090b05, 0x07090d01, 0x07090d09, 0x070b0103, 0x070b0301, 0x070b0305, 0x070b050b,
    0x070b0705, 0x070b0909, 0x070b0b0d, 0x070b0f07, 0x070d030d, 0x070d0903, 0x070f0103, 0x070f0107,
    0x070f0501, 0x070f0505, 0x070f070b, 0x09010101, 0x09010109, 0x09010305, 0x09010501, 0x09010509,
    0x0901050f, 0x09010705, 0x09010903, 0x09010b01, 0x09010f01, 0x09030105, 0x0903010f, 0x09030303,
    0x09030307, 0x09030505, 0x09030701, 0x0903070b, 0x09030907, 0x09030b03, 0x09030b0b, 0x09050103,
    0x09050107, 0x09050301, 0x0905030b, 0x09050503, 0x09050707, 0x09050901, 0x09050b0f, 0x09050d05,
    0x09050f01, 0x09070109, 0x09070303, 0x09070307, 0x09070501, 0x09070505, 0x09070703, 0x0907070b,
    0x09090101, 0x09090105, 0x09090509, 0x0909070f, 0x09090901, 0x09090f03, 0x090b010b, 0x090b010f,
    0x090b0503, 0x090b0d05, 0x090d0307, 0x090d0709, 0x090d0d01, 0x090f0301, 0x090f030b, 0x090f0701,
    0x090f0907, 0x090f0b03, 0x0b010105, 0x0b010301, 0x0b010309, 0x0b010505, 0x0b010901, 0x0b010909,
    0x0b01090f, 0x0b010b05, 0x0b010d0d, 0x0b010f09, 0x0b030103, 0x0b030107, 0x0b03010b, 0x0b030305,
    0x0b030503, 0x0b030705, 0x0b030f05, 0x0b050101, 0x0b050303, 0x0b050507, 0x0b050701, 0x0b05070d,
    0x0b050b07, 0x0b070105, 0x0b07010f, 0x0b070301, 0x0b07050f, 0x0b070909, 0x0b070b03, 0x0b070d0b,
    0x0b070f07, 0x0b090103, 0x0b090109, 0x0b090501, 0x0b090705, 0x0b09090d, 0x0b0b0305, 0x0b0b050d,
    0x0b0b0b03, 0x0b0b0b07, 0x0b0d0905, 0x0b0f0105, 0x0b0f0109, 0x0b0f0505, 0x0d010303, 0x0d010307,
    0x0d01030b, 0x0d010703, 0x0d010707, 0x0d010d01, 0x0d030101, 0x0d030501, 0x0d03050f, 0x0d030d09,
    0x0d050305, 0x0d050709, 0x0d050905, 0x0d050b0b, 0x0d050d05, 0x0d050f01, 0x0d070101, 0x0d070309,
    0x0d070503, 0x0d070901, 0x0d09050b, 0x0d090907, 0x0d090d05, 0x0d0b0101, 0x0d0b0107, 0x0d0b0709,
    0x0d0b0d01, 0x0d0d010b, 0x0d0d0901, 0x0d0f0303, 0x0d0f0307, 0x0f010101, 0x0f010109, 0x0f01010f,
    0x0f010501, 0x0f010505, 0x0f01070d, 0x0f010901, 0x0f010b09, 0x0f010d05, 0x0f030105, 0x0f030303,
    0x0f030509, 0x0f030907, 0x0f03090b, 0x0f050103, 0x0f050109, 0x0f050301, 0x0f05030d, 0x0f050503,
    0x0f050701, 0x0f050b03, 0x0f070105, 0x0f070705, 0x0f07070b, 0x0f070b07, 0x0f090103, 0x0f09010b,
    0x0f090307, 0x0f090501, 0x0f090b01, 0x0f0b0505, 0x0f0b0905, 0x0f0d0105, 0x0f0d0703, 0x0f0f0101,
};
// iq3: the bytes of a signed step from the 8 rows' sign words (bit v of a row's word: value v
// negative): step k's lane (row, j) takes bit 4k + j, byte k / 2's bit 4 (k & 1) + j.
[[maybe_unused]] alignas(16) constexpr int8_t IQ3_BYTE[4][16] = {{0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12},
                                                {1, 1, 1, 1, 5, 5, 5, 5, 9, 9, 9, 9, 13, 13, 13, 13},
                                                {2, 2, 2, 2, 6, 6, 6, 6, 10, 10, 10, 10, 14, 14, 14, 14},
                                                {3, 3, 3, 3, 7, 7, 7, 7, 11, 11, 11, 11, 15, 15, 15, 15}};
[[maybe_unused]] alignas(16) constexpr uint8_t IQ3_BIT[2][16] = {{1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8},
                                                {16, 32, 64, 128, 16, 32, 64, 128, 16, 32, 64, 128, 16, 32, 64, 128}};
// The parity of a nibble's bits at bit 7 (iq3_xxs's 8th sign of each 8: the 7 stored ones' parity).
[[maybe_unused]] alignas(16) constexpr uint8_t IQ3_PARITY[16] = {0, 0x80, 0x80, 0, 0x80, 0, 0, 0x80, 0x80, 0, 0, 0x80, 0, 0x80, 0x80, 0};

template <Fmt F>
constexpr int iq3_signs_at() { return F == Fmt::IQ3_XXS ? 64 : 72; }  // the sign words' offset in a group's block
// Step k's grid entry (4 unsigned values) of one row.
template <Fmt F>
[[maybe_unused]] inline uint32_t iq3_entry(const uint8_t* wb, int k, int row) {
  if constexpr (F == Fmt::IQ3_XXS) return IQ3XXS_GRID[wb[8 * k + row]];
  else return IQ3S_GRID[wb[8 * k + row] | ((wb[64 + row] >> k) & 1) << 8];
}
// One row's 32 signs (bit v: value v negative); iq3_xxs's 8th sign of each 8 is the parity of the 7.
template <Fmt F>
[[maybe_unused]] inline uint32_t iq3_sign_bits(const uint8_t* wb, int row) {
  uint32_t w;
  std::memcpy(&w, wb + iq3_signs_at<F>() + 4 * row, 4);
  if constexpr (F == Fmt::IQ3_XXS) {
    uint32_t out = 0;
    for (int l = 0; l < 4; ++l) {
      uint32_t b = (w >> (8 * l)) & 0x7f, p = b;
      p ^= p >> 4, p ^= p >> 2, p ^= p >> 1;
      out |= (b | (p & 1) << 7) << (8 * l);
    }
    return out;
  }
  return w;
}
// One row's 4-bit scale ls.
template <Fmt F>
[[maybe_unused]] inline int iq3_ls(const uint8_t* wb, int row) {
  if constexpr (F == Fmt::IQ3_XXS) {
    uint32_t w;
    std::memcpy(&w, wb + 64 + 4 * row, 4);
    return (int)(((w >> 7) & 1) | ((w >> 14) & 2) | ((w >> 21) & 4) | ((w >> 28) & 8));
  }
  return (wb[104 + row / 2] >> (4 * (row & 1))) & 15;
}
// The block's db for one row from its f16 d (exact: 11 bits times 5, times a power of 2).
template <Fmt F>
[[maybe_unused]] inline float iq3_db(float d, int ls) {
  return F == Fmt::IQ3_XXS ? d * (float)(2 * ls + 1) * 0.25f : d * (float)(2 * ls + 1);
}
template <Fmt F>
constexpr bool iq12() {  // the IQ2 and IQ1 formats: grids of 8 values, a scale per 16 (see the layout)
  return F == Fmt::IQ2_XXS || F == Fmt::IQ2_XS || F == Fmt::IQ2_S || F == Fmt::IQ1_S || F == Fmt::IQ1_M;
}
template <Fmt F>
constexpr bool iq1() { return F == Fmt::IQ1_S || F == Fmt::IQ1_M; }
// IQ2_XXS's, IQ2_XS's, IQ2_S's and IQ1_S's (and IQ1_M's) grids: llama.cpp's iq2xxs_grid, iq2xs_grid,
// iq2s_grid and iq1s_grid, copied verbatim from ggml/src/ggml-common.h (ggml-org/llama.cpp, MIT
// licence, Copyright (c) 2023-2024 The ggml authors). Each entry is 8 values, the first in the low
// byte (iq1s_grid's as int8: 0xff is -1).
alignas(64) constexpr uint64_t IQ2XXS_GRID[256] = {
    0x0808080808080808, 0x080808080808082b, 0x0808080808081919, 0x0808080808082b08,
    0x0808080808082b2b, 0x0808080808190819, 0x0808080808191908, 0x08080808082b0808,
    0x08080808082b082b, 0x08080808082b2b08, 0x08080808082b2b2b, 0x0808080819080819,
    0x0808080819081908, 0x0808080819190808, 0x0808080819192b08, 0x08080808192b0819,
    0x08080808192b1908, 0x080808082b080808, 0x080808082b08082b, 0x080808082b082b2b,
    0x080808082b2b082b, 0x0808081908080819, 0x0808081908081908, 0x0808081908190808,
    0x0808081908191919, 0x0808081919080808, 0x080808192b081908, 0x080808192b192b08,
    0x0808082b08080808, 0x0808082b0808082b, 0x0808082b082b082b, 0x0808082b2b08082b,
    0x0808190808080819, 0x0808190808081908, 0x0808190808190808, 0x08081908082b0819,
    0x08081908082b1908, 0x0808190819080808, 0x080819081908082b, 0x0808190819082b08,
    0x08081908192b0808, 0x080819082b080819, 0x080819082b081908, 0x080819082b190808,
    0x080819082b2b1908, 0x0808191908080808, 0x080819190808082b, 0x0808191908082b08,
    0x08081919082b0808, 0x080819191908192b, 0x08081919192b2b19, 0x080819192b080808,
    0x080819192b190819, 0x0808192b08082b19, 0x0808192b08190808, 0x0808192b19080808,
    0x0808192b2b081908, 0x0808192b2b2b1908, 0x08082b0808080808, 0x08082b0808081919,
    0x08082b0808082b08, 0x08082b0808191908, 0x08082b08082b2b08, 0x08082b0819080819,
    0x08082b0819081908, 0x08082b0819190808, 0x08082b081919082b, 0x08082b082b082b08,
    0x08082b1908081908, 0x08082b1919080808, 0x08082b2b0808082b, 0x08082b2b08191908,
    0x0819080808080819, 0x0819080808081908, 0x0819080808190808, 0x08190808082b0819,
    0x0819080819080808, 0x08190808192b0808, 0x081908082b081908, 0x081908082b190808,
    0x081908082b191919, 0x0819081908080808, 0x0819081908082b08, 0x08190819082b0808,
    0x0819081919190808, 0x0819081919192b2b, 0x081908192b080808, 0x0819082b082b1908,
    0x0819082b19081919, 0x0819190808080808, 0x0819190808082b08, 0x08191908082b0808,
    0x08191908082b1919, 0x0819190819082b19, 0x081919082b080808, 0x0819191908192b08,
    0x08191919192b082b, 0x0819192b08080808, 0x0819192b0819192b, 0x08192b0808080819,
    0x08192b0808081908, 0x08192b0808190808, 0x08192b0819080808, 0x08192b082b080819,
    0x08192b1908080808, 0x08192b1908081919, 0x08192b192b2b0808, 0x08192b2b19190819,
    0x082b080808080808, 0x082b08080808082b, 0x082b080808082b2b, 0x082b080819081908,
    0x082b0808192b0819, 0x082b08082b080808, 0x082b08082b08082b, 0x082b0819082b2b19,
    0x082b081919082b08, 0x082b082b08080808, 0x082b082b0808082b, 0x082b190808080819,
    0x082b190808081908, 0x082b190808190808, 0x082b190819080808, 0x082b19081919192b,
    0x082b191908080808, 0x082b191919080819, 0x082b1919192b1908, 0x082b192b2b190808,
    0x082b2b0808082b08, 0x082b2b08082b0808, 0x082b2b082b191908, 0x082b2b2b19081908,
    0x1908080808080819, 0x1908080808081908, 0x1908080808190808, 0x1908080808192b08,
    0x19080808082b0819, 0x19080808082b1908, 0x1908080819080808, 0x1908080819082b08,
    0x190808081919192b, 0x19080808192b0808, 0x190808082b080819, 0x190808082b081908,
    0x190808082b190808, 0x1908081908080808, 0x19080819082b0808, 0x19080819192b0819,
    0x190808192b080808, 0x190808192b081919, 0x1908082b08080819, 0x1908082b08190808,
    0x1908082b19082b08, 0x1908082b1919192b, 0x1908082b192b2b08, 0x1908190808080808,
    0x1908190808082b08, 0x19081908082b0808, 0x190819082b080808, 0x190819082b192b19,
    0x190819190819082b, 0x19081919082b1908, 0x1908192b08080808, 0x19082b0808080819,
    0x19082b0808081908, 0x19082b0808190808, 0x19082b0819080808, 0x19082b0819081919,
    0x19082b1908080808, 0x19082b1919192b08, 0x19082b19192b0819, 0x19082b192b08082b,
    0x19082b2b19081919, 0x19082b2b2b190808, 0x1919080808080808, 0x1919080808082b08,
    0x1919080808190819, 0x1919080808192b19, 0x19190808082b0808, 0x191908082b080808,
    0x191908082b082b08, 0x1919081908081908, 0x191908191908082b, 0x191908192b2b1908,
    0x1919082b2b190819, 0x191919082b190808, 0x191919082b19082b, 0x1919191908082b2b,
    0x1919192b08080819, 0x1919192b19191908, 0x19192b0808080808, 0x19192b0808190819,
    0x19192b0808192b19, 0x19192b08192b1908, 0x19192b1919080808, 0x19192b2b08082b08,
    0x192b080808081908, 0x192b080808190808, 0x192b080819080808, 0x192b0808192b2b08,
    0x192b081908080808, 0x192b081919191919, 0x192b082b08192b08, 0x192b082b192b0808,
    0x192b190808080808, 0x192b190808081919, 0x192b191908190808, 0x192b19190819082b,
    0x192b19192b081908, 0x192b2b081908082b, 0x2b08080808080808, 0x2b0808080808082b,
    0x2b08080808082b2b, 0x2b08080819080819, 0x2b0808082b08082b, 0x2b08081908081908,
    0x2b08081908192b08, 0x2b08081919080808, 0x2b08082b08190819, 0x2b08190808080819,
    0x2b08190808081908, 0x2b08190808190808, 0x2b08190808191919, 0x2b08190819080808,
    0x2b081908192b0808, 0x2b08191908080808, 0x2b0819191908192b, 0x2b0819192b191908,
    0x2b08192b08082b19, 0x2b08192b19080808, 0x2b08192b192b0808, 0x2b082b080808082b,
    0x2b082b1908081908, 0x2b082b2b08190819, 0x2b19080808081908, 0x2b19080808190808,
    0x2b190808082b1908, 0x2b19080819080808, 0x2b1908082b2b0819, 0x2b1908190819192b,
    0x2b1908192b080808, 0x2b19082b19081919, 0x2b19190808080808, 0x2b191908082b082b,
    0x2b19190819081908, 0x2b19191919190819, 0x2b192b082b080819, 0x2b192b19082b0808,
    0x2b2b08080808082b, 0x2b2b080819190808, 0x2b2b08082b081919, 0x2b2b081908082b19,
    0x2b2b082b08080808, 0x2b2b190808192b08, 0x2b2b2b0819190808, 0x2b2b2b1908081908,
};
alignas(64) constexpr uint64_t IQ2XS_GRID[512] = {
    0x0808080808080808, 0x080808080808082b, 0x0808080808081919, 0x0808080808082b08,
    0x0808080808082b2b, 0x0808080808190819, 0x0808080808191908, 0x080808080819192b,
    0x0808080808192b19, 0x08080808082b0808, 0x08080808082b082b, 0x08080808082b1919,
    0x08080808082b2b08, 0x0808080819080819, 0x0808080819081908, 0x080808081908192b,
    0x0808080819082b19, 0x0808080819190808, 0x080808081919082b, 0x0808080819191919,
    0x0808080819192b08, 0x08080808192b0819, 0x08080808192b1908, 0x080808082b080808,
    0x080808082b08082b, 0x080808082b081919, 0x080808082b082b08, 0x080808082b190819,
    0x080808082b191908, 0x080808082b192b19, 0x080808082b2b0808, 0x0808081908080819,
    0x0808081908081908, 0x080808190808192b, 0x0808081908082b19, 0x0808081908190808,
    0x080808190819082b, 0x0808081908191919, 0x0808081908192b08, 0x0808081908192b2b,
    0x08080819082b0819, 0x08080819082b1908, 0x0808081919080808, 0x080808191908082b,
    0x0808081919081919, 0x0808081919082b08, 0x0808081919190819, 0x0808081919191908,
    0x08080819192b0808, 0x08080819192b2b08, 0x080808192b080819, 0x080808192b081908,
    0x080808192b190808, 0x0808082b08080808, 0x0808082b0808082b, 0x0808082b08081919,
    0x0808082b08082b08, 0x0808082b08190819, 0x0808082b08191908, 0x0808082b082b0808,
    0x0808082b19080819, 0x0808082b19081908, 0x0808082b19190808, 0x0808082b19191919,
    0x0808082b2b080808, 0x0808082b2b082b2b, 0x0808190808080819, 0x0808190808081908,
    0x080819080808192b, 0x0808190808082b19, 0x0808190808190808, 0x080819080819082b,
    0x0808190808191919, 0x0808190808192b08, 0x08081908082b0819, 0x08081908082b1908,
    0x0808190819080808, 0x080819081908082b, 0x0808190819081919, 0x0808190819082b08,
    0x0808190819190819, 0x0808190819191908, 0x080819081919192b, 0x08081908192b0808,
    0x080819082b080819, 0x080819082b081908, 0x080819082b190808, 0x0808191908080808,
    0x080819190808082b, 0x0808191908081919, 0x0808191908082b08, 0x0808191908190819,
    0x0808191908191908, 0x08081919082b0808, 0x0808191919080819, 0x0808191919081908,
    0x0808191919190808, 0x08081919192b0819, 0x080819192b080808, 0x0808192b08080819,
    0x0808192b08081908, 0x0808192b08190808, 0x0808192b082b192b, 0x0808192b19080808,
    0x0808192b1908082b, 0x0808192b2b081908, 0x08082b0808080808, 0x08082b080808082b,
    0x08082b0808081919, 0x08082b0808082b08, 0x08082b0808082b2b, 0x08082b0808190819,
    0x08082b0808191908, 0x08082b08082b0808, 0x08082b08082b1919, 0x08082b0819080819,
    0x08082b0819081908, 0x08082b0819190808, 0x08082b0819192b08, 0x08082b082b080808,
    0x08082b082b2b0808, 0x08082b082b2b2b2b, 0x08082b1908080819, 0x08082b1908081908,
    0x08082b1908190808, 0x08082b1919080808, 0x08082b192b080819, 0x08082b192b082b19,
    0x08082b2b08080808, 0x08082b2b082b0808, 0x08082b2b082b2b08, 0x08082b2b2b19192b,
    0x08082b2b2b2b0808, 0x0819080808080819, 0x0819080808081908, 0x081908080808192b,
    0x0819080808082b19, 0x0819080808190808, 0x081908080819082b, 0x0819080808191919,
    0x0819080808192b08, 0x08190808082b0819, 0x08190808082b1908, 0x0819080819080808,
    0x081908081908082b, 0x0819080819081919, 0x0819080819082b08, 0x0819080819190819,
    0x0819080819191908, 0x08190808192b0808, 0x08190808192b2b2b, 0x081908082b080819,
    0x081908082b081908, 0x081908082b190808, 0x0819081908080808, 0x081908190808082b,
    0x0819081908081919, 0x0819081908082b08, 0x0819081908190819, 0x0819081908191908,
    0x08190819082b0808, 0x0819081919080819, 0x0819081919081908, 0x0819081919190808,
    0x081908192b080808, 0x081908192b191908, 0x081908192b19192b, 0x0819082b08080819,
    0x0819082b08081908, 0x0819082b0808192b, 0x0819082b08190808, 0x0819082b19080808,
    0x0819082b192b0808, 0x0819190808080808, 0x081919080808082b, 0x0819190808081919,
    0x0819190808082b08, 0x0819190808190819, 0x0819190808191908, 0x08191908082b0808,
    0x0819190819080819, 0x0819190819081908, 0x0819190819082b19, 0x0819190819190808,
    0x08191908192b1908, 0x081919082b080808, 0x0819191908080819, 0x0819191908081908,
    0x0819191908190808, 0x0819191919080808, 0x0819192b08080808, 0x0819192b08191908,
    0x0819192b19082b19, 0x08192b0808080819, 0x08192b0808081908, 0x08192b0808190808,
    0x08192b080819082b, 0x08192b0819080808, 0x08192b0819191908, 0x08192b082b08192b,
    0x08192b1908080808, 0x08192b1908081919, 0x08192b19192b192b, 0x08192b2b19190819,
    0x08192b2b2b2b2b19, 0x082b080808080808, 0x082b08080808082b, 0x082b080808081919,
    0x082b080808082b08, 0x082b080808082b2b, 0x082b080808190819, 0x082b080808191908,
    0x082b0808082b0808, 0x082b080819080819, 0x082b080819081908, 0x082b080819190808,
    0x082b08082b080808, 0x082b08082b2b0808, 0x082b081908080819, 0x082b081908081908,
    0x082b081908190808, 0x082b081919080808, 0x082b081919082b08, 0x082b0819192b1919,
    0x082b082b08080808, 0x082b082b082b082b, 0x082b082b2b080808, 0x082b082b2b2b2b08,
    0x082b190808080819, 0x082b190808081908, 0x082b190808190808, 0x082b1908082b2b19,
    0x082b190819080808, 0x082b191908080808, 0x082b191919080819, 0x082b19191919082b,
    0x082b19192b192b19, 0x082b192b08080819, 0x082b192b08192b2b, 0x082b192b2b2b192b,
    0x082b2b0808080808, 0x082b2b0808082b08, 0x082b2b0808082b2b, 0x082b2b08082b0808,
    0x082b2b0819191919, 0x082b2b082b082b08, 0x082b2b082b2b082b, 0x082b2b19192b2b08,
    0x082b2b192b190808, 0x082b2b2b08082b08, 0x082b2b2b082b0808, 0x082b2b2b2b08082b,
    0x082b2b2b2b082b08, 0x082b2b2b2b082b2b, 0x1908080808080819, 0x1908080808081908,
    0x190808080808192b, 0x1908080808082b19, 0x1908080808190808, 0x190808080819082b,
    0x1908080808191919, 0x1908080808192b08, 0x19080808082b0819, 0x19080808082b1908,
    0x1908080819080808, 0x190808081908082b, 0x1908080819081919, 0x1908080819082b08,
    0x1908080819082b2b, 0x1908080819190819, 0x1908080819191908, 0x19080808192b0808,
    0x19080808192b1919, 0x190808082b080819, 0x190808082b081908, 0x190808082b190808,
    0x1908081908080808, 0x190808190808082b, 0x1908081908081919, 0x1908081908082b08,
    0x1908081908190819, 0x1908081908191908, 0x19080819082b0808, 0x1908081919080819,
    0x1908081919081908, 0x1908081919190808, 0x190808192b080808, 0x190808192b081919,
    0x190808192b2b082b, 0x1908082b08080819, 0x1908082b08081908, 0x1908082b08190808,
    0x1908082b0819082b, 0x1908082b082b2b19, 0x1908082b19080808, 0x1908190808080808,
    0x190819080808082b, 0x1908190808081919, 0x1908190808082b08, 0x1908190808190819,
    0x1908190808191908, 0x1908190808192b19, 0x19081908082b0808, 0x1908190819080819,
    0x1908190819081908, 0x1908190819190808, 0x190819082b080808, 0x190819082b191908,
    0x1908191908080819, 0x1908191908081908, 0x1908191908190808, 0x19081919082b1908,
    0x1908191919080808, 0x190819192b192b2b, 0x1908192b08080808, 0x1908192b08082b2b,
    0x1908192b19081908, 0x1908192b19190808, 0x19082b0808080819, 0x19082b0808081908,
    0x19082b0808190808, 0x19082b0819080808, 0x19082b0819081919, 0x19082b0819191908,
    0x19082b08192b082b, 0x19082b1908080808, 0x19082b1908190819, 0x19082b1919081908,
    0x19082b1919190808, 0x19082b19192b2b19, 0x19082b2b08081908, 0x1919080808080808,
    0x191908080808082b, 0x1919080808081919, 0x1919080808082b08, 0x1919080808190819,
    0x1919080808191908, 0x19190808082b0808, 0x19190808082b2b08, 0x1919080819080819,
    0x1919080819081908, 0x1919080819190808, 0x191908082b080808, 0x1919081908080819,
    0x1919081908081908, 0x1919081908190808, 0x1919081908191919, 0x1919081919080808,
    0x191908191908082b, 0x1919082b08080808, 0x1919082b19081908, 0x1919082b2b2b2b2b,
    0x1919190808080819, 0x1919190808081908, 0x1919190808190808, 0x19191908082b0819,
    0x1919190819080808, 0x19191908192b0808, 0x191919082b080819, 0x191919082b2b0819,
    0x1919191908080808, 0x1919191908082b08, 0x191919192b080808, 0x191919192b082b08,
    0x1919192b082b0819, 0x1919192b192b2b08, 0x1919192b2b2b0819, 0x19192b0808080808,
    0x19192b0808191908, 0x19192b0819080819, 0x19192b0819190808, 0x19192b082b192b19,
    0x19192b1908192b2b, 0x19192b1919080808, 0x19192b191908082b, 0x19192b2b2b081919,
    0x192b080808080819, 0x192b080808081908, 0x192b080808190808, 0x192b080819080808,
    0x192b080819191908, 0x192b0808192b082b, 0x192b08082b08192b, 0x192b08082b2b2b19,
    0x192b081908080808, 0x192b082b082b1908, 0x192b082b19082b2b, 0x192b082b2b19082b,
    0x192b190808080808, 0x192b19080819192b, 0x192b191908190808, 0x192b191919080808,
    0x192b191919081919, 0x192b19192b2b1908, 0x192b2b0808080819, 0x192b2b08192b2b2b,
    0x192b2b19082b1919, 0x192b2b2b0808192b, 0x192b2b2b19191908, 0x192b2b2b192b082b,
    0x2b08080808080808, 0x2b0808080808082b, 0x2b08080808081919, 0x2b08080808082b08,
    0x2b08080808190819, 0x2b08080808191908, 0x2b080808082b0808, 0x2b080808082b2b2b,
    0x2b08080819080819, 0x2b08080819081908, 0x2b08080819190808, 0x2b0808082b080808,
    0x2b0808082b08082b, 0x2b0808082b2b2b08, 0x2b0808082b2b2b2b, 0x2b08081908080819,
    0x2b08081908081908, 0x2b0808190808192b, 0x2b08081908190808, 0x2b08081919080808,
    0x2b08081919190819, 0x2b08081919192b19, 0x2b08082b08080808, 0x2b08082b082b0808,
    0x2b08082b2b080808, 0x2b08082b2b08082b, 0x2b08082b2b2b0808, 0x2b08082b2b2b2b08,
    0x2b08190808080819, 0x2b08190808081908, 0x2b08190808190808, 0x2b0819080819082b,
    0x2b08190808191919, 0x2b08190819080808, 0x2b081908192b0808, 0x2b0819082b082b19,
    0x2b08191908080808, 0x2b08191919081908, 0x2b0819192b2b1919, 0x2b08192b08192b08,
    0x2b08192b192b2b2b, 0x2b082b0808080808, 0x2b082b0808082b08, 0x2b082b08082b1919,
    0x2b082b0819192b2b, 0x2b082b082b080808, 0x2b082b082b08082b, 0x2b082b082b2b2b08,
    0x2b082b190808192b, 0x2b082b2b082b082b, 0x2b082b2b2b080808, 0x2b082b2b2b082b08,
    0x2b082b2b2b19192b, 0x2b082b2b2b2b2b08, 0x2b19080808080819, 0x2b19080808081908,
    0x2b19080808190808, 0x2b19080819080808, 0x2b1908081919192b, 0x2b1908082b081908,
    0x2b19081908080808, 0x2b190819082b082b, 0x2b190819192b1908, 0x2b19082b1919192b,
    0x2b19082b2b082b19, 0x2b19190808080808, 0x2b19190808081919, 0x2b19190819081908,
    0x2b19190819190808, 0x2b19190819192b08, 0x2b191919082b2b19, 0x2b1919192b190808,
    0x2b1919192b19082b, 0x2b19192b19080819, 0x2b192b0819190819, 0x2b192b082b2b192b,
    0x2b192b1919082b19, 0x2b192b2b08191919, 0x2b192b2b192b0808, 0x2b2b080808080808,
    0x2b2b08080808082b, 0x2b2b080808082b08, 0x2b2b080808082b2b, 0x2b2b0808082b0808,
    0x2b2b0808082b2b2b, 0x2b2b08082b2b0808, 0x2b2b081919190819, 0x2b2b081919192b19,
    0x2b2b08192b2b192b, 0x2b2b082b08080808, 0x2b2b082b0808082b, 0x2b2b082b08082b08,
    0x2b2b082b082b2b2b, 0x2b2b082b2b080808, 0x2b2b082b2b2b0808, 0x2b2b190819080808,
    0x2b2b19082b191919, 0x2b2b192b192b1919, 0x2b2b192b2b192b08, 0x2b2b2b0808082b2b,
    0x2b2b2b08082b0808, 0x2b2b2b08082b082b, 0x2b2b2b08082b2b08, 0x2b2b2b082b2b0808,
    0x2b2b2b082b2b2b08, 0x2b2b2b1908081908, 0x2b2b2b192b081908, 0x2b2b2b192b08192b,
    0x2b2b2b2b082b2b08, 0x2b2b2b2b082b2b2b, 0x2b2b2b2b2b190819, 0x2b2b2b2b2b2b2b2b,
};
alignas(64) constexpr uint64_t IQ2S_GRID[1024] = {
    0x0808080808080808, 0x080808080808082b, 0x0808080808081919, 0x0808080808082b08,
    0x0808080808082b2b, 0x0808080808190819, 0x0808080808191908, 0x080808080819192b,
    0x0808080808192b19, 0x08080808082b0808, 0x08080808082b082b, 0x08080808082b1919,
    0x08080808082b2b08, 0x0808080819080819, 0x0808080819081908, 0x080808081908192b,
    0x0808080819082b19, 0x0808080819190808, 0x080808081919082b, 0x0808080819191919,
    0x0808080819192b08, 0x08080808192b0819, 0x08080808192b1908, 0x08080808192b192b,
    0x08080808192b2b19, 0x080808082b080808, 0x080808082b08082b, 0x080808082b081919,
    0x080808082b082b08, 0x080808082b190819, 0x080808082b191908, 0x080808082b2b0808,
    0x080808082b2b1919, 0x080808082b2b2b2b, 0x0808081908080819, 0x0808081908081908,
    0x080808190808192b, 0x0808081908082b19, 0x0808081908190808, 0x080808190819082b,
    0x0808081908191919, 0x0808081908192b08, 0x08080819082b0819, 0x08080819082b1908,
    0x0808081919080808, 0x080808191908082b, 0x0808081919081919, 0x0808081919082b08,
    0x0808081919190819, 0x0808081919191908, 0x080808191919192b, 0x0808081919192b19,
    0x08080819192b0808, 0x08080819192b1919, 0x08080819192b2b08, 0x080808192b080819,
    0x080808192b081908, 0x080808192b190808, 0x080808192b19082b, 0x080808192b191919,
    0x080808192b2b0819, 0x080808192b2b1908, 0x0808082b08080808, 0x0808082b0808082b,
    0x0808082b08081919, 0x0808082b08082b08, 0x0808082b08190819, 0x0808082b08191908,
    0x0808082b082b0808, 0x0808082b082b2b2b, 0x0808082b19080819, 0x0808082b19081908,
    0x0808082b1908192b, 0x0808082b19082b19, 0x0808082b19190808, 0x0808082b19191919,
    0x0808082b2b080808, 0x0808082b2b081919, 0x0808082b2b082b2b, 0x0808082b2b191908,
    0x0808082b2b2b082b, 0x0808190808080819, 0x0808190808081908, 0x080819080808192b,
    0x0808190808082b19, 0x0808190808190808, 0x080819080819082b, 0x0808190808191919,
    0x0808190808192b08, 0x08081908082b0819, 0x08081908082b1908, 0x08081908082b192b,
    0x08081908082b2b19, 0x0808190819080808, 0x080819081908082b, 0x0808190819081919,
    0x0808190819082b08, 0x0808190819082b2b, 0x0808190819190819, 0x0808190819191908,
    0x080819081919192b, 0x0808190819192b19, 0x08081908192b0808, 0x08081908192b082b,
    0x08081908192b1919, 0x080819082b080819, 0x080819082b081908, 0x080819082b08192b,
    0x080819082b082b19, 0x080819082b190808, 0x080819082b191919, 0x080819082b192b08,
    0x080819082b2b0819, 0x080819082b2b1908, 0x0808191908080808, 0x080819190808082b,
    0x0808191908081919, 0x0808191908082b08, 0x0808191908082b2b, 0x0808191908190819,
    0x0808191908191908, 0x080819190819192b, 0x0808191908192b19, 0x08081919082b0808,
    0x08081919082b1919, 0x08081919082b2b08, 0x0808191919080819, 0x0808191919081908,
    0x080819191908192b, 0x0808191919082b19, 0x0808191919190808, 0x080819191919082b,
    0x0808191919191919, 0x0808191919192b08, 0x08081919192b0819, 0x08081919192b1908,
    0x080819192b080808, 0x080819192b08082b, 0x080819192b081919, 0x080819192b082b08,
    0x080819192b190819, 0x080819192b191908, 0x080819192b2b0808, 0x0808192b08080819,
    0x0808192b08081908, 0x0808192b0808192b, 0x0808192b08082b19, 0x0808192b08190808,
    0x0808192b08191919, 0x0808192b19080808, 0x0808192b19081919, 0x0808192b19082b08,
    0x0808192b19190819, 0x0808192b19191908, 0x0808192b192b0808, 0x0808192b2b080819,
    0x0808192b2b081908, 0x0808192b2b190808, 0x08082b0808080808, 0x08082b080808082b,
    0x08082b0808081919, 0x08082b0808082b08, 0x08082b0808190819, 0x08082b0808191908,
    0x08082b080819192b, 0x08082b0808192b19, 0x08082b08082b0808, 0x08082b08082b1919,
    0x08082b08082b2b2b, 0x08082b0819080819, 0x08082b0819081908, 0x08082b081908192b,
    0x08082b0819082b19, 0x08082b0819190808, 0x08082b081919082b, 0x08082b0819191919,
    0x08082b0819192b08, 0x08082b08192b0819, 0x08082b08192b1908, 0x08082b082b080808,
    0x08082b082b081919, 0x08082b082b191908, 0x08082b082b2b2b2b, 0x08082b1908080819,
    0x08082b1908081908, 0x08082b1908190808, 0x08082b190819082b, 0x08082b1908191919,
    0x08082b1908192b08, 0x08082b19082b0819, 0x08082b1919080808, 0x08082b1919081919,
    0x08082b1919082b08, 0x08082b1919190819, 0x08082b1919191908, 0x08082b19192b0808,
    0x08082b192b080819, 0x08082b192b190808, 0x08082b2b08080808, 0x08082b2b08190819,
    0x08082b2b08191908, 0x08082b2b082b082b, 0x08082b2b082b2b08, 0x08082b2b082b2b2b,
    0x08082b2b19190808, 0x08082b2b2b192b19, 0x0819080808080819, 0x0819080808081908,
    0x081908080808192b, 0x0819080808082b19, 0x0819080808190808, 0x081908080819082b,
    0x0819080808191919, 0x0819080808192b08, 0x08190808082b0819, 0x08190808082b1908,
    0x08190808082b192b, 0x0819080819080808, 0x081908081908082b, 0x0819080819081919,
    0x0819080819082b08, 0x0819080819190819, 0x0819080819191908, 0x081908081919192b,
    0x0819080819192b19, 0x08190808192b0808, 0x08190808192b082b, 0x08190808192b1919,
    0x08190808192b2b08, 0x081908082b080819, 0x081908082b081908, 0x081908082b08192b,
    0x081908082b190808, 0x081908082b191919, 0x081908082b192b08, 0x081908082b2b0819,
    0x081908082b2b1908, 0x0819081908080808, 0x081908190808082b, 0x0819081908081919,
    0x0819081908082b08, 0x0819081908082b2b, 0x0819081908190819, 0x0819081908191908,
    0x081908190819192b, 0x0819081908192b19, 0x08190819082b0808, 0x08190819082b082b,
    0x08190819082b1919, 0x08190819082b2b08, 0x0819081919080819, 0x0819081919081908,
    0x081908191908192b, 0x0819081919082b19, 0x0819081919190808, 0x081908191919082b,
    0x0819081919191919, 0x0819081919192b08, 0x08190819192b0819, 0x08190819192b1908,
    0x081908192b080808, 0x081908192b08082b, 0x081908192b081919, 0x081908192b082b08,
    0x081908192b190819, 0x081908192b191908, 0x0819082b08080819, 0x0819082b08081908,
    0x0819082b08082b19, 0x0819082b08190808, 0x0819082b08191919, 0x0819082b082b0819,
    0x0819082b082b1908, 0x0819082b19080808, 0x0819082b19081919, 0x0819082b19190819,
    0x0819082b19191908, 0x0819082b2b080819, 0x0819082b2b081908, 0x0819082b2b190808,
    0x0819190808080808, 0x081919080808082b, 0x0819190808081919, 0x0819190808082b08,
    0x0819190808190819, 0x0819190808191908, 0x081919080819192b, 0x0819190808192b19,
    0x08191908082b0808, 0x08191908082b1919, 0x08191908082b2b08, 0x0819190819080819,
    0x0819190819081908, 0x081919081908192b, 0x0819190819082b19, 0x0819190819190808,
    0x081919081919082b, 0x0819190819191919, 0x0819190819192b08, 0x08191908192b0819,
    0x08191908192b1908, 0x081919082b080808, 0x081919082b08082b, 0x081919082b081919,
    0x081919082b082b08, 0x081919082b190819, 0x081919082b191908, 0x081919082b2b0808,
    0x0819191908080819, 0x0819191908081908, 0x081919190808192b, 0x0819191908082b19,
    0x0819191908190808, 0x081919190819082b, 0x0819191908191919, 0x0819191908192b08,
    0x08191919082b0819, 0x08191919082b1908, 0x0819191919080808, 0x081919191908082b,
    0x0819191919081919, 0x0819191919082b08, 0x0819191919190819, 0x0819191919191908,
    0x08191919192b0808, 0x081919192b080819, 0x081919192b081908, 0x081919192b190808,
    0x0819192b08080808, 0x0819192b08081919, 0x0819192b08082b08, 0x0819192b08190819,
    0x0819192b08191908, 0x0819192b082b0808, 0x0819192b19080819, 0x0819192b19081908,
    0x0819192b19190808, 0x0819192b2b080808, 0x0819192b2b2b2b2b, 0x08192b0808080819,
    0x08192b0808081908, 0x08192b080808192b, 0x08192b0808082b19, 0x08192b0808190808,
    0x08192b0808191919, 0x08192b0808192b08, 0x08192b08082b0819, 0x08192b0819080808,
    0x08192b081908082b, 0x08192b0819081919, 0x08192b0819082b08, 0x08192b0819190819,
    0x08192b0819191908, 0x08192b08192b0808, 0x08192b082b080819, 0x08192b082b081908,
    0x08192b1908080808, 0x08192b190808082b, 0x08192b1908081919, 0x08192b1908082b08,
    0x08192b1908190819, 0x08192b1908191908, 0x08192b19082b0808, 0x08192b1919080819,
    0x08192b1919081908, 0x08192b1919190808, 0x08192b19192b2b19, 0x08192b192b2b082b,
    0x08192b2b08081908, 0x08192b2b08190808, 0x08192b2b19080808, 0x08192b2b1919192b,
    0x082b080808080808, 0x082b08080808082b, 0x082b080808081919, 0x082b080808082b08,
    0x082b080808190819, 0x082b080808191908, 0x082b08080819192b, 0x082b080808192b19,
    0x082b0808082b0808, 0x082b0808082b1919, 0x082b0808082b2b2b, 0x082b080819080819,
    0x082b080819081908, 0x082b080819190808, 0x082b08081919082b, 0x082b080819191919,
    0x082b0808192b1908, 0x082b08082b080808, 0x082b08082b082b2b, 0x082b08082b191908,
    0x082b08082b2b2b2b, 0x082b081908080819, 0x082b081908081908, 0x082b081908190808,
    0x082b08190819082b, 0x082b081908191919, 0x082b0819082b0819, 0x082b081919080808,
    0x082b08191908082b, 0x082b081919081919, 0x082b081919190819, 0x082b081919191908,
    0x082b0819192b0808, 0x082b08192b080819, 0x082b08192b081908, 0x082b08192b190808,
    0x082b082b08080808, 0x082b082b08082b2b, 0x082b082b082b082b, 0x082b082b082b2b08,
    0x082b082b082b2b2b, 0x082b082b19081908, 0x082b082b19190808, 0x082b082b2b082b08,
    0x082b082b2b082b2b, 0x082b082b2b2b2b08, 0x082b190808080819, 0x082b190808081908,
    0x082b19080808192b, 0x082b190808082b19, 0x082b190808190808, 0x082b190808191919,
    0x082b190808192b08, 0x082b1908082b0819, 0x082b1908082b1908, 0x082b190819080808,
    0x082b19081908082b, 0x082b190819081919, 0x082b190819082b08, 0x082b190819190819,
    0x082b190819191908, 0x082b1908192b0808, 0x082b19082b080819, 0x082b19082b081908,
    0x082b19082b190808, 0x082b191908080808, 0x082b191908081919, 0x082b191908082b08,
    0x082b191908190819, 0x082b191908191908, 0x082b1919082b0808, 0x082b191919080819,
    0x082b191919081908, 0x082b191919190808, 0x082b1919192b192b, 0x082b19192b080808,
    0x082b192b08080819, 0x082b192b08081908, 0x082b192b08190808, 0x082b192b19080808,
    0x082b192b19192b19, 0x082b2b0808080808, 0x082b2b0808081919, 0x082b2b0808190819,
    0x082b2b0808191908, 0x082b2b0819080819, 0x082b2b0819081908, 0x082b2b0819190808,
    0x082b2b082b082b2b, 0x082b2b082b2b2b2b, 0x082b2b1908080819, 0x082b2b1908081908,
    0x082b2b1908190808, 0x082b2b192b191919, 0x082b2b2b08082b2b, 0x082b2b2b082b082b,
    0x082b2b2b192b1908, 0x082b2b2b2b082b08, 0x082b2b2b2b082b2b, 0x1908080808080819,
    0x1908080808081908, 0x190808080808192b, 0x1908080808082b19, 0x1908080808190808,
    0x190808080819082b, 0x1908080808191919, 0x1908080808192b08, 0x1908080808192b2b,
    0x19080808082b0819, 0x19080808082b1908, 0x19080808082b192b, 0x1908080819080808,
    0x190808081908082b, 0x1908080819081919, 0x1908080819082b08, 0x1908080819082b2b,
    0x1908080819190819, 0x1908080819191908, 0x190808081919192b, 0x1908080819192b19,
    0x19080808192b0808, 0x19080808192b082b, 0x19080808192b1919, 0x190808082b080819,
    0x190808082b081908, 0x190808082b190808, 0x190808082b191919, 0x190808082b192b08,
    0x190808082b2b0819, 0x190808082b2b1908, 0x1908081908080808, 0x190808190808082b,
    0x1908081908081919, 0x1908081908082b08, 0x1908081908190819, 0x1908081908191908,
    0x190808190819192b, 0x1908081908192b19, 0x19080819082b0808, 0x19080819082b082b,
    0x19080819082b1919, 0x1908081919080819, 0x1908081919081908, 0x190808191908192b,
    0x1908081919082b19, 0x1908081919190808, 0x190808191919082b, 0x1908081919191919,
    0x1908081919192b08, 0x19080819192b0819, 0x19080819192b1908, 0x190808192b080808,
    0x190808192b08082b, 0x190808192b081919, 0x190808192b082b08, 0x190808192b190819,
    0x190808192b191908, 0x190808192b2b0808, 0x1908082b08080819, 0x1908082b08081908,
    0x1908082b08190808, 0x1908082b0819082b, 0x1908082b08191919, 0x1908082b08192b08,
    0x1908082b082b1908, 0x1908082b19080808, 0x1908082b19081919, 0x1908082b19082b08,
    0x1908082b19190819, 0x1908082b19191908, 0x1908082b192b0808, 0x1908082b2b080819,
    0x1908082b2b081908, 0x1908190808080808, 0x190819080808082b, 0x1908190808081919,
    0x1908190808082b08, 0x1908190808082b2b, 0x1908190808190819, 0x1908190808191908,
    0x190819080819192b, 0x1908190808192b19, 0x19081908082b0808, 0x19081908082b082b,
    0x19081908082b1919, 0x19081908082b2b08, 0x1908190819080819, 0x1908190819081908,
    0x190819081908192b, 0x1908190819082b19, 0x1908190819190808, 0x190819081919082b,
    0x1908190819191919, 0x1908190819192b08, 0x19081908192b0819, 0x19081908192b1908,
    0x190819082b080808, 0x190819082b08082b, 0x190819082b081919, 0x190819082b082b08,
    0x190819082b190819, 0x190819082b191908, 0x190819082b2b0808, 0x1908191908080819,
    0x1908191908081908, 0x190819190808192b, 0x1908191908082b19, 0x1908191908190808,
    0x190819190819082b, 0x1908191908191919, 0x1908191908192b08, 0x19081919082b0819,
    0x19081919082b1908, 0x1908191919080808, 0x190819191908082b, 0x1908191919081919,
    0x1908191919082b08, 0x1908191919190819, 0x1908191919191908, 0x19081919192b0808,
    0x19081919192b2b2b, 0x190819192b080819, 0x190819192b081908, 0x190819192b190808,
    0x1908192b08080808, 0x1908192b0808082b, 0x1908192b08081919, 0x1908192b08082b08,
    0x1908192b08190819, 0x1908192b08191908, 0x1908192b082b0808, 0x1908192b19080819,
    0x1908192b19081908, 0x1908192b19190808, 0x1908192b2b080808, 0x1908192b2b2b1919,
    0x19082b0808080819, 0x19082b0808081908, 0x19082b0808082b19, 0x19082b0808190808,
    0x19082b080819082b, 0x19082b0808191919, 0x19082b0808192b08, 0x19082b08082b0819,
    0x19082b08082b1908, 0x19082b0819080808, 0x19082b081908082b, 0x19082b0819081919,
    0x19082b0819082b08, 0x19082b0819190819, 0x19082b0819191908, 0x19082b08192b0808,
    0x19082b082b081908, 0x19082b082b190808, 0x19082b1908080808, 0x19082b190808082b,
    0x19082b1908081919, 0x19082b1908082b08, 0x19082b1908190819, 0x19082b1908191908,
    0x19082b19082b0808, 0x19082b1919080819, 0x19082b1919081908, 0x19082b1919190808,
    0x19082b192b080808, 0x19082b192b19192b, 0x19082b2b08080819, 0x19082b2b08081908,
    0x19082b2b08190808, 0x19082b2b19080808, 0x1919080808080808, 0x191908080808082b,
    0x1919080808081919, 0x1919080808082b08, 0x1919080808190819, 0x1919080808191908,
    0x191908080819192b, 0x1919080808192b19, 0x19190808082b0808, 0x19190808082b082b,
    0x19190808082b1919, 0x19190808082b2b08, 0x1919080819080819, 0x1919080819081908,
    0x191908081908192b, 0x1919080819082b19, 0x1919080819190808, 0x191908081919082b,
    0x1919080819191919, 0x1919080819192b08, 0x19190808192b0819, 0x19190808192b1908,
    0x191908082b080808, 0x191908082b08082b, 0x191908082b081919, 0x191908082b082b08,
    0x191908082b190819, 0x191908082b191908, 0x1919081908080819, 0x1919081908081908,
    0x191908190808192b, 0x1919081908082b19, 0x1919081908190808, 0x191908190819082b,
    0x1919081908191919, 0x1919081908192b08, 0x19190819082b0819, 0x19190819082b1908,
    0x1919081919080808, 0x191908191908082b, 0x1919081919081919, 0x1919081919082b08,
    0x1919081919190819, 0x1919081919191908, 0x19190819192b0808, 0x191908192b080819,
    0x191908192b081908, 0x191908192b190808, 0x1919082b08080808, 0x1919082b08081919,
    0x1919082b08082b08, 0x1919082b08190819, 0x1919082b08191908, 0x1919082b082b0808,
    0x1919082b19080819, 0x1919082b19081908, 0x1919082b19190808, 0x1919082b192b2b19,
    0x1919082b2b080808, 0x1919190808080819, 0x1919190808081908, 0x191919080808192b,
    0x1919190808082b19, 0x1919190808190808, 0x191919080819082b, 0x1919190808191919,
    0x1919190808192b08, 0x19191908082b0819, 0x19191908082b1908, 0x1919190819080808,
    0x191919081908082b, 0x1919190819081919, 0x1919190819082b08, 0x1919190819190819,
    0x1919190819191908, 0x19191908192b0808, 0x191919082b080819, 0x191919082b081908,
    0x191919082b190808, 0x1919191908080808, 0x191919190808082b, 0x1919191908081919,
    0x1919191908082b08, 0x1919191908190819, 0x1919191908191908, 0x19191919082b0808,
    0x1919191919080819, 0x1919191919081908, 0x1919191919190808, 0x191919192b080808,
    0x1919192b08080819, 0x1919192b08081908, 0x1919192b08190808, 0x1919192b082b192b,
    0x1919192b19080808, 0x19192b0808080808, 0x19192b080808082b, 0x19192b0808081919,
    0x19192b0808082b08, 0x19192b0808190819, 0x19192b0808191908, 0x19192b08082b0808,
    0x19192b0819080819, 0x19192b0819081908, 0x19192b0819190808, 0x19192b0819192b2b,
    0x19192b082b080808, 0x19192b1908080819, 0x19192b1908081908, 0x19192b1908190808,
    0x19192b1919080808, 0x19192b2b08080808, 0x19192b2b08192b19, 0x19192b2b2b081919,
    0x19192b2b2b2b2b08, 0x192b080808080819, 0x192b080808081908, 0x192b08080808192b,
    0x192b080808190808, 0x192b08080819082b, 0x192b080808191919, 0x192b080808192b08,
    0x192b0808082b0819, 0x192b0808082b1908, 0x192b080819080808, 0x192b080819081919,
    0x192b080819082b08, 0x192b080819190819, 0x192b080819191908, 0x192b0808192b0808,
    0x192b08082b081908, 0x192b08082b190808, 0x192b081908080808, 0x192b08190808082b,
    0x192b081908081919, 0x192b081908082b08, 0x192b081908190819, 0x192b081908191908,
    0x192b0819082b0808, 0x192b081919080819, 0x192b081919081908, 0x192b081919190808,
    0x192b08192b080808, 0x192b08192b192b19, 0x192b082b08081908, 0x192b082b08190808,
    0x192b082b19080808, 0x192b082b1919192b, 0x192b082b2b2b0819, 0x192b190808080808,
    0x192b190808081919, 0x192b190808082b08, 0x192b190808190819, 0x192b190808191908,
    0x192b1908082b0808, 0x192b190819080819, 0x192b190819081908, 0x192b190819190808,
    0x192b19082b080808, 0x192b191908080819, 0x192b191908081908, 0x192b191908190808,
    0x192b191919080808, 0x192b191919082b2b, 0x192b1919192b2b08, 0x192b19192b19082b,
    0x192b192b08080808, 0x192b192b2b191908, 0x192b2b0808080819, 0x192b2b0808081908,
    0x192b2b0808190808, 0x192b2b08192b1919, 0x192b2b082b192b08, 0x192b2b1908080808,
    0x192b2b19082b2b2b, 0x192b2b2b1908082b, 0x192b2b2b2b2b0819, 0x2b08080808080808,
    0x2b0808080808082b, 0x2b08080808081919, 0x2b08080808082b08, 0x2b08080808190819,
    0x2b08080808191908, 0x2b08080808192b19, 0x2b080808082b0808, 0x2b080808082b1919,
    0x2b08080819080819, 0x2b08080819081908, 0x2b08080819190808, 0x2b0808081919082b,
    0x2b08080819191919, 0x2b08080819192b08, 0x2b080808192b0819, 0x2b0808082b080808,
    0x2b0808082b081919, 0x2b0808082b190819, 0x2b0808082b191908, 0x2b08081908080819,
    0x2b08081908081908, 0x2b08081908082b19, 0x2b08081908190808, 0x2b0808190819082b,
    0x2b08081908191919, 0x2b08081908192b08, 0x2b080819082b0819, 0x2b080819082b1908,
    0x2b08081919080808, 0x2b0808191908082b, 0x2b08081919081919, 0x2b08081919082b08,
    0x2b08081919190819, 0x2b08081919191908, 0x2b0808192b080819, 0x2b0808192b081908,
    0x2b0808192b190808, 0x2b0808192b2b2b19, 0x2b08082b08080808, 0x2b08082b08081919,
    0x2b08082b08082b2b, 0x2b08082b08190819, 0x2b08082b08191908, 0x2b08082b19080819,
    0x2b08082b19081908, 0x2b08082b19190808, 0x2b08190808080819, 0x2b08190808081908,
    0x2b0819080808192b, 0x2b08190808082b19, 0x2b08190808190808, 0x2b0819080819082b,
    0x2b08190808191919, 0x2b08190808192b08, 0x2b081908082b0819, 0x2b08190819080808,
    0x2b0819081908082b, 0x2b08190819081919, 0x2b08190819082b08, 0x2b08190819190819,
    0x2b08190819191908, 0x2b081908192b0808, 0x2b0819082b080819, 0x2b0819082b081908,
    0x2b0819082b190808, 0x2b08191908080808, 0x2b0819190808082b, 0x2b08191908081919,
    0x2b08191908082b08, 0x2b08191908190819, 0x2b08191908191908, 0x2b081919082b0808,
    0x2b08191919080819, 0x2b08191919081908, 0x2b08191919190808, 0x2b0819192b080808,
    0x2b0819192b082b2b, 0x2b08192b08080819, 0x2b08192b08081908, 0x2b08192b08190808,
    0x2b08192b082b2b19, 0x2b08192b19080808, 0x2b082b0808080808, 0x2b082b0808081919,
    0x2b082b0808190819, 0x2b082b0808191908, 0x2b082b0819080819, 0x2b082b0819081908,
    0x2b082b0819190808, 0x2b082b082b2b082b, 0x2b082b1908080819, 0x2b082b1908081908,
    0x2b082b1919080808, 0x2b082b19192b1919, 0x2b082b2b082b082b, 0x2b082b2b19192b08,
    0x2b082b2b19192b2b, 0x2b082b2b2b08082b, 0x2b082b2b2b2b082b, 0x2b19080808080819,
    0x2b19080808081908, 0x2b19080808082b19, 0x2b19080808190808, 0x2b1908080819082b,
    0x2b19080808191919, 0x2b19080808192b08, 0x2b190808082b1908, 0x2b19080819080808,
    0x2b1908081908082b, 0x2b19080819081919, 0x2b19080819082b08, 0x2b19080819190819,
    0x2b19080819191908, 0x2b190808192b0808, 0x2b1908082b080819, 0x2b1908082b081908,
    0x2b1908082b190808, 0x2b19081908080808, 0x2b19081908081919, 0x2b19081908190819,
    0x2b19081908191908, 0x2b19081919080819, 0x2b19081919081908, 0x2b19081919190808,
    0x2b19081919192b2b, 0x2b19082b08080819, 0x2b19082b08081908, 0x2b19082b08190808,
    0x2b19082b19080808, 0x2b19082b2b2b192b, 0x2b19190808080808, 0x2b1919080808082b,
    0x2b19190808081919, 0x2b19190808082b08, 0x2b19190808190819, 0x2b19190808191908,
    0x2b191908082b0808, 0x2b19190819080819, 0x2b19190819081908, 0x2b19190819190808,
    0x2b1919082b080808, 0x2b1919082b19192b, 0x2b19191908080819, 0x2b19191908081908,
    0x2b19191908190808, 0x2b19191919080808, 0x2b1919192b192b08, 0x2b1919192b2b0819,
    0x2b19192b08080808, 0x2b19192b1908192b, 0x2b19192b192b1908, 0x2b192b0808080819,
    0x2b192b0808081908, 0x2b192b0808190808, 0x2b192b08082b192b, 0x2b192b0819080808,
    0x2b192b082b2b2b19, 0x2b192b1908080808, 0x2b192b1919082b19, 0x2b192b191919082b,
    0x2b192b2b2b190808, 0x2b2b080808080808, 0x2b2b080808081919, 0x2b2b080808082b2b,
    0x2b2b080808191908, 0x2b2b0808082b082b, 0x2b2b0808082b2b2b, 0x2b2b080819080819,
    0x2b2b080819081908, 0x2b2b080819190808, 0x2b2b08082b2b082b, 0x2b2b08082b2b2b2b,
    0x2b2b081919080808, 0x2b2b0819192b1919, 0x2b2b082b0808082b, 0x2b2b082b08082b2b,
    0x2b2b082b082b082b, 0x2b2b082b082b2b08, 0x2b2b082b082b2b2b, 0x2b2b082b2b08082b,
    0x2b2b082b2b082b08, 0x2b2b082b2b082b2b, 0x2b2b082b2b2b2b08, 0x2b2b190808080819,
    0x2b2b190808081908, 0x2b2b190808190808, 0x2b2b190819080808, 0x2b2b19082b082b19,
    0x2b2b19082b2b1908, 0x2b2b191908080808, 0x2b2b191908192b19, 0x2b2b192b19190819,
    0x2b2b2b0808082b2b, 0x2b2b2b08082b2b08, 0x2b2b2b082b2b082b, 0x2b2b2b1919191908,
    0x2b2b2b192b08192b, 0x2b2b2b2b08082b08, 0x2b2b2b2b08082b2b, 0x2b2b2b2b082b0808,
    0x2b2b2b2b082b082b, 0x2b2b2b2b082b2b08, 0x2b2b2b2b2b082b08, 0x2b2b2b2b2b2b2b2b,
};
alignas(64) constexpr uint64_t IQ1S_GRID[2048] = {
    0xffffffffffffffff, 0xffffffffffffff01, 0xffffffffffff0000, 0xffffffffffff01ff,
    0xffffffffffff0101, 0xffffffffff00ff00, 0xffffffffff000000, 0xffffffffff01ffff,
    0xffffffffff01ff01, 0xffffffffff0101ff, 0xffffffffff010101, 0xffffffff00ff0000,
    0xffffffff0000ff00, 0xffffffff000000ff, 0xffffffff00000001, 0xffffffff00010000,
    0xffffffff01ffffff, 0xffffffff01ffff01, 0xffffffff01ff01ff, 0xffffffff01ff0101,
    0xffffffff01000000, 0xffffffff0101ffff, 0xffffffff0101ff01, 0xffffffff010101ff,
    0xffffffff01010101, 0xffffff00ffff00ff, 0xffffff00ffff0000, 0xffffff00ff00ff00,
    0xffffff00ff0000ff, 0xffffff00ff000001, 0xffffff00ff000100, 0xffffff00ff000101,
    0xffffff00ff010000, 0xffffff0000ffff00, 0xffffff0000ff0001, 0xffffff0000ff0100,
    0xffffff000000ff01, 0xffffff0000000000, 0xffffff0000000101, 0xffffff000001ff00,
    0xffffff00000100ff, 0xffffff0000010001, 0xffffff00000101ff, 0xffffff0001ff0000,
    0xffffff000100ff00, 0xffffff00010000ff, 0xffffff0001000001, 0xffffff0001010000,
    0xffffff01ffffffff, 0xffffff01ffffff01, 0xffffff01ffff01ff, 0xffffff01ffff0101,
    0xffffff01ff000000, 0xffffff01ff01ffff, 0xffffff01ff01ff01, 0xffffff01ff0101ff,
    0xffffff01ff010101, 0xffffff0100ff0000, 0xffffff010000ff00, 0xffffff0100000100,
    0xffffff01000100ff, 0xffffff0100010100, 0xffffff0101ffffff, 0xffffff0101ffff01,
    0xffffff0101ff01ff, 0xffffff0101ff0101, 0xffffff010100ff00, 0xffffff0101000000,
    0xffffff0101000100, 0xffffff010101ffff, 0xffffff010101ff01, 0xffffff01010101ff,
    0xffffff0101010101, 0xffff00ffff00ff00, 0xffff00ffff0000ff, 0xffff00ffff000001,
    0xffff00ffff010000, 0xffff00ff00ffff00, 0xffff00ff00ff0100, 0xffff00ff00000000,
    0xffff00ff00000101, 0xffff00ff000100ff, 0xffff00ff00010000, 0xffff00ff0100ff00,
    0xffff00ff01000100, 0xffff00ff01010000, 0xffff0000ffffff00, 0xffff0000ffff00ff,
    0xffff0000ffff0000, 0xffff0000ffff0001, 0xffff0000ff000000, 0xffff0000ff0001ff,
    0xffff0000ff000101, 0xffff0000ff010100, 0xffff000000ffffff, 0xffff000000ff0000,
    0xffff000000ff0101, 0xffff00000000ffff, 0xffff00000000ff00, 0xffff0000000000ff,
    0xffff000000000000, 0xffff000000000001, 0xffff000000000100, 0xffff00000001ffff,
    0xffff00000001ff01, 0xffff000000010000, 0xffff0000000101ff, 0xffff000000010101,
    0xffff000001ffff00, 0xffff00000100ff00, 0xffff000001000000, 0xffff0000010001ff,
    0xffff000001000101, 0xffff00000101ff00, 0xffff0000010100ff, 0xffff000001010000,
    0xffff000001010001, 0xffff000001010100, 0xffff0001ff0000ff, 0xffff0001ff000100,
    0xffff000100ffff00, 0xffff000100ff00ff, 0xffff00010000ffff, 0xffff00010000ff01,
    0xffff000100000000, 0xffff0001000001ff, 0xffff00010001ffff, 0xffff00010001ff00,
    0xffff000100010001, 0xffff000100010100, 0xffff000101ff0000, 0xffff00010100ff00,
    0xffff0001010000ff, 0xffff000101000100, 0xffff01ffffffffff, 0xffff01ffffffff01,
    0xffff01ffffff01ff, 0xffff01ffffff0101, 0xffff01ffff000000, 0xffff01ffff01ffff,
    0xffff01ffff01ff01, 0xffff01ffff0101ff, 0xffff01ffff010101, 0xffff01ff00ff0000,
    0xffff01ff0000ff00, 0xffff01ff00000001, 0xffff01ff00010000, 0xffff01ff01ffffff,
    0xffff01ff01ffff01, 0xffff01ff01ff01ff, 0xffff01ff01ff0101, 0xffff01ff01000000,
    0xffff01ff0101ffff, 0xffff01ff0101ff01, 0xffff01ff010101ff, 0xffff01ff01010101,
    0xffff0100ffff0000, 0xffff0100ff00ff00, 0xffff0100ff0000ff, 0xffff0100ff000100,
    0xffff0100ff0100ff, 0xffff0100ff010000, 0xffff010000ffff00, 0xffff01000000ffff,
    0xffff01000000ff00, 0xffff010000000000, 0xffff01000001ff00, 0xffff0100000100ff,
    0xffff010000010100, 0xffff01000100ff00, 0xffff0100010000ff, 0xffff010001000001,
    0xffff010001000100, 0xffff010001010000, 0xffff0101ffffffff, 0xffff0101ffffff01,
    0xffff0101ffff01ff, 0xffff0101ffff0101, 0xffff0101ff000000, 0xffff0101ff01ffff,
    0xffff0101ff01ff01, 0xffff0101ff0101ff, 0xffff0101ff010101, 0xffff010100ff0000,
    0xffff01010000ff00, 0xffff010100000100, 0xffff01010001ff00, 0xffff010100010000,
    0xffff010101ffffff, 0xffff010101ffff01, 0xffff010101ff0000, 0xffff010101ff01ff,
    0xffff010101ff0101, 0xffff010101000000, 0xffff01010101ffff, 0xffff01010101ff01,
    0xffff0101010101ff, 0xffff010101010101, 0xff00ffffff00ffff, 0xff00ffffff00ff00,
    0xff00ffffff0000ff, 0xff00ffffff000100, 0xff00ffffff0100ff, 0xff00ffffff010000,
    0xff00ffff00ffff00, 0xff00ffff00ff00ff, 0xff00ffff0000ffff, 0xff00ffff00000000,
    0xff00ffff000001ff, 0xff00ffff0001ff00, 0xff00ffff000100ff, 0xff00ffff00010000,
    0xff00ffff00010100, 0xff00ffff0100ff00, 0xff00ffff010000ff, 0xff00ffff01000001,
    0xff00ffff0101ff00, 0xff00ffff01010000, 0xff00ff00ffffff00, 0xff00ff00ffff00ff,
    0xff00ff00ffff0001, 0xff00ff00ffff0100, 0xff00ff00ff00ffff, 0xff00ff00ff00ff01,
    0xff00ff00ff000000, 0xff00ff00ff0001ff, 0xff00ff00ff01ff00, 0xff00ff00ff0100ff,
    0xff00ff00ff010100, 0xff00ff0000ff0000, 0xff00ff0000ff0101, 0xff00ff000000ffff,
    0xff00ff000000ff00, 0xff00ff000000ff01, 0xff00ff00000000ff, 0xff00ff0000000000,
    0xff00ff0000000001, 0xff00ff0000000100, 0xff00ff000001ffff, 0xff00ff0000010000,
    0xff00ff0001ff00ff, 0xff00ff000100ff01, 0xff00ff0001000000, 0xff00ff000101ff00,
    0xff00ff00010100ff, 0xff00ff01ff00ff00, 0xff00ff01ff0000ff, 0xff00ff01ff000001,
    0xff00ff01ff010000, 0xff00ff0100ffffff, 0xff00ff0100ff0001, 0xff00ff0100ff0100,
    0xff00ff010000ff01, 0xff00ff0100000000, 0xff00ff01000001ff, 0xff00ff0100000101,
    0xff00ff01000100ff, 0xff00ff0100010001, 0xff00ff0101ff0000, 0xff00ff010100ff00,
    0xff00ff01010000ff, 0xff00ff0101000001, 0xff00ff0101010000, 0xff0000ffffffff00,
    0xff0000ffffff0001, 0xff0000ffffff0100, 0xff0000ffff0000ff, 0xff0000ffff000000,
    0xff0000ffff0001ff, 0xff0000ffff000100, 0xff0000ffff01ff00, 0xff0000ffff010001,
    0xff0000ff00ffff00, 0xff0000ff00ff0000, 0xff0000ff00ff0001, 0xff0000ff00ff01ff,
    0xff0000ff00ff0101, 0xff0000ff0000ff00, 0xff0000ff000000ff, 0xff0000ff00000000,
    0xff0000ff00000001, 0xff0000ff00000100, 0xff0000ff0001ff01, 0xff0000ff00010000,
    0xff0000ff000101ff, 0xff0000ff01ff00ff, 0xff0000ff01ff0100, 0xff0000ff0100ffff,
    0xff0000ff010000ff, 0xff0000ff01000000, 0xff0000ff010001ff, 0xff0000ff01000100,
    0xff0000ff01000101, 0xff0000ff0101ff00, 0xff0000ff010100ff, 0xff0000ff01010000,
    0xff0000ff01010100, 0xff000000ffffff01, 0xff000000ffff0000, 0xff000000ffff0101,
    0xff000000ff00ff00, 0xff000000ff0000ff, 0xff000000ff000000, 0xff000000ff000001,
    0xff000000ff000100, 0xff000000ff01ffff, 0xff000000ff01ff01, 0xff000000ff010000,
    0xff000000ff0101ff, 0xff000000ff010101, 0xff00000000ffff00, 0xff00000000ff00ff,
    0xff00000000ff0000, 0xff00000000ff0001, 0xff0000000000ff00, 0xff0000000000ff01,
    0xff000000000000ff, 0xff00000000000000, 0xff00000000000001, 0xff00000000000100,
    0xff00000000000101, 0xff0000000001ff00, 0xff000000000100ff, 0xff00000000010000,
    0xff00000000010001, 0xff00000000010100, 0xff00000001ffffff, 0xff00000001ffff01,
    0xff00000001ff00ff, 0xff00000001ff0000, 0xff00000001ff01ff, 0xff00000001ff0101,
    0xff0000000100ffff, 0xff0000000100ff00, 0xff000000010000ff, 0xff00000001000000,
    0xff00000001000001, 0xff00000001000100, 0xff00000001000101, 0xff0000000101ffff,
    0xff0000000101ff01, 0xff00000001010000, 0xff000001ffffff00, 0xff000001ffff00ff,
    0xff000001ffff0000, 0xff000001ffff0001, 0xff000001ff000000, 0xff000001ff000001,
    0xff000001ff0001ff, 0xff000001ff000101, 0xff000001ff01ff00, 0xff000001ff010001,
    0xff00000100ffffff, 0xff00000100ffff01, 0xff00000100ff00ff, 0xff00000100ff0000,
    0xff00000100ff01ff, 0xff00000100ff0101, 0xff0000010000ff00, 0xff00000100000000,
    0xff00000100000001, 0xff000001000001ff, 0xff00000100000100, 0xff0000010001ff00,
    0xff000001000100ff, 0xff00000100010000, 0xff000001000101ff, 0xff00000100010100,
    0xff00000100010101, 0xff00000101ff0001, 0xff00000101ff0101, 0xff0000010100ff01,
    0xff00000101000000, 0xff000001010100ff, 0xff00000101010100, 0xff0001ffff00ff00,
    0xff0001ffff000001, 0xff0001ffff010000, 0xff0001ff00ffff00, 0xff0001ff00ff00ff,
    0xff0001ff00ff0001, 0xff0001ff00ff0100, 0xff0001ff0000ffff, 0xff0001ff00000000,
    0xff0001ff000001ff, 0xff0001ff00000101, 0xff0001ff0001ffff, 0xff0001ff0001ff00,
    0xff0001ff000100ff, 0xff0001ff00010001, 0xff0001ff00010100, 0xff0001ff01ff0000,
    0xff0001ff0100ff00, 0xff0001ff010000ff, 0xff0001ff01010000, 0xff000100ff00ffff,
    0xff000100ff00ff01, 0xff000100ff000000, 0xff000100ff000101, 0xff000100ff01ff00,
    0xff000100ff010000, 0xff00010000ffff01, 0xff00010000ff00ff, 0xff00010000ff0000,
    0xff00010000ff01ff, 0xff0001000000ff00, 0xff000100000000ff, 0xff00010000000000,
    0xff00010000000001, 0xff00010000000100, 0xff00010000000101, 0xff0001000001ffff,
    0xff00010000010000, 0xff00010000010101, 0xff00010001ff0100, 0xff0001000100ff00,
    0xff0001000100ff01, 0xff00010001000000, 0xff000100010001ff, 0xff0001000101ff00,
    0xff00010001010001, 0xff00010001010100, 0xff000101ffff0100, 0xff000101ff000001,
    0xff000101ff0100ff, 0xff000101ff010001, 0xff00010100ff00ff, 0xff00010100ff0001,
    0xff00010100ff0100, 0xff0001010000ffff, 0xff0001010000ff01, 0xff00010100000000,
    0xff000101000001ff, 0xff0001010001ff00, 0xff00010100010001, 0xff00010100010100,
    0xff00010101ff0000, 0xff0001010100ff00, 0xff00010101000001, 0xff00010101000101,
    0xff01ffffffffffff, 0xff01ffffffffff01, 0xff01ffffffff01ff, 0xff01ffffffff0101,
    0xff01ffffff000000, 0xff01ffffff01ffff, 0xff01ffffff01ff01, 0xff01ffffff010000,
    0xff01ffffff0101ff, 0xff01ffffff010101, 0xff01ffff00ff0000, 0xff01ffff0000ff00,
    0xff01ffff00000100, 0xff01ffff0001ff00, 0xff01ffff00010000, 0xff01ffff01ffffff,
    0xff01ffff01ffff01, 0xff01ffff01ff01ff, 0xff01ffff01ff0101, 0xff01ffff01000000,
    0xff01ffff0101ffff, 0xff01ffff0101ff01, 0xff01ffff01010000, 0xff01ffff010101ff,
    0xff01ffff01010101, 0xff01ff00ffff0000, 0xff01ff00ff00ff00, 0xff01ff00ff0000ff,
    0xff01ff00ff000100, 0xff01ff00ff010000, 0xff01ff0000ffff01, 0xff01ff0000ff00ff,
    0xff01ff0000ff0100, 0xff01ff0000000000, 0xff01ff00000001ff, 0xff01ff0000000101,
    0xff01ff000001ff00, 0xff01ff00000100ff, 0xff01ff0000010000, 0xff01ff0000010001,
    0xff01ff0001ff0000, 0xff01ff000100ffff, 0xff01ff0001000001, 0xff01ff0001000100,
    0xff01ff0001010000, 0xff01ff01ffffff00, 0xff01ff01ffff01ff, 0xff01ff01ffff0101,
    0xff01ff01ff00ff00, 0xff01ff01ff000000, 0xff01ff01ff01ffff, 0xff01ff01ff01ff01,
    0xff01ff01ff0101ff, 0xff01ff01ff010101, 0xff01ff0100ff0000, 0xff01ff010000ff00,
    0xff01ff0100000001, 0xff01ff0100000100, 0xff01ff0100010000, 0xff01ff0101ffff00,
    0xff01ff0101ff01ff, 0xff01ff0101ff0101, 0xff01ff010100ff00, 0xff01ff0101000000,
    0xff01ff010101ffff, 0xff01ff010101ff01, 0xff01ff01010101ff, 0xff01ff0101010101,
    0xff0100ffffff0000, 0xff0100ffff0000ff, 0xff0100ffff000001, 0xff0100ffff000100,
    0xff0100ffff010000, 0xff0100ff00ff00ff, 0xff0100ff00ff0000, 0xff0100ff00ff0001,
    0xff0100ff00ff0100, 0xff0100ff0000ff01, 0xff0100ff00000000, 0xff0100ff000001ff,
    0xff0100ff00000101, 0xff0100ff00010001, 0xff0100ff01ff0000, 0xff0100ff0100ff00,
    0xff0100ff010000ff, 0xff0100ff01000100, 0xff0100ff0101ff00, 0xff0100ff01010000,
    0xff010000ffff0100, 0xff010000ff000000, 0xff010000ff01ff00, 0xff010000ff010100,
    0xff01000000ffffff, 0xff01000000ff0000, 0xff01000000ff01ff, 0xff0100000000ff00,
    0xff010000000000ff, 0xff01000000000000, 0xff01000000000100, 0xff0100000001ff01,
    0xff01000000010000, 0xff010000000101ff, 0xff01000001ff0100, 0xff0100000100ffff,
    0xff010000010000ff, 0xff01000001000000, 0xff010000010001ff, 0xff01000001000101,
    0xff0100000101ff00, 0xff010000010100ff, 0xff01000001010001, 0xff01000001010100,
    0xff010001ffff0000, 0xff010001ff00ffff, 0xff010001ff00ff01, 0xff010001ff000100,
    0xff010001ff010000, 0xff01000100ffff00, 0xff01000100ff0100, 0xff01000100000000,
    0xff0100010001ffff, 0xff0100010001ff00, 0xff01000100010100, 0xff01000101ff00ff,
    0xff01000101ff0001, 0xff0100010100ffff, 0xff01000101000101, 0xff0101ffffffffff,
    0xff0101ffffffff01, 0xff0101ffffff01ff, 0xff0101ffffff0101, 0xff0101ffff000000,
    0xff0101ffff01ffff, 0xff0101ffff01ff01, 0xff0101ffff0101ff, 0xff0101ffff010101,
    0xff0101ff00ff0000, 0xff0101ff0000ff00, 0xff0101ff000000ff, 0xff0101ff00010000,
    0xff0101ff01ffffff, 0xff0101ff01ffff01, 0xff0101ff01ff01ff, 0xff0101ff01ff0101,
    0xff0101ff0101ffff, 0xff0101ff0101ff01, 0xff0101ff010101ff, 0xff0101ff01010101,
    0xff010100ffff0100, 0xff010100ff00ff00, 0xff010100ff0000ff, 0xff010100ff000100,
    0xff010100ff010000, 0xff01010000ff0001, 0xff01010000ff0100, 0xff0101000000ff01,
    0xff01010000000000, 0xff0101000001ff00, 0xff010100000100ff, 0xff01010000010001,
    0xff01010000010100, 0xff01010001ff0000, 0xff0101000100ffff, 0xff01010001000001,
    0xff01010001000100, 0xff010100010100ff, 0xff01010001010000, 0xff010101ffffffff,
    0xff010101ffffff01, 0xff010101ffff01ff, 0xff010101ffff0101, 0xff010101ff01ffff,
    0xff010101ff01ff01, 0xff010101ff0101ff, 0xff010101ff010101, 0xff01010100ff0000,
    0xff0101010000ff00, 0xff01010100000001, 0xff01010100000100, 0xff01010100010000,
    0xff01010101ffffff, 0xff01010101ffff01, 0xff01010101ff01ff, 0xff01010101ff0101,
    0xff01010101000000, 0xff0101010101ffff, 0xff0101010101ff01, 0xff010101010101ff,
    0xff01010101010101, 0x00ffffffffff0000, 0x00ffffffff00ff00, 0x00ffffffff000001,
    0x00ffffffff010000, 0x00ffffff00ff0100, 0x00ffffff0000ff01, 0x00ffffff00000000,
    0x00ffffff000001ff, 0x00ffffff00000101, 0x00ffffff0001ff00, 0x00ffffff000100ff,
    0x00ffffff00010001, 0x00ffffff010000ff, 0x00ffffff01000100, 0x00ffffff0101ff00,
    0x00ffffff01010001, 0x00ffff00ffffffff, 0x00ffff00ffffff00, 0x00ffff00ffff00ff,
    0x00ffff00ffff0001, 0x00ffff00ffff0100, 0x00ffff00ff00ff01, 0x00ffff00ff000000,
    0x00ffff00ff000001, 0x00ffff00ff0001ff, 0x00ffff00ff000101, 0x00ffff00ff01ff00,
    0x00ffff00ff010001, 0x00ffff00ff010100, 0x00ffff0000ff0000, 0x00ffff0000ff01ff,
    0x00ffff0000ff0101, 0x00ffff000000ff00, 0x00ffff00000000ff, 0x00ffff0000000000,
    0x00ffff0000000001, 0x00ffff0000000100, 0x00ffff0000000101, 0x00ffff0000010000,
    0x00ffff00000101ff, 0x00ffff0000010101, 0x00ffff0001ffff00, 0x00ffff0001ff00ff,
    0x00ffff0001ff0001, 0x00ffff000100ffff, 0x00ffff000100ff01, 0x00ffff0001000000,
    0x00ffff000101ffff, 0x00ffff000101ff00, 0x00ffff000101ff01, 0x00ffff01ffff0000,
    0x00ffff01ff00ff00, 0x00ffff01ff0000ff, 0x00ffff01ff000001, 0x00ffff01ff010000,
    0x00ffff0100ffff00, 0x00ffff010000ff01, 0x00ffff0100000000, 0x00ffff0100000101,
    0x00ffff01000100ff, 0x00ffff0100010100, 0x00ffff0101ff0100, 0x00ffff01010000ff,
    0x00ffff0101010000, 0x00ff00ffffffff00, 0x00ff00ffff000000, 0x00ff00ffff000100,
    0x00ff00ffff010100, 0x00ff00ff00ff0000, 0x00ff00ff00ff01ff, 0x00ff00ff00ff0101,
    0x00ff00ff0000ff00, 0x00ff00ff000000ff, 0x00ff00ff00000000, 0x00ff00ff00000001,
    0x00ff00ff0001ff00, 0x00ff00ff0001ff01, 0x00ff00ff00010000, 0x00ff00ff000101ff,
    0x00ff00ff00010101, 0x00ff00ff01ffff00, 0x00ff00ff01ff0001, 0x00ff00ff01ff0100,
    0x00ff00ff0100ffff, 0x00ff00ff0100ff01, 0x00ff00ff01000000, 0x00ff00ff0101ffff,
    0x00ff00ff0101ff00, 0x00ff00ff01010100, 0x00ff0000ffffff00, 0x00ff0000ffffff01,
    0x00ff0000ffff0000, 0x00ff0000ffff0101, 0x00ff0000ff00ff00, 0x00ff0000ff0000ff,
    0x00ff0000ff000000, 0x00ff0000ff000001, 0x00ff0000ff000100, 0x00ff0000ff01ffff,
    0x00ff0000ff010000, 0x00ff0000ff010101, 0x00ff000000ffff00, 0x00ff000000ff00ff,
    0x00ff000000ff0000, 0x00ff000000ff0001, 0x00ff000000ff0100, 0x00ff00000000ffff,
    0x00ff00000000ff00, 0x00ff0000000000ff, 0x00ff000000000000, 0x00ff000000000001,
    0x00ff0000000001ff, 0x00ff000000000100, 0x00ff00000001ff00, 0x00ff0000000100ff,
    0x00ff000000010000, 0x00ff000000010001, 0x00ff000000010100, 0x00ff000001ffff01,
    0x00ff000001ff00ff, 0x00ff000001ff0000, 0x00ff000001ff01ff, 0x00ff00000100ff00,
    0x00ff0000010000ff, 0x00ff000001000000, 0x00ff000001000001, 0x00ff000001000100,
    0x00ff000001000101, 0x00ff000001010000, 0x00ff0000010101ff, 0x00ff000001010101,
    0x00ff0001ffffff00, 0x00ff0001ffff0000, 0x00ff0001ffff0100, 0x00ff0001ff0000ff,
    0x00ff0001ff000000, 0x00ff0001ff0001ff, 0x00ff0001ff000101, 0x00ff0001ff01ff00,
    0x00ff0001ff0100ff, 0x00ff0001ff010100, 0x00ff000100ffffff, 0x00ff000100ffff01,
    0x00ff000100ff0000, 0x00ff000100ff01ff, 0x00ff00010000ffff, 0x00ff00010000ff00,
    0x00ff00010000ff01, 0x00ff000100000000, 0x00ff000100000001, 0x00ff000100000100,
    0x00ff00010001ff01, 0x00ff000100010000, 0x00ff0001000101ff, 0x00ff000101ffff00,
    0x00ff000101ff0000, 0x00ff000101ff0101, 0x00ff0001010000ff, 0x00ff000101000000,
    0x00ff00010101ff00, 0x00ff0001010100ff, 0x00ff000101010001, 0x00ff01ffffff0000,
    0x00ff01ffff00ff00, 0x00ff01ffff000000, 0x00ff01ffff000101, 0x00ff01ffff010000,
    0x00ff01ff00ffff01, 0x00ff01ff00ff0100, 0x00ff01ff0000ffff, 0x00ff01ff00000000,
    0x00ff01ff000001ff, 0x00ff01ff0001ff00, 0x00ff01ff000100ff, 0x00ff01ff00010001,
    0x00ff01ff00010100, 0x00ff01ff01ff0000, 0x00ff01ff0100ff00, 0x00ff01ff010000ff,
    0x00ff01ff01000001, 0x00ff01ff01000100, 0x00ff01ff01010000, 0x00ff0100ffffff00,
    0x00ff0100ffff0000, 0x00ff0100ffff0001, 0x00ff0100ffff0101, 0x00ff0100ff00ffff,
    0x00ff0100ff0000ff, 0x00ff0100ff000000, 0x00ff0100ff0001ff, 0x00ff0100ff01ff00,
    0x00ff0100ff0100ff, 0x00ff0100ff010001, 0x00ff010000ffffff, 0x00ff010000ff0000,
    0x00ff010000ff0101, 0x00ff01000000ff00, 0x00ff01000000ff01, 0x00ff0100000000ff,
    0x00ff010000000000, 0x00ff010000000001, 0x00ff010000000100, 0x00ff01000001ffff,
    0x00ff01000001ff01, 0x00ff010000010000, 0x00ff010000010001, 0x00ff010000010101,
    0x00ff010001ff0001, 0x00ff010001ff0100, 0x00ff01000100ff01, 0x00ff010001000000,
    0x00ff010001000001, 0x00ff0100010001ff, 0x00ff01000101ff00, 0x00ff0100010100ff,
    0x00ff010001010001, 0x00ff010001010100, 0x00ff0101ff000001, 0x00ff010100ff00ff,
    0x00ff010100ff0001, 0x00ff010100ff0100, 0x00ff010100000000, 0x00ff0101000001ff,
    0x00ff010100000101, 0x00ff0101000100ff, 0x00ff010100010100, 0x00ff0101010000ff,
    0x00ff010101010000, 0x0000ffffffffff00, 0x0000ffffffff00ff, 0x0000ffffffff0000,
    0x0000ffffffff0001, 0x0000ffffffff0100, 0x0000ffffff00ff01, 0x0000ffffff000000,
    0x0000ffffff000101, 0x0000ffffff01ff00, 0x0000ffffff0100ff, 0x0000ffffff010100,
    0x0000ffff00ffffff, 0x0000ffff00ff0000, 0x0000ffff00ff01ff, 0x0000ffff0000ff00,
    0x0000ffff000000ff, 0x0000ffff00000000, 0x0000ffff00000001, 0x0000ffff00000100,
    0x0000ffff00010000, 0x0000ffff000101ff, 0x0000ffff01ff0001, 0x0000ffff01ff0100,
    0x0000ffff01000000, 0x0000ffff010001ff, 0x0000ffff0101ffff, 0x0000ffff0101ff00,
    0x0000ffff01010001, 0x0000ffff01010100, 0x0000ff00ffff0000, 0x0000ff00ffff01ff,
    0x0000ff00ffff0100, 0x0000ff00ffff0101, 0x0000ff00ff00ff00, 0x0000ff00ff0000ff,
    0x0000ff00ff000000, 0x0000ff00ff000001, 0x0000ff00ff0001ff, 0x0000ff00ff000100,
    0x0000ff00ff01ffff, 0x0000ff00ff010000, 0x0000ff00ff010001, 0x0000ff00ff0101ff,
    0x0000ff00ff010101, 0x0000ff0000ffff00, 0x0000ff0000ff00ff, 0x0000ff0000ff0000,
    0x0000ff0000ff0001, 0x0000ff0000ff0100, 0x0000ff000000ffff, 0x0000ff000000ff00,
    0x0000ff000000ff01, 0x0000ff00000000ff, 0x0000ff0000000000, 0x0000ff0000000001,
    0x0000ff00000001ff, 0x0000ff0000000100, 0x0000ff0000000101, 0x0000ff000001ff00,
    0x0000ff00000100ff, 0x0000ff0000010000, 0x0000ff0000010001, 0x0000ff0000010100,
    0x0000ff0001ffff01, 0x0000ff0001ff0000, 0x0000ff000100ff00, 0x0000ff00010000ff,
    0x0000ff0001000000, 0x0000ff0001000001, 0x0000ff0001000100, 0x0000ff000101ffff,
    0x0000ff0001010000, 0x0000ff0001010101, 0x0000ff01ffffff00, 0x0000ff01ffff0001,
    0x0000ff01ff00ff01, 0x0000ff01ff000000, 0x0000ff01ff000101, 0x0000ff01ff01ff00,
    0x0000ff01ff0100ff, 0x0000ff0100ffff01, 0x0000ff0100ff0000, 0x0000ff0100ff0101,
    0x0000ff010000ff00, 0x0000ff01000000ff, 0x0000ff0100000000, 0x0000ff0100000001,
    0x0000ff0100000100, 0x0000ff010001ff01, 0x0000ff0100010000, 0x0000ff0101ff0000,
    0x0000ff010100ffff, 0x0000ff010100ff01, 0x0000ff0101000000, 0x0000ff0101000100,
    0x0000ff0101000101, 0x0000ff01010100ff, 0x000000ffffff00ff, 0x000000ffffff0000,
    0x000000ffff00ff00, 0x000000ffff0000ff, 0x000000ffff000000, 0x000000ffff000001,
    0x000000ffff0001ff, 0x000000ffff000100, 0x000000ffff01ff00, 0x000000ffff010000,
    0x000000ffff0101ff, 0x000000ffff010101, 0x000000ff00ffff00, 0x000000ff00ff00ff,
    0x000000ff00ff0000, 0x000000ff00ff0001, 0x000000ff00ff0100, 0x000000ff00ff0101,
    0x000000ff0000ffff, 0x000000ff0000ff00, 0x000000ff000000ff, 0x000000ff00000000,
    0x000000ff00000001, 0x000000ff000001ff, 0x000000ff00000100, 0x000000ff00000101,
    0x000000ff0001ff00, 0x000000ff0001ff01, 0x000000ff000100ff, 0x000000ff00010000,
    0x000000ff00010001, 0x000000ff00010100, 0x000000ff01ffffff, 0x000000ff01ff01ff,
    0x000000ff01ff0101, 0x000000ff0100ff00, 0x000000ff010000ff, 0x000000ff01000000,
    0x000000ff01000001, 0x000000ff01000100, 0x000000ff0101ff00, 0x000000ff010100ff,
    0x000000ff01010000, 0x000000ff01010101, 0x00000000ffffff00, 0x00000000ffffff01,
    0x00000000ffff00ff, 0x00000000ffff0000, 0x00000000ffff0001, 0x00000000ffff0100,
    0x00000000ff00ffff, 0x00000000ff00ff00, 0x00000000ff00ff01, 0x00000000ff0000ff,
    0x00000000ff000000, 0x00000000ff000001, 0x00000000ff000100, 0x00000000ff000101,
    0x00000000ff01ff00, 0x00000000ff0100ff, 0x00000000ff010000, 0x00000000ff010001,
    0x00000000ff010100, 0x0000000000ffffff, 0x0000000000ffff00, 0x0000000000ffff01,
    0x0000000000ff00ff, 0x0000000000ff0000, 0x0000000000ff0001, 0x0000000000ff01ff,
    0x0000000000ff0100, 0x000000000000ffff, 0x000000000000ff00, 0x000000000000ff01,
    0x00000000000000ff, 0x0000000000000000, 0x0000000000000001, 0x00000000000001ff,
    0x0000000000000100, 0x0000000000000101, 0x000000000001ffff, 0x000000000001ff00,
    0x00000000000100ff, 0x0000000000010000, 0x0000000000010001, 0x00000000000101ff,
    0x0000000000010100, 0x0000000000010101, 0x0000000001ffff00, 0x0000000001ff00ff,
    0x0000000001ff0000, 0x0000000001ff0100, 0x0000000001ff0101, 0x000000000100ffff,
    0x000000000100ff00, 0x00000000010000ff, 0x0000000001000000, 0x0000000001000001,
    0x00000000010001ff, 0x0000000001000100, 0x000000000101ff00, 0x00000000010100ff,
    0x0000000001010000, 0x0000000001010001, 0x0000000001010100, 0x00000001ffffffff,
    0x00000001ffffff00, 0x00000001ffffff01, 0x00000001ffff00ff, 0x00000001ffff0001,
    0x00000001ffff01ff, 0x00000001ffff0100, 0x00000001ff00ff00, 0x00000001ff0000ff,
    0x00000001ff000000, 0x00000001ff0001ff, 0x00000001ff000100, 0x00000001ff01ffff,
    0x00000001ff01ff00, 0x00000001ff01ff01, 0x00000001ff0100ff, 0x00000001ff010000,
    0x00000001ff010001, 0x00000001ff0101ff, 0x00000001ff010100, 0x0000000100ffff00,
    0x0000000100ff0000, 0x0000000100ff0001, 0x0000000100ff01ff, 0x0000000100ff0100,
    0x0000000100ff0101, 0x000000010000ffff, 0x000000010000ff00, 0x000000010000ff01,
    0x00000001000000ff, 0x0000000100000000, 0x0000000100000001, 0x00000001000001ff,
    0x0000000100000100, 0x0000000100000101, 0x000000010001ff00, 0x00000001000100ff,
    0x0000000100010000, 0x0000000100010100, 0x0000000101ffff01, 0x0000000101ff0000,
    0x0000000101ff0001, 0x0000000101ff01ff, 0x0000000101ff0100, 0x0000000101ff0101,
    0x000000010100ff00, 0x0000000101000000, 0x0000000101000101, 0x000000010101ff01,
    0x0000000101010000, 0x0000000101010001, 0x00000001010101ff, 0x0000000101010100,
    0x000001ffffff00ff, 0x000001ffffff0000, 0x000001ffffff0001, 0x000001ffffff0100,
    0x000001ffff00ffff, 0x000001ffff000000, 0x000001ffff0001ff, 0x000001ffff01ff00,
    0x000001ffff010101, 0x000001ff00ff0000, 0x000001ff00ff01ff, 0x000001ff00ff0101,
    0x000001ff0000ff00, 0x000001ff000000ff, 0x000001ff00000000, 0x000001ff00000001,
    0x000001ff000001ff, 0x000001ff00000100, 0x000001ff0001ffff, 0x000001ff0001ff01,
    0x000001ff000100ff, 0x000001ff00010000, 0x000001ff01ffff01, 0x000001ff01ff0100,
    0x000001ff0100ffff, 0x000001ff0100ff01, 0x000001ff01000000, 0x000001ff010001ff,
    0x000001ff0101ff00, 0x000001ff01010100, 0x00000100ffffff00, 0x00000100ffffff01,
    0x00000100ffff0000, 0x00000100ffff0101, 0x00000100ff00ff00, 0x00000100ff0000ff,
    0x00000100ff000000, 0x00000100ff000001, 0x00000100ff000100, 0x00000100ff010000,
    0x0000010000ffff00, 0x0000010000ff00ff, 0x0000010000ff0000, 0x0000010000ff0001,
    0x0000010000ff0100, 0x000001000000ffff, 0x000001000000ff00, 0x000001000000ff01,
    0x00000100000000ff, 0x0000010000000000, 0x0000010000000001, 0x00000100000001ff,
    0x0000010000000100, 0x0000010000000101, 0x000001000001ff00, 0x00000100000100ff,
    0x0000010000010000, 0x0000010000010001, 0x0000010000010100, 0x0000010001ffff00,
    0x0000010001ff0000, 0x0000010001ff0100, 0x000001000100ff00, 0x00000100010000ff,
    0x0000010001000000, 0x0000010001000001, 0x00000100010001ff, 0x0000010001000100,
    0x0000010001010000, 0x00000101ffff00ff, 0x00000101ffff01ff, 0x00000101ff000000,
    0x00000101ff000101, 0x00000101ff01ffff, 0x00000101ff010000, 0x00000101ff010001,
    0x00000101ff010100, 0x0000010100ff0000, 0x0000010100ff01ff, 0x0000010100ff0100,
    0x000001010000ff00, 0x0000010100000000, 0x0000010100000001, 0x00000101000001ff,
    0x0000010100000100, 0x000001010001ff01, 0x0000010100010000, 0x00000101000101ff,
    0x0000010100010101, 0x0000010101ffff00, 0x0000010101ff0101, 0x000001010100ff01,
    0x0000010101000000, 0x0000010101000001, 0x00000101010001ff, 0x0000010101000101,
    0x000001010101ff00, 0x0001ffffffff0000, 0x0001ffffff0000ff, 0x0001ffffff000001,
    0x0001ffffff000100, 0x0001ffffff010000, 0x0001ffff00ff00ff, 0x0001ffff0000ffff,
    0x0001ffff00000000, 0x0001ffff00000001, 0x0001ffff000001ff, 0x0001ffff00000101,
    0x0001ffff0001ff00, 0x0001ffff000100ff, 0x0001ffff00010001, 0x0001ffff00010100,
    0x0001ffff01ffff00, 0x0001ffff01000001, 0x0001ffff01010000, 0x0001ff00ffffff00,
    0x0001ff00ffff00ff, 0x0001ff00ffff0001, 0x0001ff00ffff0100, 0x0001ff00ff00ff01,
    0x0001ff00ff000000, 0x0001ff00ff01ff00, 0x0001ff00ff01ff01, 0x0001ff00ff010001,
    0x0001ff00ff010100, 0x0001ff0000ff0000, 0x0001ff0000ff0100, 0x0001ff000000ff00,
    0x0001ff0000000000, 0x0001ff0000000001, 0x0001ff0000000100, 0x0001ff0000010000,
    0x0001ff0000010001, 0x0001ff0000010101, 0x0001ff0001ff00ff, 0x0001ff0001ff0101,
    0x0001ff000100ff01, 0x0001ff0001000000, 0x0001ff000101ff00, 0x0001ff0001010001,
    0x0001ff0001010100, 0x0001ff01ff00ff00, 0x0001ff01ff000001, 0x0001ff01ff000100,
    0x0001ff0100ffffff, 0x0001ff0100ffff00, 0x0001ff0100ff0001, 0x0001ff0100000000,
    0x0001ff0100000001, 0x0001ff01000001ff, 0x0001ff010001ffff, 0x0001ff0101ff0000,
    0x0001ff010100ff00, 0x0001ff0101000001, 0x0001ff0101010000, 0x000100ffff00ff00,
    0x000100ffff00ff01, 0x000100ffff000000, 0x000100ffff000001, 0x000100ffff000101,
    0x000100ffff01ff00, 0x000100ffff010001, 0x000100ffff010100, 0x000100ff00ffffff,
    0x000100ff00ffff01, 0x000100ff00ff0000, 0x000100ff00ff01ff, 0x000100ff00ff0101,
    0x000100ff0000ff00, 0x000100ff000000ff, 0x000100ff00000000, 0x000100ff00000001,
    0x000100ff00000100, 0x000100ff00000101, 0x000100ff0001ffff, 0x000100ff0001ff01,
    0x000100ff00010000, 0x000100ff01ff00ff, 0x000100ff01ff0000, 0x000100ff01ff0100,
    0x000100ff0100ffff, 0x000100ff0100ff01, 0x000100ff010000ff, 0x000100ff01000000,
    0x000100ff01000001, 0x000100ff010001ff, 0x000100ff01000101, 0x000100ff0101ff00,
    0x000100ff010100ff, 0x000100ff01010100, 0x00010000ffff0000, 0x00010000ffff01ff,
    0x00010000ffff0101, 0x00010000ff00ff00, 0x00010000ff000000, 0x00010000ff000001,
    0x00010000ff000100, 0x0001000000ff00ff, 0x0001000000ff0000, 0x0001000000ff0001,
    0x0001000000ff0100, 0x000100000000ffff, 0x000100000000ff00, 0x00010000000000ff,
    0x0001000000000000, 0x0001000000000001, 0x0001000000000100, 0x000100000001ff00,
    0x00010000000100ff, 0x0001000000010000, 0x0001000000010001, 0x0001000000010100,
    0x0001000001ff0001, 0x0001000001ff0100, 0x0001000001ff0101, 0x000100000100ff00,
    0x0001000001000000, 0x0001000001000001, 0x0001000001000100, 0x0001000001000101,
    0x000100000101ff01, 0x0001000001010000, 0x0001000001010001, 0x00010000010101ff,
    0x00010001ffffff01, 0x00010001ffff0100, 0x00010001ff000000, 0x00010001ff01ffff,
    0x00010001ff010001, 0x00010001ff0101ff, 0x00010001ff010100, 0x0001000100ffffff,
    0x0001000100ff0000, 0x0001000100ff01ff, 0x0001000100ff0101, 0x000100010000ff00,
    0x00010001000000ff, 0x0001000100000000, 0x0001000100000001, 0x00010001000001ff,
    0x0001000100000101, 0x000100010001ffff, 0x0001000100010000, 0x00010001000101ff,
    0x0001000101ffffff, 0x0001000101ffff01, 0x0001000101ff0000, 0x0001000101ff0101,
    0x00010001010000ff, 0x0001000101000001, 0x00010001010001ff, 0x0001000101000100,
    0x000100010101ffff, 0x00010001010100ff, 0x0001000101010001, 0x0001000101010101,
    0x000101ffff000001, 0x000101ffff000100, 0x000101ffff010000, 0x000101ff00ffff00,
    0x000101ff0000ff01, 0x000101ff00000000, 0x000101ff00000101, 0x000101ff0001ff00,
    0x000101ff00010100, 0x000101ff01ff0000, 0x000101ff0100ff00, 0x000101ff010001ff,
    0x000101ff01010001, 0x00010100ffffff00, 0x00010100ffff00ff, 0x00010100ff00ffff,
    0x00010100ff000000, 0x00010100ff01ff00, 0x00010100ff0100ff, 0x00010100ff010001,
    0x00010100ff010100, 0x0001010000ffffff, 0x0001010000ffff00, 0x0001010000ff0000,
    0x0001010000ff0001, 0x0001010000ff01ff, 0x000101000000ff00, 0x00010100000000ff,
    0x0001010000000000, 0x0001010000000001, 0x0001010000000100, 0x000101000001ffff,
    0x0001010000010000, 0x0001010000010101, 0x0001010001ffff01, 0x0001010001ff00ff,
    0x0001010001ff0101, 0x0001010001000000, 0x000101000101ff00, 0x00010100010100ff,
    0x0001010001010000, 0x0001010001010100, 0x00010101ff00ff00, 0x00010101ff000001,
    0x00010101ff0001ff, 0x0001010100ffff00, 0x0001010100ff00ff, 0x0001010100ff0100,
    0x000101010000ffff, 0x0001010100000000, 0x00010101000001ff, 0x0001010100000101,
    0x00010101000100ff, 0x0001010100010000, 0x0001010100010100, 0x0001010101ff0001,
    0x00010101010000ff, 0x00010101010001ff, 0x0001010101000101, 0x0001010101010001,
    0x01ffffffffffffff, 0x01ffffffffffff01, 0x01ffffffffff01ff, 0x01ffffffffff0101,
    0x01ffffffff01ffff, 0x01ffffffff01ff01, 0x01ffffffff0101ff, 0x01ffffffff010101,
    0x01ffffff00ff0000, 0x01ffffff0000ffff, 0x01ffffff0000ff00, 0x01ffffff000000ff,
    0x01ffffff00000001, 0x01ffffff00000100, 0x01ffffff00010000, 0x01ffffff01ffffff,
    0x01ffffff01ffff01, 0x01ffffff01ff01ff, 0x01ffffff01ff0101, 0x01ffffff01000000,
    0x01ffffff0101ffff, 0x01ffffff0101ff01, 0x01ffffff010101ff, 0x01ffffff01010101,
    0x01ffff00ffff0000, 0x01ffff00ff00ff00, 0x01ffff00ff0000ff, 0x01ffff00ff000001,
    0x01ffff00ff000100, 0x01ffff00ff010000, 0x01ffff0000ffff00, 0x01ffff0000ff00ff,
    0x01ffff0000ff0100, 0x01ffff000000ffff, 0x01ffff000000ff01, 0x01ffff0000000000,
    0x01ffff0000000001, 0x01ffff00000001ff, 0x01ffff0000000100, 0x01ffff00000100ff,
    0x01ffff0000010001, 0x01ffff0000010100, 0x01ffff0001ff0000, 0x01ffff0001ff0100,
    0x01ffff00010000ff, 0x01ffff0001000001, 0x01ffff0001000100, 0x01ffff0001010000,
    0x01ffff01ffffffff, 0x01ffff01ffffff01, 0x01ffff01ffff01ff, 0x01ffff01ffff0101,
    0x01ffff01ff000000, 0x01ffff01ff01ffff, 0x01ffff01ff01ff01, 0x01ffff01ff0101ff,
    0x01ffff01ff010101, 0x01ffff010000ff00, 0x01ffff01000000ff, 0x01ffff0100000100,
    0x01ffff0100010000, 0x01ffff0101ffffff, 0x01ffff0101ffff01, 0x01ffff0101ff01ff,
    0x01ffff0101ff0101, 0x01ffff0101000000, 0x01ffff010101ffff, 0x01ffff010101ff01,
    0x01ffff01010101ff, 0x01ffff0101010101, 0x01ff00ffff0000ff, 0x01ff00ffff000100,
    0x01ff00ff00ffff00, 0x01ff00ff00ff00ff, 0x01ff00ff0000ff00, 0x01ff00ff00000000,
    0x01ff00ff00000101, 0x01ff00ff0001ff00, 0x01ff00ff000100ff, 0x01ff00ff00010100,
    0x01ff00ff010000ff, 0x01ff00ff01000100, 0x01ff0000ffffff00, 0x01ff0000ffff0100,
    0x01ff0000ff00ff01, 0x01ff0000ff000000, 0x01ff0000ff000101, 0x01ff0000ff010001,
    0x01ff0000ff010100, 0x01ff000000ffffff, 0x01ff000000ffff00, 0x01ff000000ff0000,
    0x01ff000000ff01ff, 0x01ff00000000ff00, 0x01ff0000000000ff, 0x01ff000000000000,
    0x01ff000000000001, 0x01ff000000000100, 0x01ff000000000101, 0x01ff000000010000,
    0x01ff000000010001, 0x01ff0000000101ff, 0x01ff000000010101, 0x01ff000001ffff00,
    0x01ff000001ff00ff, 0x01ff000001ff0001, 0x01ff000001ff0100, 0x01ff00000100ffff,
    0x01ff00000100ff01, 0x01ff000001000000, 0x01ff0000010001ff, 0x01ff000001010001,
    0x01ff0001ff00ff00, 0x01ff0001ff000001, 0x01ff0001ff000100, 0x01ff0001ff010000,
    0x01ff000100ffff00, 0x01ff000100ff00ff, 0x01ff000100ff0100, 0x01ff000100ff0101,
    0x01ff00010000ffff, 0x01ff000100000000, 0x01ff000100000100, 0x01ff000100000101,
    0x01ff00010001ff00, 0x01ff000100010001, 0x01ff000100010101, 0x01ff000101ff0000,
    0x01ff00010100ff00, 0x01ff000101000101, 0x01ff0001010100ff, 0x01ff01ffffffffff,
    0x01ff01ffffffff01, 0x01ff01ffffff01ff, 0x01ff01ffffff0101, 0x01ff01ffff000000,
    0x01ff01ffff01ffff, 0x01ff01ffff01ff01, 0x01ff01ffff0101ff, 0x01ff01ffff010101,
    0x01ff01ff00ffff00, 0x01ff01ff00ff0000, 0x01ff01ff0000ff00, 0x01ff01ff000000ff,
    0x01ff01ff00000100, 0x01ff01ff00010000, 0x01ff01ff00010100, 0x01ff01ff01ffffff,
    0x01ff01ff01ffff01, 0x01ff01ff01ff01ff, 0x01ff01ff01ff0101, 0x01ff01ff01000000,
    0x01ff01ff0101ffff, 0x01ff01ff0101ff01, 0x01ff01ff010101ff, 0x01ff01ff01010101,
    0x01ff0100ffff0000, 0x01ff0100ffff0001, 0x01ff0100ff00ff00, 0x01ff0100ff0000ff,
    0x01ff0100ff000001, 0x01ff0100ff010000, 0x01ff010000ffff00, 0x01ff010000ff00ff,
    0x01ff010000ff0001, 0x01ff010000ff0100, 0x01ff01000000ffff, 0x01ff01000000ff01,
    0x01ff010000000000, 0x01ff010000000101, 0x01ff01000001ff00, 0x01ff0100000100ff,
    0x01ff010001ff0000, 0x01ff010001000001, 0x01ff010001000100, 0x01ff010001010000,
    0x01ff0101ffffffff, 0x01ff0101ffffff01, 0x01ff0101ffff01ff, 0x01ff0101ffff0101,
    0x01ff0101ff000000, 0x01ff0101ff01ffff, 0x01ff0101ff01ff01, 0x01ff0101ff0101ff,
    0x01ff0101ff010101, 0x01ff010100ff0000, 0x01ff01010000ff00, 0x01ff0101000000ff,
    0x01ff010100000001, 0x01ff010101ffffff, 0x01ff010101ffff01, 0x01ff010101ff01ff,
    0x01ff010101ff0101, 0x01ff010101000000, 0x01ff01010101ffff, 0x01ff01010101ff01,
    0x01ff0101010101ff, 0x01ff010101010101, 0x0100ffffffff0000, 0x0100ffffff00ff00,
    0x0100ffffff000001, 0x0100ffffff0001ff, 0x0100ffffff000100, 0x0100ffffff010000,
    0x0100ffff00ffff00, 0x0100ffff00ff0001, 0x0100ffff00ff0100, 0x0100ffff00000000,
    0x0100ffff000001ff, 0x0100ffff00000101, 0x0100ffff00010100, 0x0100ffff00010101,
    0x0100ffff01ff0000, 0x0100ffff0100ff00, 0x0100ffff010000ff, 0x0100ffff01000001,
    0x0100ffff01000100, 0x0100ffff01010000, 0x0100ff00ffffff00, 0x0100ff00ffff00ff,
    0x0100ff00ffff0001, 0x0100ff00ffff0100, 0x0100ff00ff00ffff, 0x0100ff00ff000000,
    0x0100ff00ff0001ff, 0x0100ff00ff000101, 0x0100ff00ff01ff00, 0x0100ff00ff0100ff,
    0x0100ff00ff010001, 0x0100ff00ff010100, 0x0100ff0000ffffff, 0x0100ff0000ff0000,
    0x0100ff000000ffff, 0x0100ff000000ff00, 0x0100ff00000000ff, 0x0100ff0000000000,
    0x0100ff0000000001, 0x0100ff0000000100, 0x0100ff000001ff01, 0x0100ff0000010000,
    0x0100ff0001ff00ff, 0x0100ff0001ff0001, 0x0100ff000100ff01, 0x0100ff0001000000,
    0x0100ff00010001ff, 0x0100ff000101ff00, 0x0100ff00010100ff, 0x0100ff0001010001,
    0x0100ff0001010100, 0x0100ff01ffff0000, 0x0100ff01ff00ff00, 0x0100ff01ff0000ff,
    0x0100ff01ff000100, 0x0100ff01ff010000, 0x0100ff0100ff00ff, 0x0100ff0100ff0001,
    0x0100ff0100ff0100, 0x0100ff010000ffff, 0x0100ff010000ff01, 0x0100ff0100000000,
    0x0100ff01000001ff, 0x0100ff0100010001, 0x0100ff0100010100, 0x0100ff0101ff0000,
    0x0100ff01010000ff, 0x0100ff0101000001, 0x0100ff0101010100, 0x010000ffffffff00,
    0x010000ffffff00ff, 0x010000ffffff0001, 0x010000ffff00ffff, 0x010000ffff000000,
    0x010000ffff0001ff, 0x010000ffff010001, 0x010000ff00ffffff, 0x010000ff00ff0101,
    0x010000ff0000ff00, 0x010000ff000000ff, 0x010000ff00000000, 0x010000ff00000001,
    0x010000ff000001ff, 0x010000ff00000100, 0x010000ff0001ffff, 0x010000ff0001ff00,
    0x010000ff0001ff01, 0x010000ff00010000, 0x010000ff01ff00ff, 0x010000ff01ff0001,
    0x010000ff0100ff01, 0x010000ff010000ff, 0x010000ff01000000, 0x010000ff010001ff,
    0x010000ff0101ff00, 0x010000ff01010100, 0x01000000ffffffff, 0x01000000ffff0000,
    0x01000000ffff01ff, 0x01000000ffff0101, 0x01000000ff00ffff, 0x01000000ff00ff00,
    0x01000000ff0000ff, 0x01000000ff000000, 0x01000000ff000001, 0x01000000ff000100,
    0x01000000ff01ff00, 0x01000000ff010000, 0x01000000ff010100, 0x01000000ff010101,
    0x0100000000ffff00, 0x0100000000ff00ff, 0x0100000000ff0000, 0x0100000000ff0001,
    0x0100000000ff0100, 0x010000000000ffff, 0x010000000000ff00, 0x010000000000ff01,
    0x01000000000000ff, 0x0100000000000000, 0x0100000000000001, 0x01000000000001ff,
    0x0100000000000100, 0x0100000000000101, 0x010000000001ff00, 0x01000000000100ff,
    0x0100000000010000, 0x0100000000010001, 0x0100000000010100, 0x0100000001ffff00,
    0x0100000001ff0000, 0x0100000001ff01ff, 0x010000000100ff00, 0x010000000100ff01,
    0x01000000010000ff, 0x0100000001000000, 0x0100000001000001, 0x0100000001000100,
    0x0100000001000101, 0x010000000101ffff, 0x010000000101ff01, 0x0100000001010000,
    0x01000000010101ff, 0x0100000001010101, 0x01000001ffffff00, 0x01000001ffff00ff,
    0x01000001ff00ffff, 0x01000001ff000000, 0x01000001ff000100, 0x01000001ff01ffff,
    0x01000001ff010001, 0x01000001ff010100, 0x0100000100ff0000, 0x0100000100ff01ff,
    0x0100000100ff0100, 0x010000010000ff00, 0x010000010000ff01, 0x0100000100000000,
    0x0100000100000001, 0x0100000100000100, 0x0100000100010000, 0x01000001000101ff,
    0x0100000101ffff01, 0x0100000101ff00ff, 0x0100000101ff0100, 0x0100000101ff0101,
    0x010000010100ff01, 0x01000001010000ff, 0x0100000101000000, 0x01000001010100ff,
    0x0100000101010001, 0x0100000101010100, 0x010001ffffff0000, 0x010001ffff000001,
    0x010001ffff000100, 0x010001ffff010000, 0x010001ff00ffff00, 0x010001ff00ff0001,
    0x010001ff0000ffff, 0x010001ff0000ff01, 0x010001ff00000000, 0x010001ff00000001,
    0x010001ff00000101, 0x010001ff000100ff, 0x010001ff00010000, 0x010001ff01ff0000,
    0x010001ff0100ff00, 0x010001ff01000001, 0x010001ff01000100, 0x010001ff01010000,
    0x01000100ffff00ff, 0x01000100ffff0001, 0x01000100ffff0100, 0x01000100ff00ffff,
    0x01000100ff00ff01, 0x01000100ff000000, 0x01000100ff0001ff, 0x01000100ff000101,
    0x01000100ff01ffff, 0x01000100ff01ff00, 0x01000100ff0100ff, 0x01000100ff010001,
    0x0100010000ffffff, 0x0100010000ffff01, 0x0100010000ff0000, 0x0100010000ff01ff,
    0x0100010000ff0101, 0x010001000000ff00, 0x01000100000000ff, 0x0100010000000000,
    0x0100010000000001, 0x0100010000000100, 0x010001000001ff01, 0x0100010000010000,
    0x0100010000010001, 0x0100010000010101, 0x0100010001ffff00, 0x0100010001ff00ff,
    0x010001000100ffff, 0x010001000100ff01, 0x0100010001000000, 0x0100010001000101,
    0x010001000101ff00, 0x0100010001010001, 0x01000101ffff0000, 0x01000101ff000000,
    0x01000101ff010000, 0x0100010100ff00ff, 0x0100010100ff0001, 0x0100010100ff0100,
    0x010001010000ffff, 0x0100010100000000, 0x01000101000001ff, 0x010001010001ff00,
    0x0100010101ff0000, 0x010001010100ff00, 0x01000101010000ff, 0x0100010101000000,
    0x0100010101000001, 0x0101ffffffffffff, 0x0101ffffffffff01, 0x0101ffffffff01ff,
    0x0101ffffffff0101, 0x0101ffffff000000, 0x0101ffffff01ffff, 0x0101ffffff01ff01,
    0x0101ffffff0101ff, 0x0101ffffff010101, 0x0101ffff00ff0000, 0x0101ffff0000ff00,
    0x0101ffff000000ff, 0x0101ffff00000001, 0x0101ffff00000100, 0x0101ffff01ffffff,
    0x0101ffff01ffff01, 0x0101ffff01ff01ff, 0x0101ffff01ff0101, 0x0101ffff01000000,
    0x0101ffff0101ffff, 0x0101ffff0101ff01, 0x0101ffff010101ff, 0x0101ffff01010101,
    0x0101ff00ffff0000, 0x0101ff00ffff0100, 0x0101ff00ff00ff00, 0x0101ff00ff0000ff,
    0x0101ff00ff000001, 0x0101ff00ff000100, 0x0101ff00ff000101, 0x0101ff0000ff0001,
    0x0101ff0000ff0100, 0x0101ff000000ff00, 0x0101ff0000000000, 0x0101ff00000001ff,
    0x0101ff0000000101, 0x0101ff000001ff00, 0x0101ff00000100ff, 0x0101ff0001ff0000,
    0x0101ff000100ffff, 0x0101ff000100ff01, 0x0101ff0001000001, 0x0101ff0001000100,
    0x0101ff01ffffff01, 0x0101ff01ffff01ff, 0x0101ff01ffff0101, 0x0101ff01ff00ffff,
    0x0101ff01ff000100, 0x0101ff01ff01ff01, 0x0101ff01ff0101ff, 0x0101ff01ff010101,
    0x0101ff0100ff0000, 0x0101ff010000ff00, 0x0101ff0100000001, 0x0101ff0100000100,
    0x0101ff0100010000, 0x0101ff0101ffffff, 0x0101ff0101ffff01, 0x0101ff0101ff01ff,
    0x0101ff0101ff0101, 0x0101ff0101000000, 0x0101ff010101ffff, 0x0101ff010101ff01,
    0x0101ff01010101ff, 0x0101ff0101010101, 0x010100ffff000100, 0x010100ffff010000,
    0x010100ff00ffff00, 0x010100ff00ff00ff, 0x010100ff0000ffff, 0x010100ff000000ff,
    0x010100ff00000000, 0x010100ff000001ff, 0x010100ff00000101, 0x010100ff0001ff00,
    0x010100ff00010000, 0x010100ff00010001, 0x010100ff000101ff, 0x010100ff00010100,
    0x010100ff01ff0000, 0x01010000ffff0001, 0x01010000ffff0100, 0x01010000ff00ffff,
    0x01010000ff00ff01, 0x01010000ff000000, 0x01010000ff0001ff, 0x01010000ff010001,
    0x01010000ff010100, 0x0101000000ffff01, 0x0101000000ff0000, 0x010100000000ff00,
    0x01010000000000ff, 0x0101000000000000, 0x0101000000000001, 0x0101000000000100,
    0x0101000000010000, 0x0101000000010101, 0x0101000001ffff00, 0x0101000001ff00ff,
    0x0101000001ff0000, 0x0101000001ff0001, 0x0101000001ff0100, 0x010100000100ff01,
    0x0101000001000000, 0x01010000010001ff, 0x01010001ffff0000, 0x01010001ff00ff00,
    0x01010001ff000001, 0x01010001ff000101, 0x01010001ff01ff00, 0x01010001ff010000,
    0x0101000100ff00ff, 0x0101000100ff0001, 0x0101000100ff0101, 0x010100010000ff01,
    0x0101000100000000, 0x0101000100000001, 0x01010001000001ff, 0x010100010001ffff,
    0x010100010001ff01, 0x0101000101ff0001, 0x010100010100ffff, 0x0101000101000000,
    0x0101000101000001, 0x0101000101000100, 0x010100010101ff00, 0x01010001010100ff,
    0x0101000101010001, 0x010101ffffffffff, 0x010101ffffffff01, 0x010101ffffff01ff,
    0x010101ffffff0101, 0x010101ffff01ffff, 0x010101ffff01ff01, 0x010101ffff0101ff,
    0x010101ffff010101, 0x010101ff0000ff00, 0x010101ff000000ff, 0x010101ff00000001,
    0x010101ff00000100, 0x010101ff01ffffff, 0x010101ff01ffff01, 0x010101ff01ff01ff,
    0x010101ff01ff0101, 0x010101ff01000000, 0x010101ff0101ffff, 0x010101ff0101ff01,
    0x010101ff010101ff, 0x010101ff01010101, 0x01010100ffff0000, 0x01010100ff0000ff,
    0x01010100ff000100, 0x01010100ff01ff00, 0x01010100ff010000, 0x0101010000ffff00,
    0x010101000000ffff, 0x0101010000000000, 0x0101010000000101, 0x010101000001ff00,
    0x0101010000010001, 0x0101010000010100, 0x010101000100ffff, 0x0101010001000001,
    0x01010101ffffffff, 0x01010101ffffff01, 0x01010101ffff01ff, 0x01010101ffff0101,
    0x01010101ff01ffff, 0x01010101ff01ff01, 0x01010101ff0101ff, 0x01010101ff010101,
    0x010101010000ff00, 0x01010101000000ff, 0x0101010100000001, 0x0101010101ffffff,
    0x0101010101ffff01, 0x0101010101ff01ff, 0x0101010101ff0101, 0x0101010101000000,
    0x010101010101ffff, 0x010101010101ff01, 0x01010101010101ff, 0x0101010101010101,
};
template <Fmt F>
constexpr const uint64_t* iq12_grid() {
  return F == Fmt::IQ2_XXS ? IQ2XXS_GRID : F == Fmt::IQ2_XS ? IQ2XS_GRID : F == Fmt::IQ2_S ? IQ2S_GRID : IQ1S_GRID;
}
// iq1: one row's 16-bit qh word (iq1_s: index bits, ls and the delta's sign; iq1_m: index bits and
// the deltas' signs).
template <Fmt F>
[[maybe_unused]] inline uint32_t iq1_qh(const uint8_t* wb, int row) {
  uint16_t v;
  std::memcpy(&v, wb + (F == Fmt::IQ1_S ? 32 : 38) + 2 * row, 2);
  return v;
}
// Index l's grid entry (values 8l..8l+7, the first in the low byte) of one row.
template <Fmt F>
[[maybe_unused]] inline uint64_t iq12_entry(const uint8_t* wb, int l, int row) {
  uint32_t idx = wb[8 * l + row];
  if constexpr (F == Fmt::IQ2_XS) idx |= (uint32_t)(wb[32 + 4 * row + l] >> 7) << 8;
  if constexpr (F == Fmt::IQ2_S) idx |= (uint32_t)((wb[64 + row] >> (2 * l)) & 3) << 8;
  if constexpr (F == Fmt::IQ1_S) idx |= ((iq1_qh<F>(wb, row) >> (3 * l)) & 7) << 8;
  if constexpr (F == Fmt::IQ1_M) idx |= ((iq1_qh<F>(wb, row) >> (4 * l)) & 7) << 8;
  return iq12_grid<F>()[idx];
}
// iq2: one row's 32 signs (bit v: value v negative); iq2_xxs's and iq2_xs's 8th sign of each 8 is
// the parity of the 7 stored.
template <Fmt F>
[[maybe_unused]] inline uint32_t iq2_sign_bits(const uint8_t* wb, int row) {
  uint32_t w;
  std::memcpy(&w, wb + 32 + 4 * row, 4);
  if constexpr (F == Fmt::IQ2_S) return w;
  uint32_t out = 0;
  for (int l = 0; l < 4; ++l) {
    uint32_t b = (w >> (8 * l)) & 0x7f, p = b;
    p ^= p >> 4, p ^= p >> 2, p ^= p >> 1;
    out |= (b | (p & 1) << 7) << (8 * l);
  }
  return out;
}
// iq1: whether index l's delta of one row is negative.
template <Fmt F>
[[maybe_unused]] inline bool iq1_delta_negative(const uint8_t* wb, int l, int row) {
  return F == Fmt::IQ1_S ? (iq1_qh<F>(wb, row) >> 15) & 1 : (iq1_qh<F>(wb, row) >> (4 * l + 3)) & 1;
}
// One row's 2 ls + 1 for values 16h..16h+15.
template <Fmt F>
[[maybe_unused]] inline int iq12_mult(const uint8_t* wb, int row, int h) {
  int ls;
  if constexpr (F == Fmt::IQ2_XXS) {
    uint32_t w;
    std::memcpy(&w, wb + 32 + 4 * row, 4);
    ls = (int)(((w >> 7) & 1) | ((w >> 14) & 2) | ((w >> 21) & 4) | ((w >> 28) & 8));
  } else if constexpr (F == Fmt::IQ2_XS || F == Fmt::IQ2_S) {
    ls = (wb[(F == Fmt::IQ2_XS ? 64 : 72) + row] >> (4 * h)) & 15;
  } else if constexpr (F == Fmt::IQ1_S) {
    ls = (int)((iq1_qh<F>(wb, row) >> 12) & 7);
  } else {
    const uint8_t* p = wb + 32 + 3 * (row / 4);
    const uint32_t v = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    ls = (int)((v >> (6 * (row % 4) + 3 * h)) & 7);
  }
  return 2 * ls + 1;
}
// Value v (0..31) of one row as the int8 w8 (sgn: the row's iq2_sign_bits; iq1 ignores it).
template <Fmt F>
[[maybe_unused]] inline int iq12_w8(const uint8_t* wb, int row, int v, uint32_t sgn) {
  const int g = (int8_t)(uint8_t)(iq12_entry<F>(wb, v / 8, row) >> (8 * (v % 8)));
  if constexpr (iq1<F>()) return 8 * g + (iq1_delta_negative<F>(wb, v / 8, row) ? -1 : 1);
  else return (sgn >> v) & 1 ? -g : g;
}
template <Fmt F>
constexpr bool k_scales() { return F == Fmt::Q4_K || F == Fmt::Q5_K; }  // Q4_K's d, dmin and 6-bit fields
// Formats scaled per 16 values (each block's two halves apart, with the x values' sums per 16).
template <Fmt F>
constexpr bool halves16() { return F == Fmt::Q6_K || F == Fmt::Q3_K || F == Fmt::Q2_K; }
// Their offset, applied to each half's integer sum: sum((q - off) x) = sum(q x) - off sum(x).
template <Fmt F>
constexpr int half_offset() { return F == Fmt::Q6_K ? 32 : F == Fmt::Q3_K ? 4 : 0; }
// The formats whose stored unsigned u is the weight plus a constant (q8_0, iq4 and iq3: w + 128;
// q4_0: w + 8; q5_0: w + 16). The offset comes off each block's integer sum, sum((u - off) x) =
// sum(u x) - off sum(x): exact, and an integer step where a float tail (coef = -off dw times x's
// scaled sum) took a second fused multiply-add a block, on the pipes the dot products share
// (bench/qmatmul_rows.cc, one thread, 2,048 x 2,048, 64 rows: q8_0 251 -> 294-298 G MAC/s, q4_0
// 254-256 -> 302-303, iq4_xs 250-251 -> 280-287). Formats with a stored min (q4_1, q5_1, the
// K-quants' mins) keep the tail.
template <Fmt F>
constexpr int block_offset() {
  return F == Fmt::Q8_0 || iq4<F>() || iq3<F>() ? 128 : F == Fmt::Q4_0 ? 8 : F == Fmt::Q5_0 ? 16 : 0;
}
template <Fmt F>
constexpr bool two_bit() { return F == Fmt::Q3_K || F == Fmt::Q2_K; }  // 2-bit steps (q3_k's low bits)
// The formats whose packed-row tiles sum a block's min term (coef times x's scaled sum: q4_1,
// q5_1, q4_k and q5_k and their X forms) in a pass of their own over the blocks after the integer
// sums: a row's acc and tail are then never live at once, so a pass's accumulators fit in the
// registers (see tile512). Each sees the same steps in the same order, so the same bits.
template <Fmt F>
constexpr bool mins_pass() {
  return block_offset<F>() == 0 && !halves16<F>() && !iq12<F>() && !two_bit<F>() && !float_w<F>();
}
template <Fmt F>
constexpr bool expanded_scales() { return F == Fmt::Q4_KX || F == Fmt::Q5_KX; }
template <Fmt F>
constexpr int block_bytes() {
  return F == Fmt::Q8_0 ? QK * GROUP : F == Fmt::Q6_K ? 3 * QK / 4 * GROUP : five_bit<F>() ? 5 * QK / 8 * GROUP
         : F == Fmt::Q3_K ? 3 * QK / 8 * GROUP : F == Fmt::Q2_K ? QK / 4 * GROUP
         : F == Fmt::IQ3_XXS ? 12 * GROUP : F == Fmt::IQ3_S ? 27 * GROUP / 2 : float_w<F>() ? 2 * QK * GROUP
         : F == Fmt::IQ2_XXS ? 8 * GROUP : F == Fmt::IQ2_XS ? 9 * GROUP : F == Fmt::IQ2_S ? 10 * GROUP
         : F == Fmt::IQ1_S ? 6 * GROUP : F == Fmt::IQ1_M ? 27 * GROUP / 4
         : QK / 2 * GROUP;
}
// u16 elements of d and of m per chunk of K groups over nb blocks (the layer's and the chunk's
// stride; m holds q4_k's scale bytes, two a u16)
template <Fmt F>
constexpr size_t d_per_chunk(int nb, int K) {
  return float_w<F>() ? 0
         : k_scales<F>() || F == Fmt::Q2_K ? (size_t)nb / BLOCKS_K * K * 16
         : F == Fmt::Q6_K || F == Fmt::IQ4_XS || F == Fmt::Q3_K || iq3<F>() || iq12<F>()
             ? (size_t)nb / BLOCKS_K * K * GROUP
             : (size_t)nb * K * GROUP;
}
template <Fmt F>
constexpr size_t m_per_chunk(int nb, int K) {
  return k_scales<F>() || F == Fmt::Q3_K ? (size_t)nb / BLOCKS_K * K * 48
         : F == Fmt::Q6_K || F == Fmt::Q2_K ? (size_t)nb / BLOCKS_K * K * 64
         : F == Fmt::IQ4_XS ? (size_t)nb / BLOCKS_K * K * 24
                       : F == Fmt::Q4_1 || F == Fmt::Q5_1 ? (size_t)nb * K * GROUP : 0;
}
// A tile asks for the weights PREFETCH_BLOCKS blocks (of 32 inputs) ahead of those it multiplies:
// groups [g, g + n) of block b + PREFETCH_BLOCKS. The hardware prefetchers stop at every 4 KB
// page (the weights sit on ordinary pages: transparent huge pages are opt-in on most systems),
// so a tile reading its chunk from DRAM (every product of a model bigger than the caches)
// stalled at each page; 4, 8 and 16 blocks ahead measured alike. On this 2-core AMD EPYC
// (AVX-512 build), a SmolLM2-1.7B-shape Q5_K_M file: an 8-row verify step 95-99 -> 65-70 ms
// (59 ms with tile512's 8-row pass), a 64-row prefill chunk 349 -> 325 ms (python -m
// bench.step_time --rows 8 / 64); the 1-row decode step, which already reads at the memory's
// rate, unchanged; the AVX2 build's 8-row step within 0-4% (its tiles are slower, so they
// waited less on memory). A hint changes no result.
constexpr int PREFETCH_BLOCKS = 8;
template <Fmt F>
PW_INLINE void prefetch_groups(const uint8_t* wq, int b, int g, int n, int G, int nb) {
  if (b + PREFETCH_BLOCKS >= nb) return;  // (the chunk's last blocks: the next chunk may be another thread's)
  const uint8_t* p = wq + ((size_t)(b + PREFETCH_BLOCKS) * G + g) * block_bytes<F>();
  for (int o = 0; o < n * block_bytes<F>(); o += 64) PW_PREFETCH(p + o);
}

// Formats whose super-blocks span 8 blocks of 32.
template <Fmt F>
constexpr bool super_blocks() { return k_scales<F>() || halves16<F>() || F == Fmt::IQ4_XS || iq3<F>() || iq12<F>(); }

// The K- and IQ-quants keep their scales per group and super-block: where block b's are for group
// g (of G in the chunk), with D f16 of d and M scale bytes a group and super-block, and the
// block's index in its super-block.
struct SuperScales {
  const uint16_t* d;
  const uint8_t* m;
  int j;
};
template <int D, int M>
inline SuperScales super_at(const uint16_t* wd, const uint16_t* wm, int b, int g, int G) {
  const size_t sg = (size_t)(b / BLOCKS_K) * G + g;
  return {wd + sg * D, (const uint8_t*)wm + sg * M, b % BLOCKS_K};
}

// iq4_xs: block b's 6-bit scale (ls, w = d (ls - 32) kvalue) for one row of group g, and the
// super-block's d. Per group and super-block m holds 48 bytes: byte 4j + (row & 3) has block j's
// low 4 bits of row `row` (low nibble, rows 0-3) or row + 4 (high nibble), and the 16-bit word
// at byte 32 + 2j their high 2 bits at bits 2 row.
inline SuperScales iq4xs_at(const uint16_t* wd, const uint16_t* wm, int b, int g, int G) {
  return super_at<GROUP, 48>(wd, wm, b, g, G);
}
[[maybe_unused]] inline int iq4xs_scale(const SuperScales& s, int row) {
  uint16_t h;
  std::memcpy(&h, s.m + 32 + 2 * s.j, 2);
  return (int)(((s.m[4 * s.j + (row & 3)] >> (4 * (row >> 2))) & 15) | ((h >> (2 * row)) & 3) << 4);
}

// q6_k: block b's d (8 rows, f16) and its two halves' scales (8 rows each, int8) for group g.
struct Q6KScales {
  const uint16_t* d;
  const int8_t* sc;
};
inline Q6KScales q6k_at(const uint16_t* wd, const uint16_t* wm, int b, int g, int G) {
  const SuperScales s = super_at<GROUP, 128>(wd, wm, b, g, G);
  return {s.d, (const int8_t*)s.m + 16 * s.j};
}

// q3_k: the super-block's d (8 rows, f16) and its 96 scale bytes, 12 a block: block j's at byte
// 12j hold 12 bits a row, row r's at bits 12r..12r+11 (little-endian), its first half's 6-bit
// ls in the low 6 and its second half's in the high 6 (so one 16-byte shuffle gathers a row's
// pair into its 32-bit lane, 8 rows at once).
inline SuperScales q3k_at(const uint16_t* wd, const uint16_t* wm, int b, int g, int G) {
  return super_at<GROUP, 96>(wd, wm, b, g, G);
}
[[maybe_unused]] inline int q3k_scale(const SuperScales& s, int half, int row) {  // ls - 32
  uint16_t v;
  std::memcpy(&v, s.m + 12 * s.j + 3 * row / 2, 2);
  return (int)((v >> (4 * (row & 1) + 6 * half)) & 63) - 32;
}
// q2_k: the super-block's d (and dmin at + 8) and its 128 scale bytes, [scale][8 rows], each
// sc | mn << 4 as the file has it (block j's halves: bytes 16j + row and 16j + 8 + row).
inline SuperScales q2k_at(const uint16_t* wd, const uint16_t* wm, int b, int g, int G) {
  return super_at<16, 128>(wd, wm, b, g, G);
}

// The scales of q6_k block b's two halves for one row of group g (the scalar tiles'): each
// half's value is dw[h] * (u - 32).
template <Fmt F>
[[maybe_unused]] inline void row_half_scales(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, int row,
                                             float* dw) {
  if constexpr (F == Fmt::Q6_K) {
    const Q6KScales s = q6k_at(wd, wm, b, g, G);
    const float d = half_to_float(s.d[row]);
    for (int h = 0; h < 2; ++h) dw[h] = d * (float)s.sc[GROUP * h + row];
  } else {
    static_assert(F != F, "row_half_scales: q6_k only (q3_k's and q2_k's halves combine as integers)");
  }
}

// q4_k: the super-block's d (and dmin at + 8) and its 96 scale bytes.
inline SuperScales q4k_at(const uint16_t* wd, const uint16_t* wm, int b, int g, int G) {
  return super_at<16, 96>(wd, wm, b, g, G);
}
inline uint32_t q4k_high_bits(const SuperScales& s) {
  uint32_t h;
  std::memcpy(&h, s.m + 64 + 4 * s.j, 4);
  return h;
}
// Row `row`'s 6-bit scale and min of the block (the scalar tiles' decode).
[[maybe_unused]] inline void q4k_scale_min(const SuperScales& s, int row, int& sc, int& mn) {
  const uint32_t lo = s.m[8 * s.j + row], h = q4k_high_bits(s);
  sc = (int)((lo & 15) | ((h >> (2 * row)) & 3) << 4);
  mn = (int)((lo >> 4) | ((h >> (16 + 2 * row)) & 3) << 4);
}

// One block's q4_k scales for the 8 rows of a group as f32 (o[0..8) dw = d * scale, o[8..16)
// coef = -dmin * min), each product rounded once, as llama.cpp's dequantization rounds it; the
// 6-bit fields decoded 8 (or 4) rows at once where there are vectors. expand_q4k writes a whole
// chunk's (K groups over nb blocks), block b and group g at (b K + g) 16.
PW_INLINE void decode_q4k(const SuperScales& s, float* o) {
#if defined(__AVX2__)
  const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(s.m + 8 * s.j)));
  const __m256i h = _mm256_set1_epi32((int)q4k_high_bits(s));
  const __m256i shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), three = _mm256_set1_epi32(3);
  const __m256i hs = _mm256_and_si256(_mm256_srlv_epi32(h, shift), three);
  const __m256i hm = _mm256_and_si256(_mm256_srlv_epi32(h, _mm256_add_epi32(shift, _mm256_set1_epi32(16))), three);
  const __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)), _mm256_slli_epi32(hs, 4));
  const __m256i mn = _mm256_or_si256(_mm256_srli_epi32(lo, 4), _mm256_slli_epi32(hm, 4));
  _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)s.d)), _mm256_cvtepi32_ps(sc)));
  _mm256_storeu_ps(o + GROUP, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s.d + GROUP))),
                                            _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), mn))));
#elif defined(PW_NEON)
  const uint16x8_t lo = vmovl_u8(vld1_u8(s.m + 8 * s.j));
  const uint32x4_t h = vdupq_n_u32(q4k_high_bits(s)), three = vdupq_n_u32(3);
  const float16x8_t d = vreinterpretq_f16_u16(vld1q_u16(s.d)), dmin = vreinterpretq_f16_u16(vld1q_u16(s.d + GROUP));
  for (int half = 0; half < 2; ++half) {  // rows 4 half .. 4 half + 3
    const uint32x4_t l = half ? vmovl_high_u16(lo) : vmovl_u16(vget_low_u16(lo));
    const int32_t r0 = 8 * half;  // (right shifts are negative left ones)
    const int32x4_t shift = {-r0, -r0 - 2, -r0 - 4, -r0 - 6};
    const uint32x4_t hs = vandq_u32(vshlq_u32(h, shift), three);
    const uint32x4_t hm = vandq_u32(vshlq_u32(h, vaddq_s32(shift, vdupq_n_s32(-16))), three);
    const uint32x4_t sc = vorrq_u32(vandq_u32(l, vdupq_n_u32(15)), vshlq_n_u32(hs, 4));
    const uint32x4_t mn = vorrq_u32(vshrq_n_u32(l, 4), vshlq_n_u32(hm, 4));
    const float32x4_t dh = half ? vcvt_high_f32_f16(d) : vcvt_f32_f16(vget_low_f16(d));
    const float32x4_t mh = half ? vcvt_high_f32_f16(dmin) : vcvt_f32_f16(vget_low_f16(dmin));
    vst1q_f32(o + 4 * half, vmulq_f32(dh, vcvtq_f32_u32(sc)));
    vst1q_f32(o + GROUP + 4 * half, vmulq_f32(mh, vcvtq_f32_s32(vnegq_s32(vreinterpretq_s32_u32(mn)))));
  }
#else
  for (int row = 0; row < GROUP; ++row) {
    int sc, mn;
    q4k_scale_min(s, row, sc, mn);
    o[row] = half_to_float(s.d[row]) * (float)sc;
    o[GROUP + row] = half_to_float(s.d[GROUP + row]) * (float)-mn;
  }
#endif
}

inline void expand_q4k(const uint16_t* wd, const uint16_t* wm, int nb, int K, float* out) {
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < K; ++g) decode_q4k(q4k_at(wd, wm, b, g, K), out + ((size_t)b * K + g) * 2 * GROUP);
}

// Block b's dw and coef (see block_scales) for one row of group g, one at a time (the scalar
// tiles'); si is the group's index into a 32-value format's scales. For q4_k, wd points at the
// chunk's scales as expand_q4k wrote them.
template <Fmt F>
inline void row_scales(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, size_t si, int row, float& dw,
                       float& coef) {
  if constexpr (expanded_scales<F>()) {  // (wm unused: wd is the chunk's expanded scales)
    const float* f = (const float*)wd + ((size_t)b * G + g) * 2 * GROUP;
    dw = f[row], coef = f[GROUP + row];
  } else if constexpr (F == Fmt::IQ4_XS) {
    const SuperScales s = iq4xs_at(wd, wm, b, g, G);
    dw = half_to_float(s.d[row]) * (float)(iq4xs_scale(s, row) - 32);
    coef = -128.f * dw;
  } else if constexpr (k_scales<F>()) {
    const SuperScales s = q4k_at(wd, wm, b, g, G);
    int sc, mn;
    q4k_scale_min(s, row, sc, mn);
    dw = half_to_float(s.d[row]) * (float)sc;
    coef = half_to_float(s.d[GROUP + row]) * (float)-mn;
  } else {
    dw = half_to_float(wd[si + row]);
    coef = F == Fmt::Q8_0 || F == Fmt::IQ4_NL ? -128.f * dw : F == Fmt::Q4_0 ? -8.f * dw : F == Fmt::Q5_0 ? -16.f * dw
           : half_to_float(wm[si + row]);
  }
}

// The tile in plain C++, a row and a block at a time: the portable build's (the AVX2, SSE4.1 and
// NEON builds have a vector tile for every format). It runs the AVX2 tile's float
// operations (fused multiply-adds, q6_k's halves in order), so builds agree bit for bit.
template <Fmt F, int R, int G>
void tile_scalar(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
                 int64_t out_stride) {
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r)
      for (int row = 0; row < GROUP; ++row) {
        float acc = 0.f, tail = 0.f;
        for (int b = 0; b < nb; ++b) {
          const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
          const int8_t* xb = x[r].q + b * QK;
          if constexpr (iq12<F>()) {  // (2 ls0 + 1) sum(w8 x) + (2 ls1 + 1) sum(w8 x) over the halves, exact, then d / 8 d_x
            uint32_t sgn = 0;
            if constexpr (!iq1<F>()) sgn = iq2_sign_bits<F>(wb, row);
            int isum = 0;
            for (int h = 0; h < 2; ++h) {
              int sum = 0;
              for (int v = 16 * h; v < 16 * h + 16; ++v) sum += iq12_w8<F>(wb, row, v, sgn) * xb[v];
              isum += iq12_mult<F>(wb, row, h) * sum;
            }
            const float d8 = half_to_float(super_at<GROUP, 0>(wd, wm, b, g, G).d[row]) * 0.125f;
            acc = std::fma((float)isum, d8 * x[r].d[b], acc);
            continue;
          }
          if constexpr (halves16<F>()) {
            float dw[2];
            if constexpr (F == Fmt::Q6_K) row_half_scales<F>(wd, wm, b, g, G, row, dw);
            // q3_k: sum over the halves of (ls - 32) (sum(q x) - 4 sum(x)); q2_k: of sc sum(q x), and
            // of mn sum(x) for the mins (exact integers)
            int isum = 0, msum = 0, hsum[2];
            for (int h = 0; h < 2; ++h) {  // values 16 h .. 16 h + 15
              int sum = 0;
              for (int k = 0; k < 4; ++k)
                for (int j = 0; j < 4; ++j) {
                  int u;
                  if constexpr (F == Fmt::Q6_K) {
                    const int lo = h ? wb[32 * k + 4 * row + j] >> 4 : wb[32 * k + 4 * row + j] & 0x0f;
                    u = lo | ((wb[128 + 32 * h + 4 * row + j] >> (2 * k)) & 3) << 4;
                  } else {  // q3_k, q2_k: 2 bits at bits 2k of step h's lane; q3_k's 3rd at bit 4h + k
                    u = (wb[32 * h + 4 * row + j] >> (2 * k)) & 3;
                    if constexpr (F == Fmt::Q3_K) u |= ((wb[64 + 4 * row + j] >> (4 * h + k)) & 1) << 2;
                  }
                  sum += u * xb[16 * h + 4 * k + j];
                }
              sum -= half_offset<F>() * x[r].n16[2 * b + h];
              if constexpr (F == Fmt::Q3_K) {
                isum += q3k_scale(q3k_at(wd, wm, b, g, G), h, row) * sum;
              } else if constexpr (F == Fmt::Q2_K) {
                const int v = q2k_at(wd, wm, b, g, G).m[16 * (b % BLOCKS_K) + GROUP * h + row];
                isum += (v & 15) * sum, msum += (v >> 4) * x[r].n16[2 * b + h];
              } else {
                hsum[h] = sum;
              }
            }
            if constexpr (F == Fmt::Q6_K)  // (row_step's steps: s0 dw0 + s1 dw1, then times d_x)
              acc = std::fma(std::fma((float)hsum[1], dw[1], (float)hsum[0] * dw[0]), x[r].d[b], acc);
            if constexpr (F == Fmt::Q3_K)
              acc = std::fma((float)isum, half_to_float(q3k_at(wd, wm, b, g, G).d[row]) * x[r].d[b], acc);
            if constexpr (F == Fmt::Q2_K) {  // (d sum(sc sum(q x)) - dmin sum(mn sum(x))) d_x, as row_step
              const SuperScales s2 = q2k_at(wd, wm, b, g, G);
              const float t = std::fma((float)-msum, half_to_float(s2.d[GROUP + row]), (float)isum * half_to_float(s2.d[row]));
              acc = std::fma(t, x[r].d[b], acc);
            }
            continue;
          }
          float dw, coef;
          [[maybe_unused]] uint32_t sgn = 0;  // iq3: the row's signs
          if constexpr (iq3<F>()) {
            dw = iq3_db<F>(half_to_float(super_at<GROUP, 0>(wd, wm, b, g, G).d[row]), iq3_ls<F>(wb, row));
            coef = -128.f * dw;
            sgn = iq3_sign_bits<F>(wb, row);
          } else {
            row_scales<F>(wd, wm, b, g, G, ((size_t)b * G + g) * GROUP, row, dw, coef);
          }
          int sum = 0;
          for (int k = 0; k < 8; ++k)
            for (int j = 0; j < 4; ++j) {
              int u;
              if constexpr (iq3<F>()) {  // 128 + the signed grid value
                const int v = (int)((iq3_entry<F>(wb, k, row) >> (8 * j)) & 0xff);
                u = (sgn >> (4 * k + j)) & 1 ? 128 - v : 128 + v;
              } else if constexpr (F == Fmt::Q8_0) u = wb[32 * k + 4 * row + j];
              else u = k < 4 ? (wb[32 * k + 4 * row + j] & 0x0f) : (wb[32 * (k - 4) + 4 * row + j] >> 4);
              if constexpr (five_bit<F>()) u |= ((wb[128 + 4 * row + j] >> k) & 1) << 4;
              if constexpr (iq4<F>()) u = IQ4_U[u];
              sum += u * xb[4 * k + j];
            }
          if constexpr (block_offset<F>() != 0) sum -= block_offset<F>() * x[r].n[b];
          acc = std::fma((float)sum, dw * x[r].d[b], acc);  // (fused as the vector tiles' are, whatever
          if constexpr (block_offset<F>() == 0) tail = std::fma(coef, x[r].s[b], tail);  // the compiler's contraction default)
        }
        out[r * out_stride + g * GROUP + row] = acc + tail;
      }
}

#if defined(__AVX2__)
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define PW_VNNI 1
#endif
// 8 int32 lanes: acc + sum over 4-byte groups of u (unsigned) x s (signed). (The tile sums its
// steps through sum_steps, below, which is faster without VNNI.)
[[maybe_unused]] inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {  // (used where there is VNNI)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else  // exact in 16 bits: u up to 255 times s up to 127 does not fit maddubs' saturating pairs
  const __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi8(u, _mm256_setzero_si256()),
                                       _mm256_srai_epi16(_mm256_unpacklo_epi8(s, s), 8));
  const __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi8(u, _mm256_setzero_si256()),
                                       _mm256_srai_epi16(_mm256_unpackhi_epi8(s, s), 8));
  // lo holds the products of byte pairs (0,1) (2,3) (4,5) (6,7) of each 128-bit half, hi those of
  // (8,9) .. (14,15); lane k must sum bytes 4k..4k+3, as dpbusd does: adjacent pairs, so hadd.
  return _mm256_add_epi32(acc, _mm256_hadd_epi32(lo, hi));
#endif
}

// The largest unsigned weight byte a format's steps hold: 255 for those stored as w + 128 (q8_0,
// iq4's looked-up values, the grid formats' signed values), else its quant's top value.
template <Fmt F>
constexpr int u_max() {
  if constexpr (F == Fmt::Q6_K) return 63;
  else if constexpr (F == Fmt::Q5_0 || F == Fmt::Q5_1 || F == Fmt::Q5_K || F == Fmt::Q5_KX) return 31;
  else if constexpr (F == Fmt::Q4_0 || F == Fmt::Q4_1 || F == Fmt::Q4_K || F == Fmt::Q4_KX) return 15;
  else if constexpr (F == Fmt::Q3_K) return 7;
  else if constexpr (F == Fmt::Q2_K) return 3;
  else return 255;  // q8_0, iq4, the grid formats: any byte
}

// The integer sums of N steps (w[k] against x values xv[k], k < N) in each row's 32-bit lane,
// n the x values' sum over those steps (used only where it is needed, below). Exact on every
// path, so the float work after it sees the same numbers whichever path formed them:
//  - VNNI: dpbusd, in two chains (the even and odd steps) to hide its latency;
//  - AVX2 without VNNI, formats whose bytes are at most 63: pmaddubsw (u8 x s8, adjacent pairs
//    into 16-bit lanes), whose pairs cannot saturate (2 * 63 * 127 < 32768), summed in 16 bits
//    over as many steps as cannot overflow (q4: 8, q5: 4, q6_k: 2), then one pmaddwd against ones
//    into each row's 32-bit lane: 2-3 instructions a step where dot4's widening took 10. (The
//    2-core AVX2 EPYC: Q4_K_M prefill at the Qwen3.5-0.8B shape was 0.38x llama.cpp, whose AVX2
//    kernels sum the same way.)
//  - bytes up to 255 (w + 128): llama.cpp's sign trick on the signed w = u - 128, pmaddubsw of
//    |w| against x with w's sign (pairs <= 2 * 128 * 127), then 128 n added back: sum(u x) =
//    sum(w x) + 128 sum(x).
template <Fmt F, int N>
PW_INLINE __m256i sum_steps(const __m256i* w, const __m256i* xv, [[maybe_unused]] int32_t n) {
#if defined(PW_VNNI)
  __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
  for (int k = 0; k < N; k += 2) {
    s0 = dot4(s0, w[k], xv[k]);
    if (k + 1 < N) s1 = dot4(s1, w[k + 1], xv[k + 1]);
  }
  return _mm256_add_epi32(s0, s1);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s = _mm256_setzero_si256();
  if constexpr (u_max<F>() <= 63) {
    constexpr int P = 32767 / (2 * 127 * u_max<F>());  // steps a 16-bit lane holds
    static_assert(P >= 2, "16-bit pair sums");
    for (int k = 0; k < N; k += P) {
      __m256i p = _mm256_maddubs_epi16(w[k], xv[k]);
      for (int j = 1; j < P && k + j < N; ++j) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[k + j], xv[k + j]));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
    }
    return s;
  } else {
    const __m256i m80 = _mm256_set1_epi8((char)0x80);
    for (int k = 0; k < N; ++k) {
      const __m256i ws = _mm256_xor_si256(w[k], m80);
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(xv[k], ws)), ones));
    }
    return _mm256_add_epi32(s, _mm256_set1_epi32(128 * n));
  }
#endif
}

// Block b's scales for the 8 rows of group g (of G in the chunk): each row's value is
// dw * u + coef for its stored unsigned u.
template <Fmt F>
PW_INLINE void block_scales(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, __m256& dw, __m256& coef) {
  if constexpr (expanded_scales<F>()) {  // (wm unused: wd is the chunk's expanded scales)
    const float* f = (const float*)wd + ((size_t)b * G + g) * 2 * GROUP;
    dw = _mm256_loadu_ps(f), coef = _mm256_loadu_ps(f + GROUP);
  } else if constexpr (k_scales<F>()) {
    alignas(32) float f[2 * GROUP];
    decode_q4k(q4k_at(wd, wm, b, g, G), f);
    dw = _mm256_load_ps(f), coef = _mm256_load_ps(f + GROUP);
  } else if constexpr (F == Fmt::IQ4_XS) {  // d (ls - 32), the 6-bit ls decoded 8 rows at once
    const SuperScales s = iq4xs_at(wd, wm, b, g, G);
    uint32_t lo;
    uint16_t hi;
    std::memcpy(&lo, s.m + 4 * s.j, 4), std::memcpy(&hi, s.m + 32 + 2 * s.j, 2);
    const __m256i l = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)lo), _mm256_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28)),
                                       _mm256_set1_epi32(15));
    const __m256i h = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(hi), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                       _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(h, 4)), _mm256_set1_epi32(32));
    dw = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)s.d)), _mm256_cvtepi32_ps(ls));
    coef = _mm256_mul_ps(dw, _mm256_set1_ps(-128.f));
  } else {
    dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(wd + ((size_t)b * G + g) * GROUP)));
    if constexpr (F == Fmt::Q8_0 || F == Fmt::IQ4_NL) coef = _mm256_mul_ps(dw, _mm256_set1_ps(-128.f));
    if constexpr (F == Fmt::Q4_0) coef = _mm256_mul_ps(dw, _mm256_set1_ps(-8.f));
    if constexpr (F == Fmt::Q5_0) coef = _mm256_mul_ps(dw, _mm256_set1_ps(-16.f));
    if constexpr (F == Fmt::Q4_1 || F == Fmt::Q5_1)
      coef = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(wm + ((size_t)b * G + g) * GROUP)));
  }
}

// The scales of q6_k block b's two halves for the 8 rows of group g (row_half_scales' values).
template <Fmt F>
PW_INLINE void half_scales(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, __m256* dw) {
  if constexpr (F == Fmt::Q6_K) {  // d * scale of each half
    const Q6KScales s = q6k_at(wd, wm, b, g, G);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)s.d));
    dw[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)s.sc))));
    dw[1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(s.sc + GROUP)))));
  } else {
    static_assert(F != F, "half_scales: q6_k only");
  }
}

// A q3_k block's 12 scale bytes as 8 rows' pairs of 16-bit lanes (ls - 32 of the first half,
// then of the second), for pmaddwd against the halves' integer sums: a row's 12 bits are bytes
// 3r/2 and 3r/2 + 1, shifted right by 4 for odd rows.
PW_INLINE __m256i q3k_pairs(const uint8_t* p) {
  uint64_t lo;
  uint32_t hi;
  std::memcpy(&lo, p, 8), std::memcpy(&hi, p + 8, 4);
  const __m256i v = _mm256_broadcastsi128_si256(_mm_insert_epi32(_mm_cvtsi64_si128((long long)lo), (int)hi, 2));
  const __m256i idx = _mm256_setr_epi8(0, 1, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1, 4, 5, -1, -1,
                                       6, 7, -1, -1, 7, 8, -1, -1, 9, 10, -1, -1, 10, 11, -1, -1);
  const __m256i t = _mm256_srlv_epi32(_mm256_shuffle_epi8(v, idx), _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
  const __m256i pair = _mm256_or_si256(_mm256_and_si256(t, _mm256_set1_epi32(0x3f)),
                                       _mm256_and_si256(_mm256_slli_epi32(t, 10), _mm256_set1_epi32(0x3f0000)));
  return _mm256_sub_epi16(pair, _mm256_set1_epi16(32));
}
// Two int32 as one lane's 16-bit pair (a, b) (each fits int16).
inline int32_t pair16(int32_t a, int32_t b) { return (int32_t)(((uint32_t)a & 0xffffu) | (uint32_t)b << 16); }
// A q2_k block's 16 scale bytes ([half][8 rows]) as 8 rows' pairs of 16-bit lanes (the first
// half's byte, then the second's): sc | mn << 4 each.
PW_INLINE __m256i q2k_pairs(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128((const __m128i*)p);
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, _mm_srli_si128(v, 8)));
}

// (A & C) | B, bitwise: one vpternlogd where AVX-512VL has it (the AVX-512 build's q3_k unpacking,
// 5 instructions a step -> 4), and + or on AVX2.
PW_INLINE __m256i pw_ternlog_ec(__m256i a, __m256i b, __m256i c) {
#if defined(__AVX512VL__)
  return _mm256_ternarylogic_epi32(a, b, c, 0xec);
#else
  return _mm256_or_si256(_mm256_and_si256(a, c), b);
#endif
}

// The integer operations a block's unpacking takes, under one name for 256- and 512-bit
// registers, so that unpack_steps is written once for the AVX2 tile's one row group and
// tile512's pair of them (a 512-bit register: the first group's 32 bytes, then the second's).
PW_INLINE __m256i v_and(__m256i a, __m256i b) { return _mm256_and_si256(a, b); }
PW_INLINE __m256i v_or(__m256i a, __m256i b) { return _mm256_or_si256(a, b); }
PW_INLINE __m256i v_srl16(__m256i a, int n) { return _mm256_srli_epi16(a, n); }
PW_INLINE __m256i v_sll16(__m256i a, int n) { return _mm256_slli_epi16(a, n); }
PW_INLINE __m256i v_shuffle(__m256i table, __m256i i) { return _mm256_shuffle_epi8(table, i); }
PW_INLINE __m256i v_ternlog_ec(__m256i a, __m256i b, __m256i c) { return pw_ternlog_ec(a, b, c); }
PW_INLINE void v_set1_8(__m256i& v, char c) { v = _mm256_set1_epi8(c); }
PW_INLINE void v_table16(__m256i& v, const uint8_t* t) { v = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)t)); }
#if defined(__AVX512BW__)
PW_INLINE __m512i v_and(__m512i a, __m512i b) { return _mm512_and_si512(a, b); }
PW_INLINE __m512i v_or(__m512i a, __m512i b) { return _mm512_or_si512(a, b); }
PW_INLINE __m512i v_srl16(__m512i a, int n) { return _mm512_srli_epi16(a, (unsigned)n); }
PW_INLINE __m512i v_sll16(__m512i a, int n) { return _mm512_slli_epi16(a, (unsigned)n); }
PW_INLINE __m512i v_shuffle(__m512i table, __m512i i) { return _mm512_shuffle_epi8(table, i); }
PW_INLINE __m512i v_ternlog_ec(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xec); }
PW_INLINE void v_set1_8(__m512i& v, char c) { v = _mm512_set1_epi8(c); }
PW_INLINE void v_table16(__m512i& v, const uint8_t* t) { v = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i*)t)); }
#endif
// 32 bytes of one group's block at offset off, or of a pair's (the second group's in the high half).
struct LoadGroup {
  const uint8_t* wb;
  PW_INLINE __m256i operator()(int off) const { return _mm256_loadu_si256((const __m256i*)(wb + off)); }
};
#if defined(__AVX512BW__)
struct LoadPair {
  const uint8_t *lo, *hi;
  PW_INLINE __m512i operator()(int off) const {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(lo + off))),
                              _mm256_loadu_si256((const __m256i*)(hi + off)), 1);
  }
};
#endif

// An iq3 block of a group as the 8 steps of unsigned w + 128 (q8_0's), 8 rows at once: the rows'
// grid entries gathered, each value's sign from the row's sign word.
template <Fmt F>
PW_INLINE void iq3_steps8(const uint8_t* wb, __m256i* w) {
  const int* grid = (const int*)(F == Fmt::IQ3_XXS ? IQ3XXS_GRID : IQ3S_GRID);
  __m256i sg = _mm256_loadu_si256((const __m256i*)(wb + iq3_signs_at<F>()));
  if constexpr (F == Fmt::IQ3_XXS) {  // the 7 stored signs of each 8, and their parity as the 8th
    const __m256i t = _mm256_and_si256(sg, _mm256_set1_epi8(0x7f)), m4 = _mm256_set1_epi8(0x0f);
    const __m256i par = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)IQ3_PARITY));
    sg = _mm256_or_si256(t, _mm256_xor_si256(_mm256_shuffle_epi8(par, _mm256_and_si256(t, m4)),
                                             _mm256_shuffle_epi8(par, _mm256_and_si256(_mm256_srli_epi16(t, 4), m4))));
  }
  [[maybe_unused]] __m256i hi;  // iq3_s: the rows' 9th bits
  if constexpr (F == Fmt::IQ3_S) hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(wb + 64)));
  const __m256i flip = _mm256_set1_epi8(-128);
  for (int k = 0; k < 8; ++k) {
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(wb + 8 * k)));
    if constexpr (F == Fmt::IQ3_S)
      idx = _mm256_or_si256(idx, _mm256_and_si256(_mm256_slli_epi32(hi, 8 - k), _mm256_set1_epi32(256)));
    const __m256i g = _mm256_i32gather_epi32(grid, idx, 4);
    const __m256i bit = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)IQ3_BIT[k & 1]));
    const __m256i sb = _mm256_shuffle_epi8(sg, _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)IQ3_BYTE[k >> 1])));
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(sb, bit), bit);
    w[k] = _mm256_xor_si256(_mm256_sub_epi8(_mm256_xor_si256(g, neg), neg), flip);  // (+-v) + 128
  }
}
// An iq3 block's db (dw) and -128 db (coef) for the 8 rows of group g.
template <Fmt F>
PW_INLINE void iq3_scales8(const uint8_t* wb, const uint16_t* wd, int b, int g, int G, __m256& dw, __m256& coef) {
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)super_at<GROUP, 0>(wd, wd, b, g, G).d));
  __m256i ls;
  if constexpr (F == Fmt::IQ3_XXS) {  // bit 7 of byte l is ls's bit l: gathered to bits 24-27 by a multiply
    const __m256i t = _mm256_and_si256(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i*)(wb + 64)), 7), _mm256_set1_epi32(0x01010101));
    ls = _mm256_srli_epi32(_mm256_mullo_epi32(t, _mm256_set1_epi32(0x01020408)), 24);
  } else {
    uint32_t v;
    std::memcpy(&v, wb + 104, 4);
    ls = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)v), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)), _mm256_set1_epi32(15));
  }
  dw = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1))));
  if constexpr (F == Fmt::IQ3_XXS) dw = _mm256_mul_ps(dw, _mm256_set1_ps(0.25f));
  coef = _mm256_mul_ps(dw, _mm256_set1_ps(-128.f));
}

// An iq2 / iq1 block of a group as the 8 steps of unsigned w8 + 128 (q8_0's), 8 rows at once:
// index l's entries (steps 2l and 2l + 1, its low and high 4 values) gathered for the 8 rows, each
// value's sign from the row's sign word (iq2, as iq3_steps8), or 8 g + delta (iq1).
template <Fmt F>
PW_INLINE void iq12_steps8(const uint8_t* wb, __m256i* w) {
  const int* grid = (const int*)iq12_grid<F>();
  const __m256i flip = _mm256_set1_epi8(-128);
  [[maybe_unused]] __m256i sg, hi;  // iq2: the rows' sign words; the indices' high bits (and iq1's deltas)
  if constexpr (!iq1<F>()) {
    sg = _mm256_loadu_si256((const __m256i*)(wb + 32));
    if constexpr (F == Fmt::IQ2_XS) hi = sg;  // (bit 8l + 7: index l's 9th bit)
    if constexpr (F != Fmt::IQ2_S) {  // the 7 stored signs of each 8, and their parity as the 8th
      const __m256i t = _mm256_and_si256(sg, _mm256_set1_epi8(0x7f)), m4 = _mm256_set1_epi8(0x0f);
      const __m256i par = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)IQ3_PARITY));
      sg = _mm256_or_si256(t, _mm256_xor_si256(_mm256_shuffle_epi8(par, _mm256_and_si256(t, m4)),
                                               _mm256_shuffle_epi8(par, _mm256_and_si256(_mm256_srli_epi16(t, 4), m4))));
    }
  }
  if constexpr (F == Fmt::IQ2_S) hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(wb + 64)));
  if constexpr (iq1<F>()) hi = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(wb + (F == Fmt::IQ1_S ? 32 : 38))));
  for (int l = 0; l < 4; ++l) {
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(wb + 8 * l)));
    if constexpr (!(F == Fmt::IQ2_XXS)) {
      constexpr int bits = F == Fmt::IQ2_XS ? 1 : F == Fmt::IQ2_S ? 2 : 3;
      const int at = F == Fmt::IQ2_XS ? 8 * l + 7 : F == Fmt::IQ2_S ? 2 * l : F == Fmt::IQ1_S ? 3 * l : 4 * l;
      const __m256i hb = _mm256_and_si256(_mm256_srl_epi32(hi, _mm_cvtsi32_si128(at)), _mm256_set1_epi32((1 << bits) - 1));
      idx = _mm256_or_si256(idx, _mm256_slli_epi32(hb, 8));
    }
    [[maybe_unused]] __m256i delta;  // iq1: +1 or -1 in each byte of a row's lane
    if constexpr (iq1<F>()) {
      const int at = F == Fmt::IQ1_S ? 15 : 4 * l + 3;
      const __m256i neg = _mm256_srai_epi32(_mm256_sll_epi32(hi, _mm_cvtsi32_si128(31 - at)), 31);
      delta = _mm256_or_si256(neg, _mm256_set1_epi8(1));
    }
    for (int t = 0; t < 2; ++t) {
      const __m256i g = _mm256_i32gather_epi32(grid + t, idx, 8);
      __m256i v;
      if constexpr (iq1<F>()) {
        const __m256i g2 = _mm256_add_epi8(g, g), g4 = _mm256_add_epi8(g2, g2);
        v = _mm256_add_epi8(_mm256_add_epi8(g4, g4), delta);
      } else {
        const __m256i bit = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)IQ3_BIT[t]));
        const __m256i sb = _mm256_shuffle_epi8(sg, _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i*)IQ3_BYTE[l])));
        const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(sb, bit), bit);
        v = _mm256_sub_epi8(_mm256_xor_si256(g, neg), neg);
      }
      w[2 * l + t] = _mm256_xor_si256(v, flip);  // w8 + 128
    }
  }
}
// An iq2 / iq1 block's d / 8 (dw) and its halves' 2 ls + 1 (mh[h], 32-bit lanes) for the 8 rows of group g.
template <Fmt F>
PW_INLINE void iq12_scales8(const uint8_t* wb, const uint16_t* wd, int b, int g, int G, __m256& dw, __m256i* mh) {
  dw = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)super_at<GROUP, 0>(wd, wd, b, g, G).d)),
                     _mm256_set1_ps(0.125f));
  __m256i ls[2];
  if constexpr (F == Fmt::IQ2_XXS) {  // bit 7 of byte l is ls's bit l: gathered to bits 24-27 by a multiply (iq3_xxs's)
    const __m256i t = _mm256_and_si256(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i*)(wb + 32)), 7), _mm256_set1_epi32(0x01010101));
    ls[0] = ls[1] = _mm256_srli_epi32(_mm256_mullo_epi32(t, _mm256_set1_epi32(0x01020408)), 24);
  } else if constexpr (F == Fmt::IQ2_XS || F == Fmt::IQ2_S) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(wb + (F == Fmt::IQ2_XS ? 64 : 72))));
    ls[0] = _mm256_and_si256(v, _mm256_set1_epi32(15)), ls[1] = _mm256_srli_epi32(v, 4);
  } else if constexpr (F == Fmt::IQ1_S) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(wb + 32)));
    ls[0] = ls[1] = _mm256_and_si256(_mm256_srli_epi32(v, 12), _mm256_set1_epi32(7));
  } else {  // rows 4h..4h+3: 6 bits a row in the 24-bit word at byte 32 + 3h
    uint32_t lo, hw;
    std::memcpy(&lo, wb + 32, 4), std::memcpy(&hw, wb + 35, 4);
    lo &= 0xffffff, hw &= 0xffffff;
    const __m256i t = _mm256_srlv_epi32(_mm256_setr_epi32((int)lo, (int)lo, (int)lo, (int)lo, (int)hw, (int)hw, (int)hw, (int)hw),
                                        _mm256_setr_epi32(0, 6, 12, 18, 0, 6, 12, 18));
    ls[0] = _mm256_and_si256(t, _mm256_set1_epi32(7)), ls[1] = _mm256_and_si256(_mm256_srli_epi32(t, 3), _mm256_set1_epi32(7));
  }
  for (int h = 0; h < 2; ++h) mh[h] = _mm256_add_epi32(_mm256_add_epi32(ls[h], ls[h]), _mm256_set1_epi32(1));
}

// One row group's block b as the tiles read it: the 8 steps of unsigned weight bytes (8 rows x 4
// values each) and the scales its format needs; the AVX2 tile reads one group at a time, the
// AVX-512 tile two.
struct GroupW {
  __m256 dw, coef;
  __m256 hdw[2];              // q6_k: the scales of the block's first and second 16 values
  __m256i ls_pairs, mn_pairs;  // q3_k: the rows' (ls - 32) pairs; q2_k: sc and mn pairs
  __m256i mh[2];              // iq2 / iq1: the rows' 2 ls + 1 of each half
  __m256i w[8];
};
template <Fmt F>
PW_INLINE void group_scales(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, int b, int g, int G, GroupW& o) {
  __m256 &dw = o.dw, &coef = o.coef;
  [[maybe_unused]] __m256* hdw = o.hdw;
  [[maybe_unused]] __m256i &ls_pairs = o.ls_pairs, &mn_pairs = o.mn_pairs;
  [[maybe_unused]] __m256i* mh = o.mh;
  dw = _mm256_setzero_ps(), coef = dw;
  const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
  if constexpr (F == Fmt::Q3_K) {
    const SuperScales s = q3k_at(wd, wm, b, g, G);
    ls_pairs = q3k_pairs(s.m + 12 * s.j);
    dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)s.d));  // (d)
  } else if constexpr (iq12<F>()) {
    iq12_scales8<F>(wb, wd, b, g, G, dw, mh);  // (d / 8)
  } else if constexpr (F == Fmt::Q2_K) {
    const SuperScales s = q2k_at(wd, wm, b, g, G);
    const __m256i v = q2k_pairs(s.m + 16 * s.j);
    ls_pairs = _mm256_and_si256(v, _mm256_set1_epi16(15)), mn_pairs = _mm256_srli_epi16(v, 4);
    dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)s.d));                 // (d)
    coef = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s.d + GROUP)));    // (dmin)
  } else if constexpr (iq3<F>()) {
    iq3_scales8<F>(wb, wd, b, g, G, dw, coef);
  } else if constexpr (halves16<F>()) {
    half_scales<F>(wd, wm, b, g, G, hdw);
  } else {
    block_scales<F>(wd, wm, b, g, G, dw, coef);
  }
}
// A block's 8 steps of unsigned weight bytes (8 rows x 4 values each), in 256-bit registers for
// one group (ld: LoadGroup) or 512-bit ones for a pair (LoadPair): the same operations per byte.
// tile512 had unpacked each group of its pair in 256-bit registers and joined them, twice the
// instructions; unpacking the pair at once (one thread, 2,048 x 2,048, 64 rows, three
// alternations, G MAC/s): Q5_K 260-275 -> 302-316, Q6_K 255-263 -> 270-288, IQ4_XS 305-310 ->
// 317-335, Q3_K 259-269 -> 270-294, Q4_K 293-307 -> 311-322, Q4_0 342-354 -> 354-368, Q2_K
// 245-253 -> 254-260, Q8_0 alike (its steps are plain loads either way).
template <Fmt F, class V, class Load>
PW_INLINE void unpack_steps(Load ld, V* w) {
  V m4;
  v_set1_8(m4, 0x0f);
  if constexpr (F == Fmt::Q8_0) {
    for (int k = 0; k < 8; ++k) w[k] = ld(32 * k);
  } else if constexpr (F == Fmt::Q3_K) {  // q2_k's steps below, with the 3rd bit (bit k of the last 32 bytes) at bit 2
    V m3, m04;
    v_set1_8(m3, 3), v_set1_8(m04, 4);
    const V hb = ld(64);
    const V hs[8] = {v_sll16(hb, 2), v_sll16(hb, 1), hb, v_srl16(hb, 1), v_srl16(hb, 2), v_srl16(hb, 3), v_srl16(hb, 4), v_srl16(hb, 5)};
    for (int h = 0; h < 2; ++h) {
      const V raw = ld(32 * h);
      const V c[4] = {raw, v_srl16(raw, 2), v_srl16(raw, 4), v_srl16(raw, 6)};
      for (int k = 0; k < 4; ++k)  // (c & 3) | (hs & 4): imm 0xec = (A & C) | B
        w[4 * h + k] = v_ternlog_ec(c[k], v_and(hs[4 * h + k], m04), m3);
    }
  } else if constexpr (F == Fmt::Q2_K) {  // step 4h + k: bits 2k of the 32 bytes h
    V m3;
    v_set1_8(m3, 3);
    for (int h = 0; h < 2; ++h) {
      const V raw = ld(32 * h);
      for (int k = 0; k < 4; ++k) w[4 * h + k] = v_and(v_srl16(raw, 2 * k), m3);
    }
  } else {
    for (int k = 0; k < 4; ++k) {
      const V raw = ld(32 * k);
      w[k] = v_and(raw, m4);
      w[k + 4] = v_and(v_srl16(raw, 4), m4);
    }
  }
  if constexpr (iq4<F>()) {  // each 4-bit index -> its value + 128 (a 16-byte table in every 128-bit lane)
    V table;
    v_table16(table, IQ4_U);
    for (int k = 0; k < 8; ++k) w[k] = v_shuffle(table, w[k]);
  }
  if constexpr (five_bit<F>()) {  // the 5th bit of value 4k + j at bit k of lane (row, j), of 16 + 4k + j at 4 + k
    V m10;
    v_set1_8(m10, 0x10);
    const V hb = ld(128);
    for (int k = 0; k < 8; ++k) w[k] = v_or(w[k], v_and(k < 4 ? v_sll16(hb, 4 - k) : v_srl16(hb, k - 4), m10));
  }
  if constexpr (F == Fmt::Q6_K) {  // the high 2 bits of step k sit at bits 2k of each byte: to bits 4-5
    V m30;
    v_set1_8(m30, 0x30);
    for (int h = 0; h < 2; ++h) {
      const V hb = ld(128 + 32 * h);
      for (int k = 0; k < 4; ++k) w[4 * h + k] = v_or(w[4 * h + k], v_and(k < 2 ? v_sll16(hb, 4 - 2 * k) : v_srl16(hb, 2 * k - 4), m30));
    }
  }
}
// The formats unpack_steps reads (iq3's and iq2/iq1's grids take their own gathers, 8 rows at a time).
template <Fmt F>
constexpr bool plain_steps() { return !iq3<F>() && !iq12<F>() && !float_w<F>(); }

// Group g's block b: its scales and its 8 steps.
template <Fmt F>
PW_INLINE void group_weights(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, int b, int g, int G, GroupW& o) {
  group_scales<F>(wq, wd, wm, b, g, G, o);
  const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
  if constexpr (iq3<F>()) iq3_steps8<F>(wb, o.w);
  else if constexpr (iq12<F>()) iq12_steps8<F>(wb, o.w);
  else unpack_steps<F>(LoadGroup{wb}, o.w);
}

// One x row's numbers for a block, as the row tiles read them: its scale d, its sum times d (s),
// its values' sum n and its halves' sums n16 (those the format reads).
struct RowX {
  float d, s;
  int32_t n, n16[2];
};
// A group's block b against one x row (xv: its 8 words broadcast), into the row's accumulators:
// the arithmetic of every AVX2 row tile, so that each computes the same bits.
template <Fmt F>
PW_INLINE void row_step(const GroupW& gw, const __m256i* xv, const RowX& rx, __m256& acc, __m256& tail) {
  [[maybe_unused]] const __m256 &dw = gw.dw, &coef = gw.coef;
  [[maybe_unused]] const __m256* hdw = gw.hdw;
  [[maybe_unused]] const __m256i &ls_pairs = gw.ls_pairs, &mn_pairs = gw.mn_pairs;
  [[maybe_unused]] const __m256i* mh = gw.mh;
  const __m256i* w = gw.w;
  if constexpr (iq12<F>()) {  // each half's sum(w8 x) = sum((w8 + 128) x) - 128 sum(x), times 2 ls + 1: exact
    __m256i sh[2];
    for (int h = 0; h < 2; ++h) {
      const int32_t n = rx.n16[h];
      sh[h] = _mm256_sub_epi32(sum_steps<F, 4>(w + 4 * h, xv + 4 * h, n), _mm256_set1_epi32(128 * n));
    }
    const __m256i is = _mm256_add_epi32(_mm256_mullo_epi32(sh[0], mh[0]), _mm256_mullo_epi32(sh[1], mh[1]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, _mm256_set1_ps(rx.d)), acc);
    return;
  } else if constexpr (F == Fmt::Q3_K || F == Fmt::Q2_K) {
    // q3_k: sum over the halves of (ls - 32) (sum(q x) - 4 sum(x)); q2_k: of sc sum(q x), and of
    // -mn sum(x) for the mins: exact integers, each a pmaddwd of 16-bit pairs
    __m256i sh[2];
    for (int h = 0; h < 2; ++h) sh[h] = sum_steps<F, 4>(w + 4 * h, xv + 4 * h, 0);
    __m256i sp = _mm256_blend_epi16(sh[0], _mm256_slli_epi32(sh[1], 16), 0xaa);
    if constexpr (F == Fmt::Q3_K)
      sp = _mm256_sub_epi16(sp, _mm256_set1_epi32(pair16(4 * rx.n16[0], 4 * rx.n16[1])));
    const __m256 dx = _mm256_set1_ps(rx.d);
    const __m256i is = _mm256_madd_epi16(sp, ls_pairs);
    if constexpr (F == Fmt::Q2_K) {
      // d is + dmin m (m: -sum(mn sum(x))), then times d_x once: three float operations a block and
      // row where the sum and the mins' term each scaled by d_x took four, and no tail to keep
      // (one thread, 2,048 x 2,048, 64 rows, AVX-512 on a 2-core Zen 4, eight alternations in
      // two sets: 92-118 -> 97-126 G MAC/s). Every path computes these steps, so the same bits.
      const __m256i m = _mm256_madd_epi16(_mm256_set1_epi32(pair16(-rx.n16[0], -rx.n16[1])), mn_pairs);
      const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), coef, _mm256_mul_ps(_mm256_cvtepi32_ps(is), dw));
      acc = _mm256_fmadd_ps(t, dx, acc);
    } else {
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, dx), acc);
    }
    return;
  } else if constexpr (halves16<F>()) {
    // q6_k: each half's sum((q - off) x) = sum(q x) - off sum(x), exact; the halves joined by their
    // scales (s0 hdw0 + s1 hdw1), then times d_x once: three float operations a block and row, on
    // the pipes the dot products share, where scaling each half by hdw d_x took four (one thread,
    // 2,048 x 2,048, 64 rows, AVX-512 on a 2-core Zen 4, ten alternations in two sets: 116-139 ->
    // 121-148 G MAC/s). Every path computes these steps, so the same bits.
    __m256i s[2];
    for (int h = 0; h < 2; ++h) {
      s[h] = sum_steps<F, 4>(w + 4 * h, xv + 4 * h, 0);
      if constexpr (half_offset<F>() != 0)
        s[h] = _mm256_sub_epi32(s[h], _mm256_set1_epi32(half_offset<F>() * rx.n16[h]));
    }
    const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[1]), hdw[1], _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), hdw[0]));
    acc = _mm256_fmadd_ps(t, _mm256_set1_ps(rx.d), acc);
    return;
  }
  // q4: w[k] pairs with x values 4k..4k+3 for k < 4 and 16+4(k-4).. for k >= 4, and xv[k]
  // holds values 4k..4k+3: the same groups for every k (xv[4] = values 16..19).
  __m256i s = sum_steps<F, 8>(w, xv, rx.n);
  if constexpr (block_offset<F>() != 0) s = _mm256_sub_epi32(s, _mm256_set1_epi32(block_offset<F>() * rx.n));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(rx.d)), acc);
  if constexpr (block_offset<F>() == 0) tail = _mm256_fmadd_ps(coef, _mm256_set1_ps(rx.s), tail);
}

// R quantized x rows re-laid for the packed row tiles (tile512, tile_packed), block by block:
// xi [nb][11][R] (the 8 words of 4 values, the two halves' sums n16, the sum n) and xf [nb][2][R]
// (d, then s), so that a tile reads every row's numbers at fixed offsets from one pointer
// instead of through each row's own pointers.
inline void pack_rows(const QRow* x, int R, int nb, int32_t* xi, float* xf) {
  for (int b = 0; b < nb; ++b)
    for (int r = 0; r < R; ++r) {
      int32_t* bi = xi + (size_t)b * 11 * R + r;
      for (int k = 0; k < 8; ++k) std::memcpy(&bi[k * R], x[r].q + b * QK + 4 * k, 4);
      for (int h = 0; h < 2; ++h) bi[(8 + h) * R] = x[r].n16 ? x[r].n16[2 * b + h] : 0;
      bi[10 * R] = x[r].n[b];
      xf[(size_t)b * 2 * R + r] = x[r].d[b], xf[(size_t)b * 2 * R + R + r] = x[r].s[b];
    }
}

// The AVX2 tile over packed rows, a group at a time (R rows x 1 group of accumulators): the same
// row_step per lane and block as the 2-row tile, so the same bits. Rows a tile: 4 for the 4-bit
// formats, 8 for the others, at first (one thread, a 3,584 x 1,024 product, 64 rows, AVX2 without VNNI
// forced on the AVX-512 EPYC, the 2-row tile -> 4 / 8 rows: Q4_K 2.5 -> 2.1 / 2.3 ms, Q4_0 2.6 ->
// 2.0 / 2.1, Q6_K 3.2 -> 2.6 / 2.2, Q5_K 2.7 -> 2.2 / 1.9, IQ4_XS 4.6 -> 3.8 / 3.3, Q3_K 3.2 ->
// 2.4 / 2.1, Q2_K 2.5 -> 2.2 / 2.1, Q8_0 3.9 -> 3.1 / 3.1). As tile512, its rows are unrolled and
// a min's term is summed in a pass of its own (mins_pass); the same bits. One thread, 2,048 x
// 2,048, 64 rows, three alternations, G MAC/s: AVX2 Q4_K 90-93 -> 103-107, Q8_0 78-79 -> 81-86,
// IQ4_XS 73-75 -> 77-78; AVX-VNNI Q4_K 105-110 -> 123-125, Q5_K 125-127 -> 134-139; the other
// formats within 2-4% either way. With the unrolled rows and the min pass, 8 rows a tile are
// faster for the 4-bit formats too (4 had been, with the rows' accumulators in memory): same
// measurement, 4 -> 8 rows, AVX2 Q4_0 114-118 -> 127-130, Q4_K 108-110 -> 119-121; AVX-VNNI Q4_0
// 127-147 -> 169-171, Q4_K 127-129 -> 150-155; the same bits (a row's steps do not depend on R).
template <Fmt F>
constexpr int packed_rows() { return 8; }
template <Fmt F, int R, int G>
void tile_packed(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const int32_t* xi, const float* xf, int nb,
                 float* out, int64_t out_stride) {
  for (int g = 0; g < G; ++g) {
    __m256 acc[R], tail[R];
    for (int r = 0; r < R; ++r) acc[r] = tail[r] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
      prefetch_groups<F>(wq, b, g, 1, G, nb);
      GroupW gw;
      group_weights<F>(wq, wd, wm, b, g, G, gw);
      const int32_t* bi = xi + (size_t)b * 11 * R;
      const float* bf = xf + (size_t)b * 2 * R;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256i xv[8];
        for (int k = 0; k < 8; ++k) xv[k] = _mm256_set1_epi32(bi[k * R + r]);
        const RowX rx{bf[r], bf[R + r], bi[10 * R + r], {bi[8 * R + r], bi[9 * R + r]}};
        __m256 unused = _mm256_setzero_ps();  // (a min's tail: summed in a pass of its own, below)
        row_step<F>(gw, xv, rx, acc[r], mins_pass<F>() ? unused : tail[r]);
      }
    }
    if constexpr (mins_pass<F>())
      for (int b = 0; b < nb; ++b) {
        __m256 dw, coef;
        block_scales<F>(wd, wm, b, g, G, dw, coef);
        const float* bf = xf + (size_t)b * 2 * R;
        for (int r = 0; r < R; ++r) tail[r] = _mm256_fmadd_ps(coef, _mm256_set1_ps(bf[R + r]), tail[r]);
      }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + r * out_stride + g * GROUP, _mm256_add_ps(acc[r], tail[r]));
  }
}

// One chunk of G row groups (8 rows each) against R quantized x rows: R * G independent
// accumulator chains, which is what hides the dot-product latency (a 1-row step takes a chunk
// of 4 groups at once).
// Every output lane sees the same instructions in the same order whatever R and G are.
template <Fmt F, int R, int G>
void tile(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
          int64_t out_stride) {
  __m256 acc[R][G], tail[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = tail[r][g] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    prefetch_groups<F>(wq, b, 0, G, G, nb);
    // the block's x values, 4 at a time in every lane: the same for all G groups of weights
    __m256i xv[R][8];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 8; ++k) xv[r][k] = _mm256_set1_epi32(((const int32_t*)(x[r].q + b * QK))[k]);
    for (int g = 0; g < G; ++g) {
      GroupW gw;
      group_weights<F>(wq, wd, wm, b, g, G, gw);
      for (int r = 0; r < R; ++r) {
        RowX rx{x[r].d[b], x[r].s[b], x[r].n[b], {0, 0}};
        if constexpr (halves16<F>() || iq12<F>()) rx.n16[0] = x[r].n16[2 * b], rx.n16[1] = x[r].n16[2 * b + 1];
        row_step<F>(gw, xv[r], rx, acc[r][g], tail[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + r * out_stride + g * GROUP, _mm256_add_ps(acc[r][g], tail[r][g]));
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define PW_TILE512 1
// GCC 12's 512-bit intrinsics pass _mm512_undefined_* as their masked form's source, which its own
// -Wmaybe-uninitialized reports wherever they are inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// acc + the dot products of w's bytes with the x word *x in every lane, the word broadcast from
// memory inside the instruction (vpdpbusd's {1to16} operand). GCC 12 gives the intrinsic's
// _mm512_set1_epi32 a broadcast instruction of its own, 8 a block and row of x, which the tile's
// front end paid for: one instruction a dot product instead of two (one thread, 2,048 x 2,048, 64
// rows, with tile512's unrolled rows: Q6_K 6% faster, Q3_K 4%, Q2_K, IQ4_XS, Q8_0 and Q4_0 2-3%,
// Q4_K and Q5_K within the noise).
PW_INLINE __m512i dpbusd_bcast(__m512i acc, __m512i w, const int32_t* x) {
#if defined(__GNUC__) || defined(__clang__)
  asm("vpdpbusd %[x]%{1to16%}, %[w], %[a]" : [a] "+v"(acc) : [w] "v"(w), [x] "m"(*x));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(*x));
#endif
}
// init + the integer sums of N steps in 512-bit lanes (two row groups), each x word broadcast from
// memory into the dot product. A block's 8 steps take sum_steps' two VNNI chains (5-8% faster
// here than one, though the tile's rows are independent work too); a half's 4, one chain, which
// saves a register move and an add (Q6_K 244 -> 258-270 G MAC/s, Q2_K 2-4%, one thread, 2,048 x
// 2,048, 64 rows). init is the block's offset term (-off x n): an integer start instead of a
// subtraction at the end, the same sum.
template <int N, int S>
PW_INLINE __m512i sum_steps512(const __m512i* w, const int32_t* xq, int32_t init = 0) {  // (x word k at xq[k * S])
  __m512i s0 = _mm512_set1_epi32(init);
  if constexpr (N == 4) {
    for (int k = 0; k < N; ++k) s0 = dpbusd_bcast(s0, w[k], xq + k * S);
    return s0;
  } else {
    __m512i s1 = _mm512_setzero_si512();
    for (int k = 0; k < N; k += 2) {
      s0 = dpbusd_bcast(s0, w[k], xq + k * S);
      s1 = dpbusd_bcast(s1, w[k + 1], xq + (k + 1) * S);
    }
    return _mm512_add_epi32(s0, s1);
  }
}
PW_INLINE __m512 join_ps(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
PW_INLINE __m512i join_si(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// The tile with two row groups (16 rows) in each 512-bit register, for chunks of 2 or 4 groups
// and R rows of x (16 for a prefill chunk), read from pack_rows' layout: a 512-bit dot
// product does twice a 256-bit one's work at the same rate where the core has full-width units
// (this 2-core AMD EPYC: 7.9 G vpdpbusd a second at either width), and R rows share each pair of
// groups' unpacking (a pair's accumulators live across its blocks). The pair's weights are
// unpacked by the AVX2 tile's operations (unpack_steps) on both groups at once in 512-bit
// registers, and every lane sees the same integer sums and the same float steps in the same
// order, so the outputs are the AVX2 tile's bit for bit. One
// thread, a 3,584 x 1,024 product, 64 rows (-O3), the 2-row AVX2 tile -> this: Q4_K 1.40 -> 0.94
// ms, Q5_K 1.8 -> 0.90, Q6_K 2.3 -> 1.0, IQ4_XS 2.0 -> 0.89, Q3_K 2.35 -> 0.95, Q2_K 2.0 -> 1.0,
// Q8_0 1.39 -> 0.85.
//
// A pass's rows are unrolled so that their accumulators stay in registers (a loop over them kept
// each in memory, loaded and stored every block), and the formats with a min (mins_pass: q4_1,
// q5_1, the K-quants) sum its term, tail, in a pass of its own over the blocks
// (min_pass512): 16 rows' acc and tail and a block's 8 weight registers are 40, more than the 32
// there are. (Q2_K's mins' term joins its sum before the multiply by d_x, row_step's steps, so it
// has no tail; a pass of its own, which redid the scales' decoding, had measured 4% slower.)
// With dpbusd_bcast and sum_steps512's one chain a half, one thread, 2,048 x 2,048, 64 rows
// (bench/qmatmul_rows.cc, three alternations), G MAC/s: Q8_0 292 -> 334, Q4_0 296 -> 338, Q4_K
// 240 -> 293, Q5_K 239 -> 267, Q6_K 225 -> 254, IQ4_XS 279 -> 300, Q3_K 242 -> 258, Q2_K 224 ->
// 243; two threads Q4_K 480 -> 585, Q5_K 472 -> 525, Q6_K 441 -> 496.
template <Fmt F, int R, int G>
PW_INLINE void min_pass512(const uint16_t* wd, const uint16_t* wm, const float* xf, int nb, int p, __m512* tail) {
  for (int b = 0; b < nb; ++b) {  // the min's coef times x's scaled sum s
    const float* bf = xf + (size_t)b * 2 * R;
    __m256 dw[2], c[2];
    for (int h = 0; h < 2; ++h) block_scales<F>(wd, wm, b, 2 * p + h, G, dw[h], c[h]);
    const __m512 coef = join_ps(c[0], c[1]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) tail[r] = _mm512_fmadd_ps(coef, _mm512_set1_ps(bf[R + r]), tail[r]);
  }
}
template <Fmt F, int R, int G>
void tile512(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const int32_t* xi, const float* xf, int nb,
             float* out, int64_t out_stride) {
  static_assert(G % 2 == 0, "tile512: two groups a register");
  for (int p = 0; p < G / 2; ++p) {  // a pair of groups at a time, over every block
    __m512 acc[R], tail[R];
    for (int r = 0; r < R; ++r) acc[r] = tail[r] = _mm512_setzero_ps();
    for (int b = 0; b < nb; ++b) {
      prefetch_groups<F>(wq, b, 2 * p, 2, G, nb);
      GroupW lo, hi;
      __m512i w[8];
      if constexpr (plain_steps<F>()) {  // the pair's steps unpacked in 512-bit registers
        group_scales<F>(wq, wd, wm, b, 2 * p, G, lo);
        group_scales<F>(wq, wd, wm, b, 2 * p + 1, G, hi);
        const uint8_t* wb = wq + ((size_t)b * G + 2 * p) * block_bytes<F>();
        unpack_steps<F>(LoadPair{wb, wb + block_bytes<F>()}, w);
      } else {
        group_weights<F>(wq, wd, wm, b, 2 * p, G, lo);
        group_weights<F>(wq, wd, wm, b, 2 * p + 1, G, hi);
        for (int k = 0; k < 8; ++k) w[k] = join_si(lo.w[k], hi.w[k]);
      }
      const int32_t* bi = xi + (size_t)b * 11 * R;  // (pack_rows' layout)
      const float* bf = xf + (size_t)b * 2 * R;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {  // (unrolled: see the comment above)
        const int32_t* xq = bi + r;
        const int32_t n16[2] = {bi[8 * R + r], bi[9 * R + r]};
        const __m512 dx = _mm512_set1_ps(bf[r]);
        if constexpr (iq12<F>()) {  // tile's iq2 / iq1 sums
          __m512i sh[2];
          for (int h = 0; h < 2; ++h)
            sh[h] = sum_steps512<4, R>(w + 4 * h, xq + 4 * h * R, -128 * n16[h]);
          const __m512i is = _mm512_add_epi32(_mm512_mullo_epi32(sh[0], join_si(lo.mh[0], hi.mh[0])),
                                              _mm512_mullo_epi32(sh[1], join_si(lo.mh[1], hi.mh[1])));
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(join_ps(lo.dw, hi.dw), dx), acc[r]);
        } else if constexpr (F == Fmt::Q3_K || F == Fmt::Q2_K) {  // tile's pairs of 16-bit halves
          __m512i sh[2];
          for (int h = 0; h < 2; ++h) sh[h] = sum_steps512<4, R>(w + 4 * h, xq + 4 * h * R);
          __m512i sp = _mm512_mask_blend_epi16(0xaaaaaaaa, sh[0], _mm512_slli_epi32(sh[1], 16));
          if constexpr (F == Fmt::Q3_K)
            sp = _mm512_sub_epi16(sp, _mm512_set1_epi32(pair16(4 * n16[0], 4 * n16[1])));
          const __m512i is = _mm512_madd_epi16(sp, join_si(lo.ls_pairs, hi.ls_pairs));
          if constexpr (F == Fmt::Q2_K) {  // (row_step's: d is + dmin m, then times d_x)
            const __m512i m = _mm512_madd_epi16(_mm512_set1_epi32(pair16(-n16[0], -n16[1])),
                                                join_si(lo.mn_pairs, hi.mn_pairs));
            const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), join_ps(lo.coef, hi.coef),
                                             _mm512_mul_ps(_mm512_cvtepi32_ps(is), join_ps(lo.dw, hi.dw)));
            acc[r] = _mm512_fmadd_ps(t, dx, acc[r]);
          } else {
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(join_ps(lo.dw, hi.dw), dx), acc[r]);
          }
        } else if constexpr (halves16<F>()) {  // (row_step's q6_k arithmetic)
          const __m512i s0 = sum_steps512<4, R>(w, xq, -half_offset<F>() * n16[0]);
          const __m512i s1 = sum_steps512<4, R>(w + 4, xq + 4 * R, -half_offset<F>() * n16[1]);
          const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), join_ps(lo.hdw[1], hi.hdw[1]),
                                           _mm512_mul_ps(_mm512_cvtepi32_ps(s0), join_ps(lo.hdw[0], hi.hdw[0])));
          acc[r] = _mm512_fmadd_ps(t, dx, acc[r]);
        } else {
          const __m512i s = sum_steps512<8, R>(w, xq, -block_offset<F>() * bi[10 * R + r]);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(join_ps(lo.dw, hi.dw), dx), acc[r]);
        }
      }
    }
    if constexpr (mins_pass<F>()) min_pass512<F, R, G>(wd, wm, xf, nb, p, tail);
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * out_stride + p * 2 * GROUP, _mm512_add_ps(acc[r], tail[r]));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
#elif defined(__SSE4_1__) && !defined(PW_NEON)
// The tile on x86-64-v2 (SSE4.2, no AVX2: Pentium/Celeron Silver, Atom, CPUs before 2013): the
// AVX2 tile in two 128-bit halves, rows 0-3 and 4-7 of a group (each 32-byte step of the layout
// is two 16-byte registers). The integer sums are the AVX2-without-VNNI path's (bytes widened to
// 16 bits, madd, hadd), exact; the float work is the generic tile's (no FMA on this ISA: the
// product and the sum round apart), so the chunk and row-count invariance hold as everywhere.
// Scales are converted in software (no F16C). Before this path the variant ran the generic
// tile: 9.0 against 73.4 tok/s for the AVX-512 one at the 360M Q4_0 shape.
inline __m128i dot4_128(__m128i u, __m128i s16) {  // 4 int32 lanes: each the sum of 4 bytes u x s
  const __m128i lo = _mm_madd_epi16(_mm_cvtepu8_epi16(u), s16);
  const __m128i hi = _mm_madd_epi16(_mm_unpackhi_epi8(u, _mm_setzero_si128()), s16);
  return _mm_hadd_epi32(lo, hi);  // lanes: rows 0..3 of the half (each row's 4 bytes are two pairs)
}

// Four f32 lanes held as two pairs of doubles (lanes 0-1, 2-3), each an f32 value: the SSE
// tile's accumulators, so that a fused multiply-add needs no conversion of its addend.
struct vd4 {
  __m128d lo, hi;
};
PW_INLINE vd4 d4_zero() { return {_mm_setzero_pd(), _mm_setzero_pd()}; }
PW_INLINE vd4 d4_from(__m128 v) { return {_mm_cvtps_pd(v), _mm_cvtps_pd(_mm_movehl_ps(v, v))}; }
PW_INLINE __m128 d4_to(vd4 v) { return _mm_movelh_ps(_mm_cvtpd_ps(v.lo), _mm_cvtpd_ps(v.hi)); }

// c + a * b per lane, rounded to f32 once, as the AVX2 tile's fused multiply-add rounds it (this
// ISA has no FMA, and std::fma is a library call, in software where there is none): a * b is
// exact in double (24 + 24 bits), and rounding the double sum to f32 gives the once-rounded
// result except where that sum landed exactly on a midpoint between two floats (the double's
// own rounding may then have decided the tie) or below f32's normal range; such lanes, about
// one in 2^28 of random ones, are redone with std::fma. a, b and c hold f32 values.
PW_INLINE vd4 fma_exact(vd4 a, vd4 b, vd4 c) {
  const __m128d s0 = _mm_add_pd(_mm_mul_pd(a.lo, b.lo), c.lo), s1 = _mm_add_pd(_mm_mul_pd(a.hi, b.hi), c.hi);
  const vd4 r = {_mm_cvtps_pd(_mm_cvtpd_ps(s0)), _mm_cvtps_pd(_mm_cvtpd_ps(s1))};
  // the low and the high 32 bits of the four sums: a tie has 1000...0 in the 29 bits below f32's
  // last; a small sum, 0 < |s| < 2^-126, an exponent field under 897 (s is 0 or at least 2^-298)
  const __m128i lw = _mm_castps_si128(_mm_shuffle_ps(_mm_castpd_ps(s0), _mm_castpd_ps(s1), _MM_SHUFFLE(2, 0, 2, 0)));
  const __m128i hw = _mm_castps_si128(_mm_shuffle_ps(_mm_castpd_ps(s0), _mm_castpd_ps(s1), _MM_SHUFFLE(3, 1, 3, 1)));
  const __m128i tie = _mm_cmpeq_epi32(_mm_and_si128(lw, _mm_set1_epi32(0x1fffffff)), _mm_set1_epi32(0x10000000));
  const __m128i e1 = _mm_sub_epi32(_mm_and_si128(hw, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(1));
  const __m128i small = _mm_cmpeq_epi32(_mm_min_epu32(e1, _mm_set1_epi32((897 << 20) - 2)), e1);
  if (!_mm_testz_si128(_mm_or_si128(tie, small), _mm_set1_epi32(-1))) {
    alignas(16) float fa[4], fb[4], fc[4], fr[4];
    _mm_store_ps(fa, d4_to(a)), _mm_store_ps(fb, d4_to(b)), _mm_store_ps(fc, d4_to(c));
    for (int i = 0; i < 4; ++i) fr[i] = std::fma(fa[i], fb[i], fc[i]);
    return d4_from(_mm_load_ps(fr));
  }
  return r;
}

// Four f16 (p[0..4)) as f32, exactly as half_to_float: normal ones by moving the bits (not by a
// multiply, and subnormal ones through an integer conversion, which a DAZ mode would not flush).
PW_INLINE __m128 half4(const uint16_t* p) {
  const __m128i x = _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i*)p));
  const __m128i em = _mm_and_si128(x, _mm_set1_epi32(0x7fff));
  const __m128i sign = _mm_slli_epi32(_mm_xor_si128(x, em), 16);
  const __m128 normal = _mm_castsi128_ps(_mm_add_epi32(_mm_slli_epi32(em, 13), _mm_set1_epi32(112 << 23)));
  const __m128 sub = _mm_mul_ps(_mm_cvtepi32_ps(em), _mm_set1_ps(0x1p-24f));
  const __m128 is_sub = _mm_castsi128_ps(_mm_cmplt_epi32(em, _mm_set1_epi32(0x0400)));
  const __m128 is_inf = _mm_castsi128_ps(_mm_cmpgt_epi32(em, _mm_set1_epi32(0x7bff)));  // inf, NaN: exponent all ones
  const __m128 f = _mm_or_ps(_mm_blendv_ps(normal, sub, is_sub), _mm_and_ps(is_inf, _mm_castsi128_ps(_mm_set1_epi32(0x7f800000))));
  return _mm_or_ps(f, _mm_castsi128_ps(sign));
}
PW_INLINE __m128i load4_u8(const uint8_t* p) {  // 4 bytes, zero-extended to 32-bit lanes
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
}
// Bits 2 row and 2 row + 1 of h (rows 4 hr .. 4 hr + 3; SSE has no per-lane shifts: a multiply
// moves them to the top).
PW_INLINE __m128i two_bits(uint32_t h, int hr) {
  const __m128i m = hr ? _mm_setr_epi32(1 << 22, 1 << 20, 1 << 18, 1 << 16) : _mm_setr_epi32(1 << 30, 1 << 28, 1 << 26, 1 << 24);
  return _mm_srli_epi32(_mm_mullo_epi32(_mm_set1_epi32((int)h), m), 30);
}

// Block b's scales for rows 4hr..4hr+3 of group g, 4 rows at once (row_scales' values, bit for
// bit): each row's value is dw * u + coef (q6_k: dw and coef are the scales of its two halves).
template <Fmt F>
PW_INLINE void block_scales4(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, int hr, __m128& dw, __m128& coef) {
  if constexpr (expanded_scales<F>()) {
    const float* f = (const float*)wd + ((size_t)b * G + g) * 2 * GROUP;
    dw = _mm_loadu_ps(f + 4 * hr), coef = _mm_loadu_ps(f + GROUP + 4 * hr);
  } else if constexpr (k_scales<F>()) {
    const SuperScales s = q4k_at(wd, wm, b, g, G);
    const __m128i lo = load4_u8(s.m + 8 * s.j + 4 * hr);
    const uint32_t h = q4k_high_bits(s);
    const __m128i sc = _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi32(15)), _mm_slli_epi32(two_bits(h, hr), 4));
    const __m128i mn = _mm_or_si128(_mm_srli_epi32(lo, 4), _mm_slli_epi32(two_bits(h >> 16, hr), 4));
    dw = _mm_mul_ps(half4(s.d + 4 * hr), _mm_cvtepi32_ps(sc));
    coef = _mm_mul_ps(half4(s.d + GROUP + 4 * hr), _mm_cvtepi32_ps(_mm_sub_epi32(_mm_setzero_si128(), mn)));
  } else if constexpr (F == Fmt::IQ4_XS) {
    const SuperScales s = iq4xs_at(wd, wm, b, g, G);
    const __m128i lo = load4_u8(s.m + 4 * s.j);
    uint16_t h;
    std::memcpy(&h, s.m + 32 + 2 * s.j, 2);
    const __m128i l = hr ? _mm_srli_epi32(lo, 4) : _mm_and_si128(lo, _mm_set1_epi32(15));
    const __m128i ls = _mm_sub_epi32(_mm_or_si128(l, _mm_slli_epi32(two_bits(h, hr), 4)), _mm_set1_epi32(32));
    dw = _mm_mul_ps(half4(s.d + 4 * hr), _mm_cvtepi32_ps(ls));
    coef = _mm_mul_ps(dw, _mm_set1_ps(-128.f));
  } else {
    const size_t si = ((size_t)b * G + g) * GROUP + 4 * hr;
    dw = half4(wd + si);
    if constexpr (F == Fmt::Q4_1 || F == Fmt::Q5_1) coef = half4(wm + si);
    else coef = _mm_mul_ps(dw, _mm_set1_ps(F == Fmt::Q8_0 || F == Fmt::IQ4_NL ? -128.f : F == Fmt::Q5_0 ? -16.f : -8.f));
  }
}

// The scales of q6_k block b's two halves for rows 4hr..4hr+3 of group g (the AVX2 tile's
// half_scales, lane for lane).
template <Fmt F>
PW_INLINE void half_scales4(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, int hr, __m128* dw) {
  if constexpr (F == Fmt::Q6_K) {
    const Q6KScales s = q6k_at(wd, wm, b, g, G);
    const __m128 d = half4(s.d + 4 * hr);
    for (int h = 0; h < 2; ++h) {
      int32_t sc;
      std::memcpy(&sc, s.sc + GROUP * h + 4 * hr, 4);
      dw[h] = _mm_mul_ps(d, _mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sc))));
    }
  } else {
    static_assert(F != F, "half_scales4: q6_k only");
  }
}

// q3k_pairs (the AVX2 tile's) for rows 4hr..4hr+3.
PW_INLINE __m128i q3k_pairs4(const uint8_t* p, int hr) {
  uint64_t lo;
  uint32_t hi;
  std::memcpy(&lo, p, 8), std::memcpy(&hi, p + 8, 4);
  const __m128i v = _mm_insert_epi32(_mm_cvtsi64_si128((long long)lo), (int)hi, 2);
  const __m128i idx = hr ? _mm_setr_epi8(6, 7, -1, -1, 7, 8, -1, -1, 9, 10, -1, -1, 10, 11, -1, -1)
                         : _mm_setr_epi8(0, 1, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1, 4, 5, -1, -1);
  __m128i t = _mm_shuffle_epi8(v, idx);
  t = _mm_blend_epi16(t, _mm_srli_epi32(t, 4), 0xcc);  // (odd rows: 4 bits further)
  const __m128i pair = _mm_or_si128(_mm_and_si128(t, _mm_set1_epi32(0x3f)), _mm_and_si128(_mm_slli_epi32(t, 10), _mm_set1_epi32(0x3f0000)));
  return _mm_sub_epi16(pair, _mm_set1_epi16(32));
}
inline int32_t pair16(int32_t a, int32_t b) { return (int32_t)(((uint32_t)a & 0xffffu) | (uint32_t)b << 16); }
// q2k_pairs (the AVX2 tile's) for rows 4hr..4hr+3.
PW_INLINE __m128i q2k_pairs4(const uint8_t* p, int hr) {
  const __m128i v = _mm_loadu_si128((const __m128i*)p);
  const __m128i u = _mm_unpacklo_epi8(v, _mm_srli_si128(v, 8));
  return _mm_cvtepu8_epi16(hr ? _mm_srli_si128(u, 8) : u);
}

// Row half hr (rows 4hr..4hr+3) of one block of q5_x, q6_k, q3_k, q2_k or iq4 as the 8 steps the products
// take (w[k]: values 4k..4k+3 of each row): the AVX2 tile's unpacking, 128 bits wide (q5's 5th
// bit and q6_k's high 2 bits OR-ed in above the nibble, unsigned); iq4's values looked up by
// pshufb as llama.cpp's _mm_shuffle_epi8 over kvalues_iq4nl does, signed (IQ4_U - 128).
template <Fmt F>
PW_INLINE void block_steps(const uint8_t* wb, int hr, __m128i* w) {
  if constexpr (iq12<F>()) {  // the AVX2 tile's iq12_steps8 for 4 rows, signed (without its + 128)
    [[maybe_unused]] __m128i sg;
    if constexpr (!iq1<F>()) {
      sg = _mm_loadu_si128((const __m128i*)(wb + 32 + 16 * hr));
      if constexpr (F != Fmt::IQ2_S) {
        const __m128i t = _mm_and_si128(sg, _mm_set1_epi8(0x7f)), m4 = _mm_set1_epi8(0x0f);
        const __m128i par = _mm_load_si128((const __m128i*)IQ3_PARITY);
        sg = _mm_or_si128(t, _mm_xor_si128(_mm_shuffle_epi8(par, _mm_and_si128(t, m4)),
                                           _mm_shuffle_epi8(par, _mm_and_si128(_mm_srli_epi16(t, 4), m4))));
      }
    }
    for (int l = 0; l < 4; ++l) {
      uint64_t e[4];
      for (int i = 0; i < 4; ++i) e[i] = iq12_entry<F>(wb, l, 4 * hr + i);
      [[maybe_unused]] __m128i delta;  // iq1: +1 or -1 in each byte of a row's lane
      if constexpr (iq1<F>()) {
        int dl[4];
        for (int i = 0; i < 4; ++i) dl[i] = iq1_delta_negative<F>(wb, l, 4 * hr + i) ? -1 : 0x01010101;
        delta = _mm_setr_epi32(dl[0], dl[1], dl[2], dl[3]);
      }
      for (int t = 0; t < 2; ++t) {
        const __m128i g = _mm_setr_epi32((int)(uint32_t)(e[0] >> (32 * t)), (int)(uint32_t)(e[1] >> (32 * t)),
                                         (int)(uint32_t)(e[2] >> (32 * t)), (int)(uint32_t)(e[3] >> (32 * t)));
        if constexpr (iq1<F>()) {
          const __m128i g2 = _mm_add_epi8(g, g), g4 = _mm_add_epi8(g2, g2);
          w[2 * l + t] = _mm_add_epi8(_mm_add_epi8(g4, g4), delta);
        } else {
          const __m128i bit = _mm_load_si128((const __m128i*)IQ3_BIT[t]);
          const __m128i neg = _mm_cmpeq_epi8(_mm_and_si128(_mm_shuffle_epi8(sg, _mm_load_si128((const __m128i*)IQ3_BYTE[l])), bit), bit);
          w[2 * l + t] = _mm_sub_epi8(_mm_xor_si128(g, neg), neg);
        }
      }
    }
    return;
  }
  if constexpr (iq3<F>()) {  // the AVX2 tile's iq3_steps8 for 4 rows, signed (without its + 128)
    __m128i sg = _mm_loadu_si128((const __m128i*)(wb + iq3_signs_at<F>() + 16 * hr));
    if constexpr (F == Fmt::IQ3_XXS) {
      const __m128i t = _mm_and_si128(sg, _mm_set1_epi8(0x7f)), m4 = _mm_set1_epi8(0x0f);
      const __m128i par = _mm_load_si128((const __m128i*)IQ3_PARITY);
      sg = _mm_or_si128(t, _mm_xor_si128(_mm_shuffle_epi8(par, _mm_and_si128(t, m4)),
                                         _mm_shuffle_epi8(par, _mm_and_si128(_mm_srli_epi16(t, 4), m4))));
    }
    for (int k = 0; k < 8; ++k) {
      uint32_t e[4];
      for (int i = 0; i < 4; ++i) e[i] = iq3_entry<F>(wb, k, 4 * hr + i);
      const __m128i g = _mm_setr_epi32((int)e[0], (int)e[1], (int)e[2], (int)e[3]);
      const __m128i bit = _mm_load_si128((const __m128i*)IQ3_BIT[k & 1]);
      const __m128i neg = _mm_cmpeq_epi8(_mm_and_si128(_mm_shuffle_epi8(sg, _mm_load_si128((const __m128i*)IQ3_BYTE[k >> 1])), bit), bit);
      w[k] = _mm_sub_epi8(_mm_xor_si128(g, neg), neg);
    }
    return;
  }
  if constexpr (two_bit<F>()) {  // step 4h + k: bits 2k of the 32 bytes h; q3_k's 3rd bit at bit k of the last 32
    const __m128i m3 = _mm_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m128i raw = _mm_loadu_si128((const __m128i*)(wb + 32 * h + 16 * hr));
      w[4 * h] = _mm_and_si128(raw, m3);
      w[4 * h + 1] = _mm_and_si128(_mm_srli_epi16(raw, 2), m3);
      w[4 * h + 2] = _mm_and_si128(_mm_srli_epi16(raw, 4), m3);
      w[4 * h + 3] = _mm_and_si128(_mm_srli_epi16(raw, 6), m3);
    }
    if constexpr (F == Fmt::Q3_K) {
      const __m128i hb = _mm_loadu_si128((const __m128i*)(wb + 64 + 16 * hr)), m04 = _mm_set1_epi8(4);
      w[0] = _mm_or_si128(w[0], _mm_and_si128(_mm_slli_epi16(hb, 2), m04));
      w[1] = _mm_or_si128(w[1], _mm_and_si128(_mm_slli_epi16(hb, 1), m04));
      w[2] = _mm_or_si128(w[2], _mm_and_si128(hb, m04));
      w[3] = _mm_or_si128(w[3], _mm_and_si128(_mm_srli_epi16(hb, 1), m04));
      w[4] = _mm_or_si128(w[4], _mm_and_si128(_mm_srli_epi16(hb, 2), m04));
      w[5] = _mm_or_si128(w[5], _mm_and_si128(_mm_srli_epi16(hb, 3), m04));
      w[6] = _mm_or_si128(w[6], _mm_and_si128(_mm_srli_epi16(hb, 4), m04));
      w[7] = _mm_or_si128(w[7], _mm_and_si128(_mm_srli_epi16(hb, 5), m04));
    }
    return;
  }
  const __m128i m4 = _mm_set1_epi8(0x0f);
  for (int k = 0; k < 4; ++k) {
    const __m128i raw = _mm_loadu_si128((const __m128i*)(wb + 32 * k + 16 * hr));
    w[k] = _mm_and_si128(raw, m4);
    w[k + 4] = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
  }
  if constexpr (iq4<F>()) {
    const __m128i table = _mm_xor_si128(_mm_load_si128((const __m128i*)IQ4_U), _mm_set1_epi8(-128));
    for (int k = 0; k < 8; ++k) w[k] = _mm_shuffle_epi8(table, w[k]);
  }
  if constexpr (five_bit<F>()) {  // the 5th bit of value 4k + j at bit k of lane (row, j), of 16 + 4k + j at 4 + k
    const __m128i hb = _mm_loadu_si128((const __m128i*)(wb + 128 + 16 * hr)), m10 = _mm_set1_epi8(0x10);
    w[0] = _mm_or_si128(w[0], _mm_and_si128(_mm_slli_epi16(hb, 4), m10));
    w[1] = _mm_or_si128(w[1], _mm_and_si128(_mm_slli_epi16(hb, 3), m10));
    w[2] = _mm_or_si128(w[2], _mm_and_si128(_mm_slli_epi16(hb, 2), m10));
    w[3] = _mm_or_si128(w[3], _mm_and_si128(_mm_slli_epi16(hb, 1), m10));
    w[4] = _mm_or_si128(w[4], _mm_and_si128(hb, m10));
    w[5] = _mm_or_si128(w[5], _mm_and_si128(_mm_srli_epi16(hb, 1), m10));
    w[6] = _mm_or_si128(w[6], _mm_and_si128(_mm_srli_epi16(hb, 2), m10));
    w[7] = _mm_or_si128(w[7], _mm_and_si128(_mm_srli_epi16(hb, 3), m10));
  }
  if constexpr (F == Fmt::Q6_K) {  // the high 2 bits of step k sit at bits 2k of each byte: to bits 4-5
    const __m128i m30 = _mm_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m128i hb = _mm_loadu_si128((const __m128i*)(wb + 128 + 32 * h + 16 * hr));
      w[4 * h] = _mm_or_si128(w[4 * h], _mm_and_si128(_mm_slli_epi16(hb, 4), m30));
      w[4 * h + 1] = _mm_or_si128(w[4 * h + 1], _mm_and_si128(_mm_slli_epi16(hb, 2), m30));
      w[4 * h + 2] = _mm_or_si128(w[4 * h + 2], _mm_and_si128(hb, m30));
      w[4 * h + 3] = _mm_or_si128(w[4 * h + 3], _mm_and_si128(_mm_srli_epi16(hb, 2), m30));
    }
  }
}

// The tile for q5_x, q6_k and iq4 on SSE4.1: the float work the AVX2 tile's, operation for
// operation and fused where it fuses (fma_exact), so this variant holds these formats with the
// AVX2 build's bits. The integer sums by pmaddubsw (u8 x s8, adjacent pairs into saturating
// 16-bit lanes), which none of these can saturate: a q5 pair is at most 2 * 31 * 127, so four
// steps add up in 16 bits (31,496), a q6_k pair 2 * 63 * 127, so two (32,004); iq4's signed
// values (|w| <= 127) go in as |x| times w with x's sign (llama.cpp's sign trick, 32,258 a
// step), and 128 sum(x) comes back as for q8_0. pmaddwd against ones then sums each row's 4
// bytes into its 32-bit lane: 2 instructions a step instead of dot4_128's 5.
template <Fmt F, int R, int G>
void tile_steps(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
                int64_t out_stride) {
  vd4 acc[R][G][2], tail[R][G][2];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int h = 0; h < 2; ++h) acc[r][g][h] = tail[r][g][h] = d4_zero();
  const __m128i ones = _mm_set1_epi16(1);
  for (int b = 0; b < nb; ++b) {
    __m128i xv[R][8];  // step k's 4 x values in every lane (iq4: their magnitudes, and xs their signs)
    [[maybe_unused]] __m128i xs[R][8];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 8; ++k) {
        xv[r][k] = _mm_set1_epi32(((const int32_t*)(x[r].q + b * QK))[k]);
        if constexpr (iq4<F>() || iq3<F>() || iq12<F>()) xs[r][k] = xv[r][k], xv[r][k] = _mm_abs_epi8(xv[r][k]);
      }
    for (int g = 0; g < G; ++g) {
      const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
      for (int hr = 0; hr < 2; ++hr) {
        __m128i w[8];
        block_steps<F>(wb, hr, w);
        __m128 dw = _mm_setzero_ps(), cf = dw;
        [[maybe_unused]] __m128 hdw[2];  // q6_k: the halves' scales
        [[maybe_unused]] __m128i ls_pairs, mn_pairs;  // q3_k: the rows' (ls - 32) pairs; q2_k: sc and mn pairs
        [[maybe_unused]] __m128i mh[2];  // iq2 / iq1: the rows' 2 ls + 1 of each half
        if constexpr (iq12<F>()) {  // the AVX2 tile's iq12_scales8, 4 rows
          dw = _mm_mul_ps(half4(super_at<GROUP, 0>(wd, wd, b, g, G).d + 4 * hr), _mm_set1_ps(0.125f));
          for (int h = 0; h < 2; ++h)
            mh[h] = _mm_setr_epi32(iq12_mult<F>(wb, 4 * hr, h), iq12_mult<F>(wb, 4 * hr + 1, h), iq12_mult<F>(wb, 4 * hr + 2, h),
                                   iq12_mult<F>(wb, 4 * hr + 3, h));
        } else if constexpr (F == Fmt::Q3_K) {
          const SuperScales s = q3k_at(wd, wm, b, g, G);
          ls_pairs = q3k_pairs4(s.m + 12 * s.j, hr);
          dw = half4(s.d + 4 * hr);  // (d)
        } else if constexpr (F == Fmt::Q2_K) {
          const SuperScales s = q2k_at(wd, wm, b, g, G);
          const __m128i v = q2k_pairs4(s.m + 16 * s.j, hr);
          ls_pairs = _mm_and_si128(v, _mm_set1_epi16(15)), mn_pairs = _mm_srli_epi16(v, 4);
          dw = half4(s.d + 4 * hr), cf = half4(s.d + GROUP + 4 * hr);  // (d, dmin)
        } else if constexpr (halves16<F>()) {
          half_scales4<F>(wd, wm, b, g, G, hr, hdw);
        } else if constexpr (iq3<F>()) {  // the AVX2 tile's iq3_scales8, 4 rows
          int ls[4];
          for (int i = 0; i < 4; ++i) ls[i] = 2 * iq3_ls<F>(wb, 4 * hr + i) + 1;
          dw = _mm_mul_ps(half4(super_at<GROUP, 0>(wd, wd, b, g, G).d + 4 * hr), _mm_cvtepi32_ps(_mm_setr_epi32(ls[0], ls[1], ls[2], ls[3])));
          if constexpr (F == Fmt::IQ3_XXS) dw = _mm_mul_ps(dw, _mm_set1_ps(0.25f));
          cf = _mm_mul_ps(dw, _mm_set1_ps(-128.f));
        } else {
          block_scales4<F>(wd, wm, b, g, G, hr, dw, cf);
        }
        [[maybe_unused]] const vd4 cfd = d4_from(cf);
        for (int r = 0; r < R; ++r) {
          const __m128 dx = _mm_set1_ps(x[r].d[b]);
          const __m128i* xr = xv[r];
          if constexpr (iq12<F>()) {  // the AVX2 tile's integers (|w8| <= 43: a pair is at most 10,922) and float chain
            __m128i sh[2];
            for (int v = 0; v < 2; ++v) {
              sh[v] = _mm_setzero_si128();
              for (int k = 4 * v; k < 4 * v + 4; ++k)
                sh[v] = _mm_add_epi32(sh[v], _mm_madd_epi16(_mm_maddubs_epi16(xr[k], _mm_sign_epi8(w[k], xs[r][k])), ones));
            }
            const __m128i sum = _mm_add_epi32(_mm_mullo_epi32(sh[0], mh[0]), _mm_mullo_epi32(sh[1], mh[1]));
            const vd4 sd = {_mm_cvtepi32_pd(sum), _mm_cvtepi32_pd(_mm_shuffle_epi32(sum, _MM_SHUFFLE(3, 2, 3, 2)))};
            acc[r][g][hr] = fma_exact(sd, d4_from(_mm_mul_ps(dw, dx)), acc[r][g][hr]);
          } else if constexpr (F == Fmt::Q3_K || F == Fmt::Q2_K) {  // the AVX2 tile's integers and float chain
            __m128i sh[2];
            for (int v = 0; v < 2; ++v) {
              const __m128i* wv = w + 4 * v;
              const __m128i p0 = _mm_add_epi16(_mm_maddubs_epi16(wv[0], xr[4 * v]), _mm_maddubs_epi16(wv[1], xr[4 * v + 1]));
              const __m128i p1 = _mm_add_epi16(_mm_maddubs_epi16(wv[2], xr[4 * v + 2]), _mm_maddubs_epi16(wv[3], xr[4 * v + 3]));
              sh[v] = _mm_add_epi32(_mm_madd_epi16(p0, ones), _mm_madd_epi16(p1, ones));
            }
            __m128i sp = _mm_blend_epi16(sh[0], _mm_slli_epi32(sh[1], 16), 0xaa);
            if constexpr (F == Fmt::Q3_K)
              sp = _mm_sub_epi16(sp, _mm_set1_epi32(pair16(4 * x[r].n16[2 * b], 4 * x[r].n16[2 * b + 1])));
            const __m128i sum = _mm_madd_epi16(sp, ls_pairs);
            if constexpr (F == Fmt::Q2_K) {  // (the AVX2 row_step's: d is + dmin m, then times d_x)
              const __m128i m = _mm_madd_epi16(_mm_set1_epi32(pair16(-x[r].n16[2 * b], -x[r].n16[2 * b + 1])), mn_pairs);
              const vd4 t = fma_exact(d4_from(_mm_cvtepi32_ps(m)), cfd, d4_from(_mm_mul_ps(_mm_cvtepi32_ps(sum), dw)));
              acc[r][g][hr] = fma_exact(t, d4_from(dx), acc[r][g][hr]);
            } else {
              const vd4 sd = {_mm_cvtepi32_pd(sum), _mm_cvtepi32_pd(_mm_shuffle_epi32(sum, _MM_SHUFFLE(3, 2, 3, 2)))};
              acc[r][g][hr] = fma_exact(sd, d4_from(_mm_mul_ps(dw, dx)), acc[r][g][hr]);
            }
          } else if constexpr (halves16<F>()) {  // each half: sum((q - off) x) = sum(q x) - off sum(x), exact
            __m128 f[2];
            for (int v = 0; v < 2; ++v) {
              const __m128i* wv = w + 4 * v;
              const __m128i p0 = _mm_add_epi16(_mm_maddubs_epi16(wv[0], xr[4 * v]), _mm_maddubs_epi16(wv[1], xr[4 * v + 1]));
              const __m128i p1 = _mm_add_epi16(_mm_maddubs_epi16(wv[2], xr[4 * v + 2]), _mm_maddubs_epi16(wv[3], xr[4 * v + 3]));
              __m128i sum = _mm_add_epi32(_mm_madd_epi16(p0, ones), _mm_madd_epi16(p1, ones));
              if constexpr (half_offset<F>() != 0)
                sum = _mm_add_epi32(sum, _mm_set1_epi32(-half_offset<F>() * x[r].n16[2 * b + v]));
              f[v] = _mm_cvtepi32_ps(sum);  // (exact: |sum| < 2^17)
            }
            // (the AVX2 row_step's steps: s0 hdw0 + s1 hdw1, then times d_x)
            const vd4 t = fma_exact(d4_from(f[1]), d4_from(hdw[1]), d4_from(_mm_mul_ps(f[0], hdw[0])));
            acc[r][g][hr] = fma_exact(t, d4_from(dx), acc[r][g][hr]);
          } else {
            __m128i sum;
            if constexpr (iq4<F>() || iq3<F>()) {  // sum((u - 128) x) + 128 sum(x) = sum(u x)
              sum = _mm_set1_epi32(128 * x[r].n[b]);
              for (int k = 0; k < 8; ++k)
                sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_maddubs_epi16(xr[k], _mm_sign_epi8(w[k], xs[r][k])), ones));
            } else {
              __m128i p[2];
              for (int h = 0; h < 2; ++h)
                p[h] = _mm_add_epi16(_mm_add_epi16(_mm_maddubs_epi16(w[4 * h], xr[4 * h]), _mm_maddubs_epi16(w[4 * h + 1], xr[4 * h + 1])),
                                     _mm_add_epi16(_mm_maddubs_epi16(w[4 * h + 2], xr[4 * h + 2]), _mm_maddubs_epi16(w[4 * h + 3], xr[4 * h + 3])));
              sum = _mm_add_epi32(_mm_madd_epi16(p[0], ones), _mm_madd_epi16(p[1], ones));
            }
            if constexpr (block_offset<F>() != 0) sum = _mm_sub_epi32(sum, _mm_set1_epi32(block_offset<F>() * x[r].n[b]));
            const vd4 sd = {_mm_cvtepi32_pd(sum), _mm_cvtepi32_pd(_mm_shuffle_epi32(sum, _MM_SHUFFLE(3, 2, 3, 2)))};
            acc[r][g][hr] = fma_exact(sd, d4_from(_mm_mul_ps(dw, dx)), acc[r][g][hr]);
            if constexpr (block_offset<F>() == 0) {
              const __m128d sx = _mm_set1_pd((double)x[r].s[b]);
              tail[r][g][hr] = fma_exact(cfd, {sx, sx}, tail[r][g][hr]);
            }
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int h = 0; h < 2; ++h)
        _mm_storeu_ps(out + r * out_stride + g * GROUP + 4 * h, _mm_add_ps(d4_to(acc[r][g][h]), d4_to(tail[r][g][h])));
}

template <Fmt F, int R, int G>
void tile(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
          int64_t out_stride) {
  if constexpr (halves16<F>() || five_bit<F>() || iq4<F>() || iq3<F>() || iq12<F>())
    return tile_steps<F, R, G>(wq, wd, wm, x, nb, out, out_stride);
  __m128 acc[R][G][2], tail[R][G][2];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int h = 0; h < 2; ++h) acc[r][g][h] = tail[r][g][h] = _mm_setzero_ps();
  const __m128i m4 = _mm_set1_epi8(0x0f);
  for (int b = 0; b < nb; ++b) {
    // step k's 4 x values as int16, twice over: the same for both rows of a madd pair
    __m128i xv[R][8];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 8; ++k)
        xv[r][k] = _mm_cvtepi8_epi16(_mm_set1_epi32(((const int32_t*)(x[r].q + b * QK))[k]));
    for (int g = 0; g < G; ++g) {
      const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
      const size_t si = ((size_t)b * G + g) * GROUP;
      alignas(16) float dws[GROUP], cfs[GROUP];
      for (int row = 0; row < GROUP; ++row) row_scales<F>(wd, wm, b, g, G, si, row, dws[row], cfs[row]);
      for (int h = 0; h < 2; ++h) {
        __m128i w[8];
        if constexpr (F == Fmt::Q8_0) {
          for (int k = 0; k < 8; ++k) w[k] = _mm_loadu_si128((const __m128i*)(wb + 32 * k + 16 * h));
        } else {
          for (int k = 0; k < 4; ++k) {
            const __m128i raw = _mm_loadu_si128((const __m128i*)(wb + 32 * k + 16 * h));
            w[k] = _mm_and_si128(raw, m4);
            w[k + 4] = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
          }
        }
        const __m128 dw = _mm_load_ps(dws + 4 * h), cf = _mm_load_ps(cfs + 4 * h);
        for (int r = 0; r < R; ++r) {
          __m128i sum = _mm_setzero_si128();
          for (int k = 0; k < 8; ++k) sum = _mm_add_epi32(sum, dot4_128(w[k], xv[r][k]));
          if constexpr (block_offset<F>() != 0) sum = _mm_sub_epi32(sum, _mm_set1_epi32(block_offset<F>() * x[r].n[b]));
          acc[r][g][h] = _mm_add_ps(acc[r][g][h],
                                    _mm_mul_ps(_mm_cvtepi32_ps(sum), _mm_mul_ps(dw, _mm_set1_ps(x[r].d[b]))));
          if constexpr (block_offset<F>() == 0)
            tail[r][g][h] = _mm_add_ps(tail[r][g][h], _mm_mul_ps(cf, _mm_set1_ps(x[r].s[b])));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int h = 0; h < 2; ++h)
        _mm_storeu_ps(out + r * out_stride + g * GROUP + 4 * h, _mm_add_ps(acc[r][g][h], tail[r][g][h]));
}
#elif defined(PW_NEON)
// The tile on ARM64. A group's 8 output rows are two 4-lane halves (rows 0-3 and 4-7): each
// 32-byte step of the layout is two 16-byte registers, and each row's x block two more. The
// integer sum of a row and block is exact whatever instructions form it, and the float work
// after it is the x86 tile's, operation for operation (the sum, less a constant offset's term,
// as f32 times dw * dx fused into acc; a stored min's coef * dx sum(q) fused into tail; then
// acc + tail), so an ARM build computes the x86 build's bits. The integer sums:
//  - i8mm: usdot (unsigned x signed, as VNNI's dpbusd) by lane against the row's x block, and
//    usmmla for pairs of rows: a 2x8 by 8x2 product, 32 multiplies an instruction instead of 16.
//    Its operands want 8 consecutive values of a row, so two steps are zipped 4 bytes at a time
//    (one zip per 16 weight bytes, shared by every pair of rows in the tile);
//  - dotprod: sdot by lane, signed x signed: q8_0's stored u = w + 128 is flipped back to w
//    (u ^ 0x80), which is the sum less its offset already (4-bit values are < 128 as they are,
//    and their 8 or 16 comes off as on x86);
//  - baseline NEON: smull/smlal into 16-bit lanes (two q8 products, or eight 4-bit ones, fit
//    in one), then sadalp/addp into each row's 32-bit sum.
// q5_x, q6_k and iq4 are first unpacked into q8_0's 8 steps of a block (block_steps: shift-and-
// insert of the high bits, tbl for iq4's values) and multiplied as q8_0 is (step_sums).
// A stored min's term (q4_1, q5_1; q4_k's and q5_k's from a chunk's expanded scales) runs in a
// second pass over the scales (the same fused chain per lane as x86's tail, block by block),
// which leaves the main loop's registers to acc and the sums.
#if defined(__ARM_FEATURE_MATMUL_INT8)
constexpr bool kQ8Signed = false;  // usdot/usmmla take the stored unsigned weights as they are
#else
constexpr bool kQ8Signed = true;
#endif

template <class Fn, int... K>
inline void unroll(Fn&& fn, std::integer_sequence<int, K...>) {
  (fn(std::integral_constant<int, K>{}), ...);
}

// Where the integer products are signed x signed (dotprod, baseline NEON), iq4's values are
// looked up as themselves (IQ4_U - 128): the sum has no offset left to take off, as for q8_0.
template <Fmt F>
constexpr bool signed_u() { return kQ8Signed && (F == Fmt::Q8_0 || iq4<F>() || iq3<F>()); }

// Row half hr (rows 4hr..4hr+3) of one block of q5_x, q6_k or iq4 as the 8 steps the products
// take: w[k] holds values 4k..4k+3 of each of the 4 rows (q8_0's steps). q5's 5th bit and
// q6_k's high 2 bits go in above the nibble by shift-and-insert (sli keeps the destination's low
// 4 bits, sri its high 4: the nibble's mask or shift comes free); iq4's 4-bit index is looked up
// with one tbl a step (llama.cpp's vqtbl1q_s8 over kvalues_iq4nl).
template <Fmt F>
PW_INLINE void block_steps(const uint8_t* wb, int hr, uint8x16_t* w) {
  if constexpr (iq3<F>()) {  // the x86 tiles' iq3 steps for 4 rows: signed, or + 128 for usdot/usmmla
    uint8x16_t sg = vld1q_u8(wb + iq3_signs_at<F>() + 16 * hr);
    if constexpr (F == Fmt::IQ3_XXS) {  // the 8th sign of each 8: the parity of the 7 stored
      const uint8x16_t t = vandq_u8(sg, vdupq_n_u8(0x7f));
      sg = vorrq_u8(t, vshlq_n_u8(vandq_u8(vcntq_u8(t), vdupq_n_u8(1)), 7));
    }
    for (int k = 0; k < 8; ++k) {
      uint32_t e[4];
      for (int i = 0; i < 4; ++i) e[i] = iq3_entry<F>(wb, k, 4 * hr + i);
      const uint8x16_t g = vreinterpretq_u8_u32(vld1q_u32(e));
      const uint8x16_t neg = vtstq_u8(vqtbl1q_u8(sg, vreinterpretq_u8_s8(vld1q_s8(IQ3_BYTE[k >> 1]))), vld1q_u8(IQ3_BIT[k & 1]));
      const uint8x16_t v = vsubq_u8(veorq_u8(g, neg), neg);
      w[k] = signed_u<F>() ? v : veorq_u8(v, vdupq_n_u8(0x80));
    }
  } else if constexpr (iq12<F>()) {  // the x86 tiles' iq2 / iq1 steps for 4 rows: w8, or w8 + 128 for usdot/usmmla
    [[maybe_unused]] uint8x16_t sg;
    if constexpr (!iq1<F>()) {
      sg = vld1q_u8(wb + 32 + 16 * hr);
      if constexpr (F != Fmt::IQ2_S) {  // the 8th sign of each 8: the parity of the 7 stored
        const uint8x16_t t = vandq_u8(sg, vdupq_n_u8(0x7f));
        sg = vorrq_u8(t, vshlq_n_u8(vandq_u8(vcntq_u8(t), vdupq_n_u8(1)), 7));
      }
    }
    for (int l = 0; l < 4; ++l) {
      uint64_t e[4];
      for (int i = 0; i < 4; ++i) e[i] = iq12_entry<F>(wb, l, 4 * hr + i);
      [[maybe_unused]] uint8x16_t delta;  // iq1: +1 or -1 in each byte of a row's lane
      if constexpr (iq1<F>()) {
        uint32_t dl[4];
        for (int i = 0; i < 4; ++i) dl[i] = iq1_delta_negative<F>(wb, l, 4 * hr + i) ? 0xffffffffu : 0x01010101u;
        delta = vreinterpretq_u8_u32(vld1q_u32(dl));
      }
      for (int t = 0; t < 2; ++t) {
        const uint32_t h[4] = {(uint32_t)(e[0] >> (32 * t)), (uint32_t)(e[1] >> (32 * t)), (uint32_t)(e[2] >> (32 * t)),
                               (uint32_t)(e[3] >> (32 * t))};
        const uint8x16_t g = vreinterpretq_u8_u32(vld1q_u32(h));
        uint8x16_t v;
        if constexpr (iq1<F>()) {
          v = vaddq_u8(vshlq_n_u8(g, 3), delta);
        } else {
          const uint8x16_t neg = vtstq_u8(vqtbl1q_u8(sg, vreinterpretq_u8_s8(vld1q_s8(IQ3_BYTE[l]))), vld1q_u8(IQ3_BIT[t]));
          v = vsubq_u8(veorq_u8(g, neg), neg);
        }
        w[2 * l + t] = kQ8Signed ? v : veorq_u8(v, vdupq_n_u8(0x80));
      }
    }
  } else if constexpr (two_bit<F>()) {  // step 4h + k: bits 2k of the 32 bytes h; q3_k's 3rd bit at bit k of the last 32
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t c = vld1q_u8(wb + 32 * h + 16 * hr);
      w[4 * h] = vandq_u8(c, m3);
      w[4 * h + 1] = vandq_u8(vshrq_n_u8(c, 2), m3);
      w[4 * h + 2] = vandq_u8(vshrq_n_u8(c, 4), m3);
      w[4 * h + 3] = vshrq_n_u8(c, 6);
    }
    if constexpr (F == Fmt::Q3_K) {
      const uint8x16_t hb = vld1q_u8(wb + 64 + 16 * hr), one = vdupq_n_u8(1);
      unroll([&](auto kc) {
        constexpr int k = decltype(kc)::value;
        uint8x16_t t = hb;
        if constexpr (k > 0) t = vshrq_n_u8(hb, k);
        w[k] = vsliq_n_u8(w[k], vandq_u8(t, one), 2);  // (sli keeps the destination's low 2 bits)
      }, std::make_integer_sequence<int, 8>{});
    }
  } else {
    uint8x16_t raw[4];
    for (int k = 0; k < 4; ++k) raw[k] = vld1q_u8(wb + 32 * k + 16 * hr);
    if constexpr (five_bit<F>()) {  // the 5th bit of value 4k + j at bit k of lane (row, j), of 16 + 4k + j at 4 + k
      const uint8x16_t hb = vld1q_u8(wb + 128 + 16 * hr), one = vdupq_n_u8(1), m10 = vdupq_n_u8(0x10);
      unroll([&](auto kc) {
        constexpr int k = decltype(kc)::value;
        uint8x16_t t = hb;
        if constexpr (k > 0) t = vshrq_n_u8(hb, k);
        w[k] = vsliq_n_u8(raw[k], vandq_u8(t, one), 4);
        w[k + 4] = vsriq_n_u8(vandq_u8(t, m10), raw[k], 4);
      }, std::make_integer_sequence<int, 4>{});
    } else if constexpr (F == Fmt::Q6_K) {  // value 4k + j's high 2 bits at bits 2k of the first 32 bytes' lane, 16 + 4k + j the second's
      const uint8x16_t h0 = vld1q_u8(wb + 128 + 16 * hr), h1 = vld1q_u8(wb + 160 + 16 * hr);
      const uint8x16_t three = vdupq_n_u8(3), m30 = vdupq_n_u8(0x30);
      w[0] = vsliq_n_u8(raw[0], vandq_u8(h0, three), 4);
      w[1] = vsliq_n_u8(raw[1], vandq_u8(vshrq_n_u8(h0, 2), three), 4);
      w[2] = vsliq_n_u8(raw[2], vandq_u8(vshrq_n_u8(h0, 4), three), 4);
      w[3] = vsliq_n_u8(raw[3], vshrq_n_u8(h0, 6), 4);
      w[4] = vsriq_n_u8(vandq_u8(vshlq_n_u8(h1, 4), m30), raw[0], 4);  // (sri keeps bits 4-7 of its first operand)
      w[5] = vsriq_n_u8(vandq_u8(vshlq_n_u8(h1, 2), m30), raw[1], 4);
      w[6] = vsriq_n_u8(vandq_u8(h1, m30), raw[2], 4);
      w[7] = vsriq_n_u8(vshrq_n_u8(h1, 2), raw[3], 4);
    } else {
      static_assert(iq4<F>(), "block_steps: q5_x, q6_k, q3_k, q2_k and iq4 only");
      const uint8x16_t u = vld1q_u8(IQ4_U);
      const uint8x16_t table = signed_u<F>() ? veorq_u8(u, vdupq_n_u8(0x80)) : u;
      const uint8x16_t m4 = vdupq_n_u8(0x0f);
      for (int k = 0; k < 4; ++k) {
        w[k] = vqtbl1q_u8(table, vandq_u8(raw[k], m4));
        w[k + 4] = vqtbl1q_u8(table, vshrq_n_u8(raw[k], 4));
      }
    }
  }
}

// Rows [0, R) against one row half's 8 steps w (block_steps): o[r][v] += the 4 rows' integer
// sums, v = k / 4 for the step k where SPLIT (q6_k's halves of 16 values, scaled apart), else 0.
// The products as block_sums' (below) for q8_0: usmmla for pairs of rows and usdot by lane (i8mm,
// unsigned w), sdot by lane (dotprod), or smull/smlal into 16-bit lanes flushed every PER16
// steps (baseline NEON: |w x| <= 31 * 127 lets q5 keep all 8 steps' products in a lane, 63 * 127
// lets q6_k keep 4, and iq4's |w| <= 127 two).
template <int R, bool SPLIT, int PER16>
PW_INLINE void step_sums(const uint8x16_t* w, const int8x16_t (*xq)[2], int32x4_t (*o)[2]) {
#if defined(__ARM_FEATURE_MATMUL_INT8)
  constexpr int P = R / 2;
  if constexpr (P > 0) {
    int8x16_t xx[P][4];
    for (int p = 0; p < P; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64x2_t a = vreinterpretq_s64_s8(xq[2 * p][h]), b = vreinterpretq_s64_s8(xq[2 * p + 1][h]);
        xx[p][2 * h] = vreinterpretq_s8_s64(vzip1q_s64(a, b));
        xx[p][2 * h + 1] = vreinterpretq_s8_s64(vzip2q_s64(a, b));
      }
    for (int v = 0; v < (SPLIT ? 2 : 1); ++v) {
      int32x4_t m[P][2];
      for (int p = 0; p < P; ++p) m[p][0] = m[p][1] = vdupq_n_s32(0);
      for (int vp = SPLIT ? 2 * v : 0; vp < (SPLIT ? 2 * v + 2 : 4); ++vp) {
        const uint32x4_t s0 = vreinterpretq_u32_u8(w[2 * vp]), s1 = vreinterpretq_u32_u8(w[2 * vp + 1]);
        const uint8x16_t a = vreinterpretq_u8_u32(vzip1q_u32(s0, s1)), b = vreinterpretq_u8_u32(vzip2q_u32(s0, s1));
        for (int p = 0; p < P; ++p) {
          m[p][0] = vusmmlaq_s32(m[p][0], a, xx[p][vp]);
          m[p][1] = vusmmlaq_s32(m[p][1], b, xx[p][vp]);
        }
      }
      for (int p = 0; p < P; ++p) {
        o[2 * p][v] = vaddq_s32(o[2 * p][v], vuzp1q_s32(m[p][0], m[p][1]));
        o[2 * p + 1][v] = vaddq_s32(o[2 * p + 1][v], vuzp2q_s32(m[p][0], m[p][1]));
      }
    }
  }
  if constexpr (R % 2 == 1) {
    constexpr int r = R - 1;
    unroll([&](auto kc) {
      constexpr int k = decltype(kc)::value, v = SPLIT ? k / 4 : 0;
      o[r][v] = vusdotq_laneq_s32(o[r][v], w[k], xq[r][k / 4], k % 4);
    }, std::make_integer_sequence<int, 8>{});
  }
#elif defined(__ARM_FEATURE_DOTPROD)
  unroll([&](auto kc) {
    constexpr int k = decltype(kc)::value, v = SPLIT ? k / 4 : 0;
    const int8x16_t wk = vreinterpretq_s8_u8(w[k]);
    for (int r = 0; r < R; ++r) o[r][v] = vdotq_laneq_s32(o[r][v], wk, xq[r][k / 4], k % 4);
  }, std::make_integer_sequence<int, 8>{});
#else
  for (int r = 0; r < R; ++r) {
    int32x4_t a[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    int16x8_t p[2];
    unroll([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      const int8x16_t xk = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(xq[r][k / 4]), k % 4));
      const int8x16_t wk = vreinterpretq_s8_u8(w[k]);
      if constexpr (k % PER16 == 0) {
        p[0] = vmull_s8(vget_low_s8(wk), vget_low_s8(xk));  // rows 0-1 of the half
        p[1] = vmull_high_s8(wk, xk);                       // rows 2-3
      } else {
        p[0] = vmlal_s8(p[0], vget_low_s8(wk), vget_low_s8(xk));
        p[1] = vmlal_high_s8(p[1], wk, xk);
      }
      if constexpr (k % PER16 == PER16 - 1) {
        a[0] = vpadalq_s16(a[0], p[0]);
        a[1] = vpadalq_s16(a[1], p[1]);
      }
      if constexpr (k == 7 || (SPLIT && k == 3)) {
        constexpr int v = SPLIT ? k / 4 : 0;
        o[r][v] = vaddq_s32(o[r][v], vpaddq_s32(a[0], a[1]));
        a[0] = a[1] = vdupq_n_s32(0);
      }
    }, std::make_integer_sequence<int, 8>{});
  }
#endif
}

// The q5_x, q6_k and iq4 blocks' sums: s[r][hr][v] (v as step_sums').
template <Fmt F, int R>
PW_INLINE void block_sums_steps(const uint8_t* wb, const int8x16_t (*xq)[2], int32x4_t (*s)[2][2]) {
  constexpr bool SPLIT = halves16<F>() || iq12<F>();  // (iq2 / iq1: |w8 x| <= 43 * 127, four a 16-bit lane)
  constexpr int PER16 = five_bit<F>() ? 8 : SPLIT ? 4 : 2;  // (SPLIT flushes every 4 steps)
  for (int hr = 0; hr < 2; ++hr) {
    uint8x16_t w[8];
    block_steps<F>(wb, hr, w);
    int32x4_t o[R][2];
    for (int r = 0; r < R; ++r) o[r][0] = s[r][hr][0], o[r][1] = s[r][hr][1];
    step_sums<R, SPLIT, PER16>(w, xq, o);
    for (int r = 0; r < R; ++r) s[r][hr][0] = o[r][0], s[r][hr][1] = o[r][1];
  }
}

// Rows [0, R) of a block: s[r][h] += the block's integer sums of rows 4h..4h+3 (one group).
template <Fmt F, int R>
inline void block_sums(const uint8_t* wb, const int8x16_t (*xq)[2], int32x4_t (*s)[2]) {
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  [[maybe_unused]] constexpr int STEPS = F == Fmt::Q8_0 ? 8 : 4;  // 32-byte steps in a group's block
#if defined(__ARM_FEATURE_MATMUL_INT8)
  constexpr int P = R / 2;  // pairs of rows through usmmla, then any last row through usdot
  if constexpr (P > 0) {
    int8x16_t xx[P][4];  // a pair's values 8p..8p+7, first row then second: usmmla's 8x2 operand
    for (int p = 0; p < P; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64x2_t a = vreinterpretq_s64_s8(xq[2 * p][h]), b = vreinterpretq_s64_s8(xq[2 * p + 1][h]);
        xx[p][2 * h] = vreinterpretq_s8_s64(vzip1q_s64(a, b));
        xx[p][2 * h + 1] = vreinterpretq_s8_s64(vzip2q_s64(a, b));
      }
    int32x4_t m[P][2][2];  // [pair][half][rows 01 | 23 of the half]: lanes (w0 x0, w0 x1, w1 x0, w1 x1)
    for (int p = 0; p < P; ++p)
      for (int h = 0; h < 2; ++h) m[p][h][0] = m[p][h][1] = vdupq_n_s32(0);
    // two steps of 4 values -> each row's 8 consecutive values (rows 0-1 | 2-3 of the half)
    auto mm = [&](int h, int vp, uint8x16_t s0, uint8x16_t s1) {
      const uint8x16_t a = vreinterpretq_u8_u32(vzip1q_u32(vreinterpretq_u32_u8(s0), vreinterpretq_u32_u8(s1)));
      const uint8x16_t b = vreinterpretq_u8_u32(vzip2q_u32(vreinterpretq_u32_u8(s0), vreinterpretq_u32_u8(s1)));
      for (int p = 0; p < P; ++p) {
        m[p][h][0] = vusmmlaq_s32(m[p][h][0], a, xx[p][vp]);
        m[p][h][1] = vusmmlaq_s32(m[p][h][1], b, xx[p][vp]);
      }
    };
    for (int h = 0; h < 2; ++h) {
      if constexpr (F == Fmt::Q8_0) {
        for (int vp = 0; vp < 4; ++vp) mm(h, vp, vld1q_u8(wb + 64 * vp + 16 * h), vld1q_u8(wb + 64 * vp + 32 + 16 * h));
      } else {  // steps 2v, 2v + 1: low nibbles are values 8v.., high ones 16 + 8v..
        for (int v = 0; v < 2; ++v) {
          const uint8x16_t r0 = vld1q_u8(wb + 64 * v + 16 * h), r1 = vld1q_u8(wb + 64 * v + 32 + 16 * h);
          mm(h, v, vandq_u8(r0, m4), vandq_u8(r1, m4));
          mm(h, 2 + v, vshrq_n_u8(r0, 4), vshrq_n_u8(r1, 4));
        }
      }
    }
    for (int p = 0; p < P; ++p)
      for (int h = 0; h < 2; ++h) {
        s[2 * p][h] = vaddq_s32(s[2 * p][h], vuzp1q_s32(m[p][h][0], m[p][h][1]));
        s[2 * p + 1][h] = vaddq_s32(s[2 * p + 1][h], vuzp2q_s32(m[p][h][0], m[p][h][1]));
      }
  }
  if constexpr (R % 2 == 1) {
    constexpr int r = R - 1;
    unroll([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t raw = vld1q_u8(wb + 32 * k + 16 * h);
        if constexpr (F == Fmt::Q8_0) {
          s[r][h] = vusdotq_laneq_s32(s[r][h], raw, xq[r][k / 4], k % 4);
        } else {
          s[r][h] = vusdotq_laneq_s32(s[r][h], vandq_u8(raw, m4), xq[r][0], k);
          s[r][h] = vusdotq_laneq_s32(s[r][h], vshrq_n_u8(raw, 4), xq[r][1], k);
        }
      }
    }, std::make_integer_sequence<int, STEPS>{});
  }
#elif defined(__ARM_FEATURE_DOTPROD)
  unroll([&](auto kc) {
    constexpr int k = decltype(kc)::value;
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t raw = vld1q_u8(wb + 32 * k + 16 * h);
      if constexpr (F == Fmt::Q8_0) {
        const int8x16_t w = vreinterpretq_s8_u8(veorq_u8(raw, vdupq_n_u8(0x80)));
        for (int r = 0; r < R; ++r) s[r][h] = vdotq_laneq_s32(s[r][h], w, xq[r][k / 4], k % 4);
      } else {
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, m4)), hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
        for (int r = 0; r < R; ++r) {
          s[r][h] = vdotq_laneq_s32(s[r][h], lo, xq[r][0], k);
          s[r][h] = vdotq_laneq_s32(s[r][h], hi, xq[r][1], k);
        }
      }
    }
  }, std::make_integer_sequence<int, STEPS>{});
#else
  // x values 4k..4k+3 in every 4-byte lane
  int8x16_t xv[R][8];
  unroll([&](auto kc) {
    constexpr int k = decltype(kc)::value;
    for (int r = 0; r < R; ++r)
      xv[r][k] = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(xq[r][k / 4]), k % 4));
  }, std::make_integer_sequence<int, 8>{});
  for (int h = 0; h < 2; ++h) {
    if constexpr (F == Fmt::Q8_0) {  // |w x| <= 128 * 127: two products a 16-bit lane
      int32x4_t a[R][2];
      for (int r = 0; r < R; ++r) a[r][0] = a[r][1] = vdupq_n_s32(0);
      for (int k = 0; k < 8; k += 2) {
        const int8x16_t w0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(wb + 32 * k + 16 * h), vdupq_n_u8(0x80)));
        const int8x16_t w1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(wb + 32 * k + 32 + 16 * h), vdupq_n_u8(0x80)));
        for (int r = 0; r < R; ++r) {
          int16x8_t p0 = vmull_s8(vget_low_s8(w0), vget_low_s8(xv[r][k]));  // rows 0-1 of the half
          int16x8_t p1 = vmull_high_s8(w0, xv[r][k]);                       // rows 2-3
          p0 = vmlal_s8(p0, vget_low_s8(w1), vget_low_s8(xv[r][k + 1]));
          p1 = vmlal_high_s8(p1, w1, xv[r][k + 1]);
          a[r][0] = vpadalq_s16(a[r][0], p0);
          a[r][1] = vpadalq_s16(a[r][1], p1);
        }
      }
      for (int r = 0; r < R; ++r) s[r][h] = vaddq_s32(s[r][h], vpaddq_s32(a[r][0], a[r][1]));
    } else {  // |u x| <= 15 * 127: all eight products of a lane in 16 bits
      int16x8_t p[R][2];
      for (int r = 0; r < R; ++r) p[r][0] = p[r][1] = vdupq_n_s16(0);
      for (int k = 0; k < 4; ++k) {
        const uint8x16_t raw = vld1q_u8(wb + 32 * k + 16 * h);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, m4)), hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
        for (int r = 0; r < R; ++r) {
          p[r][0] = vmlal_s8(p[r][0], vget_low_s8(lo), vget_low_s8(xv[r][k]));
          p[r][1] = vmlal_high_s8(p[r][1], lo, xv[r][k]);
          p[r][0] = vmlal_s8(p[r][0], vget_low_s8(hi), vget_low_s8(xv[r][k + 4]));
          p[r][1] = vmlal_high_s8(p[r][1], hi, xv[r][k + 4]);
        }
      }
      for (int r = 0; r < R; ++r)
        s[r][h] = vaddq_s32(s[r][h], vpaddq_s32(vpaddlq_s16(p[r][0]), vpaddlq_s16(p[r][1])));
    }
  }
#endif
}

inline void load_scales(const uint16_t* p, float32x4_t* v) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  v[0] = vcvt_f32_f16(vget_low_f16(h));
  v[1] = vcvt_high_f32_f16(h);
}

// Block b's scales for the 8 rows of group g (rows 0-3 | 4-7): each row's value is dw * u + coef
// for its stored unsigned u (the x86 tile's block_scales, lane for lane).
template <Fmt F>
PW_INLINE void block_scales(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, float32x4_t* dw,
                            float32x4_t* coef) {
  if constexpr (expanded_scales<F>()) {  // (wm unused: wd is the chunk's expanded scales)
    const float* f = (const float*)wd + ((size_t)b * G + g) * 2 * GROUP;
    dw[0] = vld1q_f32(f), dw[1] = vld1q_f32(f + 4), coef[0] = vld1q_f32(f + 8), coef[1] = vld1q_f32(f + 12);
  } else if constexpr (k_scales<F>()) {
    float f[2 * GROUP];
    decode_q4k(q4k_at(wd, wm, b, g, G), f);
    dw[0] = vld1q_f32(f), dw[1] = vld1q_f32(f + 4), coef[0] = vld1q_f32(f + 8), coef[1] = vld1q_f32(f + 12);
  } else if constexpr (F == Fmt::IQ4_XS) {  // d (ls - 32), the 6-bit ls decoded 4 rows at a time
    const SuperScales s = iq4xs_at(wd, wm, b, g, G);
    uint32_t lo;
    uint16_t hi;
    std::memcpy(&lo, s.m + 4 * s.j, 4), std::memcpy(&hi, s.m + 32 + 2 * s.j, 2);
    float32x4_t d[2];
    load_scales(s.d, d);
    const int32x4_t sl[2] = {{0, -8, -16, -24}, {-4, -12, -20, -28}};  // (right shifts are negative left ones)
    const int32x4_t sh[2] = {{0, -2, -4, -6}, {-8, -10, -12, -14}};
    for (int h = 0; h < 2; ++h) {
      const uint32x4_t l = vandq_u32(vshlq_u32(vdupq_n_u32(lo), sl[h]), vdupq_n_u32(15));
      const uint32x4_t t = vandq_u32(vshlq_u32(vdupq_n_u32(hi), sh[h]), vdupq_n_u32(3));
      const int32x4_t ls = vsubq_s32(vreinterpretq_s32_u32(vorrq_u32(l, vshlq_n_u32(t, 4))), vdupq_n_s32(32));
      dw[h] = vmulq_f32(d[h], vcvtq_f32_s32(ls));
      coef[h] = vmulq_n_f32(dw[h], -128.f);
    }
  } else {
    load_scales(wd + ((size_t)b * G + g) * GROUP, dw);
    if constexpr (F == Fmt::Q4_1 || F == Fmt::Q5_1) {
      load_scales(wm + ((size_t)b * G + g) * GROUP, coef);
    } else {
      constexpr float off = F == Fmt::Q8_0 || F == Fmt::IQ4_NL ? -128.f : F == Fmt::Q5_0 ? -16.f : -8.f;
      for (int h = 0; h < 2; ++h) coef[h] = vmulq_n_f32(dw[h], off);
    }
  }
}

// The scales of q6_k block b's two halves for the 8 rows of group g (the x86 tile's half_scales,
// lane for lane): dw[h][hr] (rows 4hr..4hr+3).
template <Fmt F>
PW_INLINE void half_scales(const uint16_t* wd, const uint16_t* wm, int b, int g, int G, float32x4_t (*dw)[2]) {
  if constexpr (F == Fmt::Q6_K) {
    const Q6KScales s = q6k_at(wd, wm, b, g, G);
    float32x4_t d[2];
    load_scales(s.d, d);
    for (int h = 0; h < 2; ++h) {
      const int16x8_t sc = vmovl_s8(vld1_s8(s.sc + GROUP * h));
      dw[h][0] = vmulq_f32(d[0], vcvtq_f32_s32(vmovl_s16(vget_low_s16(sc))));
      dw[h][1] = vmulq_f32(d[1], vcvtq_f32_s32(vmovl_high_s16(sc)));
    }
  } else {
    static_assert(F != F, "half_scales: q6_k only");
  }
}

// A q3_k block's 12 scale bytes as ls - 32 of rows 4hr..4hr+3, ls[h][hr] for its halves h (the
// x86 tiles' q3k_pairs, one tbl a row half).
PW_INLINE void q3k_ls(const uint8_t* p, int32x4_t (*ls)[2]) {
  uint64_t lo;
  uint32_t hi;
  std::memcpy(&lo, p, 8), std::memcpy(&hi, p + 8, 4);
  const uint8x16_t v = vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
  alignas(16) static constexpr uint8_t IDX[2][16] = {{0, 1, 255, 255, 1, 2, 255, 255, 3, 4, 255, 255, 4, 5, 255, 255},
                                                     {6, 7, 255, 255, 7, 8, 255, 255, 9, 10, 255, 255, 10, 11, 255, 255}};
  const int32x4_t odd = {0, -4, 0, -4};  // (right shifts are negative left ones)
  for (int hr = 0; hr < 2; ++hr) {
    const uint32x4_t t = vshlq_u32(vreinterpretq_u32_u8(vqtbl1q_u8(v, vld1q_u8(IDX[hr]))), odd);
    ls[0][hr] = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(t, vdupq_n_u32(63))), vdupq_n_s32(32));
    ls[1][hr] = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(t, 6), vdupq_n_u32(63))), vdupq_n_s32(32));
  }
}

template <Fmt F, int R, int G>
void tile(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
          int64_t out_stride) {
  // Where the scales are decoded from bit fields (q4_k, q5_k and iq4_xs on a decode step's tile)
  // the offsets' term runs in the main loop on the same decode, not in a second pass that would
  // decode them again (the same fused chain per lane either way).
  constexpr bool FOLD = k_scales<F>() || F == Fmt::IQ4_XS || iq3<F>() || iq12<F>();  // (iq12: tail 0)
  float32x4_t acc[R][G][2];
  [[maybe_unused]] float32x4_t ftail[FOLD ? R : 1][FOLD ? G : 1][2];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g][0] = acc[r][g][1] = vdupq_n_f32(0.f);
  if constexpr (FOLD)
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) ftail[r][g][0] = ftail[r][g][1] = vdupq_n_f32(0.f);
  for (int b = 0; b < nb; ++b) {
    int8x16_t xq[R][2];
    for (int r = 0; r < R; ++r) xq[r][0] = vld1q_s8(x[r].q + b * QK), xq[r][1] = vld1q_s8(x[r].q + b * QK + 16);
    for (int g = 0; g < G; ++g) {
      if constexpr (iq12<F>()) {  // the x86 tiles' integers: (2 ls0 + 1) s0 + (2 ls1 + 1) s1, exact, then d / 8 d_x
        const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
        int32x4_t s[R][2][2];
        for (int r = 0; r < R; ++r)
          for (int hr = 0; hr < 2; ++hr) s[r][hr][0] = s[r][hr][1] = vdupq_n_s32(0);
        block_sums_steps<F, R>(wb, xq, s);
        float32x4_t d[2];
        load_scales(super_at<GROUP, 0>(wd, wd, b, g, G).d, d);
        int32x4_t mh[2][2];  // [half][hr]
        for (int h = 0; h < 2; ++h)
          for (int hr = 0; hr < 2; ++hr) {
            const int32x4_t m = {iq12_mult<F>(wb, 4 * hr, h), iq12_mult<F>(wb, 4 * hr + 1, h), iq12_mult<F>(wb, 4 * hr + 2, h),
                                 iq12_mult<F>(wb, 4 * hr + 3, h)};
            mh[h][hr] = m;
          }
        for (int r = 0; r < R; ++r) {
          // usdot/usmmla summed w8 + 128: 128 sum(x) off each half
          const int32x4_t off0 = vdupq_n_s32(kQ8Signed ? 0 : 128 * x[r].n16[2 * b]);
          const int32x4_t off1 = vdupq_n_s32(kQ8Signed ? 0 : 128 * x[r].n16[2 * b + 1]);
          for (int hr = 0; hr < 2; ++hr) {
            const int32x4_t i = vmlaq_s32(vmulq_s32(vsubq_s32(s[r][hr][0], off0), mh[0][hr]), vsubq_s32(s[r][hr][1], off1), mh[1][hr]);
            acc[r][g][hr] = vfmaq_f32(acc[r][g][hr], vcvtq_f32_s32(i), vmulq_n_f32(vmulq_n_f32(d[hr], 0.125f), x[r].d[b]));
          }
        }
        continue;
      }
      if constexpr (halves16<F>()) {  // each half of 16 values: sum((q - off) x) = sum(q x) - off sum(x), in order
        int32x4_t s[R][2][2];
        for (int r = 0; r < R; ++r)
          for (int hr = 0; hr < 2; ++hr) s[r][hr][0] = s[r][hr][1] = vdupq_n_s32(0);
        block_sums_steps<F, R>(wq + ((size_t)b * G + g) * block_bytes<F>(), xq, s);
        if constexpr (F == Fmt::Q3_K) {  // sum over the halves of (ls - 32) (sum(q x) - 4 sum(x)), exact, then d d_x
          const SuperScales sc = q3k_at(wd, wm, b, g, G);
          int32x4_t ls[2][2];
          q3k_ls(sc.m + 12 * sc.j, ls);
          float32x4_t d[2];
          load_scales(sc.d, d);
          for (int r = 0; r < R; ++r) {
            const int32x4_t off0 = vdupq_n_s32(4 * x[r].n16[2 * b]), off1 = vdupq_n_s32(4 * x[r].n16[2 * b + 1]);
            for (int hr = 0; hr < 2; ++hr) {
              const int32x4_t i = vmlaq_s32(vmulq_s32(vsubq_s32(s[r][hr][0], off0), ls[0][hr]), vsubq_s32(s[r][hr][1], off1), ls[1][hr]);
              acc[r][g][hr] = vfmaq_f32(acc[r][g][hr], vcvtq_f32_s32(i), vmulq_n_f32(d[hr], x[r].d[b]));
            }
          }
        } else if constexpr (F == Fmt::Q2_K) {  // the x86 tiles' integers: sc sum(q x) and -mn sum(x) over the halves
          const SuperScales sc = q2k_at(wd, wm, b, g, G);
          int32x4_t scl[2][2], mnl[2][2];  // [half][hr]
          for (int h = 0; h < 2; ++h) {
            const uint16x8_t v = vmovl_u8(vld1_u8(sc.m + 16 * sc.j + GROUP * h));
            const uint16x8_t lo = vandq_u16(v, vdupq_n_u16(15)), hi = vshrq_n_u16(v, 4);
            scl[h][0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))), scl[h][1] = vreinterpretq_s32_u32(vmovl_high_u16(lo));
            mnl[h][0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))), mnl[h][1] = vreinterpretq_s32_u32(vmovl_high_u16(hi));
          }
          float32x4_t d[2], dmin[2];
          load_scales(sc.d, d), load_scales(sc.d + GROUP, dmin);
          for (int r = 0; r < R; ++r) {
            const int32_t n0 = x[r].n16[2 * b], n1 = x[r].n16[2 * b + 1];
            for (int hr = 0; hr < 2; ++hr) {
              const int32x4_t i = vmlaq_s32(vmulq_s32(s[r][hr][0], scl[0][hr]), s[r][hr][1], scl[1][hr]);
              const int32x4_t m = vmlaq_n_s32(vmulq_n_s32(mnl[0][hr], -n0), mnl[1][hr], -n1);
              const float32x4_t t = vfmaq_f32(vmulq_f32(vcvtq_f32_s32(i), d[hr]), vcvtq_f32_s32(m), dmin[hr]);
              acc[r][g][hr] = vfmaq_n_f32(acc[r][g][hr], t, x[r].d[b]);  // (x86's row_step)
            }
          }
        } else {
          float32x4_t hdw[2][2];
          half_scales<F>(wd, wm, b, g, G, hdw);
          for (int r = 0; r < R; ++r)  // (x86's row_step: s0 hdw0 + s1 hdw1, then times d_x)
            for (int hr = 0; hr < 2; ++hr) {
              float32x4_t f[2];
              for (int v = 0; v < 2; ++v) {
                int32x4_t sv = s[r][hr][v];
                if constexpr (half_offset<F>() != 0) sv = vsubq_s32(sv, vdupq_n_s32(half_offset<F>() * x[r].n16[2 * b + v]));
                f[v] = vcvtq_f32_s32(sv);
              }
              const float32x4_t t = vfmaq_f32(vmulq_f32(f[0], hdw[0][hr]), f[1], hdw[1][hr]);
              acc[r][g][hr] = vfmaq_n_f32(acc[r][g][hr], t, x[r].d[b]);
            }
        }
        continue;
      }
      int32x4_t s[R][2];
      if constexpr (five_bit<F>() || iq4<F>() || iq3<F>()) {
        int32x4_t t[R][2][2];
        for (int r = 0; r < R; ++r)
          for (int hr = 0; hr < 2; ++hr) t[r][hr][0] = t[r][hr][1] = vdupq_n_s32(0);
        block_sums_steps<F, R>(wq + ((size_t)b * G + g) * block_bytes<F>(), xq, t);
        for (int r = 0; r < R; ++r) s[r][0] = t[r][0][0], s[r][1] = t[r][1][0];
      } else {
        for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = vdupq_n_s32(0);
        block_sums<F, R>(wq + ((size_t)b * G + g) * block_bytes<F>(), xq, s);
      }
      float32x4_t dw[2], coef[2];
      if constexpr (iq3<F>()) {  // the x86 tiles' db and -128 db
        const uint8_t* wb = wq + ((size_t)b * G + g) * block_bytes<F>();
        float32x4_t d[2];
        load_scales(super_at<GROUP, 0>(wd, wd, b, g, G).d, d);
        for (int h = 0; h < 2; ++h) {
          const int32x4_t ls = {2 * iq3_ls<F>(wb, 4 * h) + 1, 2 * iq3_ls<F>(wb, 4 * h + 1) + 1,
                                2 * iq3_ls<F>(wb, 4 * h + 2) + 1, 2 * iq3_ls<F>(wb, 4 * h + 3) + 1};
          dw[h] = vmulq_f32(d[h], vcvtq_f32_s32(ls));
          if constexpr (F == Fmt::IQ3_XXS) dw[h] = vmulq_n_f32(dw[h], 0.25f);
          coef[h] = vmulq_n_f32(dw[h], -128.f);
        }
      } else {
        block_scales<F>(wd, wm, b, g, G, dw, coef);
      }
      for (int r = 0; r < R; ++r) {
        // sum((u - off) x) = sum(u x) - off sum(x), where the dot product took (u - 128) (signed_u)
        // or u itself
        constexpr int shift = block_offset<F>() - (signed_u<F>() ? 128 : 0);
        if constexpr (shift != 0) {
          const int32x4_t off = vdupq_n_s32(shift * x[r].n[b]);
          s[r][0] = vsubq_s32(s[r][0], off), s[r][1] = vsubq_s32(s[r][1], off);
        }
        for (int h = 0; h < 2; ++h)
          acc[r][g][h] = vfmaq_f32(acc[r][g][h], vcvtq_f32_s32(s[r][h]), vmulq_n_f32(dw[h], x[r].d[b]));
        if constexpr (FOLD && block_offset<F>() == 0)
          for (int h = 0; h < 2; ++h) ftail[r][g][h] = vfmaq_n_f32(ftail[r][g][h], coef[h], x[r].s[b]);
      }
    }
  }
  if constexpr (FOLD) {
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g)
        for (int h = 0; h < 2; ++h) vst1q_f32(out + r * out_stride + g * GROUP + 4 * h, vaddq_f32(acc[r][g][h], ftail[r][g][h]));
    return;
  }
  for (int g = 0; g < G; ++g) {
    float32x4_t tail[R][2];
    for (int r = 0; r < R; ++r) tail[r][0] = tail[r][1] = vdupq_n_f32(0.f);
    // (q6_k, q3_k and q2_k, whose mins join the sum in the main loop, and the formats whose
    // offset comes off the integer sums, have no tail: theirs stays 0, as x86's)
    if constexpr (!halves16<F>() && block_offset<F>() == 0)
      for (int b = 0; b < nb; ++b) {
        float32x4_t dw[2], coef[2];
        block_scales<F>(wd, wm, b, g, G, dw, coef);
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < 2; ++h) tail[r][h] = vfmaq_n_f32(tail[r][h], coef[h], x[r].s[b]);
      }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) vst1q_f32(out + r * out_stride + g * GROUP + 4 * h, vaddq_f32(acc[r][g][h], tail[r][h]));
  }
}
#else
template <Fmt F, int R, int G>
void tile(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
          int64_t out_stride) {
  tile_scalar<F, R, G>(wq, wd, wm, x, nb, out, out_stride);
}
#endif

// Runs fn(chunk) for every chunk in [0, n). The range is cut into one contiguous segment per
// participant (the calling thread and up to pool size - 1 helpers); each works through its own
// segment in order, then takes what is left of the others'. Two things made this faster than
// every participant claiming the next chunk from one shared counter: a thread reads one
// sequential stream of weights (the hardware prefetcher keeps up; interleaved 17 KB chunks
// retrain it every chunk), and a claim touches a counter no other core is using (one shared
// counter, and a shared "done" count, moved their cache line between the cores twice a chunk).
// In a harness of the SmolLM2-360M step's 128 Q4_0 products on this 2-core machine, five runs
// each: 5.2-5.9 ms a step against 7.7-8.7 ms.
// A helper that starts late finds its segment taken and returns, so the caller never waits on a
// task that has not begun (no deadlock when the helpers are busy or gone), and it only waits for
// chunks already being computed.
// A job lives on its caller's stack and allocates nothing. Heap-allocated jobs (a few hundred a
// decode step, often freed by the helper thread) grew RSS by ~1.4 KB a token over one long
// reply (tests/engine/test_session.py's 2,500 tokens, after the other engine tests); the
// caller therefore retracts the job and waits until no helper holds it before it returns.
struct Job {
  static constexpr int MAX_SEGMENTS = 16;
  struct alignas(64) Segment {
    std::atomic<int> next{0};
    int end = 0;
  };
  Segment seg[MAX_SEGMENTS];
  alignas(64) std::atomic<int> joined{1};  // participants so far: the caller holds segment 0
  std::atomic<int> done{0};
  std::atomic<int> inside{0};  // helpers holding this job
  int segments = 1;
  void (*call)(void*, int) = nullptr;
  void* ctx = nullptr;
  void split(int n, int parts) {
    segments = std::max(1, std::min(parts, MAX_SEGMENTS));
    for (int i = 0; i < segments; ++i) {
      seg[i].next.store((int)((int64_t)n * i / segments), std::memory_order_relaxed);
      seg[i].end = (int)((int64_t)n * (i + 1) / segments);
    }
  }
  // Segment `own` first, then the others in turn; the chunks done are counted once, at the end.
  void work(int own) {
    int count = 0;
    for (int k = 0; k < segments; ++k) {
      Segment& sg = seg[(own + k) % segments];
      for (int i; (i = sg.next.fetch_add(1, std::memory_order_relaxed)) < sg.end; ++count) call(ctx, i);
    }
    if (count) done.fetch_add(count, std::memory_order_release);
  }
  void join() { work(joined.fetch_add(1, std::memory_order_relaxed) % segments); }
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

int thread_cap() {
  static const int cap = std::max(1, env_int("PINWHEEL_KERNEL_THREADS", 1 << 20));
  return cap;
}

// One T per process, never destroyed (threads may use it until exit); a forked child, which has
// none of the parent's other threads and may have inherited a lock one of them held, gets a
// fresh one.
template <class T>
T& per_process() {
  static T* instance = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    instance = new T;
#if !defined(_WIN32)
    pthread_atfork(nullptr, nullptr, [] { instance = new T; });
#endif
  });
  return *instance;
}

// Helper threads of our own, which spin for a while after each job before they sleep. XLA's
// pool wakes a sleeping worker in ~18 us on the 2-core machine (measured from the call to the
// helper's first chunk), while a decode step at the SmolLM2-360M shape is 160 products of
// 30-140 us each: the second core joined each one late, and two threads ran the step only 1.3x
// faster than one. In a step the next call comes a few microseconds after the last, so a
// spinning helper is there at once; it sleeps once the step is over (PINWHEEL_KERNEL_SPIN_US,
// default 300), yielding its core to any other runnable thread while it spins.
class Helpers {
 public:
  static Helpers& get() { return per_process<Helpers>(); }
  // Hands the job to n helpers (started on first use); any that is busy simply joins late.
  void post(Job* job, int n) {
    std::lock_guard<std::mutex> lk(m_);
    for (; started_ < n; ++started_) std::thread([this] { loop(); }).detach();
    job_ = job;
    gen_.fetch_add(1, std::memory_order_release);
    if (sleeping_) cv_.notify_all();
  }
  // After the job's last chunk: no helper takes it from now on; returns once none holds it.
  void retract(Job* job) {
    {
      std::lock_guard<std::mutex> lk(m_);
      if (job_ == job) job_ = nullptr;
    }
    // A helper still inside has at most a failed claim left; if it was preempted there, yield
    // the core to it rather than spin out its time slice.
    for (int i = 0; job->inside.load(std::memory_order_acquire) > 0; ++i) {
      if (i < 1000) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  void loop() {
    const auto spin = std::chrono::microseconds(std::max(0, env_int("PINWHEEL_KERNEL_SPIN_US", 300)));
    uint64_t seen = gen_.load(std::memory_order_acquire);
    for (;;) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; gen_.load(std::memory_order_acquire) == seen; ++i) {
        if (i % 64 != 63) {
          cpu_relax();
          continue;
        }
        const auto waited = std::chrono::steady_clock::now() - t0;
        if (waited < spin / 50) continue;
        if (waited < spin) {
          std::this_thread::yield();
          continue;
        }
        std::unique_lock<std::mutex> lk(m_);
        ++sleeping_;
        cv_.wait(lk, [&] { return gen_.load(std::memory_order_acquire) != seen; });
        --sleeping_;
        break;
      }
      Job* job;
      {
        std::lock_guard<std::mutex> lk(m_);
        seen = gen_.load(std::memory_order_acquire);
        job = job_;
        if (job) job->inside.fetch_add(1, std::memory_order_relaxed);
      }
      if (job) {
        job->join();
        job->inside.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};
  Job* job_ = nullptr;  // the latest job still open (guarded by m_)
  int started_ = 0, sleeping_ = 0;
};

// pool_threads: the size of XLA's intra-op pool (the caller's share of the machine).
template <class F>
void parallel_for(int pool_threads, int n, F&& fn) {
  const int helpers = std::min<int64_t>(std::min<int64_t>(pool_threads, thread_cap()), n) - 1;
  if (helpers <= 0) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.split(n, helpers + 1);
  job.ctx = &fn;
  job.call = [](void* f, int i) { (*static_cast<std::remove_reference_t<F>*>(f))(i); };
  Helpers::get().post(&job, helpers);
  job.work(0);
  while (job.done.load(std::memory_order_acquire) < n) cpu_relax();
  Helpers::get().retract(&job);
}

// x * rsqrt(mean(x^2) + eps) * g, one row, with the sum of squares in a fixed order (so the
// result does not depend on how many rows the call carries, as XLA's reductions may).
void rms_norm_row(const float* x, const float* g, int n, float eps, float* out) {
  float ss = 0.f;
#if defined(PW_VEC8)
  vf8 acc = v8_zero();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const vf8 v = v8_load(x + i);
    acc = v8_fma(v, v, acc);
  }
  ss = hsum8(acc);
  for (; i < n; ++i) ss += x[i] * x[i];
#else
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
#endif
  const float r = 1.f / std::sqrt(ss / (float)n + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * r * g[i];
}

// One chunk of G groups of f16 or bf16 weights against R f32 rows of x: value j of the 8 rows
// of a group as f32 lanes, fused into each row's accumulator in value order (see the layout).
[[maybe_unused]] inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
template <Fmt F, int R, int G>
void tile_float(const uint8_t* wq, const QRow* x, int nb, float* out, int64_t out_stride) {
  const uint16_t* w = (const uint16_t*)wq;
#if defined(__AVX2__)
  __m256 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < G; ++g) {
      const uint16_t* wb = w + ((size_t)b * G + g) * QK * GROUP;
      for (int j = 0; j < QK; ++j) {
        const __m128i h = _mm_loadu_si128((const __m128i*)(wb + GROUP * j));
        const __m256 v = F == Fmt::F16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        for (int r = 0; r < R; ++r) acc[r][g] = _mm256_fmadd_ps(v, _mm256_set1_ps(x[r].f[b * QK + j]), acc[r][g]);
      }
    }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + r * out_stride + g * GROUP, acc[r][g]);
#elif defined(__SSE4_1__) && !defined(PW_NEON)
  vd4 acc[R][G][2];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g][0] = acc[r][g][1] = d4_zero();
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < G; ++g) {
      const uint16_t* wb = w + ((size_t)b * G + g) * QK * GROUP;
      for (int j = 0; j < QK; ++j)
        for (int h = 0; h < 2; ++h) {
          const uint16_t* p = wb + GROUP * j + 4 * h;
          const __m128 v = F == Fmt::F16 ? half4(p) : _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i*)p)), 16));
          const vd4 vd = d4_from(v);
          for (int r = 0; r < R; ++r) {
            const __m128d xd = _mm_set1_pd((double)x[r].f[b * QK + j]);
            acc[r][g][h] = fma_exact(vd, {xd, xd}, acc[r][g][h]);
          }
        }
    }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int h = 0; h < 2; ++h) _mm_storeu_ps(out + r * out_stride + g * GROUP + 4 * h, d4_to(acc[r][g][h]));
#elif defined(PW_NEON)
  float32x4_t acc[R][G][2];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g][0] = acc[r][g][1] = vdupq_n_f32(0.f);
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < G; ++g) {
      const uint16_t* wb = w + ((size_t)b * G + g) * QK * GROUP;
      for (int j = 0; j < QK; ++j) {
        const uint16x8_t h = vld1q_u16(wb + GROUP * j);
        float32x4_t v[2];
        if constexpr (F == Fmt::F16) {
          const float16x8_t hf = vreinterpretq_f16_u16(h);
          v[0] = vcvt_f32_f16(vget_low_f16(hf)), v[1] = vcvt_high_f32_f16(hf);
        } else {
          v[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), v[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
        }
        for (int r = 0; r < R; ++r) {
          const float xv = x[r].f[b * QK + j];
          acc[r][g][0] = vfmaq_n_f32(acc[r][g][0], v[0], xv), acc[r][g][1] = vfmaq_n_f32(acc[r][g][1], v[1], xv);
        }
      }
    }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int h = 0; h < 2; ++h) vst1q_f32(out + r * out_stride + g * GROUP + 4 * h, acc[r][g][h]);
#else
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r)
      for (int row = 0; row < GROUP; ++row) {
        float acc = 0.f;
        for (int b = 0; b < nb; ++b)
          for (int j = 0; j < QK; ++j) {
            const uint16_t h = w[((size_t)b * G + g) * QK * GROUP + GROUP * j + row];
            acc = std::fma(F == Fmt::F16 ? half_to_float(h) : bf16_to_float(h), x[r].f[b * QK + j], acc);
          }
        out[r * out_stride + g * GROUP + row] = acc;
      }
#endif
}

// Row tiles of the products: R rows of x a tile (4 for one-group chunks, else 2: about as many
// accumulators as the registers hold), then one at a time. NEON without dotprod holds each x
// row's 8 broadcast steps in registers as well, so it takes half as many; so does SSE (16
// registers of 128 bits).
#if (defined(PW_NEON) && !defined(__ARM_FEATURE_DOTPROD)) || (defined(__SSE4_1__) && !defined(__AVX2__))
constexpr int tile_rows(int K) { return K == 1 ? 2 : 1; }
#else
constexpr int tile_rows(int K) { return K == 1 ? 4 : 2; }
#endif

// y [C, O] = x [C, I] times layer l's weight: wq, wd, wm point at that layer ([O/8/K, I/32,
// K * block bytes] and [O/8/K, I/32, K * 8]; K groups a chunk, see the layout above); norm is
// the layer's [I] RMS-norm weights applied to x first, or null.
template <Fmt F>
void qmatmul_rows(int pool_threads, const float* x, int64_t C, int64_t I, const uint8_t* q_base,
                  const uint16_t* d_base, const uint16_t* m_base, int64_t n_chunks, int K, const float* norm,
                  float eps, float* out) {
  const int64_t O = n_chunks * K * GROUP;
  const int nb = (int)(I / QK);
  // This thread's buffers, reached through plain pointers: the tasks below may run on helper
  // threads, whose thread_local instances are others.
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d, s, xf_rows;
  thread_local std::vector<int32_t> n, n16;
  thread_local std::vector<QRow> rows;
  if constexpr (float_w<F>()) {
    rows.resize(C);
    if (norm) xf_rows.resize(C * I);
  } else {
    q.resize(C * I), d.resize(C * nb), s.resize(C * nb), n.resize(C * nb), rows.resize(C);
    if (halves16<F>() || iq12<F>()) n16.resize(C * 2 * nb);
  }
  int8_t* qp = q.data();
  float *dp = d.data(), *sp = s.data(), *xfp = xf_rows.data();
  int32_t *np = n.data(), *n16p = halves16<F>() || iq12<F>() ? n16.data() : nullptr;
  QRow* rp = rows.data();
  const QRow* xr = rows.data();
#if defined(__AVX2__)
  // The rows the packed tiles take (AVX-512: 16 a tile, then 8, then 4; AVX2: packed_rows), re-laid for
  // every chunk's tiles; each packed tile starts at a multiple of its row count, so of 4.
#if defined(PW_TILE512)
  const int64_t CP = float_w<F>() || K % 2 ? 0 : C / 16 * 16 + C % 16 / 4 * 4;
#else
  const int64_t CP = float_w<F>() || C <= tile_rows(K) ? 0 : C / packed_rows<F>() * packed_rows<F>();
#endif
  thread_local std::vector<int32_t> xi_pack;
  thread_local std::vector<float> xf_pack;
  xi_pack.resize((size_t)CP * nb * 11), xf_pack.resize((size_t)CP * nb * 2);
  int32_t* xip = xi_pack.data();
  float* xfpk = xf_pack.data();
#endif
  // x's rows normed, quantized and packed, 16 rows a task (a pass of tile512, two of the AVX2
  // packed tiles), on the pool: done by the calling thread alone, this took ~12% of a 64-row
  // product at I = 8,192 on two threads. Each row's numbers do not depend on the task, so the
  // bits are the serial loop's.
  constexpr int PREP = 16;
  // (a task packs only rows it prepared: every packed tile starts at a multiple of 4 or 8 and
  // tile512's 16-row tiles at multiples of 16, so none straddles two tasks)
  static_assert(PREP % 16 == 0, "a packed tile must not straddle two preparation tasks");
  parallel_for(pool_threads, (int)((C + PREP - 1) / PREP), [&](int task) {
    const int64_t c0 = (int64_t)task * PREP, c1 = std::min<int64_t>(C, c0 + PREP);
    thread_local std::vector<float> xn;
    for (int64_t c = c0; c < c1; ++c) {
      const float* xc = x + c * I;
      if constexpr (float_w<F>()) {  // f16 / bf16: x as it is (normed where asked), f32
        if (norm) rms_norm_row(xc, norm, (int)I, eps, xfp + c * I);
        rp[c] = QRow{nullptr, nullptr, nullptr, nullptr, nullptr, norm ? xfp + c * I : xc};
        continue;
      }
      if (norm) {
        xn.resize(I);
        rms_norm_row(xc, norm, (int)I, eps, xn.data());
        xc = xn.data();
      }
      int32_t* h16 = n16p ? n16p + c * 2 * nb : nullptr;
      quantize_row(xc, nb, qp + c * I, dp + c * nb, sp + c * nb, np + c * nb, h16);
      rp[c] = QRow{qp + c * I, dp + c * nb, sp + c * nb, np + c * nb, h16, nullptr};
    }
#if defined(__AVX2__)
    for (int64_t c = c0; c < std::min(c1, CP);) {
#if defined(PW_TILE512)
      const int R = c + 16 <= CP ? 16 : c + 8 <= CP ? 8 : 4;  // (the tiles' order below)
#else
      const int R = packed_rows<F>();
#endif
      pack_rows(rp + c, R, nb, xip + c * nb * 11, xfpk + c * nb * 2);
      c += R;
    }
#endif
  });
  const size_t chunk_q = (size_t)nb * K * block_bytes<F>(), chunk_d = d_per_chunk<F>(nb, K), chunk_m = m_per_chunk<F>(nb, K);
#if defined(__AVX2__)
  const int32_t* xi = xi_pack.data();  // (this thread's packs, for the helpers' lambda)
  const float* xf = xf_pack.data();
#endif
  // One task a chunk (32 output rows at K = 4): the unit of a 1-row tile, and fine enough to balance.
  parallel_for(pool_threads, (int)n_chunks, [&](int chunk) {
    const uint8_t* wg = q_base + chunk * chunk_q;
    const uint16_t* dg = d_base + chunk * chunk_d;
    const uint16_t* mg = m_base + chunk * chunk_m;
    float* oc = out + (int64_t)chunk * K * GROUP;
    // KK is the chunk width K as a constant, FF the format the tiles read.
    auto rows = [&](auto kk, auto ff) {
      constexpr int KK = decltype(kk)::value, R = tile_rows(KK);
      constexpr Fmt FF = decltype(ff)::value;
      int64_t c = 0;
      if constexpr (float_w<FF>()) {
        for (; c + R <= C; c += R) tile_float<FF, R, KK>(wg, xr + c, nb, oc + c * O, O);
        if constexpr (R > 1)
          for (; c < C; ++c) tile_float<FF, 1, KK>(wg, xr + c, nb, oc + c * O, O);
      } else {
#if defined(PW_TILE512)
        // 16 rows a pass (8 to 16 measured alike; 4 and 32 slower), then 8, then 4: an 8-row
        // verify step (a prompt's tail, a short turn, a draft) in one pass over the weights, not
        // two of 4 (Q5_K_M at the 1.7B shape, with the prefetch: 65-70 -> 58-64 ms a step)
        if constexpr (KK % 2 == 0) {
          for (; c + 16 <= C; c += 16) tile512<FF, 16, KK>(wg, dg, mg, xi + c * nb * 11, xf + c * nb * 2, nb, oc + c * O, O);
          for (; c + 8 <= C; c += 8) tile512<FF, 8, KK>(wg, dg, mg, xi + c * nb * 11, xf + c * nb * 2, nb, oc + c * O, O);
          for (; c + 4 <= C; c += 4) tile512<FF, 4, KK>(wg, dg, mg, xi + c * nb * 11, xf + c * nb * 2, nb, oc + c * O, O);
        }
#elif defined(__AVX2__)
        if (C > tile_rows(KK))
          for (; c + packed_rows<F>() <= C; c += packed_rows<F>())
            tile_packed<FF, packed_rows<F>(), KK>(wg, dg, mg, xi + c * nb * 11, xf + c * nb * 2, nb, oc + c * O, O);
#endif
        for (; c + R <= C; c += R) tile<FF, R, KK>(wg, dg, mg, xr + c, nb, oc + c * O, O);
        if constexpr (R > 1)
          for (; c < C; ++c) tile<FF, 1, KK>(wg, dg, mg, xr + c, nb, oc + c * O, O);
      }
    };
    auto widths = [&](auto ff) {
      if (K == 4) rows(std::integral_constant<int, 4>{}, ff);
      else if (K == 2) rows(std::integral_constant<int, 2>{}, ff);
      else rows(std::integral_constant<int, 1>{}, ff);
    };
    // q4_k: where a chunk takes more than one row tile, its scales are decoded once (to f32)
    // for all of them; a decode step's one tile decodes them as it goes, which keeps the
    // weights streaming (1.4x faster than decoding first, the 16384x2048 product from DRAM).
    if constexpr (k_scales<F>()) {
      if (C > tile_rows(K)) {
        thread_local std::vector<float> expanded;
        expanded.resize((size_t)nb * K * 2 * GROUP);
        expand_q4k(dg, mg, nb, K, expanded.data());
        dg = (const uint16_t*)expanded.data();
        return widths(std::integral_constant<Fmt, F == Fmt::Q4_K ? Fmt::Q4_KX : Fmt::Q5_KX>{});
      }
    }
    widths(std::integral_constant<Fmt, F>{});
  });
}

template <Fmt F>
ffi::Error qmatmul(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::AnyBuffer wq, ffi::AnyBuffer wd,
                   ffi::AnyBuffer wm, ffi::Buffer<ffi::S32> layer, ffi::Buffer<ffi::F32> norm, float eps,
                   ffi::ResultBuffer<ffi::F32> y) {
  // norm: [L, I] RMS-norm weights applied to x first (the layer's), or [0] for none.
  // x [C, I]; wq [L, O/8/K, I/32, K * block bytes]; wd, wm [L, O/8/K, I/32, K * 8]; y [C, O]
  // (K groups a chunk, see the layout above).
  const auto xd = x.dimensions();
  const auto qd = wq.dimensions();
  if (xd.size() != 2 || qd.size() != 4) return ffi::Error::InvalidArgument("qmatmul: x must be [C, I], w [L, O/8/K, I/32, .]");
  const int K = (int)(qd[3] / block_bytes<F>());
  const int64_t C = xd[0], I = xd[1], L = qd[0], n_chunks = qd[1];
  const int nb = (int)(I / QK);
  if (I % QK || qd[2] != nb || qd[3] != K * block_bytes<F>() || (K != 1 && K != 2 && K != 4))
    return ffi::Error::InvalidArgument("qmatmul: weight does not match x");
  const int l = layer.typed_data()[0];
  if (l < 0 || l >= L) return ffi::Error::InvalidArgument("qmatmul: layer index out of range");
  const bool has_norm = norm.element_count() > 0;
  if (has_norm && (int64_t)norm.element_count() != L * I) return ffi::Error::InvalidArgument("qmatmul: norm weights do not match");
  if (super_blocks<F>() && nb % BLOCKS_K) return ffi::Error::InvalidArgument("qmatmul: a K-quant needs whole super-blocks");
  const size_t chunk_q = (size_t)nb * K * block_bytes<F>();
  const size_t d_layer = n_chunks * d_per_chunk<F>(nb, K), m_layer = n_chunks * m_per_chunk<F>(nb, K);
  if ((size_t)wd.size_bytes() != (size_t)L * d_layer * 2 || (m_layer && (size_t)wm.size_bytes() != (size_t)L * m_layer * 2))
    return ffi::Error::InvalidArgument("qmatmul: scales do not match the weight");
  const uint8_t* q_base = (const uint8_t*)wq.untyped_data() + (size_t)l * n_chunks * chunk_q;
  const uint16_t* d_base = (const uint16_t*)wd.untyped_data() + (size_t)l * d_layer;
  const uint16_t* m_base = (const uint16_t*)wm.untyped_data() + (size_t)l * m_layer;
  qmatmul_rows<F>((int)pool.num_threads(), x.typed_data(), C, I, q_base, d_base, m_base, n_chunks, K,
                  has_norm ? norm.typed_data() + (size_t)l * I : nullptr, eps, y->typed_data());
  return ffi::Error::Success();
}

// --- attention over the bounded cache ---------------------------------------------------------
//
// out[c, h] = softmax over the keys row c may see (mask) of q.k / sqrt(hd), times V, where the
// keys are the cache's slots [0, S) and the chunk's own rows [S, S + C). Keys are visited in
// `order` (the host sorts them by stream position), and the visible ones are first gathered
// into a compact list; every sum then runs over that list with fixed instructions. A token
// therefore gets bit-identical attention whether it is a 1-row decode step (its predecessors in
// the cache) or row i of a speculative verify (its predecessors among the chunk's rows): the same
// keys, in the same order, with the same values. Sink keys are scored with the sink-rotated
// query (StreamingLLM's in-cache positions), the others with the window-rotated one.

enum class KV { I8, BF16, F32 };

// Scratch for a chunk's dequantized keys and values, shared by every thread that calls the
// kernel: XLA runs a step on any of its threads, and a thread_local copy on each of them stayed
// held after the settings changed (a few MB each at the default window, 6 MB at 4,096 slots).
// A buffer is taken for one call and given back, and one is kept between calls (two calls at
// once each get one; the second to end frees its own). It is reallocated when it is too small
// or more than twice what the call needs (a smaller window after Apply), so the memory held
// follows the current plan. Buffers over glibc's mmap threshold (1 MiB, engine/sysmem.py) go
// back to the system when freed.
class Scratch {
 public:
  explicit Scratch(size_t n) {
    {
      Pool& p = pool();
      std::lock_guard<std::mutex> lk(p.m);
      buf_.swap(p.kept);
    }
    if (buf_.size() < n || buf_.size() > 2 * n + 1024) std::vector<float>(n).swap(buf_);
  }
  ~Scratch() {
    {
      Pool& p = pool();
      std::lock_guard<std::mutex> lk(p.m);
      if (p.kept.empty()) buf_.swap(p.kept);
    }
    // (buf_, if still held, is freed here, outside the lock)
  }
  float* data() { return buf_.data(); }

 private:
  struct Pool {
    std::mutex m;
    std::vector<float> kept;
  };
  // (an XLA thread may still be inside a call at exit, and a child may inherit the mutex locked)
  static Pool& pool() { return per_process<Pool>(); }
  std::vector<float> buf_;
};

template <KV T>
inline void load_key(const void* cache, const float* scale, size_t row, int off, int hd, int kv_dim, float* dst) {
  if constexpr (T == KV::F32) {
    std::memcpy(dst, (const float*)cache + row * kv_dim + off, hd * sizeof(float));
  } else if constexpr (T == KV::BF16) {
    const uint16_t* src = (const uint16_t*)cache + row * kv_dim + off;
    for (int i = 0; i < hd; ++i) {
      const uint32_t bits = (uint32_t)src[i] << 16;
      std::memcpy(dst + i, &bits, 4);
    }
  } else {
    // A head may start inside a 32-value scale group (head size 16): index scales from the row.
    const int8_t* src = (const int8_t*)cache + row * kv_dim;
    const float* sc = scale + row * (kv_dim / QK);
#if defined(PW_VEC8)
    if (off % QK == 0 && hd % QK == 0) {  // whole scale groups (every head size but 16): 8 at a time
      for (int i = 0; i < hd; i += 8) {
        v8_store(dst + i, v8_mul(v8_from_i8(src + off + i), v8_set1(sc[(off + i) / QK])));
      }
      return;
    }
#endif
    for (int i = off; i < off + hd;) {
      const int end = std::min(off + hd, (i / QK + 1) * QK);
      const float sb = sc[i / QK];
      for (; i < end; ++i) dst[i - off] = (float)src[i] * sb;
    }
  }
}

inline float dot(const float* a, const float* b, int n) {
#if defined(PW_VEC8)
  vf8 acc = v8_zero();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = v8_fma(v8_load(a + i), v8_load(b + i), acc);
  float s = hsum8(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
#else
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
#endif
}

inline void axpy(float a, const float* x, float* y, int n) {
#if defined(PW_VEC8)
  int i = 0;
  const vf8 av = v8_set1(a);
  for (; i + 8 <= n; i += 8) v8_store(y + i, v8_fma(av, v8_load(x + i), v8_load(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
#else
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
#endif
}

// e^x for n values in place. One polynomial for every element (Cephes' expf: range reduction by
// ln 2, degree-5 polynomial, exponent bits), so an element's result never depends on where in
// the array it sits.
inline void exp_inplace(float* x, int n) {
#if defined(PW_VEC8)
  const vf8 hi = v8_set1(88.3762626647949f), lo = v8_set1(-87.3365478515625f);
  const vf8 log2e = v8_set1(1.44269504088896341f), c1 = v8_set1(0.693359375f),
               c2 = v8_set1(-2.12194440e-4f), one = v8_set1(1.f), half = v8_set1(0.5f);
  const vf8 p0 = v8_set1(1.9875691500E-4f), p1 = v8_set1(1.3981999507E-3f),
               p2 = v8_set1(8.3334519073E-3f), p3 = v8_set1(4.1665795894E-2f),
               p4 = v8_set1(1.6666665459E-1f), p5 = v8_set1(5.0000001201E-1f);
  auto exp8 = [&](vf8 v) {
    v = v8_max(v8_min(v, hi), lo);
    vf8 fx = v8_floor(v8_fma(v, log2e, half));
    v = v8_sub(v8_sub(v, v8_mul(fx, c1)), v8_mul(fx, c2));
    const vf8 z = v8_mul(v, v);
    vf8 y = v8_fma(p0, v, p1);
    y = v8_fma(y, v, p2);
    y = v8_fma(y, v, p3);
    y = v8_fma(y, v, p4);
    y = v8_fma(y, v, p5);
    y = v8_add(v8_fma(y, z, v), one);
    return v8_mul(y, v8_pow2i(fx));
  };
  int i = 0;
  for (; i + 8 <= n; i += 8) v8_store(x + i, exp8(v8_load(x + i)));
  if (i < n) {  // the tail through the same polynomial
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    v8_store_a(buf, exp8(v8_load_a(buf)));
    std::memcpy(x + i, buf, (n - i) * sizeof(float));
  }
#else
  for (int i = 0; i < n; ++i) x[i] = std::exp(x[i]);
#endif
}

#if defined(PW_VEC8)
// x = exp(x * scale - max) in place; returns the sum. The sum runs in 8 lanes (element k in lane
// k % 8, the tail zero-padded) then hsum8: fixed for a given n, so every path that softmaxes the
// same keys gets the same bits, and 8 independent adds instead of one chain of n (a 929-key
// row's sum alone took ~1.2 us).
inline float softmax_inplace(float* x, int n, float scale) {
  const vf8 sv = v8_set1(scale);
  vf8 mv = v8_set1(-INFINITY);
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    const vf8 v = v8_mul(v8_load(x + k), sv);
    v8_store(x + k, v);
    mv = v8_max(mv, v);
  }
  float mx = -INFINITY;
  for (; k < n; ++k) x[k] *= scale, mx = std::max(mx, x[k]);
  alignas(32) float lanes[8];
  v8_store_a(lanes, mv);
  for (float l : lanes) mx = std::max(mx, l);  // max is exact in any order
  for (k = 0; k < n; ++k) x[k] -= mx;
  exp_inplace(x, n);
  vf8 acc = v8_zero();
  for (k = 0; k + 8 <= n; k += 8) acc = v8_add(acc, v8_load(x + k));
  if (k < n) {
    alignas(32) float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(tail, x + k, (n - k) * sizeof(float));
    acc = v8_add(acc, v8_load_a(tail));
  }
  return hsum8(acc);
}
#endif

#if defined(PW_VEC8)
// Where one KV head's keys and values come from, 8 values at a time (elements [i, i + 8) of the
// key at order position j): the cache itself (and the chunk's own rows, f32), converted in
// registers, for a lone row (a decode step), where a shared copy would be written and read once
// for nothing. The values are load_key's, by the same arithmetic (an int8 value times its
// group's scale, bf16 bits shifted up), so a row's result does not depend on the path.
template <KV T>
struct CacheSrc {
  const char *kbase, *vbase;
  const float *ksb, *vsb, *k_new, *v_new;
  const int32_t* ord;
  int S, kv_dim, off;
  static constexpr size_t es = T == KV::I8 ? 1 : T == KV::BF16 ? 2 : 4;
  struct Row {
    const char* p;   // the cached values (null for a chunk row)
    const float* s;  // int8: the scale of the group holding the head's first value
    const float* f;  // a chunk row's f32 values
  };
  Row row(const char* base, const float* sc, const float* fresh, int j) const {
    const size_t key = (size_t)ord[j];
    if (key >= (size_t)S) return {nullptr, nullptr, fresh + (key - S) * kv_dim + off};
    return {base + (key * kv_dim + off) * es, T == KV::I8 ? sc + key * (kv_dim / QK) + off / QK : nullptr, nullptr};
  }
  Row krow(int j) const { return row(kbase, ksb, k_new, j); }
  Row vrow(int j) const { return row(vbase, vsb, v_new, j); }
  vf8 at(const Row& r, int i) const {
    if (r.f) return v8_load(r.f + i);
    if constexpr (T == KV::F32) {
      return v8_load((const float*)r.p + i);
    } else if constexpr (T == KV::BF16) {
      return v8_from_bf16((const uint16_t*)r.p + i);
    } else {  // 8 values never straddle a 32-value scale group (heads start at multiples of 8)
      return v8_mul(v8_from_i8((const int8_t*)r.p + i), v8_set1(r.s[(off % QK + i) / QK]));
    }
  }
#if defined(PW_ATT512)
  __m512 at16(const Row& r, int i) const {  // at()'s values i .. i + 16 (i and off multiples of 16)
    if (r.f) return _mm512_loadu_ps(r.f + i);
    if constexpr (T == KV::F32) {
      return _mm512_loadu_ps((const float*)r.p + i);
    } else if constexpr (T == KV::BF16) {
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)((const uint16_t*)r.p + i))), 16));
    } else {
      const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)((const int8_t*)r.p + i))));
      return _mm512_mul_ps(v, _mm512_set1_ps(r.s[(off % QK + i) / QK]));
    }
  }
#endif
  // Rows kv_dim apart defeat the hardware prefetcher: ask for a key (and its value) ahead of use.
  void prefetch(int j) const { prefetch_k(j), prefetch_v(j); }
  void prefetch_k(int j) const { ask(krow(j)); }
  void prefetch_v(int j) const { ask(vrow(j)); }
  void ask(const Row& r) const {
    if (!r.p) return;
    for (size_t b = 0; b < span; b += 64) PW_PREFETCH(r.p + b);
    if (T == KV::I8) PW_PREFETCH(r.s);
  }
  size_t span;  // bytes of each row to prefetch from the head's first value (a run of heads)
};

// One query head of one row over its n visible keys (order positions `keys`, stream order):
// scores as an fma chain over the head then hsum8, 8 keys interleaved (independent chains hide
// the fma latency); softmax; the value sum in registers, keys in order. Same instructions for
// every key and row count.
template <class Src>
void attend_head(const Src& src, const int* keys, int n, const bool* sink, const int32_t* ord, const float* q_win,
                 const float* q_snk, float scale, int hd, float* sc, float* dst) {
  int k = 0;
  for (int u = 0; u < 16 && u < n; ++u) src.prefetch(keys[u]);
  for (; k + 8 <= n; k += 8) {
    for (int u = k + 16; u < k + 24 && u < n; ++u) src.prefetch(keys[u]);
    vf8 acc[8];
    const float* qk[8];
    typename Src::Row r[8];
    bool any_sink = false;
    for (int u = 0; u < 8; ++u) {
      const bool sk = sink[ord[keys[k + u]]];
      any_sink |= sk;
      acc[u] = v8_zero(), qk[u] = sk ? q_snk : q_win, r[u] = src.krow(keys[k + u]);
    }
    if (!any_sink) {  // the usual block: one load of the query serves all 8 keys (loads bound this)
      for (int i = 0; i < hd; i += 8) {
        const vf8 q = v8_load(q_win + i);
        for (int u = 0; u < 8; ++u) acc[u] = v8_fma(q, src.at(r[u], i), acc[u]);
      }
    } else {
      for (int i = 0; i < hd; i += 8)
        for (int u = 0; u < 8; ++u) acc[u] = v8_fma(v8_load(qk[u] + i), src.at(r[u], i), acc[u]);
    }
    for (int u = 0; u < 8; ++u) sc[k + u] = hsum8(acc[u]);
  }
  for (; k < n; ++k) {
    const float* q = sink[ord[keys[k]]] ? q_snk : q_win;
    const typename Src::Row r = src.krow(keys[k]);
    vf8 acc = v8_zero();
    for (int i = 0; i < hd; i += 8) acc = v8_fma(v8_load(q + i), src.at(r, i), acc);
    sc[k] = hsum8(acc);
  }
  const float sum = softmax_inplace(sc, n, scale);
  // values 256 at a time (32 accumulators, spilled beyond 128 but in L1); a wider head (Gemma 4's
  // 512) takes two passes over the keys. Each lane's sum runs over the keys in order either way.
  constexpr int MAXV = 256 / 8;
  const vf8 inv = v8_set1(1.f / sum);
  for (int i0 = 0; i0 < hd / 8; i0 += MAXV) {
    const int nv = std::min(MAXV, hd / 8 - i0);
    vf8 acc[MAXV];
    for (int i = 0; i < nv; ++i) acc[i] = v8_zero();
    for (k = 0; k < n; ++k) {
      const vf8 pk = v8_set1(sc[k]);
      const typename Src::Row r = src.vrow(keys[k]);
      if (k + 8 < n) src.prefetch(keys[k + 8]);
      for (int i = 0; i < nv; ++i) acc[i] = v8_fma(pk, src.at(r, 8 * (i0 + i)), acc[i]);
    }
    for (int i = 0; i < nv; ++i) v8_store(dst + 8 * (i0 + i), v8_mul(acc[i], inv));
  }
}
#endif

#if defined(PW_VEC8)
// attend_head for the G query heads that share one KV head, at once: each key (and value) is
// converted once and used by all G heads from registers. Per head and key the arithmetic is
// attend_head's exactly (the same fma chain and hsum8, the same value sums in key order), so the
// two give bit-identical results. sc holds G rows of N scores.
template <int G, class Src>
void attend_group(const Src& src, const int* keys, int n, int N, const bool* sink, const int32_t* ord,
                  const float* q_win, const float* q_snk, float scale, int hd, float* sc, float* dst) {
  // keys per pass: enough independent chains, few spills (G * KB vectors of 8 lanes: one AVX
  // register each, two NEON ones)
#if defined(PW_NEON)
  constexpr int KB = G == 1 ? 8 : G == 2 ? 4 : G <= 6 ? 2 : 1;
#else
  constexpr int KB = G == 1 ? 8 : G <= 3 ? 4 : 2;
#endif
  int k = 0;
  for (int u = 0; u < 32 && u < n; ++u) src.prefetch(keys[u]);
  for (; k + KB <= n; k += KB) {
    for (int u = k + 32; u < k + 32 + KB && u < n; ++u) src.prefetch(keys[u]);
    typename Src::Row r[KB];
    const float* qk[KB];
    vf8 acc[G][KB];
    bool any_sink = false;
    for (int u = 0; u < KB; ++u) {
      const bool sk = sink[ord[keys[k + u]]];
      any_sink |= sk;
      r[u] = src.krow(keys[k + u]), qk[u] = sk ? q_snk : q_win;
    }
    for (int h = 0; h < G; ++h)
      for (int u = 0; u < KB; ++u) acc[h][u] = v8_zero();
    for (int i = 0; i < hd; i += 8) {
      vf8 kv[KB];
      for (int u = 0; u < KB; ++u) kv[u] = src.at(r[u], i);
      for (int h = 0; h < G; ++h) {
        if (!any_sink) {  // one load of each head's query for all the keys
          const vf8 q = v8_load(q_win + (size_t)h * hd + i);
          for (int u = 0; u < KB; ++u) acc[h][u] = v8_fma(q, kv[u], acc[h][u]);
        } else {
          for (int u = 0; u < KB; ++u)
            acc[h][u] = v8_fma(v8_load(qk[u] + (size_t)h * hd + i), kv[u], acc[h][u]);
        }
      }
    }
    for (int h = 0; h < G; ++h)
      for (int u = 0; u < KB; ++u) sc[(size_t)h * N + k + u] = hsum8(acc[h][u]);
  }
  for (; k < n; ++k) {
    const typename Src::Row r = src.krow(keys[k]);
    const float* q = sink[ord[keys[k]]] ? q_snk : q_win;
    vf8 acc[G];
    for (int h = 0; h < G; ++h) acc[h] = v8_zero();
    for (int i = 0; i < hd; i += 8) {
      const vf8 kv = src.at(r, i);
      for (int h = 0; h < G; ++h) acc[h] = v8_fma(v8_load(q + (size_t)h * hd + i), kv, acc[h]);
    }
    for (int h = 0; h < G; ++h) sc[(size_t)h * N + k] = hsum8(acc[h]);
  }
  float sum[G];
  for (int h = 0; h < G; ++h) {
    float* s = sc + (size_t)h * N;
    sum[h] = softmax_inplace(s, n, scale);
  }
#if defined(PW_NEON)
  constexpr int VC = G >= 2 ? 12 / G : 8;  // value vectors per pass (G * VC accumulators)
#else
  constexpr int VC = G >= 3 ? 24 / G : 8;  // value vectors per pass (G * VC accumulators)
#endif
  for (int i0 = 0; i0 < hd; i0 += 8 * VC) {
    const int nv = std::min(VC, (hd - i0) / 8);
    vf8 acc[G][VC];
    for (int h = 0; h < G; ++h)
      for (int c = 0; c < VC; ++c) acc[h][c] = v8_zero();
    for (int j = 0; j < n; ++j) {
      const typename Src::Row r = src.vrow(keys[j]);
      if (i0 == 0 && j + 8 < n) src.prefetch(keys[j + 8]);
      vf8 pk[G];
      for (int h = 0; h < G; ++h) pk[h] = v8_set1(sc[(size_t)h * N + j]);
      for (int c = 0; c < nv; ++c) {
        const vf8 v = src.at(r, i0 + 8 * c);
        for (int h = 0; h < G; ++h) acc[h][c] = v8_fma(pk[h], v, acc[h][c]);
      }
    }
    for (int h = 0; h < G; ++h) {
      const vf8 inv = v8_set1(1.f / sum[h]);
      for (int c = 0; c < nv; ++c) v8_store(dst + (size_t)h * hd + i0 + 8 * c, v8_mul(acc[h][c], inv));
    }
  }
}

#if defined(PW_ATT512)
// (GCC 12's -Wmaybe-uninitialized on its own 512-bit intrinsics, as at tile512: popped after
// attention_rows, where they are inlined)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Two keys' 8-lane accumulators in one 512-bit register (lanes 0-7 and 8-15): the same lane
// arithmetic as two 256-bit ones at half the instructions.
PW_INLINE __m512 two_rows(const float* a, const float* b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}
// hsum8 of both halves of 8 registers at once, each sum added in hsum8's order (lanes i and
// i + 4, then i and i + 2, then the two halves): lane 4j + m is half j & 1 of register 2m + j / 2.
PW_INLINE __m512 hsum8_halves(const __m512* a) {
  __m512 t[4], w[2];
  for (int m = 0; m < 4; ++m)  // 128-bit lane j: half j & 1 of register 2m + j / 2, i and i + 4
    t[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int m = 0; m < 2; ++m)  // i and i + 2
    w[m] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * m], t[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * m], t[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

// Floats of keys (or values) attend_rows converts at a time: 16 KB, which stays in L1.
constexpr int BLOCK_FLOATS = 4096;

// A block's rows and their group's query heads at once, over the keys any of them sees (U: order
// positions in stream order; vis[r * nU + u]: row r sees U[u]; lead_in[r]: n where row r sees
// U[0 .. n) and nothing after, as a causal row does, else -1). The group's KV head comes in
// blocks of keys, converted to f32 by fill(values, u0, n, dst) (keys U[u0 .. u0 + n) into dst
// [n][hd], 16 KB: L1) and used there by every (row, head) pair of the block. A prefill chunk's
// attention had first copied every head's keys and values to f32 (34 MB at 2,048 keys at the
// SmolLM2-1.7B shape) and read them back from DRAM once per 8-row block. One layer, 64 rows,
// 32 heads, 2 threads (-O3): 2,048 visible keys 18.7 -> 6.0 ms, 128 keys 1.35 -> 0.61 ms. Per
// pair the arithmetic is attend_head's exactly: each score an fma chain over the head then
// hsum8, the softmax over the row's own keys in order, the value sums over them in order
// (carried in acc [P][hd] from one block of keys to the next). S: P rows of nU scratch floats.
template <class Fill>
void attend_rows(const Fill& fill, const int* U, int nU, const uint8_t* vis, const int* lead_in, int R, int G, int NH,
                 int hd, const bool* sink, const int32_t* ord, const float* qw, const float* qs, int H, int h0, int c0,
                 float scale, float* S, float* e, float* sums, float* blk, float* acc_mem, float* out) {
  // pair p = kh * RG + r * G + h: KV head kh of the run, row r of the block, query head h of its group
  const int RG = R * G, P = NH * RG;
  auto off = [&](int p) { return ((size_t)(c0 + p % RG / G) * H + h0 + p / RG * G + p % G) * hd; };
  if (nU == 0) {  // rows that see no key
    for (int p = 0; p < P; ++p) std::fill(out + off(p), out + off(p) + hd, 0.f);
    return;
  }
#if defined(PW_NEON)
  constexpr int TP = 4, KB = 3;  // 12 accumulators (24 registers)
#else
  constexpr int TP = 8, KB = 3;  // 24 accumulators
#endif
  const int KBLK = std::max(KB, BLOCK_FLOATS / hd / KB * KB);  // keys a block of scores
  for (int u0 = 0; u0 < nU; u0 += KBLK) {
    const int nb = std::min(KBLK, nU - u0);
    fill(false, u0, nb, blk);
    for (int kh = 0; kh < NH; ++kh) {  // TP pairs of KV head kh at a time
      const float* kblk = blk + (size_t)kh * nb * hd;
      for (int p0 = 0; p0 < RG; p0 += TP) {
        const float *qwp[TP], *qsp[TP];
        for (int t = 0; t < TP; ++t) {  // past the head's last pair: a copy of it, computed and dropped
          const size_t at = off(kh * RG + std::min(p0 + t, RG - 1));
          qwp[t] = qw + at, qsp[t] = qs + at;
        }
        float* sp = S + (size_t)(kh * RG + p0) * nU + u0;
        auto triple = [&](int u) {  // keys u .. u + KB of the block against the TP pairs
          const float* kr[KB];
          bool sk[KB], any = false;
          for (int b = 0; b < KB; ++b) kr[b] = kblk + (size_t)(u + b) * hd, sk[b] = sink[ord[U[u0 + u + b]]], any |= sk[b];
          vf8 acc[TP][KB];
          for (int t = 0; t < TP; ++t)
            for (int b = 0; b < KB; ++b) acc[t][b] = v8_zero();
          for (int i = 0; i < hd; i += 8) {
            vf8 kv[KB];
            for (int b = 0; b < KB; ++b) kv[b] = v8_load(kr[b] + i);
            for (int t = 0; t < TP; ++t) {
              if (!any) {
                const vf8 q = v8_load(qwp[t] + i);
                for (int b = 0; b < KB; ++b) acc[t][b] = v8_fma(q, kv[b], acc[t][b]);
              } else {
                for (int b = 0; b < KB; ++b)
                  acc[t][b] = v8_fma(v8_load((sk[b] ? qsp[t] : qwp[t]) + i), kv[b], acc[t][b]);
              }
            }
          }
          for (int t = 0; t < TP && p0 + t < RG; ++t)
            for (int b = 0; b < KB; ++b) sp[(size_t)t * nU + u + b] = hsum8(acc[t][b]);
        };
        int u = 0;
  #if defined(PW_ATT512)
        // six keys at a time in 512-bit registers, two keys a register (the sink keys' groups,
        // which take each key's own query, as above)
        for (; u + 6 <= nb; u += 6) {
          bool any = false;
          for (int b = 0; b < 6; ++b) any |= sink[ord[U[u0 + u + b]]];
          if (any) {
            triple(u), triple(u + 3);
            continue;
          }
          // hsum8_halves' sum 4j + m is pair 2m + j / 2's score of key j & 1: to 2t + k for pair t, key k
          const __m512i by_pair = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
          __m512 acc[3][TP];
          for (int b = 0; b < 3; ++b)
            for (int t = 0; t < TP; ++t) acc[b][t] = _mm512_setzero_ps();
          const float* kr = kblk + (size_t)u * hd;
          for (int i = 0; i < hd; i += 8) {
            __m512 kv[3];
            for (int b = 0; b < 3; ++b) kv[b] = two_rows(kr + (size_t)(2 * b) * hd + i, kr + (size_t)(2 * b + 1) * hd + i);
            for (int t = 0; t < TP; ++t) {
              const __m512 q = _mm512_broadcast_f32x8(_mm256_loadu_ps(qwp[t] + i));
              for (int b = 0; b < 3; ++b) acc[b][t] = _mm512_fmadd_ps(q, kv[b], acc[b][t]);
            }
          }
          for (int b = 0; b < 3; ++b) {  // pair t's scores of keys 2b and 2b + 1, side by side
            alignas(64) float f[16];
            _mm512_store_ps(f, _mm512_permutexvar_ps(by_pair, hsum8_halves(acc[b])));
            for (int t = 0; t < TP && p0 + t < RG; ++t) std::memcpy(sp + (size_t)t * nU + u + 2 * b, f + 2 * t, 8);
          }
        }
  #endif
        for (; u + KB <= nb; u += KB) triple(u);
        for (; u < nb; ++u) {
          const float* kr = kblk + (size_t)u * hd;
          const bool sk = sink[ord[U[u0 + u]]];
          vf8 acc[TP];
          for (int t = 0; t < TP; ++t) acc[t] = v8_zero();
          for (int i = 0; i < hd; i += 8) {
            const vf8 kv = v8_load(kr + i);
            for (int t = 0; t < TP; ++t) acc[t] = v8_fma(v8_load((sk ? qsp[t] : qwp[t]) + i), kv, acc[t]);
          }
          for (int t = 0; t < TP && p0 + t < RG; ++t) sp[(size_t)t * nU + u] = hsum8(acc[t]);
        }
      }
    }
  }
  for (int p = 0; p < P; ++p) {  // softmax over the row's own keys, in order; 0 for the others
    float* sp = S + (size_t)p * nU;
    const uint8_t* vr = vis + (size_t)(p % RG / G) * nU;
    const int lead = lead_in[p % RG / G];
    float* x = lead >= 0 ? sp : e;
    int n = lead >= 0 ? lead : 0;
    if (lead < 0)
      for (int u = 0; u < nU; ++u)
        if (vr[u]) e[n++] = sp[u];
    const float sum = softmax_inplace(x, n, scale);
    sums[p] = n ? sum : 0.f;
    if (lead >= 0)
      std::fill(sp + lead, sp + nU, 0.f);
    else
      for (int u = 0, k = 0; u < nU; ++u) sp[u] = vr[u] ? e[k++] : 0.f;
  }
  // Values: a key a row does not see has weight exactly 0 in S, and fma(0, v, acc) is acc for a
  // finite v, so the sums run branch-free over all of U and equal the sums over each row's own
  // keys (but for the sign of an all-zero sum: an underflowed -0 accumulator becomes +0).
#if defined(PW_NEON)
  constexpr int TV = 2, VD = 4;  // 8 accumulators: 2 pairs x 32 values of the head
#else
  constexpr int TV = 4, VD = 4;  // 16 accumulators: 4 pairs x 32 values of the head
#endif
  const int VBLK = std::max(1, BLOCK_FLOATS / hd);
  for (int u0 = 0; u0 < nU; u0 += VBLK) {
    const int nb = std::min(VBLK, nU - u0);
    const bool first = u0 == 0, last = u0 + nb == nU;
    fill(true, u0, nb, blk);
    for (int kh = 0; kh < NH; ++kh) {  // each KV head's pairs against its values
      const float* vblk = blk + (size_t)kh * nb * hd;
      float* const Sk = S + (size_t)kh * RG * nU;
      float* const Ak = acc_mem + (size_t)kh * RG * hd;
      float* const sk_sums = sums + (size_t)kh * RG;
      // a tile's T pairs from p0: their scores of this block and their carried sums (past the
      // head's last pair: a copy of it, computed and dropped)
      auto tile = [&](int p0, int T, const float** sp, float** am) {
        for (int t = 0; t < T; ++t) {
          const int p = std::min(p0 + t, RG - 1);
          sp[t] = Sk + (size_t)p * nU + u0, am[t] = Ak + (size_t)p * hd;
        }
      };
#if defined(PW_ATT512)
      if (hd % 64 == 0) {  // 64 values of the head in four 512-bit registers: each lane's sum as above
        constexpr int TZ = 6;
        for (int p0 = 0; p0 < RG; p0 += TZ) {
          const int np = std::min(TZ, RG - p0);
          const float* sp[TZ];
          float* am[TZ];
          tile(p0, TZ, sp, am);
          for (int d = 0; d < hd; d += 64) {
            __m512 acc[TZ][4];
            for (int t = 0; t < TZ; ++t)
              for (int c = 0; c < 4; ++c) acc[t][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(am[t] + d + 16 * c);
            for (int u = 0; u < nb; ++u) {
              const float* vrow = vblk + (size_t)u * hd + d;
              __m512 v[4];
              for (int c = 0; c < 4; ++c) v[c] = _mm512_loadu_ps(vrow + 16 * c);
              for (int t = 0; t < TZ; ++t) {
                const __m512 pk = _mm512_set1_ps(sp[t][u]);
                for (int c = 0; c < 4; ++c) acc[t][c] = _mm512_fmadd_ps(pk, v[c], acc[t][c]);
              }
            }
            for (int t = 0; t < np; ++t) {
              const int p = p0 + t;
              if (!last) {
                for (int c = 0; c < 4; ++c) _mm512_storeu_ps(am[t] + d + 16 * c, acc[t][c]);
                continue;
              }
              float* dst = out + off(kh * RG + p) + d;
              if (sk_sums[p] == 0.f) {  // a row that sees no key
                std::fill(dst, dst + 64, 0.f);
                continue;
              }
              const __m512 inv = _mm512_set1_ps(1.f / sk_sums[p]);
              for (int c = 0; c < 4; ++c) _mm512_storeu_ps(dst + 16 * c, _mm512_mul_ps(acc[t][c], inv));
            }
          }
        }
        continue;
      }
#endif
      for (int p0 = 0; p0 < RG; p0 += TV) {
        const int np = std::min(TV, RG - p0);
        const float* sp[TV];
        float* am[TV];
        tile(p0, TV, sp, am);
        for (int d = 0; d < hd; d += 8 * VD) {
          const int nvd = std::min(VD, (hd - d) / 8);
          vf8 acc[TV][VD];
          for (int t = 0; t < TV; ++t)
            for (int c = 0; c < VD; ++c) acc[t][c] = first || c >= nvd ? v8_zero() : v8_load(am[t] + d + 8 * c);
          for (int u = 0; u < nb; ++u) {
            const float* vrow = vblk + (size_t)u * hd + d;
            vf8 v[VD];
            for (int c = 0; c < VD; ++c) v[c] = c < nvd ? v8_load(vrow + 8 * c) : v8_zero();
            for (int t = 0; t < TV; ++t) {
              const vf8 pk = v8_set1(sp[t][u]);
              for (int c = 0; c < VD; ++c) acc[t][c] = v8_fma(pk, v[c], acc[t][c]);
            }
          }
          for (int t = 0; t < np; ++t) {
            const int p = p0 + t;
            if (!last) {
              for (int c = 0; c < nvd; ++c) v8_store(am[t] + d + 8 * c, acc[t][c]);
              continue;
            }
            float* dst = out + off(kh * RG + p) + d;
            if (sk_sums[p] == 0.f) {  // a row that sees no key
              std::fill(dst, dst + 8 * nvd, 0.f);
              continue;
            }
            const vf8 inv = v8_set1(1.f / sk_sums[p]);
            for (int c = 0; c < nvd; ++c) v8_store(dst + 8 * c, v8_mul(acc[t][c], inv));
          }
        }
      }
    }
  }
}

// A decode step with long cache rows (SmolLM2-1.7B: 32 KV heads, 2 KB a row) in two passes.
// The scores first, split by keys: a task takes a range of keys and every head of each, so it
// reads whole rows in stream order, one contiguous run of the cache that the hardware
// prefetcher follows. (A task per run of heads had read 512 bytes of every 2 KB row.) Then each
// run of nh adjacent KV heads (G query heads each) takes its softmax and its value sums, keys
// in order (in 512-bit registers where they fit, else in memory: acc, nh * G * hd floats). At
// 1,000 keys, 32 KV heads of 64, the cache out of the CPU's caches, 2 threads: 670 -> 315 us a
// layer (a SmolLM2-1.7B decode step with 1,000 tokens cached: 53-57 -> 38-43 ms). Per head and
// key the arithmetic is attend_head's exactly (the same fma chain over the head and hsum8, the
// softmax, each value lane's fma in key order), so a row's result does not depend on which
// path computed it.
//
// run_scores: the scores of keys [j0, j1) for nh adjacent KV heads, sc[(e * G + h) * N + j].
template <int G, class Src>
void run_scores(const Src& src, int nh, const int* keys, int j0, int j1, int N, const bool* sink, const int32_t* ord,
                const float* q_win, const float* q_snk, int hd, float* sc) {
  constexpr int AHEAD = 8;
  for (int u = j0; u < j0 + AHEAD && u < j1; ++u) src.prefetch_k(keys[u]);
  for (int j = j0; j < j1; ++j) {
    if (j + AHEAD < j1) src.prefetch_k(keys[j + AHEAD]);
    const typename Src::Row r = src.krow(keys[j]);
    const float* q = sink[ord[keys[j]]] ? q_snk : q_win;
    for (int e = 0; e < nh; ++e) {
      vf8 a[G];
      for (int h = 0; h < G; ++h) a[h] = v8_zero();
      for (int i = 0; i < hd; i += 8) {
        const vf8 kv = src.at(r, e * hd + i);
        for (int h = 0; h < G; ++h) a[h] = v8_fma(v8_load(q + (size_t)(e * G + h) * hd + i), kv, a[h]);
      }
      for (int h = 0; h < G; ++h) sc[(size_t)(e * G + h) * N + j] = hsum8(a[h]);
    }
  }
}

// The softmax of a run's P = nh * G score rows (sc as run_scores left them) and its outputs.
#if defined(PW_ATT512)
// run_values' sums for NE KV heads from e0 (Z 512-bit registers a head: hd = 16 Z) in registers,
// over keys [j0, j1) in order, carried in accm between blocks of keys: each lane's fma chain is
// the 8-lane code's (the sums in memory took a load and a store per fma, most of a long decode
// step's attention).
template <int G, int Z, int NE, class Src>
void values_pass(const Src& src, int e0, const int* keys, int j0, int j1, int n, int N, const float* sc,
                 const float* inv, float* accm, float* dst) {
  constexpr int hd = 16 * Z, A = NE * G * Z;
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = j0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(accm + (size_t)e0 * G * hd + 16 * a);
  constexpr int AHEAD = 8;
  for (int j = j0; j < j1; ++j) {
    if (j + AHEAD < j1) src.prefetch_v(keys[j + AHEAD]);
    const typename Src::Row r = src.vrow(keys[j]);
    for (int e = 0; e < NE; ++e) {
      __m512 p[G];
      for (int h = 0; h < G; ++h) p[h] = _mm512_set1_ps(sc[(size_t)((e0 + e) * G + h) * N + j]);
      for (int c = 0; c < Z; ++c) {
        const __m512 v = src.at16(r, (e0 + e) * hd + 16 * c);
        for (int h = 0; h < G; ++h) acc[(e * G + h) * Z + c] = _mm512_fmadd_ps(p[h], v, acc[(e * G + h) * Z + c]);
      }
    }
  }
  if (j1 < n) {
    for (int a = 0; a < A; ++a) _mm512_storeu_ps(accm + (size_t)e0 * G * hd + 16 * a, acc[a]);
    return;
  }
  for (int e = 0; e < NE; ++e)
    for (int h = 0; h < G; ++h) {
      const int q = (e0 + e) * G + h;
      const __m512 iv = _mm512_set1_ps(inv[q]);
      for (int c = 0; c < Z; ++c)
        _mm512_storeu_ps(dst + (size_t)q * hd + 16 * c, _mm512_mul_ps(acc[(e * G + h) * Z + c], iv));
    }
}
// values_pass over a run of nh KV heads, a block of keys at a time (read from memory by the
// first pass over it, from the CPU's caches by the next), as many heads a pass as 16-24
// registers hold; false where one head's G * Z registers do not fit.
template <int G, int Z, class Src>
bool values512(const Src& src, int nh, const int* keys, int n, int N, const float* sc, const float* inv, float* accm,
               float* dst) {
  if constexpr (G * Z > 24) {
    return false;
  } else {
    constexpr int NE = 4 * G * Z <= 24 ? 4 : 2 * G * Z <= 24 ? 2 : 1, KEYS = 64;
    for (int j0 = 0; j0 < n; j0 += KEYS) {
      const int j1 = std::min(n, j0 + KEYS);
      int e0 = 0;
      for (; e0 + NE <= nh; e0 += NE) values_pass<G, Z, NE>(src, e0, keys, j0, j1, n, N, sc, inv, accm, dst);
      for (; e0 < nh; ++e0) values_pass<G, Z, 1>(src, e0, keys, j0, j1, n, N, sc, inv, accm, dst);
    }
    return true;
  }
}
#endif

template <int G, class Src>
void run_values(const Src& src, int nh, const int* keys, int n, int N, float* sc, float scale, int hd, float* acc,
                float* dst) {
  const int P = nh * G;  // query heads of the run, head p = e * G + h at dst + p * hd
  thread_local std::vector<float> inv;
  inv.resize(P);
  for (int p = 0; p < P; ++p) inv[p] = 1.f / softmax_inplace(sc + (size_t)p * N, n, scale);
#if defined(PW_ATT512)
  if ((hd == 64 && values512<G, 4>(src, nh, keys, n, N, sc, inv.data(), acc, dst)) ||
      (hd == 128 && values512<G, 8>(src, nh, keys, n, N, sc, inv.data(), acc, dst)) ||
      (hd == 256 && values512<G, 16>(src, nh, keys, n, N, sc, inv.data(), acc, dst)))
    return;
#endif
  std::fill(acc, acc + (size_t)P * hd, 0.f);
  constexpr int AHEAD = 8;
  for (int u = 0; u < AHEAD && u < n; ++u) src.prefetch_v(keys[u]);
  for (int j = 0; j < n; ++j) {
    if (j + AHEAD < n) src.prefetch_v(keys[j + AHEAD]);
    const typename Src::Row r = src.vrow(keys[j]);
    for (int e = 0; e < nh; ++e)
      for (int i = 0; i < hd; i += 8) {
        const vf8 v = src.at(r, e * hd + i);
        for (int h = 0; h < G; ++h) {
          float* a = acc + (size_t)(e * G + h) * hd + i;
          v8_store(a, v8_fma(v8_set1(sc[(size_t)(e * G + h) * N + j]), v, v8_load(a)));
        }
      }
  }
  for (int p = 0; p < P; ++p) {
    const vf8 iv = v8_set1(inv[p]);
    for (int i = 0; i < hd; i += 8)
      v8_store(dst + (size_t)p * hd + i, v8_mul(v8_load(acc + (size_t)p * hd + i), iv));
  }
}

// The value sums over all n keys, in order, of NB blocks of SPAN_W columns (a register's
// lanes: 16 on AVX-512, 8 elsewhere) from column f0 of the cache row (head e = column / hd;
// blocks may run across heads), for each head's G query heads, scaled by inv (softmax's
// 1 / sum): a decode step's values split by columns, not by heads, so that a model with few KV
// heads (the default one's 3 on 2 threads) keeps every thread busy, each with one pass over the
// keys. Each lane's fma chain is attend_group's and values_pass's (from
// zero, keys in order), so the bits are theirs.
// A span's register (SpanV: __m512 on AVX-512, vf8 elsewhere) and the operations values_span
// takes on it, so that its one body serves both widths.
#if defined(PW_ATT512)
constexpr int SPAN_W = 16, SPAN_REGS = 24;
struct SpanV {
  using T = __m512;
  static T zero() { return _mm512_setzero_ps(); }
  static T fma(float a, T b, T c) { return _mm512_fmadd_ps(_mm512_set1_ps(a), b, c); }
  static void store_scaled(float* p, T v, float k) { _mm512_storeu_ps(p, _mm512_mul_ps(v, _mm512_set1_ps(k))); }
  template <class Src>
  static T at(const Src& src, const typename Src::Row& r, int f) { return src.at16(r, f); }
};
#else
constexpr int SPAN_W = 8, SPAN_REGS = 12;  // (16 AVX2 registers; NEON's vf8 is two of its 32)
struct SpanV {
  using T = vf8;
  static T zero() { return v8_zero(); }
  static T fma(float a, T b, T c) { return v8_fma(v8_set1(a), b, c); }
  static void store_scaled(float* p, T v, float k) { v8_store(p, v8_mul(v, v8_set1(k))); }
  template <class Src>
  static T at(const Src& src, const typename Src::Row& r, int f) { return src.at(r, f); }
};
#endif
template <int G, int NB, class Src>
void values_span(const Src& src, int f0, int hd, const int* keys, int n, int N, const float* sc, const float* inv,
                 float* dst) {
  constexpr int AHEAD = 8;
  for (int u = 0; u < AHEAD && u < n; ++u) src.prefetch_v(keys[u]);
  const float* s[NB];  // block b's first query head's scores (its G rows are N apart)
  for (int b = 0; b < NB; ++b) s[b] = sc + (size_t)((f0 + SPAN_W * b) / hd) * G * N;
  typename SpanV::T acc[NB][G];
  for (int b = 0; b < NB; ++b)
    for (int h = 0; h < G; ++h) acc[b][h] = SpanV::zero();
  for (int j = 0; j < n; ++j) {
    if (j + AHEAD < n) src.prefetch_v(keys[j + AHEAD]);
    const typename Src::Row r = src.vrow(keys[j]);
    for (int b = 0; b < NB; ++b) {
      const typename SpanV::T v = SpanV::at(src, r, f0 + SPAN_W * b);
      for (int h = 0; h < G; ++h) acc[b][h] = SpanV::fma(s[b][(size_t)h * N + j], v, acc[b][h]);
    }
  }
  for (int b = 0; b < NB; ++b) {
    const int e = (f0 + SPAN_W * b) / hd, c = (f0 + SPAN_W * b) % hd;
    for (int h = 0; h < G; ++h) SpanV::store_scaled(dst + (size_t)(e * G + h) * hd + c, acc[b][h], inv[e * G + h]);
  }
}
// values_span for a run-time block count (1 .. min(8, SPAN_REGS / G): the registers it holds).
template <int G, class Src>
void values_spans(const Src& src, int f0, int nb, int hd, const int* keys, int n, int N, const float* sc,
                  const float* inv, float* dst) {
  auto run = [&](auto k) {
    constexpr int NB = decltype(k)::value;
    if constexpr (NB * G <= SPAN_REGS) values_span<G, NB>(src, f0, hd, keys, n, N, sc, inv, dst);
  };
  switch (nb) {
    case 1: return run(std::integral_constant<int, 1>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 3: return run(std::integral_constant<int, 3>{});
    case 4: return run(std::integral_constant<int, 4>{});
    case 5: return run(std::integral_constant<int, 5>{});
    case 6: return run(std::integral_constant<int, 6>{});
    case 7: return run(std::integral_constant<int, 7>{});
    case 8: return run(std::integral_constant<int, 8>{});
  }
}

// fn(std::integral_constant<int, G>) for a group size (query heads a KV head) the decode paths
// compile (run_scores, run_values, attend_group); false for any other.
template <class Fn>
bool by_group(int G, Fn&& fn) {
  switch (G) {
#define PW_GROUP(g) \
  case g: fn(std::integral_constant<int, g>{}); return true;
    PW_GROUP(1) PW_GROUP(2) PW_GROUP(3) PW_GROUP(4) PW_GROUP(6) PW_GROUP(8)
#undef PW_GROUP
    default: return false;
  }
}
#endif

// out [C, H * hd] for queries qw, qs [C, H, hd] (window- and sink-rotated) over one layer's
// cache (kbase, vbase [S, kv_dim] of T; ksb, vsb [S, kv_dim / 32] int8 scales) and the chunk's own
// rows (k_new, v_new [C, kv_dim] f32); ord [S + C], msk [C, S + C], sink [S + C] as below.
// Keys from which a decode step with short cache rows and few KV heads splits its attention by
// key ranges and column spans (see attention_rows): below it one pass per KV head costs about
// the same (the default model, bench.step_time: 200 cached tokens alike, 400 3.97-4.57 ->
// 3.34-3.97 ms a step).
#if defined(PW_VEC8)
constexpr int SPLIT_DECODE_KEYS = 256;
#endif

template <KV T>
void attention_rows(int pool_threads, const float* qw, const float* qs, int C, int H, int hd, int S, int kv_dim,
                    const char* kbase, const char* vbase, const float* ksb, const float* vsb, const float* k_new,
                    const float* v_new, const int32_t* ord, const bool* msk, const bool* sink, float* o) {
  const int KVH = kv_dim / hd, G = H / KVH, N = S + C;
  const float scale = 1.0f / std::sqrt((float)hd);
  // the threads a parallel_for runs on (the caller and its helpers)
  const int workers = (int)std::max<int64_t>(1, std::min<int64_t>(pool_threads, thread_cap()));
  // a cache row of 1 KB or more is read in runs of it, shorter ones whole (both paths below)
  const size_t row_bytes = (size_t)kv_dim * (T == KV::I8 ? 1 : T == KV::BF16 ? 2 : 4);
  const bool long_rows = row_bytes >= 1024;

  // One task per (KV head, block of up to 8 rows): the block's rows and the group's G query
  // heads share one dequantized copy of the keys and values any of them may see (a prefill
  // chunk's rows see nearly the same keys; a decode step is a block of one row).
#if defined(PW_VEC8)
  if (C == 1 && hd % 8 == 0) {
    // A decode step reads the cache in place (a shared dequantized copy would be written and
    // read once for nothing): runs of KV heads with their query heads together (run_values,
    // attend_group), or one query head a task for a group size without a compiled variant.
    std::vector<int> keys;
    for (int j = 0; j < N; ++j)
      if (msk[ord[j]]) keys.push_back(j);
    const int n = (int)keys.size();
    if (n == 0) {
      std::fill(o, o + (size_t)H * hd, 0.f);
      return;
    }
    const bool grouped = G == 1 || G == 2 || G == 3 || G == 4 || G == 6 || G == 8;
    // Tasks take runs of adjacent KV heads, and the first head's pass prefetches the whole run
    // of each row: the cache is [S, kv_dim], so a head alone reads 64 bytes every kv_dim, which
    // DRAM serves far slower than a run of contiguous lines (4x at 32 KV heads).
    const int threads = workers + 1;
    // Long rows (32 KV heads of 64 int8 values: 2 KB): the scores by ranges of keys, then runs of
    // heads, keys outer (run_scores, run_values), two tasks per thread, and at least 512
    // contiguous bytes of each row per task (a run of one head would stride again on a machine
    // with many cores). Short rows are a few lines: one KV head a task reads them well.
    const size_t head_bytes = (size_t)hd * CacheSrc<T>::es;
    // The first pass of both split paths below: every head's scores by ranges of keys
    // (run_scores), into [H][N], the caller's buffer (the later passes read it on any thread).
    thread_local std::vector<float> scores;
    const int* kp = keys.data();
    const CacheSrc<T> all{kbase, vbase, ksb, vsb, k_new, v_new, ord, S, kv_dim, 0, row_bytes};
    auto scores_by_ranges = [&]() {
      if (scores.size() < (size_t)H * N) scores.resize((size_t)H * N);
      float* sc = scores.data();
      const int n_ranges = std::min(workers, std::max(1, n / 64));
      parallel_for(pool_threads, n_ranges, [&](int t) {
        const int j0 = (int)((int64_t)n * t / n_ranges), j1 = (int)((int64_t)n * (t + 1) / n_ranges);
        by_group(G, [&](auto g) { run_scores<decltype(g)::value>(all, KVH, kp, j0, j1, N, sink, ord, qw, qs, hd, sc); });
      });
      return sc;
    };
    if (grouped && long_rows) {
      float* sc = scores_by_ranges();
      const int per_task = std::max<int>({1, (KVH + 2 * workers - 1) / (2 * workers),
                                          (int)std::min<size_t>(KVH, (512 + head_bytes - 1) / head_bytes)});
      parallel_for(pool_threads, (KVH + per_task - 1) / per_task, [&](int task) {
        thread_local std::vector<float> acc;
        const int g0 = task * per_task, nh = std::min(KVH, g0 + per_task) - g0;
        if (acc.size() < (size_t)nh * G * hd) acc.resize((size_t)nh * G * hd);
        const CacheSrc<T> src{kbase, vbase, ksb, vsb, k_new, v_new, ord, S, kv_dim, g0 * hd,
                              nh * head_bytes};
        const size_t q0 = (size_t)g0 * G * hd;
        by_group(G, [&](auto g) {
          run_values<decltype(g)::value>(src, nh, kp, n, N, sc + (size_t)g0 * G * N, scale, hd, acc.data(), o + q0);
        });
      });
      return;
    }
    // Short rows with fewer KV heads than twice the workers (the default model: 3 on 2 threads, one
    // thread doing two heads' work while the other waited), once there are keys enough to pay for
    // the extra pass: the scores by ranges of keys (every head), each query head's softmax, then
    // the values by even spans of the row's columns. The same arithmetic per key and lane
    // (run_scores, values_span), so the same bits as attend_group.
    if (grouped && KVH < 2 * workers && hd % SPAN_W == 0 && n >= SPLIT_DECODE_KEYS) {
      thread_local std::vector<float> inv_tl;  // (the caller's, as scores)
      inv_tl.resize(H);
      float *sc = scores_by_ranges(), *inv = inv_tl.data();
      for (int p = 0; p < H; ++p) inv[p] = 1.f / softmax_inplace(sc + (size_t)p * N, n, scale);  // (~1 us a head)
      // the row's blocks of SPAN_W columns in even spans, one a thread where a span's G
      // accumulators a block fit in SPAN_REGS registers (and values_spans' 8 blocks)
      const int blocks = kv_dim / SPAN_W, per = std::min(8, std::max(1, SPAN_REGS / G));
      const int spans = std::max(workers, (blocks + per - 1) / per);
      parallel_for(pool_threads, spans, [&](int t) {
        const int b0 = (int)((int64_t)blocks * t / spans), b1 = (int)((int64_t)blocks * (t + 1) / spans);
        by_group(G, [&](auto g) { values_spans<decltype(g)::value>(all, SPAN_W * b0, b1 - b0, hd, kp, n, N, sc, inv, o); });
      });
      return;
    }
    const int run = std::max(1, KVH / (2 * threads)), n_tasks = (KVH + run - 1) / run;
    parallel_for(pool_threads, grouped ? n_tasks : H, [&](int task) {
      thread_local std::vector<float> sc;
      if (sc.size() < (size_t)G * N) sc.resize((size_t)G * N);
      const int g0 = grouped ? task * run : task / G, g1 = grouped ? std::min(KVH, g0 + run) : g0 + 1;
      for (int g = g0; g < g1; ++g) {
        const int h0 = grouped ? g * G : task;
        const size_t span = (g == g0 ? (size_t)(g1 - g0) : 1) * hd * CacheSrc<T>::es;
        const CacheSrc<T> src{kbase, vbase, ksb, vsb, k_new, v_new, ord, S, kv_dim, g * hd, span};
        const float *q_win = qw + (size_t)h0 * hd, *q_snk = qs + (size_t)h0 * hd;
        float* dst = o + (size_t)h0 * hd;
        if (!grouped || !by_group(G, [&](auto gs) {
              attend_group<decltype(gs)::value>(src, kp, n, N, sink, ord, q_win, q_snk, scale, hd, sc.data(), dst);
            }))
          attend_head(src, kp, n, sink, ord, q_win, q_snk, scale, hd, sc.data(), dst);
      }
    });
    return;
  }
#endif
  // The keys any row sees (by key, then their order positions in stream order), found once: the
  // cache's empty and faded slots are most of N early in a chat, and asking every row block of
  // every KV head about each of them (8 mask reads a slot) took half a prefill chunk's attention
  // at 4,128 slots and 200 tokens.
  // (8 mask bytes a step, through a local pointer: byte by byte through the thread_local vector,
  // whose own fields a byte store may alias, GCC reloaded them and called __tls_get_addr for every
  // key: ~45 us of an 8-row verify's layer at 4,128 slots, half of a 64-row chunk's own-keys cost)
  thread_local std::vector<uint8_t> any_tl;
  thread_local std::vector<int> cand_tl;
  any_tl.assign(N, 0);
  uint8_t* any = any_tl.data();
  for (int c = 0; c < C; ++c) {
    const bool* m = msk + (size_t)c * N;
    int key = 0;
    static_assert(sizeof(bool) == 1, "XLA's PRED elements are bytes");
    for (; key + 8 <= N; key += 8) {  // (a bool is one byte, 0 or 1: OR them as words)
      uint64_t a, b;
      std::memcpy(&a, any + key, 8);
      std::memcpy(&b, m + key, 8);
      a |= b;
      std::memcpy(any + key, &a, 8);
    }
    for (; key < N; ++key) any[key] |= (uint8_t)m[key];
  }
  std::vector<int>& cand = cand_tl;
  cand.clear();
  for (int j = 0; j < N; ++j)
    if (any[ord[j]]) cand.push_back(j);
  // Tasks of (run of NH KV heads, block of rows); each key is converted once a task and used by
  // all its pairs. Long cache rows (1 KB and more): a head a task, and a block as large as keeps
  // its (row, head) pairs near 64 while the threads have two tasks each. Short rows (the default
  // model's: 3 KV heads, 192 bytes): every head in each task, so a task reads whole rows (a head
  // a task read 64 bytes every 192, which made an 8-row verify's attention slower than a copy of
  // the cache), and a block per thread, or of 16 rows. Each block's keys (U: those any of its
  // rows sees) and which row sees which (vis) are found once for all the KV heads.
  const int NH = long_rows ? 1 : KVH, runs = KVH / NH;
  int RB;
  if (long_rows) {
    RB = std::max(8, 64 / G / 8 * 8);
    while (RB > 8 && (int64_t)KVH * ((C + RB - 1) / RB) < 2 * workers) RB -= 8;
  } else {
    const int blocks = std::min(C, std::max(workers, (C + 15) / 16));
    RB = (C + blocks - 1) / blocks;
  }
  const int n_blocks = (C + RB - 1) / RB;
  thread_local std::vector<std::vector<int>> Ub;
  thread_local std::vector<std::vector<uint8_t>> visb;
  thread_local std::vector<std::vector<int>> leadb;
  if ((int)Ub.size() < n_blocks) Ub.resize(n_blocks), visb.resize(n_blocks), leadb.resize(n_blocks);
  for (int bk = 0; bk < n_blocks; ++bk) {
    const int c0 = bk * RB, c1 = std::min(C, c0 + RB);
    std::vector<int>& U = Ub[bk];
    U.clear();
    for (int j : cand) {
      const int key = ord[j];
      for (int c = c0; c < c1; ++c)
        if (msk[(size_t)c * N + key]) {
          U.push_back(j);
          break;
        }
    }
    const int nU = (int)U.size();
    std::vector<uint8_t>& vis = visb[bk];
    vis.resize((size_t)(c1 - c0) * nU);
    leadb[bk].resize(c1 - c0);
    for (int r = 0; r < c1 - c0; ++r) {
      uint8_t* vr = vis.data() + (size_t)r * nU;
      for (int u = 0; u < nU; ++u) vr[u] = msk[(size_t)(c0 + r) * N + ord[U[u]]];
      const int lead = (int)(std::find(vr, vr + nU, 0) - vr);
      leadb[bk][r] = std::find(vr + lead, vr + nU, 1) == vr + nU ? lead : -1;
    }
  }
  const std::vector<int>* Us = Ub.data();  // (the helpers' lambda must see this thread's lists)
  const std::vector<uint8_t>* viss = visb.data();
  [[maybe_unused]] const std::vector<int>* leads = leadb.data();
  parallel_for(pool_threads, n_blocks * runs, [&](int task) {
    const int g = task % runs * NH, bk = task / runs, c0 = bk * RB, c1 = std::min(C, c0 + RB), R = c1 - c0;
    const int* U = Us[bk].data();
    const int nU = (int)Us[bk].size();
    const uint8_t* vis = viss[bk].data();
    // keys U[u0 .. u0 + n) of KV heads g .. g + NH, converted to f32 as load_key does, into dst
    // [NH][n][hd] (asking for the rows ahead, a line every kv_dim bytes, made it slower)
    auto fill = [&](bool values, int u0, int n, float* dst) {
      const char* base = values ? vbase : kbase;
      for (int i = 0; i < n; ++i) {
        const int key = ord[U[u0 + i]];
        for (int kh = 0; kh < NH; ++kh) {
          float* d = dst + ((size_t)kh * n + i) * hd;
          if (key < S)
            load_key<T>(base, values ? vsb : ksb, key, (g + kh) * hd, hd, kv_dim, d);
          else
            std::memcpy(d, (values ? v_new : k_new) + (size_t)(key - S) * kv_dim + (g + kh) * hd, hd * sizeof(float));
        }
      }
    };
#if defined(PW_VEC8)
    if (hd % 8 == 0) {
      const int P = NH * R * G;
      const size_t block = (size_t)NH * std::max(BLOCK_FLOATS, 3 * hd);
      thread_local std::vector<float> S_, e, sums, blk, acc;
      S_.resize((size_t)P * nU), sums.resize(P), acc.resize((size_t)P * hd);
      if (e.size() < (size_t)nU) e.resize(nU);
      if (blk.size() < block) blk.resize(block);
      attend_rows(fill, U, nU, vis, leads[bk].data(), R, G, NH, hd, sink, ord, qw, qs, H, g * G, c0, scale, S_.data(),
                  e.data(), sums.data(), blk.data(), acc.data(), o);
      return;
    }
#endif
    // Without 8-lane vectors: the run's keys and values all converted, then row by row.
    thread_local std::vector<float> Kt, Vt, sc;
    thread_local std::vector<int> keys;
    Kt.resize((size_t)NH * nU * hd), Vt.resize((size_t)NH * nU * hd), sc.resize(nU);
    fill(false, 0, nU, Kt.data());
    fill(true, 0, nU, Vt.data());
    for (int r = 0; r < R; ++r) {
      keys.clear();
      for (int u = 0; u < nU; ++u)
        if (vis[(size_t)r * nU + u]) keys.push_back(u);
      const int n = (int)keys.size(), c = c0 + r;
      for (int h = g * G; h < (g + NH) * G; ++h) {
        const float *Kh = Kt.data() + (size_t)(h / G - g) * nU * hd, *Vh = Vt.data() + (size_t)(h / G - g) * nU * hd;
        float* dst = o + ((size_t)c * H + h) * hd;
        std::fill(dst, dst + hd, 0.f);
        if (n == 0) continue;
        const float* q_win = qw + ((size_t)c * H + h) * hd;
        const float* q_snk = qs + ((size_t)c * H + h) * hd;
        for (int k = 0; k < n; ++k) {
          const int u = keys[k];
          sc[k] = dot(sink[ord[U[u]]] ? q_snk : q_win, Kh + (size_t)u * hd, hd) * scale;
        }
        float mx = -INFINITY;
        for (int k = 0; k < n; ++k) mx = std::max(mx, sc[k]);
        for (int k = 0; k < n; ++k) sc[k] -= mx;
        exp_inplace(sc.data(), n);
        float sum = 0.f;
        for (int k = 0; k < n; ++k) sum += sc[k];
        for (int k = 0; k < n; ++k) axpy(sc[k], Vh + (size_t)keys[k] * hd, dst, hd);
        const float inv = 1.f / sum;
        for (int i = 0; i < hd; ++i) dst[i] *= inv;
      }
    }
  });
}

#if defined(PW_ATT512) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template <KV T>
ffi::Error attention(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> qw, ffi::Buffer<ffi::F32> qs, ffi::AnyBuffer kc,
                     ffi::AnyBuffer vc, ffi::AnyBuffer ks, ffi::AnyBuffer vs, ffi::Buffer<ffi::F32> k_new,
                     ffi::Buffer<ffi::F32> v_new, ffi::Buffer<ffi::S32> order, ffi::Buffer<ffi::PRED> mask,
                     ffi::Buffer<ffi::PRED> key_sink, ffi::Buffer<ffi::S32> layer, ffi::ResultBuffer<ffi::F32> out) {
  // qw, qs [C, H, hd]; kc, vc [L, S, kv]; ks, vs [L, S, kv/32] (int8 only); k_new, v_new [C, kv];
  // order [S + C]; mask [C, S + C]; key_sink [S + C]; out [C, H * hd].
  const auto qd = qw.dimensions();
  const auto cd = kc.dimensions();
  if (qd.size() != 3 || cd.size() != 3) return ffi::Error::InvalidArgument("attention: bad ranks");
  const int C = (int)qd[0], H = (int)qd[1], hd = (int)qd[2];
  const int L = (int)cd[0], S = (int)cd[1], kv_dim = (int)cd[2];
  const int KVH = kv_dim / hd, G = H / KVH, N = S + C;
  const int l = layer.typed_data()[0];
  if (l < 0 || l >= L || KVH * hd != kv_dim || G * KVH != H || (int)order.element_count() != N)
    return ffi::Error::InvalidArgument("attention: shapes do not match");
  const size_t esize = T == KV::I8 ? 1 : T == KV::BF16 ? 2 : 4;
  const char* kbase = (const char*)kc.untyped_data() + (size_t)l * S * kv_dim * esize;
  const char* vbase = (const char*)vc.untyped_data() + (size_t)l * S * kv_dim * esize;
  const float* ksb = T == KV::I8 ? (const float*)ks.untyped_data() + (size_t)l * S * (kv_dim / QK) : nullptr;
  const float* vsb = T == KV::I8 ? (const float*)vs.untyped_data() + (size_t)l * S * (kv_dim / QK) : nullptr;
  const int32_t* ord = order.typed_data();
  const bool* msk = mask.typed_data();
  const bool* sink = key_sink.typed_data();
  float* o = out->typed_data();
  attention_rows<T>((int)pool.num_threads(), qw.typed_data(), qs.typed_data(), C, H, hd, S, kv_dim, kbase, vbase, ksb, vsb,
                    k_new.typed_data(), v_new.typed_data(), ord, msk, sink, o);
  return ffi::Error::Success();
}

}  // namespace

#define PINWHEEL_BIND                                  \
  ffi::Ffi::Bind()                                     \
      .Ctx<ffi::ThreadPool>()                          \
      .Arg<ffi::Buffer<ffi::F32>>()                    \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::Buffer<ffi::S32>>()                    \
      .Arg<ffi::Buffer<ffi::F32>>()                    \
      .Attr<float>("eps")                              \
      .Ret<ffi::Buffer<ffi::F32>>()

XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ8_0, qmatmul<Fmt::Q8_0>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ4_0, qmatmul<Fmt::Q4_0>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ4_1, qmatmul<Fmt::Q4_1>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ4_K, qmatmul<Fmt::Q4_K>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ6_K, qmatmul<Fmt::Q6_K>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ5_0, qmatmul<Fmt::Q5_0>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ5_1, qmatmul<Fmt::Q5_1>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ5_K, qmatmul<Fmt::Q5_K>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ4_NL, qmatmul<Fmt::IQ4_NL>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ4_XS, qmatmul<Fmt::IQ4_XS>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ3_K, qmatmul<Fmt::Q3_K>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ2_K, qmatmul<Fmt::Q2_K>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ3_XXS, qmatmul<Fmt::IQ3_XXS>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ3_S, qmatmul<Fmt::IQ3_S>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ2_XXS, qmatmul<Fmt::IQ2_XXS>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ2_XS, qmatmul<Fmt::IQ2_XS>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ2_S, qmatmul<Fmt::IQ2_S>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ1_S, qmatmul<Fmt::IQ1_S>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelIQ1_M, qmatmul<Fmt::IQ1_M>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelF16, qmatmul<Fmt::F16>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelBF16, qmatmul<Fmt::BF16>, PINWHEEL_BIND);

#define PINWHEEL_ATTN_BIND                             \
  ffi::Ffi::Bind()                                     \
      .Ctx<ffi::ThreadPool>()                          \
      .Arg<ffi::Buffer<ffi::F32>>()                    \
      .Arg<ffi::Buffer<ffi::F32>>()                    \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::AnyBuffer>()                           \
      .Arg<ffi::Buffer<ffi::F32>>()                    \
      .Arg<ffi::Buffer<ffi::F32>>()                    \
      .Arg<ffi::Buffer<ffi::S32>>()                    \
      .Arg<ffi::Buffer<ffi::PRED>>()                   \
      .Arg<ffi::Buffer<ffi::PRED>>()                   \
      .Arg<ffi::Buffer<ffi::S32>>()                    \
      .Ret<ffi::Buffer<ffi::F32>>()

XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelAttnI8, attention<KV::I8>, PINWHEEL_ATTN_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelAttnBF16, attention<KV::BF16>, PINWHEEL_ATTN_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelAttnF32, attention<KV::F32>, PINWHEEL_ATTN_BIND);

// Gated DeltaNet's one-token state update (Qwen3.5's recurrent layers) lives in its own file:
// it shares this file's thread pool and nothing else.
#include "deltanet_step.inc"

// The weight formats this build multiplies at speed (engine/quant.py's names): the loader holds
// a tensor in its own format only where the build has a vector tile for it, and re-quantizes it
// to q8_0 elsewhere (every build computes every format correctly: tile_scalar). Every vector
// build (AVX2 and up, SSE4.1, NEON with or without dotprod/i8mm) has a tile for each; the plain
// C++ build (tile_scalar for all) keeps to the four it has always listed.
extern "C" const char* pinwheel_kernel_formats() {
#if defined(__AVX2__) || defined(__SSE4_1__) || defined(PW_NEON)
  return "q8_0 q4_0 q4_1 q4_k q6_k q5_0 q5_1 q5_k iq4_nl iq4_xs q3_k q2_k iq3_xxs iq3_s f16 bf16 iq2_xxs iq2_xs iq2_s iq1_s iq1_m";
#else
  return "q8_0 q4_0 q4_1 q4_k";
#endif
}

// What the build targeted, for the bench and the tests to report.
extern "C" const char* pinwheel_kernel_isa() {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return "avx512-vnni";
#elif defined(__AVXVNNI__)
  return "avx-vnni";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(PW_NEON) && defined(__ARM_FEATURE_MATMUL_INT8) && defined(__ARM_FEATURE_DOTPROD)
  return "neon+dotprod+i8mm";
#elif defined(PW_NEON) && defined(__ARM_FEATURE_DOTPROD)
  return "neon+dotprod";
#elif defined(PW_NEON)
  return "neon";
#elif defined(__SSE4_1__)
  return "sse4.1 products";  // (attention and the x row's rounding run the generic code)
#else
  return "generic";
#endif
}
