// expected-error: regex_has_unterminated_character_set
// re_match in constant evaluation: a bad pattern does not compile (at run time it throws).
#include <qtl/match/regex.hpp>
#ifndef QTL_COMPILE_FAIL_TWIN
static_assert(qtl::re_match("model.layers.[0-9.mlp", "model.layers.1.mlp"));
#else
static_assert(qtl::re_match("model.layers.[0-9].mlp", "model.layers.1.mlp"));
#endif
