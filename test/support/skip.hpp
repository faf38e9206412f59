#pragma once
// A unit test that cannot check anything on this machine says so instead of passing in silence.
//
//   if (!cpu_has_avx512()) {
//     return qtl_test::skip("no AVX-512 on this CPU: the 64-byte encoders are not compared");
//   }
//
// Catch2 2.13 has no skip of its own. The unit tests' main (test/unit/main.cpp) lists every skipped
// test case with its reason after the run, and exits 77 (Meson's "skipped") when every test case
// that ran was skipped and none failed; a binary that also ran other test cases passes or fails by
// those, with the skipped ones listed in its log.

#include <string>

namespace qtl_test {

/// Marks the running test case skipped, with the reason (printed as a Catch2 warning and again at
/// the end of the run). Call it, then return from the test case: it asserts nothing.
void skip(std::string const& why);

}  // namespace qtl_test
