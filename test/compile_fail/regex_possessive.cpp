// expected-error: regex_possessive_quantifiers_are_not_supported
// Python 3.11 accepts possessive repeats; they change what matches, so they are rejected.
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
using rule = qtl::static_regex<R"(\d*+\.)">;
#else
using rule = qtl::static_regex<R"(\d*\.)">;
#endif
bool f(char const* s) { return rule::match(s); }
