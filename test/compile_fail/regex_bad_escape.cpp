// expected-error: regex_has_bad_escape
// An unknown letter escape is an error in Python's re, and here at compile time.
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
using rule = qtl::static_regex<R"(layers\.\q+)">;
#else
using rule = qtl::static_regex<R"(layers\.\d+)">;
#endif
bool f(char const* s) { return rule::match(s); }
