// Test-only: dumps what qtl/numeric.hpp's encoders and decoders give, as raw little-endian arrays,
// for the interop tier (test_numeric.py) to compare against ml_dtypes and numpy.
//
//   dump_numeric decode FORMAT            every code of FORMAT (0..2^bits-1) -> float32, to stdout
//   dump_numeric encode FORMAT MODE       float32 from stdin -> one code per value, to stdout
//                                         (uint16 for fp16/bf16, uint8 otherwise)
//   dump_numeric rint                     float32 from stdin -> round_half_even, float32 to stdout
//
// FORMAT: fp16 bf16 e4m3fn e5m2 e3m2 e2m3 e2m1 e8m0. MODE: fp16/bf16/e4m3fn/e5m2: none|finite
// (saturation); e3m2/e2m3/e2m1: nearest|zero (round_mode); e8m0: nearest|zero|up, then -none or
// -finite (e.g. up-finite). Exit 1 with a message for anything else.
#include <qtl/numeric.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace {

std::vector<float> read_floats() {
  std::vector<float> v;
  float buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, sizeof(float), 4096, stdin)) > 0) {
    v.insert(v.end(), buf, buf + n);
  }
  return v;
}

template <class T>
void write_all(std::vector<T> const& v) {
  if (!v.empty() && std::fwrite(v.data(), sizeof(T), v.size(), stdout) != v.size()) {
    std::fputs("dump_numeric: short write\n", stderr);
    std::exit(1);
  }
}

[[noreturn]] void usage(char const* why) {
  std::fprintf(stderr, "dump_numeric: %s\nusage: dump_numeric decode FORMAT | encode FORMAT MODE | rint\n", why);
  std::exit(1);
}

qtl::saturation saturation_of(std::string_view m) {
  if (m == "none") return qtl::saturation::none;
  if (m == "finite") return qtl::saturation::finite;
  usage("saturation mode must be none or finite");
}

qtl::round_mode round_of(std::string_view m) {
  if (m == "nearest") return qtl::round_mode::nearest_even;
  if (m == "zero") return qtl::round_mode::toward_zero;
  usage("fp6/fp4 mode must be nearest or zero");
}

int decode(std::string_view f) {
  std::vector<float> out;
  auto table = [&](unsigned n, auto fn) {
    for (unsigned c = 0; c < n; ++c) out.push_back(fn(c));
  };
  if (f == "fp16") table(65536, [](unsigned c) { return qtl::fp16_to_float(static_cast<std::uint16_t>(c)); });
  else if (f == "bf16") table(65536, [](unsigned c) { return qtl::bf16_to_float(static_cast<std::uint16_t>(c)); });
  else if (f == "e4m3fn") table(256, [](unsigned c) { return qtl::e4m3fn_to_float(static_cast<std::uint8_t>(c)); });
  else if (f == "e5m2") table(256, [](unsigned c) { return qtl::e5m2_to_float(static_cast<std::uint8_t>(c)); });
  else if (f == "e3m2") table(64, [](unsigned c) { return qtl::e3m2_to_float(static_cast<std::uint8_t>(c)); });
  else if (f == "e2m3") table(64, [](unsigned c) { return qtl::e2m3_to_float(static_cast<std::uint8_t>(c)); });
  else if (f == "e2m1") table(16, [](unsigned c) { return qtl::e2m1_to_float(static_cast<std::uint8_t>(c)); });
  else if (f == "e8m0") table(256, [](unsigned c) { return qtl::e8m0_to_float(static_cast<std::uint8_t>(c)); });
  else usage("unknown format");
  write_all(out);
  return 0;
}

template <class Code, class Fn>
int encode_with(Fn fn) {
  auto const in = read_floats();
  std::vector<Code> out;
  out.reserve(in.size());
  for (float x : in) out.push_back(static_cast<Code>(fn(x)));
  write_all(out);
  return 0;
}

int encode(std::string_view f, std::string_view m) {
  if (f == "fp16") return encode_with<std::uint16_t>([s = saturation_of(m)](float x) { return qtl::float_to_fp16(x, s); });
  if (f == "bf16") return encode_with<std::uint16_t>([s = saturation_of(m)](float x) { return qtl::float_to_bf16(x, s); });
  if (f == "e4m3fn") return encode_with<std::uint8_t>([s = saturation_of(m)](float x) { return qtl::float_to_e4m3fn(x, s); });
  if (f == "e5m2") return encode_with<std::uint8_t>([s = saturation_of(m)](float x) { return qtl::float_to_e5m2(x, s); });
  if (f == "e3m2") return encode_with<std::uint8_t>([r = round_of(m)](float x) { return qtl::float_to_e3m2(x, r); });
  if (f == "e2m3") return encode_with<std::uint8_t>([r = round_of(m)](float x) { return qtl::float_to_e2m3(x, r); });
  if (f == "e2m1") return encode_with<std::uint8_t>([r = round_of(m)](float x) { return qtl::float_to_e2m1(x, r); });
  if (f == "e8m0") {
    auto const dash = m.find('-');
    if (dash == std::string_view::npos) usage("e8m0 mode must be ROUNDING-SATURATION, e.g. nearest-none");
    auto const rs = m.substr(0, dash);
    qtl::e8m0_rounding r{};
    if (rs == "nearest") r = qtl::e8m0_rounding::nearest;
    else if (rs == "zero") r = qtl::e8m0_rounding::toward_zero;
    else if (rs == "up") r = qtl::e8m0_rounding::up;
    else usage("e8m0 rounding must be nearest, zero or up");
    auto const s = saturation_of(m.substr(dash + 1));
    return encode_with<std::uint8_t>([r, s](float x) { return qtl::float_to_e8m0(x, r, s); });
  }
  usage("unknown format");
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view const cmd = argc > 1 ? argv[1] : "";
  if (cmd == "decode" && argc == 3) return decode(argv[2]);
  if (cmd == "encode" && argc == 4) return encode(argv[2], argv[3]);
  if (cmd == "rint" && argc == 2) {
    return encode_with<float>([](float x) { return qtl::round_half_even(x); });
  }
  usage("bad arguments");
}
