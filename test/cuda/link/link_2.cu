// Translation unit 2 of the two-TU link test (the body: link_tu.cuh), and its main.
#define QTL_LINK_TU use_tu_2
#include "link_tu.cuh"

int use_tu_1();

int main(int argc, char**) {
  // Linking is the test; the launchers are referenced, not run (no GPU is needed).
  return argc > 1000 ? use_tu_1() + use_tu_2() : 0;
}
