#pragma once
/// \file
/// The group-size rule of group quantization, written once for the host ops, the CUDA launchers,
/// `qtl/dispatch.hpp` and the tool: a group is `G` consecutive rows (along K) of one column, and
///
///   G == -1 or G ≥ K   one group per column (G = K; the reference does the same)
///   0 < G < K          G rows per group; G must divide K (the reference crashes in a reshape)
///   G == 0 or G < -1   not a group size
///
/// `normalize_group_size` applies it and reports the verdict as a code (no exception), so device
/// launchers built without exceptions can use it; host callers turn the code into their error.
/// "No groups at all" (the reference's `group_size=None`) is not a group size: callers model it
/// apart (an empty optional, `group_none`).
///
/// The GPTQ group-size set (the reference's `SUPPORTED_GROUP_SIZES`) is `is_gptq_group_size`.

#include <cstdint>

#include <qtl/macros.hpp>

namespace qtl {

/// Verdict of `normalize_group_size`.
enum class group_size_status : std::uint8_t {
  ok,            ///< `rows` is the number of rows per group
  no_rows,       ///< K ≤ 0: nothing to group
  not_positive,  ///< G is 0 or below -1
  not_dividing,  ///< 0 < G < K and G does not divide K
};

/// Rows per group (`rows`, valid when `status == ok`) and the verdict.
struct group_size_result {
  std::int64_t rows = 0;
  group_size_status status = group_size_status::ok;
  QTL_HOST_DEVICE constexpr bool ok() const { return status == group_size_status::ok; }
};

/// True when group size `g` means one group per column of K rows (g == -1 or g ≥ k).
QTL_HOST_DEVICE constexpr bool is_channelwise_group_size(std::int64_t g, std::int64_t k) { return g == -1 || g >= k; }

/// The rule of the file comment: rows per group for group size `g` and K = `k` rows, or why not.
QTL_HOST_DEVICE constexpr group_size_result normalize_group_size(std::int64_t g, std::int64_t k) {
  if (k <= 0) {
    return {0, group_size_status::no_rows};
  }
  if (is_channelwise_group_size(g, k)) {
    return {k, group_size_status::ok};
  }
  if (g <= 0) {
    return {0, group_size_status::not_positive};
  }
  if (k % g != 0) {
    return {0, group_size_status::not_dividing};
  }
  return {g, group_size_status::ok};
}

/// True for a group size of the reference's `SUPPORTED_GROUP_SIZES` (-1, 32, 64, 128: GPTQ's,
/// and Marlin's) — the one place that lists them; run-time callers also accept K itself.
QTL_HOST_DEVICE constexpr bool is_gptq_group_size(std::int64_t g) { return g == -1 || g == 32 || g == 64 || g == 128; }

}  // namespace qtl
