// expected-error: regex_is_missing_a_closing_parenthesis
// A literal pattern with an unclosed group does not compile; the diagnostic names the problem.
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
using rule = qtl::static_regex<R"(model\.layers\.(\d+\.mlp)">;
#else
using rule = qtl::static_regex<R"(model\.layers\.(\d+)\.mlp)">;
#endif
bool f(char const* s) { return rule::match(s); }
