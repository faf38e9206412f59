// expected-error: regex_lookbehind_is_not_supported
// Lookbehind is outside the supported subset: a compile error, never a silent mismatch.
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
using rule = qtl::static_regex<R"((?<=mlp\.)gate)">;
#else
using rule = qtl::static_regex<R"((?:mlp\.)gate)">;
#endif
bool f(char const* s) { return rule::search(s); }
