// Translation unit 1 of the two-TU link test (the body: link_tu.cuh).
#define QTL_LINK_TU use_tu_1
#include "link_tu.cuh"
