#pragma once
// Sweeps and random rounds thinned where a build runs them many times slower.
//
// The sanitizer stage of .ci/run runs the unit and cuda-sim suites built with ASan + UBSan at -O0,
// where the dense sweeps and the thousands of random rounds take 10-40x their plain time; what the
// sanitizers look for (an access out of bounds, an overflow, a misaligned load) shows on the first
// inputs that reach a path, not on the millionth. There, QTL_TEST_THIN=k keeps one sweep point or
// round in 2^k; the plain build of the same tests (stage 1) runs them all. Boundary cases, hand-worked
// cases and the shapes that reach each code path are never thinned: only the counts below.
//
//   for (int rep = 0; rep < qtl_test::rounds(300); ++rep) { ... }
//   std::uint64_t const stride = std::uint64_t{1} << (sweep_shift + qtl_test::thin_shift());

#include <algorithm>
#include <cstdlib>

namespace qtl_test {

/// The power of two by which counts are thinned: QTL_TEST_THIN (0 to 16), 0 when unset or invalid.
inline int thin_shift() {
  static int const shift = [] {
    char const* const v = std::getenv("QTL_TEST_THIN");
    if (v == nullptr || *v == '\0') {
      return 0;
    }
    char* end = nullptr;
    long const k = std::strtol(v, &end, 10);
    return *end == '\0' && k >= 0 && k <= 16 ? static_cast<int>(k) : 0;
  }();
  return shift;
}

/// `n` rounds of a random test, thinned by 2^thin_shift(): at least one.
inline int rounds(int n) { return std::max(1, n >> thin_shift()); }

}  // namespace qtl_test
