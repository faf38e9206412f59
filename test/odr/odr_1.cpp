// ODR check: two translation units include the umbrella header and are linked together; an
// inline-less definition in a header would be a duplicate symbol here.
#include <qtl/qtl.hpp>

int odr_2();
int main() { return odr_2() == 0 ? 0 : 1; }
