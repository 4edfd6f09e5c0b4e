// One product of the native kernel alone, in C++, without JAX around it: qmatmul_rows for each
// format at a shape, C rows of x, T threads, best of 15, with a digest of the outputs (equal
// digests: the same bits). Compare two checkouts by building each and running them in turn:
//
//   g++ -std=c++17 -O3 -march=x86-64-v4 -mavx512vnni -mtune=generic -isystem engine/kernels/include -Iengine/kernels -pthread -o /tmp/qmr bench/qmatmul_rows.cc
//   /tmp/qmr 2048 8192 64 2        # O (outputs) I (inputs) C (rows) T (threads)
//
// (the flags are the avx512vnni variant's, engine/kernels/variants.py; random weights and x)
#include "qmatmul.cc"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

template <Fmt F>
void bench(const char* name, int O, int I, int C, int T) {
  const int K = 4, nb = I / QK;
  const int64_t n_chunks = O / (K * GROUP);
  std::mt19937 rng(1);
  std::vector<uint8_t> q((size_t)n_chunks * nb * K * block_bytes<F>());
  for (auto& v : q) v = (uint8_t)rng();
  std::vector<uint16_t> d(std::max<size_t>(1, n_chunks * d_per_chunk<F>(nb, K)));
  std::vector<uint16_t> m(std::max<size_t>(1, n_chunks * m_per_chunk<F>(nb, K)));
  for (auto& v : d) v = (uint16_t)(0x1c00 + rng() % 0x400);  // small positive f16
  for (auto& v : m) v = (uint16_t)rng();
  std::vector<float> x((size_t)C * I), out((size_t)C * O);
  for (auto& v : x) v = (float)(rng() % 2000) / 1000.f - 1.f;
  auto run = [&] {
    qmatmul_rows<F>(T, x.data(), C, I, q.data(), d.data(), m.data(), n_chunks, K, nullptr, 0.f, out.data());
  };
  run();
  double best = 1e9;
  for (int i = 0; i < 15; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  uint64_t h = 1469598103934665603ull;
  for (float f : out) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    h = (h ^ b) * 1099511628211ull;
  }
  std::printf("%-7s %dx%d C %d T %d: %7.3f ms %6.1f G MAC/s  digest %016llx\n", name, O, I, C, T, best,
              (double)O * I * C / best / 1e6, (unsigned long long)h);
}

int main(int argc, char** argv) {
  const int O = argc > 1 ? std::atoi(argv[1]) : 4096, I = argc > 2 ? std::atoi(argv[2]) : 2048;
  const int C = argc > 3 ? std::atoi(argv[3]) : 64, T = argc > 4 ? std::atoi(argv[4]) : 1;
  if (O % 32 || I % 256 || C < 1 || T < 1) {
    std::fprintf(stderr, "usage: qmr O I C T (O a multiple of 32, I of 256)\n");
    return 2;
  }
  bench<Fmt::Q8_0>("q8_0", O, I, C, T);
  bench<Fmt::Q4_0>("q4_0", O, I, C, T);
  bench<Fmt::Q4_K>("q4_k", O, I, C, T);
  bench<Fmt::Q5_K>("q5_k", O, I, C, T);
  bench<Fmt::Q6_K>("q6_k", O, I, C, T);
  bench<Fmt::IQ4_XS>("iq4_xs", O, I, C, T);
  bench<Fmt::Q3_K>("q3_k", O, I, C, T);
  bench<Fmt::Q2_K>("q2_k", O, I, C, T);
  return 0;
}
