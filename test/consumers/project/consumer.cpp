// A consumer of QTL, built three ways by test/consumers/consumer_test.py: as a Meson subproject,
// through the installed CMake package (qtl::qtl, qtl::io) and through the installed pkg-config files.
#include <qtl/qtl.hpp>
#include <qtl/io/safetensors.hpp>

#include <cstdint>
#include <cstdio>

static_assert(qtl::uint4b8.id() == 0x4000000100400ull, "scalar type ids are vLLM's");
static_assert(qtl::pack_factor<qtl::uint4b8> == 8);

int main() {
  // Eight 4-bit codes of one column packed GPTQ style (pack_rows) into one int32 word, and back.
  std::int32_t codes[8] = {0, 1, 2, 3, 12, 13, 14, 15};
  std::int32_t word[1] = {};
  std::int32_t back[8] = {};
  qtl::pack_rows<qtl::uint4b8>(qtl::make_view(static_cast<std::int32_t const*>(codes), 8, 1),
                               qtl::make_view(word, 1, 1));
  qtl::unpack_rows<qtl::uint4b8>(qtl::make_view(static_cast<std::int32_t const*>(word), 1, 1),
                                 qtl::make_view(back, 8, 1));
  bool ok = static_cast<std::uint32_t>(word[0]) == 0xFEDC3210u;
  for (int i = 0; i < 8; ++i) {
    ok = ok && back[i] == codes[i];
  }
  std::printf("consumer: qtl %s packs 8 codes into 0x%08X, round trip %s\n", qtl::uint4b8.name().c_str(),
              static_cast<unsigned>(word[0]), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
