// How fast T threads read memory with nothing else to do: each sums its share of a buffer far
// bigger than the caches, in the widest loads the build has. It is the ceiling for a decode step on a big model,
// which reads every weight once a token: a file's tensor bytes times tokens a second, read
// against this, says whether a decode is at the memory's rate (bench/vnni_peak.cc is the other
// ceiling, the prefill's).
//
//   g++ -O2 -march=native -pthread -o /tmp/read_peak bench/read_peak.cc && /tmp/read_peak [GB] [T] [rounds]
//
// (default 2 GB on 2 threads, 5 rounds. A shared 2-core Zen 4 EPYC read anything from 15 to 55
// GB/s, minute to minute: bench/decode_vs_bus.py runs it a round at a time between the decodes
// it is read against.)
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

// The sum of n bytes as 64-bit words (n a multiple of 256), in the widest loads the build has.
long long sum_share(const char* a, size_t n) {
#if defined(__AVX512F__)
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  for (size_t i = 0; i < n; i += 256)
    for (int k = 0; k < 4; ++k) acc[k] = _mm512_add_epi64(acc[k], _mm512_load_si512(a + i + 64 * k));
  alignas(64) long long lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3])));
#elif defined(__AVX2__)
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (size_t i = 0; i < n; i += 128)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_add_epi64(acc[k], _mm256_load_si256((const __m256i*)(a + i + 32 * k)));
  alignas(32) long long lanes[4];
  _mm256_store_si256((__m256i*)lanes, _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3])));
#else
  long long lanes[4] = {0, 0, 0, 0};
  const long long* w = (const long long*)a;
  for (size_t i = 0; i < n / 8; i += 4)
    for (int k = 0; k < 4; ++k) lanes[k] += w[i + k];
#endif
  long long s = 0;
  for (long long v : lanes) s += v;
  return s;
}

int main(int argc, char** argv) {
  const size_t gb = argc > 1 ? (size_t)atoi(argv[1]) : 2;
  const int T = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 5;
  const size_t n = gb << 30, share = n / T / 256 * 256;
  char* p = (char*)aligned_alloc(64, n);
  if (!p) return 1;
  memset(p, 1, n);  // (touched first: the rounds time reads, not page faults)
  std::vector<long long> sums(T);
  for (int round = 0; round < rounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < T; ++t)
      threads.emplace_back([&, t] { sums[t] += sum_share(p + t * share, share); });
    for (auto& th : threads) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%.1f GB/s (%d threads, %zu GB)\n", share * T / s / 1e9, T, gb);
  }
  long long total = 0;
  for (long long v : sums) total += v;
  free(p);
  return total == 1;  // (keeps the sums alive)
}
