// A consumer of QTL, built three ways by test/consumers/consumer_test.py: as a Meson subproject,
// through the installed CMake package (qtl::qtl, qtl::io) and through the installed pkg-config files.
#include <qtl/qtl.hpp>
#include <qtl/io/safetensors.hpp>

#include <cstdio>

int main() {
  int codes[4] = {1, 2, 3, 4};
  auto const v = qtl::make_view(codes, 2, 2);
  static_assert(qtl::make_view(static_cast<int*>(nullptr), 2, 3).size() == 6);
  std::printf("consumer: qtl view %lld x %lld, element (1,1) = %d\n", static_cast<long long>(v.rows()),
              static_cast<long long>(v.cols()), v(1, 1));
  return v(1, 1) == 4 ? 0 : 1;
}
