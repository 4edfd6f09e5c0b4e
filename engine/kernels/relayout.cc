// GGUF's blocks re-laid into the kernel's layout at load, straight from the file's bytes.
//
// engine/quant.py says what the kernel's layout is (interleave, to_chunks) and keeps the numpy
// spelling of every step as the reference (tests/engine/test_relayout.py checks this code
// against it byte for byte, for every format). The numpy path decoded each block to values
// (gguf's dequantization of Q6_K, Q5_x and IQ4_XS through f32), then interleaved them with
// several passes over temporaries, then reordered the groups into chunks: ~13 s of a 1.7B
// Q4_K_M file's load. Here each output group of 8 rows is written once, from its 8 source rows,
// with byte and word moves only (no value is decoded but the 6-bit K-quant scales, which are
// re-packed as bytes), straight into its chunk; groups are split over threads.
//
// The output of one layer of a stacked weight: q [G/K, nb, K * qb], d [G/K, nu, K * db] and m
// [G/K, nu, K * mb] bytes, where G is the layer's groups of 8 rows, K its chunk width
// (quant.chunk_width), nb its blocks of 32 a row, nu its scale units a row (blocks of 32, or
// super-blocks of 256 for the K- and IQ-quants), and qb, db, mb one group's bytes a unit (Spec).
// Group g's unit u is at ((g / K * units + u) * K + g % K) * bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

// (Its own namespace: the C++ harness, tests/kernels/kernel_check.cc, includes this file beside
// qmatmul.cc, whose names for the same constants are the kernel's.)
namespace {
namespace relay {

constexpr int GROUP = 8, QK = 32, BLOCKS_K = 8;  // rows a group; values a block; blocks a super-block

enum class Src { Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, Q5_0, Q5_1, Q5_K, IQ4_NL, IQ4_XS, Q3_K, Q2_K, IQ3_XXS, IQ3_S, F16, BF16,
                 IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M };

// One format: engine/quant.py's name, the GGUF block it is stored in (bytes, values), and one
// group's bytes of q per block of 32 and of d and m per scale unit.
struct Spec {
  const char* name;
  Src src;
  int src_bytes, src_values;
  int qb, db, mb;
};
constexpr Spec SPECS[] = {
    {"q8_0", Src::Q8_0, 34, 32, 256, 16, 0},        {"q4_0", Src::Q4_0, 18, 32, 128, 16, 0},
    {"q4_1", Src::Q4_1, 20, 32, 128, 16, 16},       {"q4_k", Src::Q4_K, 144, 256, 128, 32, 96},
    {"q6_k", Src::Q6_K, 210, 256, 192, 16, 128},    {"q5_0", Src::Q5_0, 22, 32, 160, 16, 0},
    {"q5_1", Src::Q5_1, 24, 32, 160, 16, 16},       {"q5_k", Src::Q5_K, 176, 256, 160, 32, 96},
    {"iq4_nl", Src::IQ4_NL, 18, 32, 128, 16, 0},    {"iq4_xs", Src::IQ4_XS, 136, 256, 128, 16, 48},
    {"q3_k", Src::Q3_K, 110, 256, 96, 16, 96},      {"q2_k", Src::Q2_K, 84, 256, 64, 32, 128},
    {"iq3_xxs", Src::IQ3_XXS, 98, 256, 96, 16, 0},  {"iq3_s", Src::IQ3_S, 110, 256, 108, 16, 0},
    {"f16", Src::F16, 64, 32, 512, 0, 0},           {"bf16", Src::BF16, 64, 32, 512, 0, 0},
    {"iq2_xxs", Src::IQ2_XXS, 66, 256, 64, 16, 0},  {"iq2_xs", Src::IQ2_XS, 74, 256, 72, 16, 0},
    {"iq2_s", Src::IQ2_S, 82, 256, 80, 16, 0},      {"iq1_s", Src::IQ1_S, 50, 256, 48, 16, 0},
    {"iq1_m", Src::IQ1_M, 56, 256, 54, 16, 0},
};

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint16_t load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void store16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline bool finite_half(uint16_t h) { return (h & 0x7c00) != 0x7c00; }
constexpr uint64_t LOW_NIBBLES = 0x0F0F0F0F0F0F0F0Full;
constexpr uint32_t LOW_BITS = 0x01010101u, LOW_2BITS = 0x03030303u;

// Where one group's bytes go in its layer's arrays: unit u (a block of 32 for q; a block or a
// super-block for d and m) of q at q + u * q_step, and so on (the chunk's K groups lie side by
// side within each unit).
struct Group {
  uint8_t *q, *d, *m;
  int64_t q_step, d_step, m_step;
};

Group group_at(const Spec& s, uint8_t* q, uint8_t* d, uint8_t* m, int64_t K, int64_t nb, int64_t nu, int64_t g) {
  const int64_t chunk = g / K, slot = g % K;
  return {q + (chunk * nb * K + slot) * s.qb, d + (chunk * nu * K + slot) * s.db,
          m ? m + (chunk * nu * K + slot) * s.mb : nullptr, K * s.qb, K * s.db, K * s.mb};
}

// A block's 16 bytes of nibbles (byte t: value t low, t + 16 high) for row r of the group, in
// q4_x's interleaved order: step k holds the rows' 4-byte words k side by side.
inline void put_nibbles(uint8_t* qo, int r, const uint8_t* nib) {
  for (int k = 0; k < 4; ++k) store32(qo + (k * GROUP + r) * 4, load32(nib + 4 * k));
}

// The same from 32 bytes whose low (shift 0) or high (shift 4) nibbles are a block's 32 values:
// Q4_K's, Q5_K's and Q6_K's low bits, which hold two blocks in the same 32 bytes.
inline void put_half_nibbles(uint8_t* qo, int r, const uint8_t* v, int shift) {
  for (int i = 0; i < 2; ++i) {  // 8 of the 16 bytes a time
    const uint64_t lo = (load64(v + 8 * i) >> shift) & LOW_NIBBLES, hi = (load64(v + 16 + 8 * i) >> shift) & LOW_NIBBLES;
    const uint64_t nib = lo | hi << 4;
    store32(qo + (2 * i * GROUP + r) * 4, (uint32_t)nib);
    store32(qo + ((2 * i + 1) * GROUP + r) * 4, (uint32_t)(nib >> 32));
  }
}

// The 5th bits of a block's 32 values as lane (r, j) of the block's 32 bytes after the nibbles:
// value 4k + j's bit at bit k, value 16 + 4k + j's at bit 4 + k. Q5_0/Q5_1 keep them as bit i of
// a 32-bit word (value i): each nibble of it (values 4k .. 4k + 3) is spread to bit 0 of the 4
// lanes by one multiply (its bit j to bit 8j: the shifted copies 0, 7, 14, 21 never overlap).
inline uint32_t spread4(uint32_t n) { return (n * 0x204081u) & LOW_BITS; }
inline void put_fifth_bits_word(uint8_t* qo, int r, uint32_t qh) {
  uint32_t lanes = 0;
  for (int k = 0; k < 8; ++k) lanes |= spread4((qh >> (4 * k)) & 15) << ((k & 3) + 4 * (k >> 2));
  store32(qo + 128 + 4 * r, lanes);
}
// Q5_K keeps them as bit `bit` of byte i (value i) of 32 bytes, read here as 4 words of both
// halves (values 4k + j and 16 + 4k + j in the low and high 32 bits of w[k]); (Q3_K's high bits
// alike, into the step at byte `at`).
inline void put_fifth_bits_bytes(uint8_t* qo, int r, const uint64_t* w, int bit, int at = 128) {
  uint64_t lanes = 0;
  for (int k = 0; k < 4; ++k) lanes |= ((w[k] >> bit) & (LOW_BITS | (uint64_t)LOW_BITS << 32)) << k;
  store32(qo + at + 4 * r, (uint32_t)lanes | (uint32_t)(lanes >> 32) << 4);
}
// A Q5_K or Q6_K row's 32 bytes of high bits of 32 values as put_fifth_bits_bytes and group_6k read them.
inline void halves(const uint8_t* qh, uint64_t* w) {
  for (int k = 0; k < 4; ++k) w[k] = load32(qh + 4 * k) | (uint64_t)load32(qh + 16 + 4 * k) << 32;
}

// Formats of 32-value blocks: q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl. Returns the non-finite scales.
// (A template: the format's branches are resolved at compile time, outside the loops.)
template <Src f>
int64_t group_32(const Spec& s, const Group& o, int64_t nb, const uint8_t* const* row) {
  constexpr bool has_m = f == Src::Q4_1 || f == Src::Q5_1;
  constexpr int nib = f == Src::Q4_1 ? 4 : f == Src::Q5_0 ? 6 : f == Src::Q5_1 ? 8 : 2;  // the nibbles' offset
  int64_t bad = 0;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t *qo = o.q + b * o.q_step, *dd = o.d + b * o.d_step;
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + b * s.src_bytes;
      const uint16_t d = load16(p);
      bad += !finite_half(d);
      store16(dd + 2 * r, d);
      if constexpr (has_m) {
        const uint16_t m = load16(p + 2);
        bad += !finite_half(m);
        store16(o.m + b * o.m_step + 2 * r, m);
      }
      if constexpr (f == Src::Q8_0) {  // int8 + 128, 4 values a step (8 at once: GCC's own vectors
        for (int k = 0; k < 4; ++k) {  // of the 4-byte loop ran 3x slower)
          const uint64_t v = load64(p + 2 + 8 * k) ^ 0x8080808080808080ull;
          store32(qo + (2 * k * GROUP + r) * 4, (uint32_t)v);
          store32(qo + ((2 * k + 1) * GROUP + r) * 4, (uint32_t)(v >> 32));
        }
      } else {
        put_nibbles(qo, r, p + nib);
      }
      if constexpr (f == Src::Q5_0 || f == Src::Q5_1) put_fifth_bits_word(qo, r, load32(p + (f == Src::Q5_0 ? 2 : 4)));
    }
  }
  return bad;
}

// q4_k and q5_k: per super-block the 8 rows' d then dmin, and their 6-bit scales and mins as
// qmatmul.cc reads them (96 bytes: the low 4 bits of scale and min of block j, row r, at byte
// 8 j + r; their high 2 bits at bits 2 r and 16 + 2 r of the 32-bit word at 64 + 4 j), taken
// from the file's 12 bytes (llama.cpp's get_scale_min_k4) without decoding anything else; the
// nibbles as q4_x's (block j: the low or high nibbles of the 32 bytes j / 2), q5_k's 5th bits
// (bit j of the 32 bytes before the nibbles) after them.
template <bool five>
int64_t group_k(const Spec& s, const Group& o, int64_t nu, const uint8_t* const* row) {
  constexpr int qs = five ? 48 : 16;
  int64_t bad = 0;
  for (int64_t u = 0; u < nu; ++u) {
    uint8_t *dd = o.d + u * o.d_step, *mm = o.m + u * o.m_step;
    uint32_t hi[BLOCKS_K] = {};
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + u * s.src_bytes;
      const uint16_t d = load16(p), dmin = load16(p + 2);
      bad += !finite_half(d) + !finite_half(dmin);
      store16(dd + 2 * r, d);
      store16(dd + 2 * (GROUP + r), dmin);
      const uint8_t* sm = p + 4;
      for (int j = 0; j < 4; ++j) {
        const int sc0 = sm[j] & 63, mn0 = sm[j + 4] & 63;
        const int sc1 = (sm[j + 8] & 15) | (sm[j] >> 6) << 4, mn1 = (sm[j + 8] >> 4) | (sm[j + 4] >> 6) << 4;
        mm[8 * j + r] = (uint8_t)((sc0 & 15) | (mn0 & 15) << 4);
        mm[8 * (j + 4) + r] = (uint8_t)((sc1 & 15) | (mn1 & 15) << 4);
        hi[j] |= (uint32_t)(sc0 >> 4) << (2 * r) | (uint32_t)(mn0 >> 4) << (16 + 2 * r);
        hi[j + 4] |= (uint32_t)(sc1 >> 4) << (2 * r) | (uint32_t)(mn1 >> 4) << (16 + 2 * r);
      }
      uint64_t qh[4];
      if constexpr (five) halves(p + 16, qh);
      for (int j = 0; j < BLOCKS_K; ++j) {
        uint8_t* qo = o.q + (u * BLOCKS_K + j) * o.q_step;
        put_half_nibbles(qo, r, p + qs + 32 * (j / 2), 4 * (j & 1));
        if constexpr (five) put_fifth_bits_bytes(qo, r, qh, j);
      }
    }
    for (int j = 0; j < BLOCKS_K; ++j) store32(mm + 64 + 4 * j, hi[j]);
  }
  return bad;
}

// q6_k: per super-block the 8 rows' d and their 16 scales as [scale][row]; per block of 32 the
// low 4 bits as q4_x's nibbles, then the high 2 bits in two 32-byte steps ([half][row][4]: value
// 16 half + 4 k + j at bits 2 k). Block c of a super-block: its low bits are the low or high
// nibbles of ql's bytes 64 (c / 4) + 32 (c % 2), its high bits bits 2 (c % 4) of qh's 32 (c / 4).
int64_t group_6k(const Spec& s, const Group& o, int64_t nu, const uint8_t* const* row) {
  int64_t bad = 0;
  for (int64_t u = 0; u < nu; ++u) {
    uint8_t *dd = o.d + u * o.d_step, *mm = o.m + u * o.m_step;
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + u * s.src_bytes;
      const uint16_t d = load16(p + 208);
      bad += !finite_half(d);
      store16(dd + 2 * r, d);
      for (int i = 0; i < 16; ++i) mm[i * GROUP + r] = p[192 + i];
      for (int n = 0; n < 2; ++n) {  // 128 values a time: ql's bytes 64 n.., qh's 32 n..
        uint64_t qh[4];
        halves(p + 128 + 32 * n, qh);
        for (int c = 4 * n; c < 4 * n + 4; ++c) {
          uint8_t* qo = o.q + (u * BLOCKS_K + c) * o.q_step;
          put_half_nibbles(qo, r, p + 64 * n + 32 * (c % 2), 4 * ((c / 2) % 2));
          uint64_t lanes = 0;  // both halves' 4 lanes of row r: the low and high 32 bits
          for (int k = 0; k < 4; ++k) lanes |= ((qh[k] >> (2 * (c % 4))) & (LOW_2BITS | (uint64_t)LOW_2BITS << 32)) << (2 * k);
          store32(qo + 128 + 4 * r, (uint32_t)lanes);
          store32(qo + 160 + 4 * r, (uint32_t)(lanes >> 32));
        }
      }
    }
  }
  return bad;
}

// iq4_xs: per super-block the 8 rows' d and their 6-bit scales as qmatmul.cc reads them (48
// bytes: the low 4 bits of block j's scale of rows r and r + 4 in byte 4 j + r, low and high
// nibble; the high 2 bits at bits 2 r of the 16-bit word at 32 + 2 j); the nibbles as stored.
int64_t group_xs(const Spec& s, const Group& o, int64_t nu, const uint8_t* const* row) {
  int64_t bad = 0;
  for (int64_t u = 0; u < nu; ++u) {
    uint8_t *dd = o.d + u * o.d_step, *mm = o.m + u * o.m_step;
    uint8_t lo[32] = {};
    uint16_t hi[BLOCKS_K] = {};
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + u * s.src_bytes;
      const uint16_t d = load16(p), sh = load16(p + 2);
      bad += !finite_half(d);
      store16(dd + 2 * r, d);
      for (int j = 0; j < BLOCKS_K; ++j) {
        const int ls = ((p[4 + j / 2] >> (4 * (j % 2))) & 15) | ((sh >> (2 * j)) & 3) << 4;
        lo[4 * j + (r & 3)] |= (uint8_t)((ls & 15) << (4 * (r >> 2)));
        hi[j] |= (uint16_t)((ls >> 4) << (2 * r));
        put_nibbles(o.q + (u * BLOCKS_K + j) * o.q_step, r, p + 8 + 16 * j);
      }
    }
    std::memcpy(mm, lo, 32);
    for (int j = 0; j < BLOCKS_K; ++j) store16(mm + 32 + 2 * j, hi[j]);
  }
  return bad;
}

// 2-bit values c of 32 bytes (value l at bits 2 c of byte l, read as halves() words) as two 32-byte
// steps at qo: lane (r, j) of step h holds values 16 h + 4 k + j at bits 2 k (Q3_K's and Q2_K's qs).
inline void put_crumbs(uint8_t* qo, int r, const uint64_t* w, int c) {
  uint64_t lanes = 0;
  for (int k = 0; k < 4; ++k) lanes |= ((w[k] >> (2 * c)) & (LOW_2BITS | (uint64_t)LOW_2BITS << 32)) << (2 * k);
  store32(qo + 4 * r, (uint32_t)lanes);
  store32(qo + 32 + 4 * r, (uint32_t)(lanes >> 32));
}

// q3_k and q2_k: per block of 32 (block c = 4 n + j of a super-block: bits 2 j of qs's 32 bytes
// n) the low 2 bits as two steps (put_crumbs), q3_k's high bit (bit c of hmask's 32 bytes) in a
// third as q5's 5th bit. Per super-block: q3_k, the 8 rows' d and their 16 6-bit scales as
// qmatmul.cc reads them (12 bytes a block j: row r's 12 bits at bit 12 r, scale 2 j in the low
// 6, 2 j + 1 in the high 6), unpacked from the file's 12 bytes as llama.cpp's
// dequantize_row_q3_K does; q2_k, the rows' d then dmin, and their 16 scale bytes as [scale][row].
template <bool three>
int64_t group_lowk(const Spec& s, const Group& o, int64_t nu, const uint8_t* const* row) {
  constexpr int qs = three ? 32 : 16;
  int64_t bad = 0;
  for (int64_t u = 0; u < nu; ++u) {
    uint8_t *dd = o.d + u * o.d_step, *mm = o.m + u * o.m_step;
    uint8_t sb[96] = {};
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + u * s.src_bytes;
      if constexpr (three) {
        const uint16_t d = load16(p + 108);
        bad += !finite_half(d);
        store16(dd + 2 * r, d);
        const uint8_t* sc = p + 96;
        int ls[16];
        for (int i = 0; i < 16; ++i) ls[i] = ((sc[i % 8] >> (4 * (i / 8))) & 15) | ((sc[8 + i % 4] >> (2 * (i / 4))) & 3) << 4;
        for (int j = 0; j < BLOCKS_K; ++j) {  // 12 bits at bit 12 r of the block's 12 bytes
          const uint32_t v = (uint32_t)(ls[2 * j] | ls[2 * j + 1] << 6) << (4 * (r & 1));
          uint8_t* at = sb + 12 * j + 3 * r / 2;
          at[0] |= (uint8_t)v, at[1] |= (uint8_t)(v >> 8);
        }
      } else {
        const uint16_t d = load16(p + 80), dmin = load16(p + 82);
        bad += !finite_half(d) + !finite_half(dmin);
        store16(dd + 2 * r, d);
        store16(dd + 2 * (GROUP + r), dmin);
        for (int i = 0; i < 16; ++i) mm[i * GROUP + r] = p[i];
      }
      uint64_t hm[4];
      if constexpr (three) halves(p, hm);
      for (int n = 0; n < 2; ++n) {
        uint64_t q[4];
        halves(p + qs + 32 * n, q);
        for (int j = 0; j < 4; ++j) {
          const int c = 4 * n + j;
          uint8_t* qo = o.q + (u * BLOCKS_K + c) * o.q_step;
          put_crumbs(qo, r, q, j);
          if constexpr (three) put_fifth_bits_bytes(qo, r, hm, c, 64);
        }
      }
    }
    if constexpr (three) std::memcpy(mm, sb, 96);
  }
  return bad;
}

// iq3_xxs and iq3_s (qmatmul.cc's layout): per block of 32 the rows' 8 grid indices as [step][row]
// (iq3_s: then their 9th bits, a byte a row), the rows' 32-bit sign words (iq3_xxs: the file's
// 7-bit sign indices a byte each, ls's bit l at bit 7 of byte l; iq3_s: the file's 4 sign bytes),
// iq3_s's 4-bit ls two rows a byte; per super-block the 8 rows' d.
template <bool xxs>
int64_t group_iq3(const Spec& s, const Group& o, int64_t nu, const uint8_t* const* row) {
  int64_t bad = 0;
  for (int64_t u = 0; u < nu; ++u)
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + u * s.src_bytes;
      const uint16_t d = load16(p);
      bad += !finite_half(d);
      store16(o.d + u * o.d_step + 2 * r, d);
      for (int c = 0; c < BLOCKS_K; ++c) {
        uint8_t* qo = o.q + (u * BLOCKS_K + c) * o.q_step;
        for (int k = 0; k < 8; ++k) qo[8 * k + r] = p[2 + 8 * c + k];
        if constexpr (xxs) {
          const uint32_t aux = load32(p + 66 + 4 * c);
          uint32_t word = 0;
          for (int l = 0; l < 4; ++l) word |= ((aux >> (7 * l)) & 0x7f) << (8 * l) | ((aux >> (28 + l)) & 1) << (8 * l + 7);
          store32(qo + 64 + 4 * r, word);
        } else {
          qo[64 + r] = p[66 + c];
          std::memcpy(qo + 72 + 4 * r, p + 74 + 4 * c, 4);
          const uint8_t ls = (p[106 + c / 2] >> (4 * (c & 1))) & 15;
          qo[104 + r / 2] = (r & 1) ? (uint8_t)((qo[104 + r / 2] & 15) | ls << 4) : ls;
        }
      }
    }
  return bad;
}

// iq2_xxs, iq2_xs, iq2_s, iq1_s and iq1_m (qmatmul.cc's layout): per block of 32 the rows' 4 grid
// indices' low 8 bits as [l][row], then per row: iq2_xxs's and iq2_xs's sign word (the file's
// 7-bit sign indices a byte each; bit 7 of byte l: ls's bit l, or index l's 9th bit), iq2_xs's
// scale byte; iq2_s's 4 sign bytes, qh byte and scale byte; iq1_s's 16-bit qh; iq1_m's 6 bits of
// ls (rows 4h..4h+3 in the 24-bit word at 32 + 3h) and its two qh bytes. Per super-block the 8
// rows' d (iq1_m: put together from its scale words' top nibbles, as llama.cpp's iq1m_scale_t).
template <Src f>
int64_t group_iq12(const Spec& s, const Group& o, int64_t nu, const uint8_t* const* row) {
  int64_t bad = 0;
  for (int64_t u = 0; u < nu; ++u)
    for (int r = 0; r < GROUP; ++r) {
      const uint8_t* p = row[r] + u * s.src_bytes;
      uint16_t d;
      if constexpr (f == Src::IQ1_M)
        d = (uint16_t)((load16(p + 48) >> 12) | ((load16(p + 50) >> 8) & 0x00f0) | ((load16(p + 52) >> 4) & 0x0f00) |
                       (load16(p + 54) & 0xf000));
      else
        d = load16(p);
      bad += !finite_half(d);
      store16(o.d + u * o.d_step + 2 * r, d);
      for (int c = 0; c < BLOCKS_K; ++c) {
        uint8_t* qo = o.q + (u * BLOCKS_K + c) * o.q_step;
        if constexpr (f == Src::IQ2_XXS) {
          const uint8_t* q = p + 2 + 8 * c;
          const uint32_t aux = load32(q + 4);
          uint32_t word = 0;
          for (int l = 0; l < 4; ++l) {
            qo[8 * l + r] = q[l];
            word |= ((aux >> (7 * l)) & 0x7f) << (8 * l) | ((aux >> (28 + l)) & 1) << (8 * l + 7);
          }
          store32(qo + 32 + 4 * r, word);
        } else if constexpr (f == Src::IQ2_XS) {
          for (int l = 0; l < 4; ++l) {
            const uint16_t v = load16(p + 2 + 8 * c + 2 * l);
            qo[8 * l + r] = (uint8_t)v;
            qo[32 + 4 * r + l] = (uint8_t)((v >> 9) | ((v >> 8) & 1) << 7);
          }
          qo[64 + r] = p[66 + c];
        } else if constexpr (f == Src::IQ2_S) {
          for (int l = 0; l < 4; ++l) qo[8 * l + r] = p[2 + 4 * c + l];
          std::memcpy(qo + 32 + 4 * r, p + 34 + 4 * c, 4);
          qo[64 + r] = p[66 + c];
          qo[72 + r] = p[74 + c];
        } else if constexpr (f == Src::IQ1_S) {
          for (int l = 0; l < 4; ++l) qo[8 * l + r] = p[2 + 4 * c + l];
          std::memcpy(qo + 32 + 2 * r, p + 34 + 2 * c, 2);
        } else {
          for (int l = 0; l < 4; ++l) qo[8 * l + r] = p[4 * c + l];
          std::memcpy(qo + 38 + 2 * r, p + 32 + 2 * c, 2);
          const uint32_t ls = (load16(p + 48 + 2 * (c / 2)) >> (6 * (c % 2))) & 63;
          uint8_t* at = qo + 32 + 3 * (r / 4);
          const uint32_t v = (r % 4 ? (uint32_t)(at[0] | at[1] << 8 | at[2] << 16) : 0u) | ls << (6 * (r % 4));
          at[0] = (uint8_t)v, at[1] = (uint8_t)(v >> 8), at[2] = (uint8_t)(v >> 16);
        }
      }
    }
  return bad;
}

// f16 and bf16: per block of 32 the 8 rows' values as [value][row], 2 bytes each (no scales).
int64_t group_float(const Group& o, int64_t nb, const uint8_t* const* row) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* qo = o.q + b * o.q_step;
    for (int r = 0; r < GROUP; ++r)
      for (int j = 0; j < QK; ++j) std::memcpy(qo + 2 * (GROUP * j + r), row[r] + 2 * (b * QK + j), 2);
  }
  return 0;
}

int64_t write_group(const Spec& s, const Group& o, int64_t nb, int64_t nu, const uint8_t* const* row) {
  switch (s.src) {
    case Src::Q8_0:
      return group_32<Src::Q8_0>(s, o, nb, row);
    case Src::Q4_0:
      return group_32<Src::Q4_0>(s, o, nb, row);
    case Src::Q4_1:
      return group_32<Src::Q4_1>(s, o, nb, row);
    case Src::Q5_0:
      return group_32<Src::Q5_0>(s, o, nb, row);
    case Src::Q5_1:
      return group_32<Src::Q5_1>(s, o, nb, row);
    case Src::IQ4_NL:
      return group_32<Src::IQ4_NL>(s, o, nb, row);
    case Src::Q4_K:
      return group_k<false>(s, o, nu, row);
    case Src::Q5_K:
      return group_k<true>(s, o, nu, row);
    case Src::Q6_K:
      return group_6k(s, o, nu, row);
    case Src::IQ4_XS:
      return group_xs(s, o, nu, row);
    case Src::Q3_K:
      return group_lowk<true>(s, o, nu, row);
    case Src::Q2_K:
      return group_lowk<false>(s, o, nu, row);
    case Src::IQ3_XXS:
      return group_iq3<true>(s, o, nu, row);
    case Src::IQ3_S:
      return group_iq3<false>(s, o, nu, row);
    case Src::F16:
    case Src::BF16:
      return group_float(o, nb, row);
    case Src::IQ2_XXS:
      return group_iq12<Src::IQ2_XXS>(s, o, nu, row);
    case Src::IQ2_XS:
      return group_iq12<Src::IQ2_XS>(s, o, nu, row);
    case Src::IQ2_S:
      return group_iq12<Src::IQ2_S>(s, o, nu, row);
    case Src::IQ1_S:
      return group_iq12<Src::IQ1_S>(s, o, nu, row);
    case Src::IQ1_M:
      return group_iq12<Src::IQ1_M>(s, o, nu, row);
  }
  return 0;
}

const Spec* spec_of(const char* name) {
  for (const Spec& s : SPECS)
    if (std::strcmp(s.name, name) == 0) return &s;
  return nullptr;
}

int64_t relayout(const char* fmt, const uint8_t* raw, int64_t rows, int64_t row_bytes, const int64_t* order,
                 int64_t in, uint8_t* q, uint8_t* d, uint8_t* m, int64_t G, int64_t g0, int threads) {
  const Spec* s = spec_of(fmt);
  if (s == nullptr || in <= 0 || in % s->src_values || row_bytes != in / s->src_values * s->src_bytes || rows < 0 ||
      G <= 0 || g0 < 0 || g0 + (rows + GROUP - 1) / GROUP > G)
    return -1;
  for (int64_t i = 0; order && i < rows; ++i)
    if (order[i] < 0 || order[i] >= rows) return -1;
  const int64_t K = G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1;  // quant.chunk_width
  const int64_t nb = in / QK, nu = in / s->src_values;
  const std::vector<uint8_t> zero(row_bytes, 0);  // the padding rows
  const int64_t groups = (rows + GROUP - 1) / GROUP;
  auto run = [&](int64_t a, int64_t b, int64_t* bad) {
    const uint8_t* row[GROUP];
    for (int64_t i = a; i < b; ++i) {
      for (int r = 0; r < GROUP; ++r) {
        const int64_t src = i * GROUP + r;
        row[r] = src < rows ? raw + (order ? order[src] : src) * row_bytes : zero.data();
      }
      *bad += write_group(*s, group_at(*s, q, d, m, K, nb, nu, g0 + i), nb, nu, row);
    }
  };
  // Threads only where each gets a few groups' worth (a group is ~8 rows' bytes: a few KB).
  const int n = (int)std::max<int64_t>(1, std::min<int64_t>(threads, groups / 4));
  std::vector<int64_t> bad(n, 0);
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(run, groups * t / n, groups * (t + 1) / n, &bad[t]);
  run(0, groups / n, &bad[0]);
  for (auto& th : pool) th.join();
  int64_t total = 0;
  for (int64_t b : bad) total += b;
  return total;
}

}  // namespace relay
}  // namespace

// Rows [0, rows) of a GGUF tensor stored as format `fmt`'s blocks (raw: row_bytes a row, `in`
// values; order, where not null: output row i is raw's row order[i], how the loader un-permutes
// llama.cpp's Q/K rows without a copy) into groups g0, g0 + 1, ... of one layer of G groups, in
// the kernel's chunked layout
// (q, d, m: the layer's arrays; m unused, may be null, for formats without one). A last group
// short of 8 rows is padded with zero rows, as quant.interleave pads. Runs on up to `threads`
// threads. Returns the number of NaN or infinite f16 scales met (the loader refuses the file),
// or -1 for an unknown format, sizes that do not fit it or an order out of range.
extern "C" int64_t pinwheel_relayout(const char* fmt, const uint8_t* raw, int64_t rows, int64_t row_bytes,
                                     const int64_t* order, int64_t in, uint8_t* q, uint8_t* d, uint8_t* m, int64_t G,
                                     int64_t g0, int threads) {
  return relay::relayout(fmt, raw, rows, row_bytes, order, in, q, d, m, G, g0, threads);
}
