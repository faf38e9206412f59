// Python names of DeepSeek-V4's load-time conversions beyond the MXFP4 cast (bind_convert.cpp):
//   deepgemm_post_process_e8m0(weight, scale, bmm_batch_size=0) -> (weight, int32 storage [P, A] | [G, P, A])
//       vLLM deepgemm_post_process_fp8_weight_block on E8M0 scales (qtl/deepgemm_e8m0.hpp): weight e4m3
//       [N, K] or [E, N, K] (returned as it is, reshaped [B, N/B, K] with bmm_batch_size B), scale
//       float8_e8m0fnu or uint8 [.., ceil(N/128), ceil(K/128)], packed without requantization; the
//       weight may be given as its uint8 codes (it is not read). Device arrays: the kernel reports a
//       code 0 or 255 (run_with_first), refused as the host op refuses it

#include <nanobind/stl/tuple.h>

#include <qtl/deepgemm_e8m0.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

namespace cv = qtl::convert;

nb::object deepgemm_post_process_e8m0(nb::handle w_obj, nb::handle s_obj, index_t bmm) {
  char const* const op = "qtl.deepgemm_post_process_e8m0";
  array_in w = take(w_obj, "weight", true);
  array_in s = take(byte_view(s_obj), "scale", true);
  check_same_place(op, w, s);
  w.check_type({elem::fp8_e4m3, elem::u8});
  s.check_type({elem::u8});
  if (w.ndim() != 2 && w.ndim() != 3) {
    throw qtl::shape_error("qtl.deepgemm_post_process_e8m0: weight: expected [N, K] or [E, N, K], got shape " +
                           w.shape());
  }
  s.check_contiguous();
  bool const experts = w.ndim() == 3;
  index_t const groups = experts ? w.dim(0) : 1;
  index_t const n = w.dim(experts ? 1 : 0);
  index_t const k = w.dim(experts ? 2 : 1);
  if (bmm < 0 || (bmm > 0 && experts)) {
    throw qtl::value_error("qtl.deepgemm_post_process_e8m0: bmm_batch_size = " + std::to_string(bmm) +
                           ": a positive batch, of a 2-D weight (0: no bmm view)");
  }
  std::vector<index_t> want{(n + 127) / 128, (k + 127) / 128};
  if (experts) {
    want.insert(want.begin(), groups);
  }
  if (s.extents() != want) {
    throw qtl::shape_error("qtl.deepgemm_post_process_e8m0: weight " + w.shape() + " has 128x128 block scales of " +
                           std::to_string(want.size()) + " dims [.., ceil(N/128), ceil(K/128)]; scale has shape " +
                           s.shape());
  }
  auto const l = cv::deepgemm_post_process_layout(groups, n, k, bmm);
  array_out out(elem::i32,
                experts || bmm > 0 ? std::vector<index_t>{l.groups, l.packed_k(), l.aligned_mn()}
                                   : std::vector<index_t>{l.packed_k(), l.aligned_mn()},
                s);
  if (s.on_device()) {
    auto const first = run_with_first(s, op, 1, [&](auto const& b, auto st, auto* f) {
      return b.deepgemm_pack(true, s.nd.data(), l.groups, l.mn, l.k_blocks, out.data<std::int32_t>(), f, st);
    });
    if (first[0] != ~0ull) {
      refuse_unpackable("deepgemm_post_process_e8m0", s, first[0]);
    }
  } else {
    std::span<std::uint8_t const> const sv(static_cast<std::uint8_t const*>(s.nd.data()), s.nd.size());
    nb::gil_scoped_release nogil;
    cv::deepgemm_post_process_e8m0(sv, l, std::span(out.data<std::int32_t>(), static_cast<std::size_t>(out.size())));
  }
  nb::object const wq =
      bmm > 0 ? nb::borrow(w_obj).attr("reshape")(nb::make_tuple(bmm, n / bmm, k)) : nb::borrow(w_obj);
  return nb::make_tuple(wq, out.release(w.from));
}

}  // namespace

void bind_dsv4(nb::module_& m) {
  m.def("deepgemm_post_process_e8m0", &deepgemm_post_process_e8m0, nb::arg("weight"), nb::arg("scale"),
        nb::arg("bmm_batch_size") = 0,
        "vLLM deepgemm_post_process_fp8_weight_block on DeepSeek-V4's E8M0 block scales (no requant): (weight, "
        "DeepGEMM's packed int32 scale storage [ceil(kb/4), rows rounded up to 4] ([G, ...])); bmm_batch_size B "
        "views a 2-D weight as B matrices [N/B, K] (wo_a).");
}

}  // namespace qtl::py
