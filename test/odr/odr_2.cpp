#include <qtl/qtl.hpp>

int odr_2() { return 0; }
