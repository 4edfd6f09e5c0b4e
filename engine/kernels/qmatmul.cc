// Block-quantized matrix products for XLA:CPU, called from JAX through the FFI.
//
// y[c, o] = sum_i x[c, i] * W[o, i] for weights kept in GGUF's own block layouts, 32 values
// per block with f16 scales (llama.cpp's Q8_0, Q4_0, Q4_1), read straight from the packed
// bytes. XLA:CPU has no fast path for int8 or 4-bit weights (it converts as it reads, at a
// fraction of the memory bandwidth, and at some shapes materialises an f32 copy of the weight
// on every step); here each row of x is quantized to int8 per 32 values, as llama.cpp does,
// and the products run on the integer dot-product units (AVX-512 VNNI, else AVX2, else plain
// C++ the compiler vectorises).
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
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int QK = 32;

enum class Fmt { Q8_0, Q4_0, Q4_1 };

inline float half_to_float(uint16_t h) {
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

// One row of x quantized as llama.cpp's Q8_0/Q8_1 activations: int8 values, a scale per block
// and (for the weights' offsets) the scaled sum of each block's values.
struct QRow {
  const int8_t* q;
  const float* d;
  const float* s;  // d * sum(q) per block
};

void quantize_row(const float* x, int n_blocks, int8_t* q, float* d, float* s) {
  for (int b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * QK;
    float amax = 0.f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float db = amax / 127.f, id = db != 0.f ? 1.f / db : 0.f;
    int sum = 0;
    for (int j = 0; j < QK; ++j) {
      const int v = (int)std::nearbyint(xb[j] * id);
      q[b * QK + j] = (int8_t)v;
      sum += v;
    }
    d[b] = db;
    s[b] = db * (float)sum;
  }
}

// The weight layout (engine/quant.py writes it): output rows in groups of 8, and inside a
// group, block by block, the values of all 8 rows interleaved 4 bytes at a time, so that one
// 32-byte load holds 4 consecutive values of each of the 8 rows and one dot-product
// instruction against 4 broadcast x values advances all 8 outputs (llama.cpp's repacked Q4_0
// kernels work the same way). Per group and block:
//   q8_0: 256 bytes, [8 steps][8 rows][4 values], each value stored as w + 128 (unsigned);
//   q4_x: 128 bytes, [4 steps][8 rows][4 bytes]; the low nibbles of step k are values 4k..4k+3,
//         the high nibbles values 16+4k..16+4k+3 of that row's block (GGUF's nibble order);
//   scales (and q4_1 offsets): [8 rows] f16.
// Every weight value is then unsigned (0..255 or 0..15) and the offset (128, 8, or m) is
// applied through the x block's sum: sum(w x) = d_w d_x sum(u q_x) + offset * d_x sum(q_x).
constexpr int GROUP = 8;

template <Fmt F>
constexpr int block_bytes() { return F == Fmt::Q8_0 ? QK * GROUP : QK / 2 * GROUP; }

#if defined(__AVX2__)
// 8 int32 lanes: acc + sum over 4-byte groups of u (unsigned) x s (signed).
inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else  // exact in 16 bits: u up to 255 times s up to 127 does not fit maddubs' saturating pairs
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi8(u, _mm256_setzero_si256()),
                                       _mm256_srai_epi16(_mm256_unpacklo_epi8(s, s), 8));
  const __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi8(u, _mm256_setzero_si256()),
                                       _mm256_srai_epi16(_mm256_unpackhi_epi8(s, s), 8));
  (void)ones;
  return _mm256_add_epi32(acc, _mm256_add_epi32(lo, hi));
#endif
}

// G row groups (8 rows each) against R quantized x rows: R * G independent accumulator chains,
// which is what hides the dot-product latency (a 1-row step takes G = 4 groups at once).
// Every output lane sees the same instructions in the same order whatever R and G are.
template <Fmt F, int R, int G>
void tile(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
          int64_t out_stride) {
  __m256 acc[R][G], tail[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = tail[r][g] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int b = 0; b < nb; ++b) {
    for (int g = 0; g < G; ++g) {
      const uint8_t* wb = wq + ((size_t)g * nb + b) * block_bytes<F>();
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(wd + ((size_t)g * nb + b) * GROUP)));
      __m256 coef;
      if constexpr (F == Fmt::Q8_0) coef = _mm256_mul_ps(dw, _mm256_set1_ps(-128.f));
      if constexpr (F == Fmt::Q4_0) coef = _mm256_mul_ps(dw, _mm256_set1_ps(-8.f));
      if constexpr (F == Fmt::Q4_1) coef = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(wm + ((size_t)g * nb + b) * GROUP)));
      __m256i w[8];
      if constexpr (F == Fmt::Q8_0) {
        for (int k = 0; k < 8; ++k) w[k] = _mm256_loadu_si256((const __m256i*)(wb + 32 * k));
      } else {
        for (int k = 0; k < 4; ++k) {
          const __m256i raw = _mm256_loadu_si256((const __m256i*)(wb + 32 * k));
          w[k] = _mm256_and_si256(raw, m4);
          w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        }
      }
      for (int r = 0; r < R; ++r) {
        const int32_t* xb = (const int32_t*)(x[r].q + b * QK);  // 8 groups of 4 values
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        for (int k = 0; k < 8; k += 2) {
          s0 = dot4(s0, w[k], _mm256_set1_epi32(xb[k]));
          s1 = dot4(s1, w[k + 1], _mm256_set1_epi32(xb[k + 1]));
        }
        // q4: w[k] pairs with x values 4k..4k+3 for k < 4 and 16+4(k-4).. for k >= 4; xb[k]
        // for k < 4 and xb[k] for k >= 4 are exactly those groups (xb[4] = values 16..19).
        const __m256i s = _mm256_add_epi32(s0, s1);
        acc[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(x[r].d[b])), acc[r][g]);
        tail[r][g] = _mm256_fmadd_ps(coef, _mm256_set1_ps(x[r].s[b]), tail[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + r * out_stride + g * GROUP, _mm256_add_ps(acc[r][g], tail[r][g]));
}
#else
template <Fmt F, int R, int G>
void tile(const uint8_t* wq, const uint16_t* wd, const uint16_t* wm, const QRow* x, int nb, float* out,
          int64_t out_stride) {
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r)
      for (int row = 0; row < GROUP; ++row) {
        float acc = 0.f, tail = 0.f;
        for (int b = 0; b < nb; ++b) {
          const uint8_t* wb = wq + ((size_t)g * nb + b) * block_bytes<F>();
          const size_t si = ((size_t)g * nb + b) * GROUP + row;
          const float dw = half_to_float(wd[si]);
          const int8_t* xb = x[r].q + b * QK;
          int sum = 0;
          for (int k = 0; k < 8; ++k)
            for (int j = 0; j < 4; ++j) {
              int u;
              if constexpr (F == Fmt::Q8_0) u = wb[32 * k + 4 * row + j];
              else u = k < 4 ? (wb[32 * k + 4 * row + j] & 0x0f) : (wb[32 * (k - 4) + 4 * row + j] >> 4);
              sum += u * xb[4 * k + j];
            }
          const float coef = F == Fmt::Q8_0 ? -128.f * dw : F == Fmt::Q4_0 ? -8.f * dw : half_to_float(wm[si]);
          acc += (float)sum * (dw * x[r].d[b]);
          tail += coef * x[r].s[b];
        }
        out[r * out_stride + g * GROUP + row] = acc + tail;
      }
}
#endif

// Runs fn(chunk) for every chunk in [0, n): the calling thread and up to (pool size - 1)
// helpers claim chunks from one counter. A helper that starts late finds nothing left and
// returns, so the caller never waits on a task that has not begun (no deadlock when the pool
// is busy), and it only waits for chunks already being computed.
struct Job {
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  int n = 0;
  std::function<void(int)> fn;
  void work() {
    for (int i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      fn(i);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

void parallel_for(ffi::ThreadPool& pool, int n, std::function<void(int)> fn) {
  const int helpers = std::min<int64_t>(pool.num_threads(), n) - 1;
  if (helpers <= 0) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->n = n;
  job->fn = std::move(fn);
  for (int t = 0; t < helpers; ++t) pool.Schedule([job] { job->work(); });
  job->work();
  while (job->done.load(std::memory_order_acquire) < n) {
#if defined(__AVX2__)
    _mm_pause();
#endif
  }
}

template <Fmt F>
ffi::Error qmatmul(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::AnyBuffer wq, ffi::AnyBuffer wd,
                   ffi::AnyBuffer wm, ffi::Buffer<ffi::S32> layer, ffi::ResultBuffer<ffi::F32> y) {
  // x [C, I]; wq [L, O/8, I/32, block bytes]; wd, wm [L, O/8, I/32, 8]; y [C, O].
  const auto xd = x.dimensions();
  const auto qd = wq.dimensions();
  if (xd.size() != 2 || qd.size() != 4) return ffi::Error::InvalidArgument("qmatmul: x must be [C, I], w [L, O/8, I/32, .]");
  const int64_t C = xd[0], I = xd[1], L = qd[0], n_groups = qd[1], O = n_groups * GROUP;
  const int nb = (int)(I / QK);
  if (I % QK || qd[2] != nb || qd[3] != block_bytes<F>()) return ffi::Error::InvalidArgument("qmatmul: weight does not match x");
  const int l = layer.typed_data()[0];
  if (l < 0 || l >= L) return ffi::Error::InvalidArgument("qmatmul: layer index out of range");

  std::vector<int8_t> q(C * I);
  std::vector<float> d(C * nb), s(C * nb);
  std::vector<QRow> rows(C);
  for (int64_t c = 0; c < C; ++c) {
    quantize_row(x.typed_data() + c * I, nb, &q[c * I], &d[c * nb], &s[c * nb]);
    rows[c] = QRow{&q[c * I], &d[c * nb], &s[c * nb]};
  }
  const size_t group_q = (size_t)nb * block_bytes<F>(), group_s = (size_t)nb * GROUP;
  const uint8_t* q_base = (const uint8_t*)wq.untyped_data() + (size_t)l * n_groups * group_q;
  const uint16_t* d_base = (const uint16_t*)wd.untyped_data() + (size_t)l * n_groups * group_s;
  const uint16_t* m_base = (const uint16_t*)wm.untyped_data() + (F == Fmt::Q4_1 ? (size_t)l * n_groups * group_s : 0);
  float* out = y->typed_data();
  // Chunks of 4 groups (32 output rows): the unit of a 1-row tile, and fine enough to balance.
  constexpr int G = 4;
  const int n_chunks = (int)((n_groups + G - 1) / G);
  parallel_for(pool, n_chunks, [&](int chunk) {
    const int64_t g0 = (int64_t)chunk * G, g1 = std::min(n_groups, g0 + G);
    for (int64_t g = g0; g < g1;) {
      const uint8_t* wg = q_base + g * group_q;
      const uint16_t* dg = d_base + g * group_s;
      const uint16_t* mg = m_base + (F == Fmt::Q4_1 ? g * group_s : 0);
      const int take = g + G <= g1 ? G : 1;
      int64_t c = 0;
      if (take == G) {
        for (; c + 2 <= C; c += 2) tile<F, 2, G>(wg, dg, mg, &rows[c], nb, out + c * O + g * GROUP, O);
        for (; c < C; ++c) tile<F, 1, G>(wg, dg, mg, &rows[c], nb, out + c * O + g * GROUP, O);
      } else {
        for (; c + 4 <= C; c += 4) tile<F, 4, 1>(wg, dg, mg, &rows[c], nb, out + c * O + g * GROUP, O);
        for (; c < C; ++c) tile<F, 1, 1>(wg, dg, mg, &rows[c], nb, out + c * O + g * GROUP, O);
      }
      g += take;
    }
  });
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
      .Ret<ffi::Buffer<ffi::F32>>()

XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ8_0, qmatmul<Fmt::Q8_0>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ4_0, qmatmul<Fmt::Q4_0>, PINWHEEL_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(PinwheelQ4_1, qmatmul<Fmt::Q4_1>, PINWHEEL_BIND);

// What the build targeted, for the bench and the tests to report.
extern "C" const char* pinwheel_kernel_isa() {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return "avx512-vnni";
#elif defined(__AVXVNNI__)
  return "avx-vnni";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "generic";
#endif
}
