// expected-error: regex_has_nothing_to_repeat
// A quantifier with nothing before it (here after '|').
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
using rule = qtl::static_regex<"gate|*up">;
#else
using rule = qtl::static_regex<"gate|.*up">;
#endif
bool f(char const* s) { return rule::match(s); }
