// A C++ check of engine/kernels/qmatmul.cc's products and attention, for any ISA the kernel
// builds for: scripts/test_arm64.sh cross-builds it for the three aarch64 variants and runs them
// under qemu-aarch64 (and natively on x86 against the x86 paths, which checks the harness).
//
// It includes the kernel's source and calls its internal entry points (qmatmul_rows,
// attention_rows) on random inputs, and checks:
//  - every product (q8_0, q4_0, q4_1, q4_k, q6_k, q5_0, q5_1, q5_k, iq4_nl, iq4_xs, q3_k, q2_k, iq3_xxs, iq3_s, f16, bf16,
//    iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m; chunks of 1, 2 and 4 groups; 1 row, verify- and
//    prefill-sized row counts, odd ones) against a double-precision x @ W^T at the x86 tests'
//    tolerance (tests/engine/test_quant.py: max error <= 2% of the largest output), and against a
//    double-precision sum over the kernel's own int8 activations at float rounding's bound;
//  - every attention path (int8, bf16, f32 caches; decode rows, verify chunks, prefill chunks;
//    sinks and windows; compiled and uncompiled group sizes; short and long cache rows) against a
//    double-precision softmax(q.k / sqrt(hd)) V at tests/engine/test_forward.py's tolerance
//    (rtol = atol = 2e-5);
//  - invariance, bit for bit: a product row's result is the same in a call of any row count and
//    on any number of threads; an attention row's result is the same whether it was computed in
//    a 1-row decode step (its predecessors in the cache), in any split of its chunk, or on any
//    number of threads;
//  - the load's re-layout (engine/kernels/relayout.cc): every format's weight, written out here as
//    GGUF stores it (llama.cpp's block structs), re-laid on 1 and 2 threads, whole and in two
//    parts, is byte for byte the layout the products above read; a NaN scale is counted.
// It prints "<name>: N checks passed" and a digest of the outputs, and exits 1 on any failure.
#include "qmatmul.cc"
#include "relayout.cc"

#include <cinttypes>
#include <initializer_list>
#include <cstdio>
#include <random>
#include <string>

namespace {

int g_checks = 0, g_failures = 0;
uint64_t g_digest = 1469598103934665603ull;  // FNV-1a over every checked output's bits

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok && ++g_failures <= 40) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

void digest(const float* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n * sizeof(float); ++i) g_digest = (g_digest ^ b[i]) * 1099511628211ull;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// IEEE half, written out (not the kernel's converter, which this checks)
double h2d(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1024.0 + m, e - 25);
  return h & 0x8000 ? -v : v;
}
uint16_t d2h(double v) {  // the half at or below |v| (any half will do: the reference reads it back)
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  v = std::fabs(v);
  if (v < std::ldexp(1.0, -14)) return (uint16_t)(sign | (int)std::floor(std::ldexp(v, 24)));
  int e;
  const double f = std::frexp(v, &e);  // v = f 2^e, f in [0.5, 1)
  return (uint16_t)(sign | (e + 14) << 10 | ((int)std::floor(f * 2048.0) - 1024));
}

// --- products -------------------------------------------------------------------------------

const char* fmt_name(Fmt f) {
  return f == Fmt::Q8_0 ? "q8_0" : f == Fmt::Q4_0 ? "q4_0" : f == Fmt::Q4_1 ? "q4_1" : f == Fmt::Q4_K ? "q4_k"
         : f == Fmt::Q6_K ? "q6_k" : f == Fmt::Q5_0 ? "q5_0" : f == Fmt::Q5_1 ? "q5_1" : f == Fmt::Q5_K ? "q5_k"
         : f == Fmt::IQ4_NL ? "iq4_nl" : f == Fmt::IQ4_XS ? "iq4_xs" : f == Fmt::Q3_K ? "q3_k" : f == Fmt::Q2_K ? "q2_k"
         : f == Fmt::IQ3_XXS ? "iq3_xxs" : f == Fmt::IQ3_S ? "iq3_s" : f == Fmt::F16 ? "f16" : f == Fmt::BF16 ? "bf16"
         : f == Fmt::IQ2_XXS ? "iq2_xxs" : f == Fmt::IQ2_XS ? "iq2_xs" : f == Fmt::IQ2_S ? "iq2_s" : f == Fmt::IQ1_S ? "iq1_s" : "iq1_m";
}

struct Weight {
  Fmt fmt;
  int out, inp, nb, G, K, n_chunks;
  std::vector<double> dense;  // [out][inp], GGUF's meaning of the blocks
  std::vector<int> u;         // [G * 8][inp]: the unsigned value the product takes
  std::vector<int> nib;       // iq4: [G * 8][inp] the stored 4-bit index (u = IQ4_U[nib])
  std::vector<double> dw, coef;  // [G * 8][nb]: the scale and the offset term's coefficient
  std::vector<double> dw16;      // q6_k, q3_k, q2_k: [G * 8][2 nb], each 16 values' d * scale (w = dw16 (u - off))
  std::vector<double> cf16;      // q2_k: [G * 8][2 nb], each 16 values' -dmin * min (w = dw16 u + cf16)
  std::vector<uint8_t> q;        // the kernel's layout (engine/quant.py's pack)
  std::vector<uint16_t> d, m;
  std::vector<uint8_t> gguf;     // [out][row_bytes]: the same weight as a GGUF file stores it
  int row_bytes = 0;
};

// A weight's shape: out rows in groups of 8, chunks of 4 groups (2 or 1 where the group count
// is not a multiple), as engine/quant.py chunks them.
Weight shaped(Fmt fmt, int out, int inp) {
  Weight w;
  w.fmt = fmt, w.out = out, w.inp = inp, w.nb = inp / QK;
  w.G = (out + GROUP - 1) / GROUP;
  w.K = w.G % 4 == 0 ? 4 : w.G % 2 == 0 ? 2 : 1;
  w.n_chunks = w.G / w.K;
  return w;
}

// GGUF's block of each format: bytes, and whether it spans a super-block of 256 values.
int gguf_block_bytes(Fmt f) {
  return f == Fmt::Q8_0 ? 34 : f == Fmt::Q4_0 || f == Fmt::IQ4_NL ? 18 : f == Fmt::Q4_1 ? 20 : f == Fmt::Q5_0 ? 22
         : f == Fmt::Q5_1 ? 24 : f == Fmt::Q4_K ? 144 : f == Fmt::Q5_K ? 176 : f == Fmt::Q6_K ? 210 : f == Fmt::Q3_K ? 110
         : f == Fmt::Q2_K ? 84 : f == Fmt::IQ3_XXS ? 98 : f == Fmt::IQ3_S ? 110 : f == Fmt::F16 || f == Fmt::BF16 ? 64
         : f == Fmt::IQ2_XXS ? 66 : f == Fmt::IQ2_XS ? 74 : f == Fmt::IQ2_S ? 82 : f == Fmt::IQ1_S ? 50 : f == Fmt::IQ1_M ? 56 : 136;
}
bool gguf_super(Fmt f) {
  return f == Fmt::Q4_K || f == Fmt::Q5_K || f == Fmt::Q6_K || f == Fmt::IQ4_XS || f == Fmt::Q3_K || f == Fmt::Q2_K ||
         f == Fmt::IQ3_XXS || f == Fmt::IQ3_S || f == Fmt::IQ2_XXS || f == Fmt::IQ2_XS || f == Fmt::IQ2_S || f == Fmt::IQ1_S ||
         f == Fmt::IQ1_M;
}
bool iq12_fmt(Fmt f) { return f == Fmt::IQ2_XXS || f == Fmt::IQ2_XS || f == Fmt::IQ2_S || f == Fmt::IQ1_S || f == Fmt::IQ1_M; }
int half_off(Fmt f) { return f == Fmt::Q6_K ? 32 : f == Fmt::Q3_K ? 4 : iq12_fmt(f) ? 128 : 0; }  // (q - off) per 16 values
bool per16(Fmt f) { return f == Fmt::Q6_K || f == Fmt::Q3_K || f == Fmt::Q2_K || iq12_fmt(f); }
bool is_float(Fmt f) { return f == Fmt::F16 || f == Fmt::BF16; }
void put_half(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
// 32 4-bit values as GGUF's 16 bytes: byte t holds value t low, value t + 16 high.
void put_nibbles16(uint8_t* p, const int* v) {
  for (int t = 0; t < 16; ++t) p[t] = (uint8_t)((v[t] & 15) | (v[t + 16] & 15) << 4);
}

int block_bytes_of(Fmt f) {
  return f == Fmt::Q8_0 ? block_bytes<Fmt::Q8_0>() : f == Fmt::Q6_K ? block_bytes<Fmt::Q6_K>()
         : f == Fmt::Q3_K ? block_bytes<Fmt::Q3_K>() : f == Fmt::Q2_K ? block_bytes<Fmt::Q2_K>()
         : f == Fmt::IQ3_XXS ? block_bytes<Fmt::IQ3_XXS>() : f == Fmt::IQ3_S ? block_bytes<Fmt::IQ3_S>()
         : is_float(f) ? block_bytes<Fmt::F16>()
         : f == Fmt::IQ2_XXS ? block_bytes<Fmt::IQ2_XXS>() : f == Fmt::IQ2_XS ? block_bytes<Fmt::IQ2_XS>()
         : f == Fmt::IQ2_S ? block_bytes<Fmt::IQ2_S>() : f == Fmt::IQ1_S ? block_bytes<Fmt::IQ1_S>()
         : f == Fmt::IQ1_M ? block_bytes<Fmt::IQ1_M>()
         : f == Fmt::Q5_0 || f == Fmt::Q5_1 || f == Fmt::Q5_K ? block_bytes<Fmt::Q5_0>() : block_bytes<Fmt::Q4_0>();
}

// llama.cpp's ksigns_iq2xs (ggml/src/ggml-common.h, MIT licence): 7 sign bits and their parity.
constexpr uint8_t KSIGNS[128] = {
      0, 129, 130,   3, 132,   5,   6, 135, 136,   9,  10, 139,  12, 141, 142,  15,
    144,  17,  18, 147,  20, 149, 150,  23,  24, 153, 154,  27, 156,  29,  30, 159,
    160,  33,  34, 163,  36, 165, 166,  39,  40, 169, 170,  43, 172,  45,  46, 175,
     48, 177, 178,  51, 180,  53,  54, 183, 184,  57,  58, 187,  60, 189, 190,  63,
    192,  65,  66, 195,  68, 197, 198,  71,  72, 201, 202,  75, 204,  77,  78, 207,
     80, 209, 210,  83, 212,  85,  86, 215, 216,  89,  90, 219,  92, 221, 222,  95,
     96, 225, 226,  99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111,
    240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
};

// IQ3_XXS / IQ3_S: random GGUF super-blocks (every byte random but d), their meaning as llama.cpp's
// dequantize_row_iq3_xxs / _iq3_s reads them, and the kernel's layout (the comment above
// qmatmul.cc's GROUP) written out from the GGUF bytes.
// The kernel's layout of a grid format's weight (iq3, iq2, iq1), made from its GGUF rows: for every
// row and block b, put(p, c, row, d, dst) copies block b's bytes into dst, its group's block in
// the chunked layout (p: the row's super-block in the file, c: b's place in it, d: the group's
// super-block scale of this row, to set where c == 0). Padding rows keep zero bytes and zero d.
template <class Put>
void relay_grid(Weight& w, int nsb, int sbytes, Put put) {
  const int nb = w.nb, gbytes = block_bytes_of(w.fmt);
  w.q.assign((size_t)w.G * nb * gbytes, 0);
  w.d.assign((size_t)w.G * nsb * GROUP, 0);
  for (int g = 0; g < w.G; ++g)
    for (int row = 0; row < GROUP; ++row) {
      const int o = g * GROUP + row;
      if (o >= w.out) continue;
      for (int b = 0; b < nb; ++b) {
        const uint8_t* p = &w.gguf[(size_t)o * w.row_bytes + (size_t)(b / BLOCKS_K) * sbytes];
        uint16_t& d = w.d[(((size_t)(g / w.K) * nsb + b / BLOCKS_K) * w.K + g % w.K) * GROUP + row];
        put(p, b % BLOCKS_K, row, d, &w.q[(((size_t)(g / w.K) * nb + b) * w.K + g % w.K) * gbytes]);
      }
    }
}

Weight make_iq3(std::mt19937& rng, Fmt fmt, int out, int inp) {
  Weight w = shaped(fmt, out, inp);
  const int rows = w.G * GROUP, nb = w.nb, nsb = nb / BLOCKS_K;
  const bool xxs = fmt == Fmt::IQ3_XXS;
  const int sbytes = xxs ? 98 : 110;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> byte(0, 255);
  w.dense.assign((size_t)out * inp, 0.0);
  w.u.assign((size_t)rows * inp, 128);
  w.dw.assign((size_t)rows * nb, 0.0), w.coef.assign((size_t)rows * nb, 0.0);
  w.row_bytes = nsb * sbytes;
  w.gguf.assign((size_t)out * w.row_bytes, 0);
  const uint32_t* grid = xxs ? IQ3XXS_GRID : IQ3S_GRID;
  for (int o = 0; o < out; ++o)
    for (int sb = 0; sb < nsb; ++sb) {
      uint8_t* p = &w.gguf[(size_t)o * w.row_bytes + (size_t)sb * sbytes];
      put_half(p, d2h((unit(rng) - 0.5) * (xxs ? 0.004 : 0.01)));
      for (int i = 2; i < sbytes; ++i) p[i] = (uint8_t)byte(rng);
      const double d = h2d((uint16_t)(p[0] | p[1] << 8));
      for (int c = 0; c < BLOCKS_K; ++c) {
        const int b = sb * BLOCKS_K + c;
        uint32_t aux = 0;
        std::memcpy(&aux, p + 66 + 4 * c, 4);
        const int ls = xxs ? (int)(aux >> 28) : (p[106 + c / 2] >> (4 * (c & 1))) & 15;
        const double db = xxs ? d * (0.5 + ls) * 0.5 : d * (1 + 2 * ls);
        w.dw[(size_t)o * nb + b] = db, w.coef[(size_t)o * nb + b] = -128.0 * db;
        for (int k = 0; k < 8; ++k) {  // values 4k..4k+3: qs[2l + t] for l = k / 2, t = k % 2
          const int idx = p[2 + 8 * c + k] | (xxs ? 0 : ((p[66 + c] >> k) & 1) << 8);
          const int sbits = xxs ? KSIGNS[(aux >> (7 * (k / 2))) & 127] : p[74 + 4 * c + k / 2];
          for (int j = 0; j < 4; ++j) {
            const int v = (int)((grid[idx] >> (8 * j)) & 255), neg = (sbits >> (4 * (k % 2) + j)) & 1;
            const int i = b * QK + 4 * k + j;
            w.u[(size_t)o * inp + i] = neg ? 128 - v : 128 + v;
            w.dense[(size_t)o * inp + i] = db * (neg ? -v : v);
          }
        }
      }
    }
  relay_grid(w, nsb, sbytes, [&](const uint8_t* p, int c, int row, uint16_t& d, uint8_t* dst) {
    if (c == 0) d = (uint16_t)(p[0] | p[1] << 8);
    for (int k = 0; k < 8; ++k) dst[8 * k + row] = p[2 + 8 * c + k];
    if (xxs) {  // the sign word: byte l = sign index l, and bit l of ls at its bit 7
      uint32_t aux, word = 0;
      std::memcpy(&aux, p + 66 + 4 * c, 4);
      for (int l = 0; l < 4; ++l) word |= ((aux >> (7 * l)) & 127) << (8 * l) | ((aux >> (28 + l)) & 1) << (8 * l + 7);
      std::memcpy(dst + 64 + 4 * row, &word, 4);
    } else {
      dst[64 + row] = p[66 + c];
      std::memcpy(dst + 72 + 4 * row, p + 74 + 4 * c, 4);
      dst[104 + row / 2] |= (uint8_t)(((p[106 + c / 2] >> (4 * (c & 1))) & 15) << (4 * (row & 1)));
    }
  });
  w.m.assign(1, 0);
  return w;
}

// IQ2_XXS / IQ2_XS / IQ2_S / IQ1_S / IQ1_M: GGUF's super-block bytes, and the f16 d (IQ1_M keeps
// it in the top nibbles of its 4 scale words, llama.cpp's iq1m_scale_t).
void put_iq1m_d(uint8_t* p, uint16_t h) {
  for (int i = 0; i < 4; ++i) p[49 + 2 * i] = (uint8_t)((p[49 + 2 * i] & 0x0f) | ((h >> (4 * i)) & 15) << 4);
}
uint16_t iq12_d(Fmt f, const uint8_t* p) {
  if (f != Fmt::IQ1_M) return (uint16_t)(p[0] | p[1] << 8);
  uint16_t h = 0;
  for (int i = 0; i < 4; ++i) h |= (uint16_t)((p[49 + 2 * i] >> 4) << (4 * i));
  return h;
}

// IQ2 / IQ1: random GGUF super-blocks (every byte random but d), their meaning as llama.cpp's
// dequantize_row_iq2_xxs / _iq2_xs / _iq2_s / _iq1_s / _iq1_m read them, and the kernel's layout
// (the comment above qmatmul.cc's GROUP) written out from the GGUF bytes. The product's
// unsigned value is w8 + 128 with w = dw16 w8 per 16 values (w8: the signed grid value, or
// 8 g +- 1 for iq1), its offset 128 off through the x values' sum per 16 (half_off).
Weight make_iq12(std::mt19937& rng, Fmt fmt, int out, int inp) {
  Weight w = shaped(fmt, out, inp);
  const int rows = w.G * GROUP, nb = w.nb, nsb = nb / BLOCKS_K;
  const int sbytes = gguf_block_bytes(fmt);
  const bool one = fmt == Fmt::IQ1_S || fmt == Fmt::IQ1_M;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> byte(0, 255);
  w.dense.assign((size_t)out * inp, 0.0);
  w.u.assign((size_t)rows * inp, 128);
  w.dw16.assign((size_t)rows * 2 * nb, 0.0), w.cf16.assign((size_t)rows * 2 * nb, 0.0);
  w.row_bytes = nsb * sbytes;
  w.gguf.assign((size_t)out * w.row_bytes, 0);
  const uint64_t* grid = fmt == Fmt::IQ2_XXS ? IQ2XXS_GRID : fmt == Fmt::IQ2_XS ? IQ2XS_GRID : fmt == Fmt::IQ2_S ? IQ2S_GRID : IQ1S_GRID;
  for (int o = 0; o < out; ++o)
    for (int sb = 0; sb < nsb; ++sb) {
      uint8_t* p = &w.gguf[(size_t)o * w.row_bytes + (size_t)sb * sbytes];
      for (int i = 0; i < sbytes; ++i) p[i] = (uint8_t)byte(rng);
      const uint16_t dh = d2h((unit(rng) - 0.5) * (one ? 0.004 : 0.01));
      if (fmt == Fmt::IQ1_M) put_iq1m_d(p, dh);
      else put_half(p, dh);
      const double d = h2d(dh);
      for (int c = 0; c < BLOCKS_K; ++c) {
        const int b = sb * BLOCKS_K + c;
        for (int l = 0; l < 4; ++l) {  // values 8l..8l+7
          int idx = 0, signs = 0, ls[2] = {0, 0}, dneg = 0;
          uint32_t aux1 = 0, qh = 0;
          uint16_t v = 0;
          switch (fmt) {
            case Fmt::IQ2_XXS:
              std::memcpy(&aux1, p + 6 + 8 * c, 4);
              idx = p[2 + 8 * c + l], signs = KSIGNS[(aux1 >> (7 * l)) & 127], ls[0] = ls[1] = (int)(aux1 >> 28);
              break;
            case Fmt::IQ2_XS:
              std::memcpy(&v, p + 2 + 8 * c + 2 * l, 2);
              idx = v & 511, signs = KSIGNS[v >> 9], ls[0] = p[66 + c] & 15, ls[1] = p[66 + c] >> 4;
              break;
            case Fmt::IQ2_S:
              idx = p[2 + 4 * c + l] | ((p[66 + c] << (8 - 2 * l)) & 0x300), signs = p[34 + 4 * c + l];
              ls[0] = p[74 + c] & 15, ls[1] = p[74 + c] >> 4;
              break;
            case Fmt::IQ1_S:
              qh = (uint32_t)(p[34 + 2 * c] | p[35 + 2 * c] << 8);
              idx = p[2 + 4 * c + l] | (int)((qh >> (3 * l)) & 7) << 8, ls[0] = ls[1] = (int)((qh >> 12) & 7), dneg = (int)(qh >> 15);
              break;
            default: {  // IQ1_M
              const int qb = p[32 + 2 * c + l / 2] >> (4 * (l & 1));
              idx = p[4 * c + l] | (qb & 7) << 8, dneg = (qb >> 3) & 1;
              const int sc = p[48 + 2 * (c / 2)] | p[49 + 2 * (c / 2)] << 8;
              ls[0] = (sc >> (6 * (c % 2))) & 7, ls[1] = (sc >> (6 * (c % 2) + 3)) & 7;
            }
          }
          for (int j = 0; j < 8; ++j) {
            const int g = (int8_t)(uint8_t)(grid[idx] >> (8 * j)), h = l / 2;
            const int w8 = one ? 8 * g + (dneg ? -1 : 1) : (signs >> j) & 1 ? -g : g;
            const double dw = d * (2 * ls[h] + 1) / 8;  // iq2: d (0.5 + ls) / 4; iq1: d (2 ls + 1) (g +- 1/8)
            const int i = b * QK + 8 * l + j;
            w.u[(size_t)o * inp + i] = w8 + 128;
            w.dw16[(size_t)o * 2 * nb + 2 * b + h] = dw;
            w.dense[(size_t)o * inp + i] = dw * w8;
          }
        }
      }
    }
  relay_grid(w, nsb, sbytes, [&](const uint8_t* p, int c, int row, uint16_t& d, uint8_t* dst) {
    if (c == 0) d = iq12_d(fmt, p);
    if (fmt == Fmt::IQ2_XXS) {  // the sign word: byte l = sign index l, and bit l of ls at its bit 7
      uint32_t aux1, word = 0;
      std::memcpy(&aux1, p + 6 + 8 * c, 4);
      for (int l = 0; l < 4; ++l) {
        dst[8 * l + row] = p[2 + 8 * c + l];
        word |= ((aux1 >> (7 * l)) & 127) << (8 * l) | ((aux1 >> (28 + l)) & 1) << (8 * l + 7);
      }
      std::memcpy(dst + 32 + 4 * row, &word, 4);
    } else if (fmt == Fmt::IQ2_XS) {  // byte l = sign index l, and index l's 9th bit at its bit 7
      for (int l = 0; l < 4; ++l) {
        uint16_t v;
        std::memcpy(&v, p + 2 + 8 * c + 2 * l, 2);
        dst[8 * l + row] = (uint8_t)(v & 255);
        dst[32 + 4 * row + l] = (uint8_t)((v >> 9) | ((v >> 8) & 1) << 7);
      }
      dst[64 + row] = p[66 + c];
    } else if (fmt == Fmt::IQ2_S) {
      for (int l = 0; l < 4; ++l) dst[8 * l + row] = p[2 + 4 * c + l], dst[32 + 4 * row + l] = p[34 + 4 * c + l];
      dst[64 + row] = p[66 + c], dst[72 + row] = p[74 + c];
    } else if (fmt == Fmt::IQ1_S) {
      for (int l = 0; l < 4; ++l) dst[8 * l + row] = p[2 + 4 * c + l];
      dst[32 + 2 * row] = p[34 + 2 * c], dst[33 + 2 * row] = p[35 + 2 * c];
    } else {  // IQ1_M: 6 bits of ls a row at bit 6 (row % 4) of the 24 bits at 32 + 3 (row / 4)
      for (int l = 0; l < 4; ++l) dst[8 * l + row] = p[4 * c + l];
      dst[38 + 2 * row] = p[32 + 2 * c], dst[39 + 2 * row] = p[33 + 2 * c];
      const uint32_t ls = (uint32_t)(((p[48 + 2 * (c / 2)] | p[49 + 2 * (c / 2)] << 8) >> (6 * (c % 2))) & 63) << (6 * (row % 4));
      for (int k = 0; k < 3; ++k) dst[32 + 3 * (row / 4) + k] |= (uint8_t)(ls >> (8 * k));
    }
  });
  w.m.assign(1, 0);
  return w;
}

// F16 / BF16: random values, stored as GGUF does (2 bytes a value, little-endian) and in the
// kernel's layout ([value j][8 rows] per group and block); no scales.
Weight make_float(std::mt19937& rng, Fmt fmt, int out, int inp) {
  Weight w = shaped(fmt, out, inp);
  const int nb = w.nb;
  std::normal_distribution<double> normal(0.0, 0.05);
  w.dense.assign((size_t)out * inp, 0.0);
  w.row_bytes = 2 * inp;
  w.gguf.assign((size_t)out * w.row_bytes, 0);
  w.q.assign((size_t)w.G * nb * block_bytes_of(fmt), 0);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < inp; ++i) {
      const double v = normal(rng);
      uint16_t h;
      if (fmt == Fmt::F16) {
        h = d2h(v);
        w.dense[(size_t)o * inp + i] = h2d(h);
      } else {  // bf16: the top 16 bits of the f32 (truncated: any bf16 will do)
        const float f = (float)v;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        h = (uint16_t)(bits >> 16);
        bits = (uint32_t)h << 16;
        float back;
        std::memcpy(&back, &bits, 4);
        w.dense[(size_t)o * inp + i] = back;
      }
      std::memcpy(&w.gguf[(size_t)o * w.row_bytes + 2 * i], &h, 2);
      const int g = o / GROUP, row = o % GROUP, b = i / QK, j = i % QK;
      const size_t at = ((size_t)(g / w.K) * nb + b) * w.K + g % w.K;
      std::memcpy(&w.q[at * block_bytes_of(fmt) + 2 * (GROUP * j + row)], &h, 2);
    }
  return w;
}

Weight make_weight(std::mt19937& rng, Fmt fmt, int out, int inp) {
  if (fmt == Fmt::IQ3_XXS || fmt == Fmt::IQ3_S) return make_iq3(rng, fmt, out, inp);
  if (is_float(fmt)) return make_float(rng, fmt, out, inp);
  if (iq12_fmt(fmt)) return make_iq12(rng, fmt, out, inp);
  Weight w = shaped(fmt, out, inp);
  const int rows = w.G * GROUP, nb = w.nb;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> q8(-128, 127), q4(0, 15);
  w.dense.assign((size_t)out * inp, 0.0);
  w.u.assign((size_t)rows * inp, 0);
  w.dw.assign((size_t)rows * nb, 0.0), w.coef.assign((size_t)rows * nb, 0.0);
  std::vector<uint16_t> dh((size_t)rows * nb, 0), mh((size_t)rows * nb, 0);
  // q4_k: per row and super-block an f16 d and dmin ([0] and [1]), and per block 6-bit scale and min
  const int nsb = nb / BLOCKS_K;
  std::vector<uint16_t> kd((size_t)rows * nsb * 2, 0);
  std::vector<int> ksc((size_t)rows * nb, 0), kmn((size_t)rows * nb, 0);
  std::uniform_int_distribution<int> six(0, 63), s8(-127, 127);
  std::vector<uint16_t> qd6((size_t)rows * nsb, 0);  // q6_k: per row and super-block d, and per 16 an int8 scale
  std::vector<int8_t> qsc6((size_t)rows * 2 * nb, 0);
  std::vector<uint16_t> xd4((size_t)rows * nsb, 0);  // iq4_xs: per row and super-block d, per block a 6-bit ls
  std::vector<int> xls((size_t)rows * nb, 0);
  w.nib.assign((size_t)rows * inp, 0);
  w.dw16.assign((size_t)rows * 2 * nb, 0.0), w.cf16.assign((size_t)rows * 2 * nb, 0.0);
  // q3_k: per row and super-block d, per 16 a 6-bit ls; q2_k: d and dmin, per 16 a 4-bit sc and mn
  std::vector<uint16_t> kd3((size_t)rows * nsb * 2, 0);
  std::vector<int> ls3((size_t)rows * 2 * nb, 0), sm2((size_t)rows * 2 * nb, 0);
  std::uniform_int_distribution<int> q3(0, 7), q2(0, 3);
  for (int o = 0; o < out; ++o)
    for (int b = 0; b < nb; ++b) {
      dh[(size_t)o * nb + b] = d2h(unit(rng) * 0.02);
      if (fmt == Fmt::Q4_1 || fmt == Fmt::Q5_1) mh[(size_t)o * nb + b] = d2h(-unit(rng) * 0.1);
      const double d = h2d(dh[(size_t)o * nb + b]), m = h2d(mh[(size_t)o * nb + b]);
      w.dw[(size_t)o * nb + b] = d;
      w.coef[(size_t)o * nb + b] = fmt == Fmt::Q8_0 ? -128.0 * d : fmt == Fmt::Q4_0 ? -8.0 * d : fmt == Fmt::Q5_0 ? -16.0 * d : m;
      if (fmt == Fmt::Q4_K || fmt == Fmt::Q5_K) {
        uint16_t* sd = &kd[((size_t)o * nsb + b / BLOCKS_K) * 2];
        if (b % BLOCKS_K == 0) sd[0] = d2h(unit(rng) * 0.002), sd[1] = d2h(unit(rng) * 0.002);
        const int sc = ksc[(size_t)o * nb + b] = six(rng), mn = kmn[(size_t)o * nb + b] = six(rng);
        w.dw[(size_t)o * nb + b] = h2d(sd[0]) * sc;
        w.coef[(size_t)o * nb + b] = -h2d(sd[1]) * mn;
      }
      if (fmt == Fmt::Q6_K) {
        if (b % BLOCKS_K == 0) qd6[(size_t)o * nsb + b / BLOCKS_K] = d2h(unit(rng) * 0.0005);
        for (int h = 0; h < 2; ++h) {
          const int sc = qsc6[(size_t)o * 2 * nb + 2 * b + h] = (int8_t)s8(rng);
          w.dw16[(size_t)o * 2 * nb + 2 * b + h] = h2d(qd6[(size_t)o * nsb + b / BLOCKS_K]) * sc;
        }
      }
      if (fmt == Fmt::Q3_K || fmt == Fmt::Q2_K) {
        uint16_t* sd = &kd3[((size_t)o * nsb + b / BLOCKS_K) * 2];
        if (b % BLOCKS_K == 0) sd[0] = d2h(unit(rng) * 0.002), sd[1] = d2h(unit(rng) * 0.002);
        for (int h = 0; h < 2; ++h) {
          const size_t i = (size_t)o * 2 * nb + 2 * b + h;
          if (fmt == Fmt::Q3_K) {
            ls3[i] = six(rng);
            w.dw16[i] = h2d(sd[0]) * (ls3[i] - 32);
          } else {
            sm2[i] = q4(rng) | q4(rng) << 4;
            w.dw16[i] = h2d(sd[0]) * (sm2[i] & 15), w.cf16[i] = -h2d(sd[1]) * (sm2[i] >> 4);
          }
        }
      }
      if (fmt == Fmt::IQ4_NL) w.coef[(size_t)o * nb + b] = -128.0 * d;
      if (fmt == Fmt::IQ4_XS) {
        if (b % BLOCKS_K == 0) xd4[(size_t)o * nsb + b / BLOCKS_K] = d2h(unit(rng) * 0.001);
        const int ls = xls[(size_t)o * nb + b] = six(rng);
        w.dw[(size_t)o * nb + b] = h2d(xd4[(size_t)o * nsb + b / BLOCKS_K]) * (ls - 32);
        w.coef[(size_t)o * nb + b] = -128.0 * w.dw[(size_t)o * nb + b];
      }
      const double dk = w.dw[(size_t)o * nb + b], mk = w.coef[(size_t)o * nb + b];
      for (int j = 0; j < QK; ++j) {
        const int i = b * QK + j;
        double v;
        if (fmt == Fmt::Q8_0) {
          const int s = q8(rng);
          w.u[(size_t)o * inp + i] = s + 128;
          v = s * d;
        } else if (fmt == Fmt::Q6_K) {
          const int n = six(rng);
          w.u[(size_t)o * inp + i] = n;
          v = (n - 32) * w.dw16[(size_t)o * 2 * nb + 2 * b + j / 16];
        } else if (fmt == Fmt::Q3_K || fmt == Fmt::Q2_K) {
          const int n = fmt == Fmt::Q3_K ? q3(rng) : q2(rng);
          const size_t h = (size_t)o * 2 * nb + 2 * b + j / 16;
          w.u[(size_t)o * inp + i] = n;
          v = (n - half_off(fmt)) * w.dw16[h] + w.cf16[h];
        } else if (fmt == Fmt::IQ4_NL || fmt == Fmt::IQ4_XS) {
          const int idx = q4(rng);
          w.nib[(size_t)o * inp + i] = idx;
          w.u[(size_t)o * inp + i] = IQ4_U[idx];
          v = (IQ4_U[idx] - 128) * (fmt == Fmt::IQ4_NL ? d : dk);
        } else {
          const bool five = fmt == Fmt::Q5_0 || fmt == Fmt::Q5_1 || fmt == Fmt::Q5_K;
          const int n = five ? q4(rng) | (q4(rng) & 1) << 4 : q4(rng);
          w.u[(size_t)o * inp + i] = n;
          v = fmt == Fmt::Q4_0 ? (n - 8) * d : fmt == Fmt::Q5_0 ? (n - 16) * d
              : fmt == Fmt::Q4_K || fmt == Fmt::Q5_K ? n * dk + mk : n * d + m;
        }
        w.dense[(size_t)o * inp + i] = v;
      }
    }
  // padding rows: zero blocks (q8_0 stores 0 as 128), zero scales and offsets
  if (fmt == Fmt::Q8_0)
    for (int o = out; o < rows; ++o)
      for (int i = 0; i < inp; ++i) w.u[(size_t)o * inp + i] = 128;
  // interleave (group g, block b: [steps][8 rows][4 values]) then chunk ([chunk][block][K groups])
  const int gbytes = block_bytes_of(fmt);
  w.q.assign((size_t)w.G * nb * gbytes, 0);
  w.d.assign((size_t)w.G * nb * GROUP, 0), w.m.assign((size_t)w.G * nb * GROUP, 0);
  for (int g = 0; g < w.G; ++g)
    for (int b = 0; b < nb; ++b) {
      const size_t at = ((size_t)(g / w.K) * nb + b) * w.K + g % w.K;  // group-block index in the layout
      uint8_t* dst = &w.q[at * gbytes];
      for (int row = 0; row < GROUP; ++row) {
        const int o = g * GROUP + row;
        const int* uo = &w.u[(size_t)o * inp + b * QK];
        if (fmt == Fmt::Q8_0) {
          for (int k = 0; k < 8; ++k)
            for (int j = 0; j < 4; ++j) dst[32 * k + 4 * row + j] = (uint8_t)uo[4 * k + j];
        } else if (fmt == Fmt::Q3_K || fmt == Fmt::Q2_K) {  // value 16h + 4k + j: bits 2k of byte 32h + 4 row + j
          for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 4; ++k)
              for (int j = 0; j < 4; ++j) {
                const int v = uo[16 * h + 4 * k + j];
                dst[32 * h + 4 * row + j] |= (uint8_t)((v & 3) << (2 * k));
                if (fmt == Fmt::Q3_K) dst[64 + 4 * row + j] |= (uint8_t)((v >> 2) << (4 * h + k));  // the 3rd bit
              }
        } else {  // byte t of a GGUF block: value t low, value t + 16 high; step k holds bytes 4k..4k+3
          for (int k = 0; k < 4; ++k)
            for (int j = 0; j < 4; ++j) {
              const int t = 4 * k + j;
              const int* src = fmt == Fmt::IQ4_NL || fmt == Fmt::IQ4_XS ? &w.nib[(size_t)o * inp + b * QK] : uo;
              dst[32 * k + 4 * row + j] = (uint8_t)((src[t] & 15) | (src[t + 16] & 15) << 4);
              if (fmt == Fmt::Q6_K)  // the high 2 bits: half h's step k at bits 2k of lane (row, j)
                for (int h = 0; h < 2; ++h) dst[128 + 32 * h + 4 * row + j] |= (uint8_t)((uo[16 * h + t] >> 4) << (2 * k));
              if (fmt == Fmt::Q5_0 || fmt == Fmt::Q5_1 || fmt == Fmt::Q5_K)  // the 5th bit: bit k, and 4 + k for t + 16
                dst[128 + 4 * row + j] |= (uint8_t)((uo[t] >> 4) << k | (uo[t + 16] >> 4) << (4 + k));
            }
        }
        w.d[at * GROUP + row] = dh[(size_t)o * nb + b];
        w.m[at * GROUP + row] = mh[(size_t)o * nb + b];
      }
    }
  // every row of every group and super-block, with `at` the group-super-block's index in the
  // chunked layout ([chunk][super-block][K groups]), for the formats with scales per super-block
  auto each_super_row = [&](auto fn) {
    for (int g = 0; g < w.G; ++g)
      for (int sb = 0; sb < nsb; ++sb)
        for (int row = 0; row < GROUP; ++row) fn(((size_t)(g / w.K) * nsb + sb) * w.K + g % w.K, g * GROUP + row, sb, row);
  };
  if (fmt == Fmt::IQ4_XS) {  // per group and super-block: d [8 rows]; 48 bytes of 6-bit scales
    w.d.assign((size_t)w.G * nsb * 8, 0), w.m.assign((size_t)w.G * nsb * 24, 0);
    uint8_t* mb = (uint8_t*)w.m.data();
    each_super_row([&](size_t at, int o, int sb, int row) {
      w.d[at * 8 + row] = xd4[(size_t)o * nsb + sb];
      for (int j = 0; j < BLOCKS_K; ++j) {
        const int ls = xls[(size_t)o * nb + sb * BLOCKS_K + j];
        mb[at * 48 + 4 * j + (row & 3)] |= (uint8_t)((ls & 15) << (4 * (row >> 2)));
        uint16_t h;
        std::memcpy(&h, &mb[at * 48 + 32 + 2 * j], 2);
        h |= (uint16_t)((ls >> 4) << (2 * row));
        std::memcpy(&mb[at * 48 + 32 + 2 * j], &h, 2);
      }
    });
  }
  if (fmt == Fmt::Q3_K) {  // per group and super-block: d [8 rows]; 12 bytes a block: row r's 12 bits at bit 12 r
    w.d.assign((size_t)w.G * nsb * 8, 0), w.m.assign((size_t)w.G * nsb * 48, 0);
    uint8_t* mb = (uint8_t*)w.m.data();
    each_super_row([&](size_t at, int o, int sb, int row) {
      w.d[at * 8 + row] = kd3[((size_t)o * nsb + sb) * 2];
      for (int j = 0; j < BLOCKS_K; ++j) {
        const int* ls = &ls3[(size_t)o * 2 * nb + 16 * sb + 2 * j];
        const int v = ls[0] | ls[1] << 6;  // (the first half's ls low, the second's high)
        for (int t = 0; t < 12; ++t)
          if (v >> t & 1) mb[at * 96 + 12 * j + (12 * row + t) / 8] |= (uint8_t)(1 << ((12 * row + t) % 8));
      }
    });
  }
  if (fmt == Fmt::Q2_K) {  // per group and super-block: d [8 rows], dmin [8 rows]; scale bytes [16][8 rows]
    w.d.assign((size_t)w.G * nsb * 16, 0), w.m.assign((size_t)w.G * nsb * 64, 0);
    uint8_t* mb = (uint8_t*)w.m.data();
    each_super_row([&](size_t at, int o, int sb, int row) {
      w.d[at * 16 + row] = kd3[((size_t)o * nsb + sb) * 2];
      w.d[at * 16 + 8 + row] = kd3[((size_t)o * nsb + sb) * 2 + 1];
      for (int i = 0; i < 16; ++i) mb[at * 128 + 8 * i + row] = (uint8_t)sm2[(size_t)o * 2 * nb + 16 * sb + i];
    });
  }
  if (fmt == Fmt::Q6_K) {  // per group and super-block: d [8 rows]; scales [block][half][8 rows]
    w.d.assign((size_t)w.G * nsb * 8, 0), w.m.assign((size_t)w.G * nsb * 64, 0);
    int8_t* mb = (int8_t*)w.m.data();
    each_super_row([&](size_t at, int o, int sb, int row) {
      w.d[at * 8 + row] = qd6[(size_t)o * nsb + sb];
      for (int j = 0; j < BLOCKS_K; ++j)
        for (int h = 0; h < 2; ++h) mb[at * 128 + 16 * j + 8 * h + row] = qsc6[(size_t)o * 2 * nb + 2 * (sb * BLOCKS_K + j) + h];
    });
  }
  if (fmt == Fmt::Q4_K || fmt == Fmt::Q5_K) {  // per group and super-block: d [8 rows, dmin 8 rows], 96 scale bytes
    w.d.assign((size_t)w.G * nsb * 16, 0), w.m.assign((size_t)w.G * nsb * 48, 0);
    uint8_t* mb = (uint8_t*)w.m.data();
    each_super_row([&](size_t at, int o, int sb, int row) {
      w.d[at * 16 + row] = kd[((size_t)o * nsb + sb) * 2];
      w.d[at * 16 + 8 + row] = kd[((size_t)o * nsb + sb) * 2 + 1];
      for (int j = 0; j < BLOCKS_K; ++j) {
        const int sc = ksc[(size_t)o * nb + sb * BLOCKS_K + j], mn = kmn[(size_t)o * nb + sb * BLOCKS_K + j];
        mb[at * 96 + 8 * j + row] = (uint8_t)((sc & 15) | (mn & 15) << 4);
        uint8_t* hw = &mb[at * 96 + 64 + 4 * j];
        uint32_t h;
        std::memcpy(&h, hw, 4);
        h |= (uint32_t)(sc >> 4) << (2 * row) | (uint32_t)(mn >> 4) << (16 + 2 * row);
        std::memcpy(hw, &h, 4);
      }
    });
  }
  // The same weight as GGUF stores it (llama.cpp's block_q8_0 .. block_iq4_xs, written out from
  // the values and scales above): what relayout.cc re-lays into the layout above.
  const int sbytes = gguf_block_bytes(fmt);
  w.row_bytes = (gguf_super(fmt) ? nsb : nb) * sbytes;
  w.gguf.assign((size_t)out * w.row_bytes, 0);
  for (int o = 0; o < out; ++o) {
    uint8_t* row = &w.gguf[(size_t)o * w.row_bytes];
    const int *uo = &w.u[(size_t)o * inp], *no = &w.nib[(size_t)o * inp];
    for (int b = 0; !gguf_super(fmt) && b < nb; ++b) {
      uint8_t* p = row + b * sbytes;
      const int* v = uo + b * QK;
      put_half(p, dh[(size_t)o * nb + b]);
      if (fmt == Fmt::Q8_0) {
        for (int j = 0; j < QK; ++j) p[2 + j] = (uint8_t)(v[j] - 128);
        continue;
      }
      if (fmt == Fmt::Q4_1 || fmt == Fmt::Q5_1) put_half(p + 2, mh[(size_t)o * nb + b]);
      const int qs = fmt == Fmt::Q4_1 ? 4 : fmt == Fmt::Q5_0 ? 6 : fmt == Fmt::Q5_1 ? 8 : 2;
      put_nibbles16(p + qs, fmt == Fmt::IQ4_NL ? no + b * QK : v);
      if (fmt == Fmt::Q5_0 || fmt == Fmt::Q5_1) {  // qh: bit j is value j's 5th bit
        uint32_t qh = 0;
        for (int j = 0; j < QK; ++j) qh |= (uint32_t)(v[j] >> 4) << j;
        std::memcpy(p + qs - 4, &qh, 4);
      }
    }
    for (int sb = 0; gguf_super(fmt) && sb < nsb; ++sb) {
      uint8_t* p = row + sb * sbytes;
      const int* v = uo + sb * QK_K;
      const size_t b0 = (size_t)o * nb + sb * BLOCKS_K;
      if (fmt == Fmt::Q4_K || fmt == Fmt::Q5_K) {  // d, dmin, 12 bytes of 6-bit scales and mins, (qh,) qs
        put_half(p, kd[((size_t)o * nsb + sb) * 2]), put_half(p + 2, kd[((size_t)o * nsb + sb) * 2 + 1]);
        const int *sc = &ksc[b0], *mn = &kmn[b0];
        for (int j = 0; j < 4; ++j) {
          p[4 + j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
          p[8 + j] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
          p[12 + j] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
        }
        const int qs = fmt == Fmt::Q5_K ? 48 : 16;
        for (int s = 0; s < BLOCKS_K; ++s)  // block s: the low (s even) or high nibbles of bytes 32 (s / 2)..
          for (int l = 0; l < QK; ++l) {
            p[qs + 32 * (s / 2) + l] |= (uint8_t)((v[QK * s + l] & 15) << (4 * (s & 1)));
            if (fmt == Fmt::Q5_K) p[16 + l] |= (uint8_t)((v[QK * s + l] >> 4) << s);
          }
      } else if (fmt == Fmt::Q6_K) {  // ql, qh, 16 int8 scales, d; value 128 n + 32 c + l
        for (int i = 0; i < QK_K; ++i) {
          const int n = i / 128, c = i % 128 / 32, l = i % 32;
          p[64 * n + 32 * (c & 1) + l] |= (uint8_t)((v[i] & 15) << (4 * (c >> 1)));
          p[128 + 32 * n + l] |= (uint8_t)((v[i] >> 4) << (2 * c));
        }
        for (int i = 0; i < 16; ++i) p[192 + i] = (uint8_t)qsc6[(size_t)o * 2 * nb + 2 * sb * BLOCKS_K + i];
        put_half(p + 208, qd6[(size_t)o * nsb + sb]);
      } else if (fmt == Fmt::Q3_K || fmt == Fmt::Q2_K) {  // value 128 n + 32 c + l: bits 2c of qs[32 n + l]
        const int qs = fmt == Fmt::Q3_K ? 32 : 16;
        for (int i = 0; i < QK_K; ++i) {
          const int n = i / 128, c = i % 128 / 32, l = i % 32;
          p[qs + 32 * n + l] |= (uint8_t)((v[i] & 3) << (2 * c));
          if (fmt == Fmt::Q3_K) p[l] |= (uint8_t)((v[i] >> 2) << (4 * n + c));  // hmask: bit 4n + c of byte l
        }
        const size_t s0 = (size_t)o * 2 * nb + 16 * sb;
        if (fmt == Fmt::Q3_K) {  // scales: 12 bytes (llama.cpp's dequantize_row_q3_K unpacks them), d
          for (int i = 0; i < 16; ++i) {
            p[96 + i % 8] |= (uint8_t)((ls3[s0 + i] & 15) << (4 * (i / 8)));
            p[104 + i % 4] |= (uint8_t)((ls3[s0 + i] >> 4) << (2 * (i / 4)));
          }
          put_half(p + 108, kd3[((size_t)o * nsb + sb) * 2]);
        } else {  // scales (sc | mn << 4), qs, d, dmin
          for (int i = 0; i < 16; ++i) p[i] = (uint8_t)sm2[s0 + i];
          put_half(p + 80, kd3[((size_t)o * nsb + sb) * 2]), put_half(p + 82, kd3[((size_t)o * nsb + sb) * 2 + 1]);
        }
      } else {  // IQ4_XS: d, the scales' high 2 bits (u16), their low 4 bits (4 bytes), qs
        put_half(p, xd4[(size_t)o * nsb + sb]);
        uint16_t hi = 0;
        for (int j = 0; j < BLOCKS_K; ++j) {
          p[4 + j / 2] |= (uint8_t)((xls[b0 + j] & 15) << (4 * (j % 2)));
          hi |= (uint16_t)((xls[b0 + j] >> 4) << (2 * j));
          put_nibbles16(p + 8 + 16 * j, no + sb * QK_K + QK * j);
        }
        put_half(p + 2, hi);
      }
    }
  }
  return w;
}

void run_product(const Weight& w, const float* x, int C, int threads, float* y) {
  const uint16_t* m = w.fmt == Fmt::Q4_1 ? w.m.data() : w.d.data();
  switch (w.fmt) {
    case Fmt::Q8_0: qmatmul_rows<Fmt::Q8_0>(threads, x, C, w.inp, w.q.data(), w.d.data(), m, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q4_0: qmatmul_rows<Fmt::Q4_0>(threads, x, C, w.inp, w.q.data(), w.d.data(), m, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q4_1: qmatmul_rows<Fmt::Q4_1>(threads, x, C, w.inp, w.q.data(), w.d.data(), m, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q4_K: qmatmul_rows<Fmt::Q4_K>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q6_K: qmatmul_rows<Fmt::Q6_K>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q5_0: qmatmul_rows<Fmt::Q5_0>(threads, x, C, w.inp, w.q.data(), w.d.data(), m, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q5_1: qmatmul_rows<Fmt::Q5_1>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q5_K: qmatmul_rows<Fmt::Q5_K>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ4_NL: qmatmul_rows<Fmt::IQ4_NL>(threads, x, C, w.inp, w.q.data(), w.d.data(), m, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ4_XS: qmatmul_rows<Fmt::IQ4_XS>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q3_K: qmatmul_rows<Fmt::Q3_K>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q2_K: qmatmul_rows<Fmt::Q2_K>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.m.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ3_XXS: qmatmul_rows<Fmt::IQ3_XXS>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ3_S: qmatmul_rows<Fmt::IQ3_S>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::F16: qmatmul_rows<Fmt::F16>(threads, x, C, w.inp, w.q.data(), nullptr, nullptr, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::BF16: qmatmul_rows<Fmt::BF16>(threads, x, C, w.inp, w.q.data(), nullptr, nullptr, w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ2_XXS: qmatmul_rows<Fmt::IQ2_XXS>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ2_XS: qmatmul_rows<Fmt::IQ2_XS>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ2_S: qmatmul_rows<Fmt::IQ2_S>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ1_S: qmatmul_rows<Fmt::IQ1_S>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::IQ1_M: qmatmul_rows<Fmt::IQ1_M>(threads, x, C, w.inp, w.q.data(), w.d.data(), w.d.data(), w.n_chunks, w.K, nullptr, 0.f, y); break;
    case Fmt::Q4_KX: case Fmt::Q5_KX: break;  // (not a layout: what qmatmul_rows<Q4_K> runs for more than a row tile)
  }
}

void check_products(std::mt19937& rng, std::initializer_list<Fmt> formats) {
  const int shapes[][2] = {{40, 64}, {13, 96}, {1000, 320}, {256, 320}, {48, 96}, {520, 256}, {528, 256}, {512, 256}, {24, 32}, {13, 768}, {64, 512}};
  const int row_counts[] = {1, 2, 3, 5, 8, 17, 64};
  const int CMAX = 64;
  std::normal_distribution<float> normal(0.f, 1.f);
  for (Fmt fmt : formats)
    for (const auto& sh : shapes) {
      const bool supers = gguf_super(fmt);
      if (supers && sh[1] % QK_K) continue;  // (whole super-blocks only)
      const Weight w = make_weight(rng, fmt, sh[0], sh[1]);
      const int O = w.G * GROUP, I = w.inp, nb = w.nb;
      std::vector<float> x((size_t)CMAX * I);
      for (float& v : x) v = normal(rng);
      // the references: x @ W^T, and the same over the kernel's own int8 rows of x
      std::vector<int8_t> xq(I);
      std::vector<float> xd(nb), xs(nb);
      std::vector<int32_t> xn(nb);
      std::vector<double> ref((size_t)CMAX * O), qref((size_t)CMAX * O), bound((size_t)CMAX * O);
      for (int c = 0; c < CMAX; ++c) {
        quantize_row(&x[(size_t)c * I], nb, xq.data(), xd.data(), xs.data(), xn.data());
        for (int o = 0; o < O; ++o) {
          double r = 0, qr = 0, mag = 0;
          if (o < w.out)
            for (int i = 0; i < I; ++i) r += (double)x[(size_t)c * I + i] * w.dense[(size_t)o * I + i];
          for (int b = 0; b < nb && per16(w.fmt); ++b)
            for (int h = 0; h < 2; ++h) {  // d scale (sum(u x) - off sum(x)) (+ q2_k's -dmin min sum(x)) per 16 values
              long sum = 0, asum = 0, n = 0;
              for (int j = 16 * h; j < 16 * h + 16; ++j) {
                const long p = (long)w.u[(size_t)o * I + b * QK + j] * xq[b * QK + j];
                sum += p, asum += std::labs(p), n += xq[b * QK + j];
              }
              const size_t i16 = (size_t)o * 2 * nb + 2 * b + h;
              const double dd = w.dw16[i16] * xd[b], off = half_off(w.fmt);
              qr += dd * (double)(sum - off * n) + w.cf16[i16] * xd[b] * (double)n;
              mag += std::fabs(dd) * (double)(asum + off * std::labs(n)) + std::fabs(w.cf16[i16] * xd[b] * (double)n);
            }
          if (is_float(w.fmt) && o < w.out)  // x itself (f32) times the stored values: a chain of fused adds
            for (int i = 0; i < I; ++i) {
              const double p = (double)x[(size_t)c * I + i] * w.dense[(size_t)o * I + i];
              qr += p, mag += std::fabs(p);
            }
          for (int b = 0; b < nb && !per16(w.fmt) && !is_float(w.fmt); ++b) {
            long sum = 0, asum = 0;
            for (int j = 0; j < QK; ++j) {
              const long p = (long)w.u[(size_t)o * I + b * QK + j] * xq[b * QK + j];
              sum += p, asum += std::labs(p);
            }
            const double dd = w.dw[(size_t)o * nb + b] * xd[b];
            qr += dd * (double)sum + w.coef[(size_t)o * nb + b] * xs[b];
            mag += std::fabs(dd) * (double)asum + std::fabs(w.coef[(size_t)o * nb + b] * xs[b]);
          }
          ref[(size_t)c * O + o] = r, qref[(size_t)c * O + o] = qr;
          bound[(size_t)c * O + o] = (is_float(w.fmt) ? I + 2 : nb + 2) * 1.2e-7 * mag + 1e-30;
        }
      }
      const std::string tag = std::string(fmt_name(fmt)) + " " + std::to_string(w.out) + "x" + std::to_string(I);
      // accuracy at each row count (rows 0..C-1)
      std::vector<float> y((size_t)CMAX * O);
      for (int C : row_counts) {
        std::fill(y.begin(), y.end(), NAN);
        run_product(w, x.data(), C, 2, y.data());
        double err = 0, top = 0;
        bool tight = true, pad = true;
        for (int c = 0; c < C; ++c)
          for (int o = 0; o < O; ++o) {
            const double g = y[(size_t)c * O + o];
            if (o < w.out) {
              err = std::max(err, std::fabs(g - ref[(size_t)c * O + o]));
              top = std::max(top, std::fabs(ref[(size_t)c * O + o]));
              if (!(std::fabs(g - qref[(size_t)c * O + o]) <= bound[(size_t)c * O + o])) tight = false;
            } else if (g != 0.0) {
              pad = false;
            }
          }
        const std::string t = tag + " C=" + std::to_string(C);
        check(err <= 0.02 * top, t + ": max error " + std::to_string(err) + " > 2% of " + std::to_string(top));
        check(tight, t + ": differs from the int8-activation reference beyond float rounding");
        check(pad, t + ": padding rows are not zero");
        digest(y.data(), (size_t)C * O);
        if (std::getenv("KERNEL_CHECK_VERBOSE")) {
          uint64_t h = 1469598103934665603ull;
          std::swap(h, g_digest);
          digest(y.data(), (size_t)C * O);
          std::printf("  %-40s %016" PRIx64 "\n", t.c_str(), g_digest);
          std::swap(h, g_digest);
        }
      }
      // invariance: any row range, any thread count, the same bits as the full call
      if (!(w.out == 520 || w.out == 528 || w.out == 512 || w.out == 40 || w.out == 13)) continue;
      std::vector<float> full((size_t)CMAX * O), part((size_t)CMAX * O);
      run_product(w, x.data(), CMAX, 2, full.data());
      for (int threads : {1, 3, 4}) {
        run_product(w, x.data(), CMAX, threads, part.data());
        check(same_bits(full.data(), part.data(), (size_t)CMAX * O), tag + ": 64 rows on " + std::to_string(threads) + " threads differ from 2");
      }
      const int ranges[][2] = {{5, 6}, {4, 7}, {0, 8}, {13, 21}, {63, 64}, {1, 4}, {2, 7}};
      for (const auto& rg : ranges) {
        const int lo = rg[0], n = rg[1] - rg[0];
        run_product(w, x.data() + (size_t)lo * I, n, 1 + lo % 3, part.data());
        check(same_bits(full.data() + (size_t)lo * O, part.data(), (size_t)n * O),
              tag + ": rows " + std::to_string(lo) + ".." + std::to_string(rg[1]) + " alone differ from the 64-row call");
      }
    }
}

// --- x's rounding to int8 ------------------------------------------------------------------

// quantize_row (AVX2 or NEON where built with them) against its scalar definition, bit for bit:
// random rows, rows whose values land on .5 ties after scaling, all-zero blocks, one-value
// blocks, magnitudes from 2^-40 to 2^40 and blocks near the smallest normal floats (whose 1 / d
// overflows: they round to zeros), and both signs of zero.
void check_quantize(std::mt19937& rng) {
  const int nb = 24;
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(nb * QK);
  int bad = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const float scale = std::ldexp(1.f, (int)(rng() % 80) - 40);
    for (int b = 0; b < nb; ++b)
      for (int j = 0; j < QK; ++j) {
        float& v = x[b * QK + j];
        switch ((b + trial) % 7) {
          case 0: v = normal(rng) * scale; break;
          case 1: v = (j ? (float)(int)(rng() % 254) - 127.f + 0.5f : 127.f) * scale; break;  // d = scale: exact .5 ties
          case 2: v = (j % 2 ? -0.f : 0.f); break;
          case 3: v = j == (int)(rng() % QK) ? scale : 0.f; break;
          case 4: v = (float)((int)(rng() % 255) - 127); break;  // already integers: amax / 127 exact or not
          case 5: v = normal(rng) * (j % 7 ? 1e-3f : 1e3f) * scale; break;
          default: v = normal(rng) * std::ldexp(1.f, -118 - (int)(rng() % 12)); break;  // 1 / d overflows, or nearly
        }
      }
    std::vector<int8_t> q1(nb * QK), q2(nb * QK);
    std::vector<float> d1(nb), d2(nb), s1(nb), s2(nb);
    std::vector<int32_t> n1(nb), n2(nb), h1(2 * nb), h2(2 * nb);
    quantize_row_scalar(x.data(), nb, q1.data(), d1.data(), s1.data(), n1.data(), h1.data());
    quantize_row(x.data(), nb, q2.data(), d2.data(), s2.data(), n2.data(), h2.data());
    bad += q1 != q2 || !same_bits(d1.data(), d2.data(), nb) || !same_bits(s1.data(), s2.data(), nb) || n1 != n2 || h1 != h2;
  }
  check(bad == 0, "quantize_row differs from quantize_row_scalar in " + std::to_string(bad) + " of 200 trials");
}

// --- the load's re-layout -------------------------------------------------------------------

bool has_m(Fmt f) {
  return f == Fmt::Q4_1 || f == Fmt::Q5_1 || (gguf_super(f) && f != Fmt::IQ3_XXS && f != Fmt::IQ3_S && !iq12_fmt(f));
}

// relayout.cc's bytes for w.gguf, rows [0, split) and [split, out) in two calls (split a multiple of 8).
bool relaid_matches(const Weight& w, int threads, int split) {
  std::vector<uint8_t> q(w.q.size(), 0xAA), d(w.d.size() * 2, 0xAA), m(w.m.size() * 2, 0xAA);
  uint8_t* mp = has_m(w.fmt) ? m.data() : nullptr;
  int64_t bad = 0;
  for (int part = 0; part < 2; ++part) {
    const int r0 = part ? split : 0, r1 = part ? w.out : split;
    if (r1 > r0)
      bad += pinwheel_relayout(fmt_name(w.fmt), w.gguf.data() + (size_t)r0 * w.row_bytes, r1 - r0, w.row_bytes,
                               nullptr, w.inp, q.data(), d.data(), mp, w.G, r0 / GROUP, threads);
  }
  return bad == 0 && std::memcmp(q.data(), w.q.data(), q.size()) == 0 &&
         std::memcmp(d.data(), w.d.data(), d.size()) == 0 && (!mp || std::memcmp(m.data(), w.m.data(), m.size()) == 0);
}

void check_relayout(std::mt19937& rng) {
  const Fmt fmts[] = {Fmt::Q8_0, Fmt::Q4_0, Fmt::Q4_1, Fmt::Q4_K, Fmt::Q6_K, Fmt::Q5_0, Fmt::Q5_1, Fmt::Q5_K,
                      Fmt::IQ4_NL, Fmt::IQ4_XS, Fmt::Q3_K, Fmt::Q2_K, Fmt::IQ3_XXS, Fmt::IQ3_S, Fmt::F16, Fmt::BF16,
                      Fmt::IQ2_XXS, Fmt::IQ2_XS, Fmt::IQ2_S, Fmt::IQ1_S, Fmt::IQ1_M};
  const int shapes[][2] = {{8, 256}, {13, 512}, {40, 256}, {64, 512}, {200, 768}};  // chunks of 1, 2 (padded), 1, 4, 1
  for (Fmt f : fmts)
    for (const auto& sh : shapes) {
      const Weight w = make_weight(rng, f, sh[0], sh[1]);
      const std::string what = std::string("relayout ") + fmt_name(f) + " " + std::to_string(sh[0]) + "x" + std::to_string(sh[1]);
      for (int threads : {1, 2}) check(relaid_matches(w, threads, w.out), what + " on " + std::to_string(threads) + " threads");
      check(relaid_matches(w, 2, w.out / 16 * 8), what + " in two parts");
      Weight nan = w;  // a NaN scale (each format's first f16 of row 0's first block) is counted (no scales: f16, bf16)
      if (f == Fmt::IQ1_M) put_iq1m_d(&nan.gguf[0], 0x7e00);  // (its d: the top nibbles of the scale words)
      else if (!is_float(f)) put_half(&nan.gguf[f == Fmt::Q6_K ? 208 : f == Fmt::Q3_K ? 108 : f == Fmt::Q2_K ? 80 : 0], 0x7e00);
      std::vector<uint8_t> q(w.q.size()), d(w.d.size() * 2), m(w.m.size() * 2);
      if (!is_float(f))
        check(pinwheel_relayout(fmt_name(f), nan.gguf.data(), w.out, w.row_bytes, nullptr, w.inp, q.data(), d.data(),
                              m.data(), w.G, 0, 1) == 1, what + ": a NaN scale");
      // rows in reverse order through `order` re-lay as the reversed rows do (padding aside: whole groups)
      if (w.out % GROUP == 0) {
        std::vector<int64_t> order(w.out);
        Weight rev = w;
        for (int o = 0; o < w.out; ++o) {
          order[o] = w.out - 1 - o;
          std::memcpy(&rev.gguf[(size_t)o * w.row_bytes], &w.gguf[(size_t)order[o] * w.row_bytes], w.row_bytes);
        }
        std::vector<uint8_t> q1(w.q.size()), d1(w.d.size() * 2), m1(w.m.size() * 2);
        check(pinwheel_relayout(fmt_name(f), w.gguf.data(), w.out, w.row_bytes, order.data(), w.inp, q.data(), d.data(),
                                m.data(), w.G, 0, 2) == 0 &&
                  pinwheel_relayout(fmt_name(f), rev.gguf.data(), w.out, w.row_bytes, nullptr, w.inp, q1.data(),
                                    d1.data(), m1.data(), w.G, 0, 2) == 0 &&
                  q == q1 && d == d1 && (!has_m(f) || m == m1),
              what + ": rows in a given order");
      }
    }
  check(pinwheel_relayout("tq2_0", nullptr, 8, 0, nullptr, 256, nullptr, nullptr, nullptr, 1, 0, 1) == -1,
        "relayout: unknown format");
  const int64_t far[8] = {0, 1, 2, 3, 4, 5, 6, 8};
  check(pinwheel_relayout("q4_0", nullptr, 8, 144, far, 256, nullptr, nullptr, nullptr, 1, 0, 1) == -1,
        "relayout: an order past the rows");
}

// --- attention ------------------------------------------------------------------------------

struct Attn {
  const char* name;
  int H, KVH, hd, S, C, sinks, window;
  bool blind_row;  // one chunk row sees no key at all
};

struct Scene {
  Attn a;
  KV kv;
  int kv_dim, N;
  // the base call: a cache of S slots (layer 1 of 2) and C chunk rows
  std::vector<float> qw, qs;                 // [C, H, hd]
  std::vector<int8_t> k8, v8;                // [S + C, kv]: the cache's int8 values, then the chunk rows'
  std::vector<uint16_t> kb, vb;              // bf16 the same
  std::vector<float> kf, vf, ksc, vsc;       // f32 the same; int8 scales [S + C, kv / 32]
  std::vector<float> knew, vnew;             // [C, kv] f32: the chunk rows, exactly as the cache would hold them
  std::vector<int> pos;                      // [S]: each slot's stream position (-1: empty)
  std::vector<int32_t> order;                // [N]
  std::vector<uint8_t> sink;                 // [N]
  std::vector<uint8_t> mask;                 // [C, N]
};

float bf16_round(float v) {  // toward zero: any bf16 value will do
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b &= 0xffff0000u;
  std::memcpy(&v, &b, 4);
  return v;
}

Scene make_scene(std::mt19937& rng, const Attn& a, KV kv) {
  Scene s;
  s.a = a, s.kv = kv, s.kv_dim = a.KVH * a.hd, s.N = a.S + a.C;
  const int kvd = s.kv_dim, T = a.S + a.C, ng = kvd / QK;
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::uniform_int_distribution<int> q8(-127, 127);
  s.qw.resize((size_t)a.C * a.H * a.hd), s.qs.resize(s.qw.size());
  for (float& v : s.qw) v = normal(rng);
  for (float& v : s.qs) v = normal(rng);
  s.kf.resize((size_t)T * kvd), s.vf.resize(s.kf.size());
  s.k8.resize(s.kf.size()), s.v8.resize(s.kf.size()), s.kb.resize(s.kf.size()), s.vb.resize(s.kf.size());
  s.ksc.resize((size_t)T * std::max(ng, 1)), s.vsc.resize(s.ksc.size());
  for (int t = 0; t < T; ++t)
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float>& f = pass ? s.vf : s.kf;
      std::vector<int8_t>& i8 = pass ? s.v8 : s.k8;
      std::vector<uint16_t>& b16 = pass ? s.vb : s.kb;
      std::vector<float>& sc = pass ? s.vsc : s.ksc;
      for (int g = 0; g < ng; ++g) sc[(size_t)t * ng + g] = unit(rng) * 0.02f;
      for (int i = 0; i < kvd; ++i) {
        const size_t at = (size_t)t * kvd + i;
        if (kv == KV::I8) {
          i8[at] = (int8_t)q8(rng);
          f[at] = (float)i8[at] * sc[(size_t)t * ng + i / QK];  // the kernel's own product
        } else {
          f[at] = kv == KV::BF16 ? bf16_round(normal(rng)) : normal(rng);
          uint32_t bits;
          std::memcpy(&bits, &f[at], 4);
          b16[at] = (uint16_t)(bits >> 16);
        }
      }
    }
  s.knew.assign(s.kf.begin() + (size_t)a.S * kvd, s.kf.end());
  s.vnew.assign(s.vf.begin() + (size_t)a.S * kvd, s.vf.end());
  // a wrapped ring: slots hold stream positions in rotated order, a few slots still empty
  const int empty = a.S / 8, filled = a.S - empty, rot = a.S / 3;
  s.pos.assign(a.S, -1);
  for (int p = 0; p < filled; ++p) s.pos[(p + rot) % a.S] = p;
  std::vector<int> slots(a.S);
  for (int i = 0; i < a.S; ++i) slots[i] = i;
  std::stable_sort(slots.begin(), slots.end(), [&](int x, int y) {
    const int px = s.pos[x] < 0 ? 1 << 30 : s.pos[x], py = s.pos[y] < 0 ? 1 << 30 : s.pos[y];
    return px < py;
  });
  s.order.resize(s.N);
  for (int i = 0; i < a.S; ++i) s.order[i] = slots[i];
  for (int c = 0; c < a.C; ++c) s.order[a.S + c] = a.S + c;
  s.sink.assign(s.N, 0);
  for (int k = 0; k < a.S; ++k) s.sink[k] = s.pos[k] >= 0 && s.pos[k] < a.sinks;
  s.mask.assign((size_t)a.C * s.N, 0);
  for (int c = 0; c < a.C; ++c) {
    if (a.blind_row && c == a.C / 2) continue;
    const int p = filled + c;  // the row's stream position
    for (int k = 0; k < s.N; ++k) {
      const int pk = k < a.S ? s.pos[k] : filled + (k - a.S);
      if (pk < 0 || pk > p) continue;
      s.mask[(size_t)c * s.N + k] = p - pk < a.window || (k < a.S && s.sink[k]);
    }
  }
  return s;
}

// The call for chunk rows [j0, j1) of the scene, with rows [0, j0) already written to the cache
// (slots S..S+j0-1, in stream order after the cache's own keys). Returns out [j1 - j0, H * hd].
std::vector<float> run_attention(const Scene& s, int j0, int j1, int threads) {
  const Attn& a = s.a;
  const int kvd = s.kv_dim, ng = kvd / QK, L = 2, layer = 1;
  const int S2 = a.S + j0, C2 = j1 - j0, N2 = S2 + C2;
  const size_t es = s.kv == KV::I8 ? 1 : s.kv == KV::BF16 ? 2 : 4;
  // two layers; layer 0 is garbage the kernel must not read
  std::vector<char> kc((size_t)L * S2 * kvd * es, (char)0x7f), vc(kc.size(), (char)0x7f);
  std::vector<float> ks((size_t)L * S2 * std::max(ng, 1), 1e30f), vs(ks.size(), 1e30f);
  for (int t = 0; t < S2; ++t) {
    const size_t dst = ((size_t)layer * S2 + t) * kvd * es, src = (size_t)t * kvd;
    if (s.kv == KV::I8) {
      std::memcpy(&kc[dst], &s.k8[src], kvd), std::memcpy(&vc[dst], &s.v8[src], kvd);
      for (int g = 0; g < ng; ++g) {
        ks[((size_t)layer * S2 + t) * ng + g] = s.ksc[(size_t)t * ng + g];
        vs[((size_t)layer * S2 + t) * ng + g] = s.vsc[(size_t)t * ng + g];
      }
    } else if (s.kv == KV::BF16) {
      std::memcpy(&kc[dst], &s.kb[src], kvd * 2), std::memcpy(&vc[dst], &s.vb[src], kvd * 2);
    } else {
      std::memcpy(&kc[dst], &s.kf[src], kvd * 4), std::memcpy(&vc[dst], &s.vf[src], kvd * 4);
    }
  }
  std::vector<int32_t> order(N2);
  for (int i = 0; i < a.S; ++i) order[i] = s.order[i];
  for (int i = a.S; i < N2; ++i) order[i] = i;  // rows before j0 as slots, then the chunk's rows
  bool* sink = new bool[N2];
  for (int k = 0; k < N2; ++k) sink[k] = k < a.S && s.sink[k];
  bool* mask = new bool[(size_t)C2 * N2];
  for (int c = 0; c < C2; ++c)
    for (int k = 0; k < N2; ++k) mask[(size_t)c * N2 + k] = s.mask[(size_t)(j0 + c) * s.N + k];
  std::vector<float> out((size_t)C2 * a.H * a.hd, NAN);
  const float* qw = s.qw.data() + (size_t)j0 * a.H * a.hd;
  const float* qs = s.qs.data() + (size_t)j0 * a.H * a.hd;
  const float* kn = s.knew.data() + (size_t)j0 * kvd;
  const float* vn = s.vnew.data() + (size_t)j0 * kvd;
  const char* kb = kc.data() + (size_t)layer * S2 * kvd * es;
  const char* vb = vc.data() + (size_t)layer * S2 * kvd * es;
  const float* ksb = ks.data() + (size_t)layer * S2 * ng;
  const float* vsb = vs.data() + (size_t)layer * S2 * ng;
  switch (s.kv) {
    case KV::I8: attention_rows<KV::I8>(threads, qw, qs, C2, a.H, a.hd, S2, kvd, kb, vb, ksb, vsb, kn, vn, order.data(), mask, sink, out.data()); break;
    case KV::BF16: attention_rows<KV::BF16>(threads, qw, qs, C2, a.H, a.hd, S2, kvd, kb, vb, nullptr, nullptr, kn, vn, order.data(), mask, sink, out.data()); break;
    case KV::F32: attention_rows<KV::F32>(threads, qw, qs, C2, a.H, a.hd, S2, kvd, kb, vb, nullptr, nullptr, kn, vn, order.data(), mask, sink, out.data()); break;
  }
  delete[] sink;
  delete[] mask;
  return out;
}

void check_attention(std::mt19937& rng) {
  const Attn cases[] = {
      {"tiny gqa2 hd16", 4, 2, 16, 24, 8, 3, 20, false},
      {"mha hd64", 4, 4, 64, 40, 8, 4, 24, false},
      {"gqa3 hd32", 6, 2, 32, 33, 5, 0, 16, false},
      {"gqa4 long rows hd128", 32, 8, 128, 30, 3, 2, 40, false},
      {"gqa5 (no compiled group) hd64", 10, 2, 64, 21, 4, 2, 200, false},
      {"gqa8 prefill hd64", 16, 2, 64, 45, 20, 4, 24, false},
      {"gqa6 hd32 blind row", 12, 2, 32, 17, 6, 1, 9, true},
      {"hd8 long rows", 128, 128, 8, 12, 2, 0, 16, false},
      {"hd4 (scalar path)", 8, 8, 4, 14, 4, 2, 10, false},
      {"hd256", 2, 1, 256, 19, 9, 3, 12, false},
      {"gemma4 global gqa8 hd512", 8, 1, 512, 23, 9, 3, 14, false},
      {"gqa5 (no compiled group) hd512", 10, 2, 512, 13, 3, 2, 8, false},
      // a decode step's values in 512-bit registers (long rows, 64-key blocks, two key ranges)
      {"mha long rows hd64", 16, 16, 64, 150, 9, 2, 140, false},
      {"gqa2 long rows hd128", 16, 8, 128, 90, 4, 2, 80, false},
      {"hd256 long rows", 4, 4, 256, 70, 3, 1, 66, false},
      // a decode step with few KV heads split three ways (keys, softmax, value columns; 512+ keys)
      {"gqa3 decode split hd64", 9, 3, 64, 600, 3, 4, 590, false},
      {"one kv head decode split hd128", 4, 1, 128, 540, 2, 2, 530, false},
      {"mha3 decode split hd128", 3, 3, 128, 520, 2, 1, 515, false},
      // a chunk of more rows than a block (two row blocks, each with its own keys)
      {"mha two row blocks hd64", 8, 8, 64, 30, 70, 2, 90, false},
  };
  for (const Attn& a : cases)
    for (KV kv : {KV::I8, KV::BF16, KV::F32}) {
      const Scene s = make_scene(rng, a, kv);
      const char* kvn = kv == KV::I8 ? "int8" : kv == KV::BF16 ? "bf16" : "f32";
      const std::string tag = std::string(a.name) + " " + kvn;
      const uint64_t before = g_digest;
      const int G = a.H / a.KVH, hd = a.hd, kvd = s.kv_dim;
      const std::vector<float> out = run_attention(s, 0, a.C, 2);
      // the reference, in double
      double worst = 0;
      bool ok = true;
      for (int c = 0; c < a.C; ++c)
        for (int h = 0; h < a.H; ++h) {
          const int g = h / G;
          std::vector<double> sc, acc(hd, 0.0);
          std::vector<int> keys;
          for (int j = 0; j < s.N; ++j) {
            const int k = s.order[j];
            if (!s.mask[(size_t)c * s.N + k]) continue;
            const float* q = (s.sink[k] ? s.qs.data() : s.qw.data()) + ((size_t)c * a.H + h) * hd;
            double dot = 0;
            for (int i = 0; i < hd; ++i) dot += (double)q[i] * s.kf[(size_t)k * kvd + g * hd + i];
            sc.push_back(dot / std::sqrt((double)hd)), keys.push_back(k);
          }
          double mx = -INFINITY, sum = 0;
          for (double v : sc) mx = std::max(mx, v);
          for (size_t t = 0; t < sc.size(); ++t) {
            const double p = std::exp(sc[t] - mx);
            sum += p;
            for (int i = 0; i < hd; ++i) acc[i] += p * s.vf[(size_t)keys[t] * kvd + g * hd + i];
          }
          for (int i = 0; i < hd; ++i) {
            const double want = sc.empty() ? 0.0 : acc[i] / sum, got = out[((size_t)c * a.H + h) * hd + i];
            const double e = std::fabs(got - want);
            worst = std::max(worst, e);
            if (!(e <= 2e-5 + 2e-5 * std::fabs(want))) ok = false;
          }
        }
      check(ok, tag + ": differs from the double reference beyond rtol = atol = 2e-5 (worst " + std::to_string(worst) + ")");
      digest(out.data(), out.size());
      if (std::getenv("KERNEL_CHECK_VERBOSE")) {
        uint64_t h = 1469598103934665603ull;
        std::swap(h, g_digest);
        digest(out.data(), out.size());
        std::printf("  %-40s %016" PRIx64 "\n", tag.c_str(), g_digest);
        std::swap(h, g_digest);
      }
      (void)before;
      const size_t row = (size_t)a.H * hd;
      // threads
      for (int threads : {1, 3}) {
        const std::vector<float> o2 = run_attention(s, 0, a.C, threads);
        check(same_bits(out.data(), o2.data(), out.size()), tag + ": " + std::to_string(threads) + " threads differ from 2");
      }
      // each row as a decode step, its predecessors in the cache
      bool dec = true;
      for (int c = 0; c < a.C; ++c) {
        const std::vector<float> o1 = run_attention(s, c, c + 1, 1 + c % 2);
        dec &= same_bits(out.data() + c * row, o1.data(), row);
      }
      check(dec, tag + ": a row as a 1-row decode step differs from the same row in the chunk");
      // the chunk split in two at each point (a verify after a decode, a prefill in two chunks)
      bool split = true;
      for (int c0 = 1; c0 < a.C; c0 += std::max(1, a.C / 4)) {
        const std::vector<float> p0 = run_attention(s, 0, c0, 2), p1 = run_attention(s, c0, a.C, 2);
        split &= same_bits(out.data(), p0.data(), c0 * row) && same_bits(out.data() + c0 * row, p1.data(), (a.C - c0) * row);
      }
      check(split, tag + ": the chunk split in two differs from the whole chunk");
    }
}

// A DeltaNet chunk of C rows whose rows after `last` are padding (deltanet_chunk, two threads)
// against the real rows as one-row chunks (one thread): the same bits for the real rows' outputs
// and for both states, zeros for the padding rows; `last` from none real (-1) through fewer real
// rows than the conv's K-1 (its kept inputs then mix old state and new rows) to past the chunk.
void check_deltanet_chunk(std::mt19937& rng, int Hk, int Hv, int S, int K, const std::vector<float>& w,
                          const std::vector<float>& a, const std::vector<float>& dt, const std::vector<float>& norm,
                          const std::vector<float>& conv0, const std::vector<float>& st0, const std::string& tag) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const int D = (2 * Hk + Hv) * S, P = D + Hv * S + 2 * Hv, C = 8, O = Hv * S;
  for (int last : {-1, 0, 1, 5, C - 1, C + 3}) {
    std::vector<float> proj((size_t)C * P), out((size_t)C * O, 1.f), one((size_t)O);
    for (auto& x : proj) x = nd(rng);
    std::vector<float> conv = conv0, st = st0, conv1 = conv0, st1 = st0;
    deltanet_chunk(2, proj.data(), C, last, conv.data(), st.data(), Hk, Hv, S, K, w.data(), a.data(), dt.data(),
                   norm.data(), 1e-6f, out.data());
    bool same = true;
    for (int c = 0; c <= std::min(last, C - 1); ++c) {
      deltanet_chunk(1, proj.data() + (size_t)c * P, 1, 0, conv1.data(), st1.data(), Hk, Hv, S, K, w.data(), a.data(),
                     dt.data(), norm.data(), 1e-6f, one.data());
      same &= same_bits(out.data() + (size_t)c * O, one.data(), O);
    }
    bool zeros = true;
    for (size_t i = (size_t)std::min(last + 1, C) * O; i < out.size(); ++i) zeros &= out[i] == 0.f;
    const std::string at = tag + " chunk last=" + std::to_string(last);
    check(same && same_bits(conv.data(), conv1.data(), conv.size()) && same_bits(st.data(), st1.data(), st.size()),
          at + ": the chunk's rows differ from single steps");
    check(zeros, at + ": the chunk's padding rows are not zeros");
  }
}

// Gated DeltaNet's layer one token at a time (deltanet_chunk of one row) against a double reference of the same
// maths, chained over a few tokens, with a head size the vector lanes cover (128) and one with a
// tail (20); one thread and two give the same bits (rows are independent); and a chunk with
// padding rows against single steps (check_deltanet_chunk). Digested on their own (the digests
// above stay comparable with earlier builds): a change of the kernel that keeps its bits keeps
// this digest.
void check_deltanet(std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int S : {128, 20}) {
    const int Hk = 2, Hv = 4, K = 4, D = (2 * Hk + Hv) * S, P = D + Hv * S + 2 * Hv;
    const float eps = 1e-6f;
    std::vector<float> w((size_t)D * K), a(Hv), dt(Hv), norm(S), conv((size_t)(K - 1) * D), st((size_t)Hv * S * S);
    for (auto& x : w) x = 0.5f * nd(rng);
    for (int h = 0; h < Hv; ++h) a[h] = -std::exp(0.5f * nd(rng) - 1.f), dt[h] = 0.5f * nd(rng) - 1.f;
    for (auto& x : norm) x = 1.f + 0.3f * nd(rng);
    for (auto& x : conv) x = nd(rng);
    for (auto& x : st) x = 0.3f * nd(rng);
    std::vector<double> rconv(conv.begin(), conv.end()), rst(st.begin(), st.end());
    std::vector<float> conv2 = conv, st2 = st;
    const std::string tag = "deltanet S=" + std::to_string(S);
    check_deltanet_chunk(rng, Hk, Hv, S, K, w, a, dt, norm, conv, st, tag);
    for (int t = 0; t < 6; ++t) {
      std::vector<float> proj(P), out((size_t)Hv * S), out2((size_t)Hv * S);
      for (auto& x : proj) x = nd(rng);
      deltanet_chunk(2, proj.data(), 1, 0, conv.data(), st.data(), Hk, Hv, S, K, w.data(), a.data(), dt.data(),
                     norm.data(), eps, out.data());
      deltanet_chunk(1, proj.data(), 1, 0, conv2.data(), st2.data(), Hk, Hv, S, K, w.data(), a.data(), dt.data(),
                     norm.data(), eps, out2.data());
      check(same_bits(out.data(), out2.data(), out.size()) && same_bits(st.data(), st2.data(), st.size()),
            tag + ": one thread and two differ");
      digest(out.data(), out.size());
      digest(st.data(), st.size());
      // the reference
      std::vector<double> mixed(D);
      for (int c = 0; c < D; ++c) {
        double y = (double)proj[c] * w[(size_t)c * K + K - 1];
        for (int k = 0; k < K - 1; ++k) y += rconv[(size_t)k * D + c] * w[(size_t)c * K + k];
        mixed[c] = y / (1.0 + std::exp(-y));
      }
      for (int k = 0; k + 1 < K - 1; ++k)
        for (int c = 0; c < D; ++c) rconv[(size_t)k * D + c] = rconv[(size_t)(k + 1) * D + c];
      for (int c = 0; c < D; ++c) rconv[(size_t)(K - 2) * D + c] = proj[c];
      for (int h = 0; h < 2 * Hk; ++h) {
        double n = 0;
        for (int j = 0; j < S; ++j) n += mixed[(size_t)h * S + j] * mixed[(size_t)h * S + j];
        const double f = (h < Hk ? 1.0 / std::sqrt((double)S) : 1.0) / std::max(std::sqrt(n), (double)eps);
        for (int j = 0; j < S; ++j) mixed[(size_t)h * S + j] *= f;
      }
      double worst = 0, scale = 0;
      for (int h = 0; h < Hv; ++h) {
        const double* q = &mixed[(size_t)(h % Hk) * S];
        const double* k = &mixed[(size_t)(Hk + h % Hk) * S];
        const double* v = &mixed[(size_t)(2 * Hk + h) * S];
        const double al = proj[D + Hv * S + Hv + h] + dt[h];
        const double e = std::exp(std::log1p(std::exp(al)) * a[h]), b = 1.0 / (1.0 + std::exp(-proj[D + Hv * S + h]));
        std::vector<double> o(S);
        for (int r = 0; r < S; ++r) {
          double* m = &rst[((size_t)h * S + r) * S];
          double mk = 0;
          for (int j = 0; j < S; ++j) m[j] *= e, mk += m[j] * k[j];
          const double d = b * (v[r] - mk);
          double oq = 0;
          for (int j = 0; j < S; ++j) m[j] += d * k[j], oq += m[j] * q[j];
          o[r] = oq;
        }
        double ss = 0;
        for (int r = 0; r < S; ++r) ss += o[r] * o[r];
        const double rr = 1.0 / std::sqrt(ss / S + eps);
        for (int r = 0; r < S; ++r) {
          const double z = proj[D + (size_t)h * S + r];
          const double want = o[r] * rr * norm[r] * (z / (1.0 + std::exp(-z)));
          worst = std::max(worst, std::fabs(want - out[(size_t)h * S + r]));
          scale = std::max(scale, std::fabs(want));
        }
      }
      check(worst <= 1e-4 * std::max(1.0, scale), tag + ": the output is off the reference");
      double sworst = 0;
      for (size_t i = 0; i < st.size(); ++i) sworst = std::max(sworst, std::fabs(rst[i] - st[i]));
      for (size_t i = 0; i < conv.size(); ++i) sworst = std::max(sworst, std::fabs(rconv[i] - conv[i]));
      check(sworst <= 1e-4, tag + ": the state is off the reference");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  setenv("PINWHEEL_KERNEL_SPIN_US", "0", 1);  // helper threads sleep between calls (qemu, shared cores)
  const std::string name = argc > 1 ? argv[1] : pinwheel_kernel_isa();
  std::mt19937 rng(1234);
  check_products(rng, {Fmt::Q8_0, Fmt::Q4_0, Fmt::Q4_1, Fmt::Q4_K, Fmt::Q6_K, Fmt::Q5_0, Fmt::Q5_1, Fmt::Q5_K, Fmt::IQ4_NL,
                       Fmt::IQ4_XS, Fmt::Q3_K, Fmt::Q2_K, Fmt::IQ3_XXS, Fmt::IQ3_S, Fmt::F16, Fmt::BF16});
  // (the IQ2 and IQ1 formats on a stream of their own: the formats above and the attention below
  // see the same inputs as before them, and give the same per-format digests)
  std::mt19937 rng_iq12(2212);
  check_products(rng_iq12, {Fmt::IQ2_XXS, Fmt::IQ2_XS, Fmt::IQ2_S, Fmt::IQ1_S, Fmt::IQ1_M});
  const uint64_t products = g_digest;
  g_digest = 1469598103934665603ull;
  check_attention(rng);
  std::mt19937 rng_relayout(99);  // (its own stream: the digests above stay what they were)
  check_relayout(rng_relayout);
  const uint64_t attention = g_digest;
  g_digest = 1469598103934665603ull;
  std::mt19937 rng_deltanet(7);
  check_deltanet(rng_deltanet);
  const uint64_t deltanet = g_digest;
  std::mt19937 rng_quantize(32);
  check_quantize(rng_quantize);
  // Every vector build has a tile for every format these checks multiply, and says so: the loader
  // then holds each as stored (a build that listed fewer re-quantized those files to q8_0).
#if defined(__AVX2__) || defined(__SSE4_1__) || defined(PW_NEON)
  const std::string held = std::string(" ") + pinwheel_kernel_formats() + " ";
  for (Fmt f : {Fmt::Q8_0, Fmt::Q4_0, Fmt::Q4_1, Fmt::Q4_K, Fmt::Q6_K, Fmt::Q5_0, Fmt::Q5_1, Fmt::Q5_K, Fmt::IQ4_NL, Fmt::IQ4_XS,
                Fmt::Q3_K, Fmt::Q2_K, Fmt::IQ3_XXS, Fmt::IQ3_S, Fmt::F16, Fmt::BF16, Fmt::IQ2_XXS, Fmt::IQ2_XS, Fmt::IQ2_S,
                Fmt::IQ1_S, Fmt::IQ1_M})
    check(held.find(std::string(" ") + fmt_name(f) + " ") != std::string::npos,
          std::string("pinwheel_kernel_formats() lacks ") + fmt_name(f) + " on this vector build");
#endif
  // The digests name the output bits: equal digests on two ISAs mean bit-identical results.
  std::printf("%s: %d checks passed (kernel %s; output digests: products %016" PRIx64 ", attention %016" PRIx64
              ", deltanet %016" PRIx64 ")\n",
              name.c_str(), g_checks - g_failures, pinwheel_kernel_isa(), products, attention, deltanet);
  if (g_failures) {
    std::printf("%s: %d of %d checks FAILED\n", name.c_str(), g_failures, g_checks);
    return 1;
  }
  return 0;
}
