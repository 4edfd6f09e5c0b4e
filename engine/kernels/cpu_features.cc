// The CPU features the kernel's variants need, asked of the CPU itself (and of the OS, which
// must save the wide registers' state): cpuid + xgetbv on x86, HWCAP on Linux arm64, sysctl on
// macOS. Compiled into every variant's library; the loader asks the baseline one, then loads
// the fastest variant the answer allows (engine/kernels/variants.py names the features as
// Linux's /proc/cpuinfo does).
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(_M_X64)
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif

namespace {

void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
#if defined(_MSC_VER)
  int out[4];
  __cpuidex(out, static_cast<int>(leaf), static_cast<int>(sub));
  for (int i = 0; i < 4; ++i) r[i] = static_cast<unsigned>(out[i]);
#else
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
#endif
}

unsigned long long xcr0() {
#if defined(_MSC_VER)
  return _xgetbv(0);
#else
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));  // (no -mxsave needed, unlike _xgetbv)
  return (static_cast<unsigned long long>(hi) << 32) | lo;
#endif
}

std::string features() {
  unsigned r[4];
  cpuid(0, 0, r);
  const unsigned max_leaf = r[0];
  cpuid(1, 0, r);
  const unsigned ecx1 = r[2];
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (on) out += std::string(name) + " ";
  };
  add(ecx1 & (1u << 20), "sse4_2");
  add(ecx1 & (1u << 23), "popcnt");
  const bool osxsave = ecx1 & (1u << 27);
  const unsigned long long xcr = osxsave ? xcr0() : 0;
  const bool avx_state = (xcr & 0x6) == 0x6;          // XMM and YMM saved by the OS
  const bool avx512_state = avx_state && (xcr & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  if (!avx_state) return out;
  add(ecx1 & (1u << 28), "avx");
  add(ecx1 & (1u << 12), "fma");
  add(ecx1 & (1u << 29), "f16c");
  if (max_leaf < 7) return out;
  cpuid(7, 0, r);
  const unsigned ebx7 = r[1], ecx7 = r[2], max_sub7 = r[0];
  add(ebx7 & (1u << 5), "avx2");
  add(ebx7 & (1u << 8), "bmi2");
  if (avx512_state) {
    add(ebx7 & (1u << 16), "avx512f");
    add(ebx7 & (1u << 17), "avx512dq");
    add(ebx7 & (1u << 28), "avx512cd");
    add(ebx7 & (1u << 30), "avx512bw");
    add(ebx7 & (1u << 31), "avx512vl");
    add(ecx7 & (1u << 11), "avx512_vnni");
  }
  if (max_sub7 >= 1) {
    cpuid(7, 1, r);
    add(r[0] & (1u << 4), "avx_vnni");
  }
  return out;
}

}  // namespace

#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif

namespace {
std::string features() {
  std::string out = "asimd ";
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  if (hw & HWCAP_ASIMDDP) out += "asimddp ";
  if (hw2 & HWCAP2_I8MM) out += "i8mm ";
  return out;
}
}  // namespace

#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>

namespace {
bool sysctl_on(const char* name) {
  int value = 0;
  size_t size = sizeof(value);
  return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
std::string features() {
  std::string out = "asimd ";
  if (sysctl_on("hw.optional.arm.FEAT_DotProd")) out += "asimddp ";
  if (sysctl_on("hw.optional.arm.FEAT_I8MM")) out += "i8mm ";
  return out;
}
}  // namespace

#else
namespace {
std::string features() { return ""; }
}  // namespace
#endif

// Space-separated feature names; the string lives for the process.
extern "C" const char* pinwheel_cpu_features() {
  static const std::string answer = features();
  return answer.c_str();
}
