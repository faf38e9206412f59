// expected-error: regex_lookbehind_requires_fixed_width_pattern
// A lookbehind of variable width is an error in Python's re too: a compile error, never a silent mismatch.
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
using rule = qtl::static_regex<R"((?<=mlp\.|experts\.\d+\.)gate)">;
#else
using rule = qtl::static_regex<R"((?<=mlp\.|exp\.)gate)">;
#endif
bool f(char const* s) { return rule::search(s); }
