// The most 512-bit VNNI dot products (vpdpbusd zmm) one core issues a second, with nothing else
// in the loop: 12 independent accumulators, so the instruction's latency is hidden and only its
// issue rate counts. It is the ceiling for the prefill tile (tile512: 8 vpdpbusd a block and row,
// 64 multiply-adds each), against which bench/qmatmul_rows.cc's G MAC/s read as a fraction.
//
//   g++ -O2 -march=native -o /tmp/vnni_peak bench/vnni_peak.cc && /tmp/vnni_peak
//
// (needs AVX-512 VNNI; a 2-core Zen 4 EPYC read 3.6 G/s = 230 G MAC/s, a Zen 5 ~7.9 G/s)
#include <immintrin.h>

#include <chrono>
#include <cstdio>

int main(int argc, char**) {
  constexpr int A = 12;
  __m512i acc[A];
  for (int k = 0; k < A; ++k) acc[k] = _mm512_set1_epi32(k + argc);  // (argc: nothing to fold at compile time)
  const __m512i w = _mm512_set1_epi8((char)argc), x = _mm512_set1_epi8((char)(5 + argc));
  for (int round = 0; round < 3; ++round) {
    const long n = 100000000;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) {
#pragma GCC unroll 12
      for (int k = 0; k < A; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], w, x);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%.2f G vpdpbusd zmm a second = %.0f G MAC/s (one thread)\n", n * A / s / 1e9, n * A * 64.0 / s / 1e9);
  }
  alignas(64) int lanes[16];
  int sum = 0;
  for (int k = 0; k < A; ++k) {  // (keeps the sums alive; a store, not GCC 12's reduce, which warns)
    _mm512_store_si512(lanes, acc[k]);
    for (int v : lanes) sum += v;
  }
  return sum == 1;
}
