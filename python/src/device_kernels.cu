// The device table (device.hpp) of the CUDA build: the runtime calls and the launchers of
// include/qtl/cuda/. The test build compiles this file with g++ against the simulated device
// (QTL_CUDA_SIM), with qtl._sim from sim_producer.cpp as its extra bindings.
// Only the kernels the bindings call are instantiated here: keep the dispatch sets the host
// bindings' (one instantiation per supported width or type).

#include <cuda_runtime.h>

#include <qtl/cuda/blockscale.cuh>
#include <qtl/cuda/convert.cuh>
#include <qtl/cuda/ct_quantize.cuh>
#include <qtl/cuda/deepgemm_e8m0.cuh>
#include <qtl/cuda/e2m1_to_e4m3.cuh>
#include <qtl/cuda/fnuz.cuh>
#include <qtl/cuda/fp4.cuh>
#include <qtl/cuda/fp8.cuh>
#include <qtl/cuda/fp8_checkpoint.cuh>
#include <qtl/cuda/gptq_checkpoint.cuh>
#include <qtl/cuda/marlin.cuh>
#include <qtl/cuda/moe.cuh>
#include <qtl/cuda/pack.cuh>
#include <qtl/cuda/pack_nd.cuh>
#include <qtl/cuda/quantize.cuh>
#include <qtl/cuda/scaled_quantize.cuh>
#include <qtl/cuda/w4a8.cuh>
#include <qtl/dispatch.hpp>
#include <qtl/pack_nd.hpp>

#include "device.hpp"

namespace qtl::py::device {
#ifdef QTL_CUDA_SIM
void bind_sim(void* module);  // sim_producer.cpp
/// The stream of the last launch, for qtl._sim.last_stream() (the simulator runs work at enqueue).
stream_t last_stream = nullptr;
/// The streams of the last order_after (producer, consumer), for qtl._sim.last_order().
stream_t last_order[2] = {nullptr, nullptr};
#endif

namespace {

cudaStream_t as_stream(stream_t s) {
#ifdef QTL_CUDA_SIM
  last_stream = s;
#endif
  return static_cast<cudaStream_t>(s);
}

/// f(std::type_identity<T>{}) with T the C++ type of `t`.
template <class F>
decltype(auto) with_float(float_type t, F&& f) {
  switch (t) {
    case float_type::f16: return f(std::type_identity<half_t>{});
    case float_type::bf16: return f(std::type_identity<bfloat16_t>{});
    default: return f(std::type_identity<float>{});
  }
}

int current_device(int* d) { return static_cast<int>(cudaGetDevice(d)); }

int device_malloc(void** p, std::size_t bytes) { return static_cast<int>(cudaMalloc(p, bytes == 0 ? 1 : bytes)); }

void device_free(void* p) { static_cast<void>(cudaFree(p)); }

int copy_to_host(void* dst, void const* src, std::size_t bytes, stream_t s) {
  auto const stream = static_cast<cudaStream_t>(s);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) {
    e = cudaStreamSynchronize(stream);
  }
  return static_cast<int>(e);
}

int copy_to_device(void* dst, void const* src, std::size_t bytes, stream_t s) {
  return static_cast<int>(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(s)));
}

char const* error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

int order_after(stream_t producer, stream_t consumer) {
#ifdef QTL_CUDA_SIM
  // the simulator runs work when it is enqueued, so every stream is ordered already; the pair is
  // kept for the tests
  last_order[0] = producer;
  last_order[1] = consumer;
  return 0;
#else
  cudaEvent_t event = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    return static_cast<int>(e);
  }
  e = cudaEventRecord(event, static_cast<cudaStream_t>(producer));
  if (e == cudaSuccess) {
    e = cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer), event, 0);
  }
  cudaError_t const d = cudaEventDestroy(event);  // released once the wait is done
  return static_cast<int>(e != cudaSuccess ? e : d);
#endif
}

int pack(pack_op op, int bits, view2d<std::int32_t const> in, view2d<std::int32_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(qtl::dispatch_bits<1, 2, 4, 8, 16, 32>(bits, [&]<int B>() -> cudaError_t {
    switch (op) {
      case pack_op::pack_cols: return qtl::cuda::pack_cols<B>(in, out, stream);
      case pack_op::pack_rows: return qtl::cuda::pack_rows<B>(in, out, stream);
      case pack_op::unpack_cols: return qtl::cuda::unpack_cols<B>(in, out, stream);
      case pack_op::unpack_rows: return qtl::cuda::unpack_rows<B>(in, out, stream);
      case pack_op::awq_pack:
        if constexpr (B == 4 || B == 8) {
          return qtl::cuda::awq_pack<B>(in, out, stream);
        }
        break;
    }
    return cudaErrorInvalidValue;  // awq_pack of another width: the binding refuses it first
  }));
}

int pack_dim(bool packing, scalar_type t, view3d<std::int32_t const> in, view3d<std::int32_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(qtl::dispatch_pack_type(t, [&]<scalar_type T>(scalar_constant<T>) {
    return packing ? qtl::cuda::pack_quantized_values_into_int32<T>(in, out, stream)
                   : qtl::cuda::unpack_quantized_values_into_int32<T>(in, out, stream);
  }));
}

int blockscale(bool swizzle, view3d<std::uint8_t const> in, view3d<std::uint8_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(swizzle ? qtl::cuda::swizzle_blockscale(in, out, stream)
                                  : qtl::cuda::unswizzle_blockscale(in, out, stream));
}

int per_tensor_dequantize(view2d<float8_e4m3fn_t const> t, float inv, void* out, bool f32_out, stream_t s) {
  auto const stream = as_stream(s);
  index_t const k = t.extent[0];
  index_t const n = t.extent[1];
  return static_cast<int>(
      f32_out ? qtl::cuda::per_tensor_dequantize(t, inv, make_view(static_cast<float*>(out), k, n), stream)
              : qtl::cuda::per_tensor_dequantize(t, inv, make_view(static_cast<half_t*>(out), k, n), stream));
}

template <class T>
int quantize_typed(quantize_call const& c, cudaStream_t stream) {
  auto const w = make_view(static_cast<T const*>(c.w), c.k, c.n);
  auto const w_q = make_view(c.w_q, c.k, c.n);
  // the same integer types as the host binding's (bind_quantize.cpp)
  return static_cast<int>(
      qtl::dispatch_scalar_type<qtl::int4, qtl::uint4, qtl::int8, qtl::uint8, qtl::uint2b2, qtl::uint3b4, qtl::uint4b8,
                                qtl::uint8b128>(c.q, [&]<scalar_type Q>(scalar_constant<Q>) -> cudaError_t {
        if (!c.group_size) {
          qtl::quantize_outputs<float> out{make_view(static_cast<float*>(c.w_ref), c.k, c.n), w_q, {}, {}};
          return qtl::cuda::quantize_weights<Q>(w, std::nullopt, out, c.opt, stream);
        }
        qtl::quantize_outputs<T> out{make_view(static_cast<T*>(c.w_ref), c.k, c.n), w_q,
                                     make_view(static_cast<T*>(c.w_s), c.groups, c.n),
                                     make_view(c.w_zp, c.opt.zero_points ? c.groups : 0, c.n)};
        return qtl::cuda::quantize_weights<Q>(w, c.group_size, out, c.opt, stream);
      }));
}

int quantize_weights(quantize_call const& c, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(c.type, [&]<class T>(std::type_identity<T>) { return quantize_typed<T>(c, stream); });
}

int marlin_repack(bool awq, int bits, bool a8, view2d<std::int32_t const> w, std::int32_t const* perm,
                  view2d<std::int32_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(qtl::dispatch_bits<4, 8>(bits, [&]<int B>() {
    using qtl::marlin::act_width;
    if (awq) {
      return a8 ? qtl::cuda::marlin::repack_awq<B, act_width::a8>(w, out, stream)
                : qtl::cuda::marlin::repack_awq<B, act_width::a16>(w, out, stream);
    }
    return a8 ? qtl::cuda::marlin::repack_gptq<B, act_width::a8>(w, perm, out, stream)
              : qtl::cuda::marlin::repack_gptq<B, act_width::a16>(w, perm, out, stream);
  }));
}

template <class T>
cudaError_t fp8_typed(fp8_mode mode, void const* in, index_t m, index_t n, float8_e4m3fn_t* out, index_t rows,
                      float* scale, cudaStream_t stream) {
  auto const iv = make_view(static_cast<T const*>(in), m, n);
  auto const ov = make_view(out, rows, n);
  switch (mode) {
    case fp8_mode::static_scale: return qtl::cuda::scaled_fp8_quant_static(iv, scale, ov, {}, stream);
    case fp8_mode::dynamic: return qtl::cuda::scaled_fp8_quant_dynamic(iv, ov, scale, {}, stream);
    default: return qtl::cuda::scaled_fp8_quant_per_token(iv, ov, scale, {}, stream);
  }
}

int scaled_fp8_quant(fp8_mode mode, float_type type, void const* in, index_t m, index_t n, float8_e4m3fn_t* out,
                     index_t rows, float* scale, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(fp8_typed<T>(mode, in, m, n, out, rows, scale, stream));
  });
}

int gptq_quantize_weights(gptq_call const& c, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(c.type, [&]<class T>(std::type_identity<T>) {
    index_t const kp = c.perm != nullptr ? c.k : 0;
    qtl::gptq_outputs<T> const out{make_view(static_cast<T*>(c.w_ref), c.k, c.n), make_view(c.w_q, c.k, c.n),
                                   make_view(static_cast<T*>(c.w_s), c.groups, c.n), make_view(c.g_idx, kp),
                                   make_view(c.rand_perm, kp)};
    auto const w = make_view(static_cast<T const*>(c.w), c.k, c.n);
    return static_cast<int>(
        qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(c.q, [&]<scalar_type Q>(scalar_constant<Q>) {
          return qtl::cuda::gptq_quantize_weights<Q>(w, c.group_size, out, c.perm, c.scratch, stream);
        }));
  });
}

int permute_rows(float_type type, view2d<std::int32_t const> q_w, void const* w_ref, index_t group_size,
                 std::int64_t const* perm, view2d<std::int32_t> q_out, void* r_out, std::int32_t* g_idx,
                 std::int64_t* rand_perm, stream_t s) {
  auto const stream = as_stream(s);
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    qtl::permute_rows_outputs<T> const out{make_view(static_cast<T*>(r_out), k, n), q_out, make_view(g_idx, k),
                                           make_view(rand_perm, k)};
    return static_cast<int>(
        qtl::cuda::permute_rows(q_w, make_view(static_cast<T const*>(w_ref), k, n), group_size, perm, out, stream));
  });
}

int sort_weights(void* workspace, std::size_t& bytes, view2d<std::int32_t const> q_w, std::int32_t const* g_idx,
                 view2d<std::int32_t> q_out, std::int32_t* g_out, std::int32_t* sort_indices, stream_t s) {
  index_t const k = q_w.extent[0];
  qtl::sort_weights_outputs const out{q_out, make_view(g_out, k), make_view(sort_indices, k)};
  return static_cast<int>(qtl::cuda::sort_weights(workspace, bytes, q_w, g_idx, out, as_stream(s)));
}

/// f.template operator()<F, Layout>() for the block format and scale layout.
template <class Fn>
int with_block_format(block_format f, bool swizzle, Fn&& fn) {
  auto const with_layout = [&]<class F>() {
    return swizzle ? fn.template operator()<F, qtl::layout_128x4>() : fn.template operator()<F, qtl::layout_linear>();
  };
  switch (f) {
    case block_format::nvfp4: return with_layout.template operator()<qtl::nvfp4>();
    case block_format::mxfp4: return with_layout.template operator()<qtl::mxfp4>();
    default: return with_layout.template operator()<qtl::mxfp8>();
  }
}

int block_quantize(block_format f, bool swizzle, float_type type, void const* in, index_t m, index_t k, void* values,
                   void* scales, float* global_scale, bool compute_global_scale, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    auto const iv = make_view(static_cast<T const*>(in), m, k);
    return with_block_format(f, swizzle, [&]<class F, class Layout>() {
      if (compute_global_scale) {
        if (cudaError_t const e = qtl::cuda::nvfp4_global_scale(iv, global_scale, stream); e != cudaSuccess) {
          return static_cast<int>(e);
        }
      }
      using E = typename F::element;
      auto const vv = make_view(static_cast<E*>(values), m, k / F::elements_per_value);
      return static_cast<int>(
          qtl::cuda::block_quantize<F, Layout>(iv, vv, static_cast<typename F::scale*>(scales), global_scale, stream));
    });
  });
}

int block_dequantize(block_format f, bool swizzle, float_type out_type, void const* values, index_t m, index_t k,
                     void const* scales, float const* global_scale, void* out, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(out_type, [&]<class O>(std::type_identity<O>) {
    return with_block_format(f, swizzle, [&]<class F, class Layout>() {
      using E = typename F::element;
      auto const vv = make_view(static_cast<E const*>(values), m, k / F::elements_per_value);
      return static_cast<int>(qtl::cuda::block_dequantize<F, Layout>(vv, static_cast<typename F::scale const*>(scales),
                                                                     global_scale,
                                                                     make_view(static_cast<O*>(out), m, k), stream));
    });
  });
}

int scaled_quantize(bool fnuz, float_type type, float_type compute, void const* x, index_t m, index_t n,
                    index_t group_rows, index_t group_cols, void* q, float* scale, index_t s_rows, index_t s_cols,
                    float fp8_max, stream_t s) {
  auto const stream = as_stream(s);
  qtl::group_shape const group{group_rows, group_cols};
  auto const sv = make_view(scale, s_rows, s_cols);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    auto const xv = make_view(static_cast<T const*>(x), m, n);
    return with_float(compute, [&]<class C>(std::type_identity<C>) {
      return static_cast<int>(
          fnuz ? qtl::cuda::scaled_quantize<float8_e4m3fnuz_t, C>(
                     xv, group, make_view(static_cast<float8_e4m3fnuz_t*>(q), m, n), sv, fp8_max, stream)
               : qtl::cuda::scaled_quantize<float8_e4m3fn_t, C>(
                     xv, group, make_view(static_cast<float8_e4m3fn_t*>(q), m, n), sv, fp8_max, stream));
    });
  });
}

int scaled_dequantize(bool fnuz, float_type scale_type, float_type out_type, void const* q, index_t m, index_t n,
                      void const* scale, index_t s_rows, index_t s_cols, void* out, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(scale_type, [&]<class S>(std::type_identity<S>) {
    auto const sv = make_view(static_cast<S const*>(scale), s_rows, s_cols);
    return with_float(out_type, [&]<class O>(std::type_identity<O>) {
      auto const ov = make_view(static_cast<O*>(out), m, n);
      return static_cast<int>(fnuz ? qtl::cuda::scaled_dequantize<O>(
                                         make_view(static_cast<float8_e4m3fnuz_t const*>(q), m, n), sv, ov, stream)
                                   : qtl::cuda::scaled_dequantize<O>(
                                         make_view(static_cast<float8_e4m3fn_t const*>(q), m, n), sv, ov, stream));
    });
  });
}

int group_broadcast(float_type type, void const* t, index_t rows, index_t cols, void* out, index_t out_rows,
                    index_t out_cols, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(qtl::cuda::group_broadcast(make_view(static_cast<T const*>(t), rows, cols),
                                                       make_view(static_cast<T*>(out), out_rows, out_cols), stream));
  });
}

int fnuz(bool weight, float_type scale_type, void const* in, void* out, index_t n, stream_t s) {
  auto const stream = as_stream(s);
  if (weight) {
    return static_cast<int>(
        qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(make_view(static_cast<float8_e4m3fn_t const*>(in), n),
                                                make_view(static_cast<float8_e4m3fnuz_t*>(out), n), stream));
  }
  return with_float(scale_type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(
        qtl::cuda::double_scales(make_view(static_cast<T const*>(in), n), make_view(static_cast<T*>(out), n), stream));
  });
}

int requantize_with_max_scale(view2d<float8_e4m3fn_t> weight, float max_scale, std::span<float const> scales,
                              std::span<index_t const> widths, stream_t s) {
  return static_cast<int>(qtl::cuda::requantize_with_max_scale(weight, qtl::requantize_plan{max_scale, true}, scales,
                                                               widths, as_stream(s)));
}

int fp8_compare(view2d<float8_e4m3fn_t const> a, view2d<float8_e4m3fn_t const> b, unsigned long long* counts,
                stream_t s) {
  return static_cast<int>(qtl::cuda::fp8_compare(a, b, counts, as_stream(s)));
}

int marlin_permute_scales(int elem_bytes, int kind, void const* s, index_t rows, index_t cols, void* out, stream_t st) {
  auto const k = static_cast<qtl::marlin::scale_perm_kind>(kind);
  auto const run = [&]<class T>(std::type_identity<T>) {  // a permutation: the bytes move, as any type of the size
    return static_cast<int>(qtl::cuda::marlin::permute_scales(make_view(static_cast<T const*>(s), rows, cols), k,
                                                              make_view(static_cast<T*>(out), rows, cols),
                                                              as_stream(st)));
  };
  return elem_bytes == 2 ? run(std::type_identity<std::uint16_t>{}) : run(std::type_identity<std::uint32_t>{});
}

int marlin_unrepack(int bits, bool a8, view2d<std::int32_t const> m, std::int32_t const* inverse_perm,
                    view2d<std::int32_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(qtl::dispatch_bits<4, 8>(bits, [&]<int B>() {
    using qtl::marlin::act_width;
    return a8 ? qtl::cuda::marlin::unrepack_gptq<B, act_width::a8>(m, inverse_perm, out, stream)
              : qtl::cuda::marlin::unrepack_gptq<B, act_width::a16>(m, inverse_perm, out, stream);
  }));
}

qtl::convert::block_grid grid_of(backend::block_grid g) { return {g.groups, g.n, g.k, {g.bn, g.bk}}; }

int block_quant_dequant(bool bf16, std::uint8_t const* q, float const* s, backend::block_grid g, void* out,
                        stream_t st) {
  auto const stream = as_stream(st);
  return static_cast<int>(
      bf16 ? qtl::cuda::convert::block_quant_dequant(q, s, grid_of(g), static_cast<bfloat16_t*>(out), stream)
           : qtl::cuda::convert::block_quant_dequant(q, s, grid_of(g), static_cast<float*>(out), stream));
}

int per_block_cast_to_fp8(int rule, float const* x, backend::block_grid g, std::uint8_t* q, float* s, stream_t st) {
  auto const stream = as_stream(st);
  using qtl::convert::pow2_rule;
  switch (static_cast<pow2_rule>(rule)) {
    case pow2_rule::bits:
      return static_cast<int>(qtl::cuda::convert::per_block_cast_to_fp8<pow2_rule::bits>(x, grid_of(g), q, s, stream));
    case pow2_rule::log2:
      return static_cast<int>(qtl::cuda::convert::per_block_cast_to_fp8<pow2_rule::log2>(x, grid_of(g), q, s, stream));
    default:
      return static_cast<int>(qtl::cuda::convert::per_block_cast_to_fp8<pow2_rule::none>(x, grid_of(g), q, s, stream));
  }
}

int requant_weight_ue8m0(char const* recipe, bool canonical, std::uint8_t const* q, float const* s, std::int64_t groups,
                         std::int64_t n, std::int64_t k, std::uint8_t* q_out, float* s_out, stream_t st) {
  auto const stream = as_stream(st);
  return qtl::dispatch_name<qtl::convert::recipes>("recipe", recipe, [&]<class R>() {
    return static_cast<int>(
        canonical ? qtl::cuda::convert::requant_weight_ue8m0_canonical<R>(q, s, groups, n, k, q_out, s_out, stream)
                  : qtl::cuda::convert::requant_weight_ue8m0<R>(q, s, groups, n, k, q_out, s_out, stream));
  });
}

int deepgemm_unpack_ue8m0(std::int32_t const* packed, std::int64_t groups, std::int64_t p, std::int64_t a,
                          std::int64_t k_blocks, float* sf, stream_t st) {
  return static_cast<int>(qtl::cuda::convert::deepgemm_unpack_ue8m0(packed, groups, p, a, k_blocks, sf, as_stream(st)));
}

int deepgemm_pack(bool e8m0, void const* sf, std::int64_t groups, std::int64_t mn, std::int64_t k_blocks,
                  std::int32_t* out, unsigned long long* first, stream_t st) {
  auto const l = qtl::convert::deepgemm_layout(groups, mn, k_blocks);
  return static_cast<int>(
      e8m0 ? qtl::cuda::convert::deepgemm_post_process_e8m0(static_cast<std::uint8_t const*>(sf), l, out, first,
                                                            as_stream(st))
           : qtl::cuda::convert::deepgemm_pack_ue8m0(static_cast<float const*>(sf), l, out, first, as_stream(st)));
}

int fp8_block_to_mxfp4(std::uint8_t const* q, float const* s, backend::block_grid g, std::uint8_t* packed,
                       std::uint8_t* scales, unsigned long long* first, stream_t st) {
  return static_cast<int>(
      qtl::cuda::convert::fp8_block_to_mxfp4(q, s, grid_of(g), packed, scales, first, as_stream(st)));
}

int fp8_block_to_nvfp4(std::uint8_t const* q, float const* s, backend::block_grid g, bool compute_global_scale,
                       float* global_scale, std::uint8_t* packed, std::uint8_t* scales, void* workspace,
                       unsigned long long* first, stream_t st) {
  auto const stream = as_stream(st);
  auto const grid = grid_of(g);
  auto* const bf = static_cast<bfloat16_t*>(workspace);
  if (compute_global_scale) {
    if (cudaError_t const e = qtl::cuda::convert::block_quant_dequant(q, s, grid, bf, stream); e != cudaSuccess) {
      return static_cast<int>(e);
    }
    auto const all = make_view(static_cast<bfloat16_t const*>(bf), grid.groups * grid.n, grid.k);
    if (cudaError_t const e = qtl::cuda::convert::nvfp4_shared_global_scale(all, global_scale, stream);
        e != cudaSuccess) {
      return static_cast<int>(e);
    }
  }
  return static_cast<int>(
      qtl::cuda::convert::fp8_block_to_nvfp4(q, s, grid, global_scale, reinterpret_cast<float4_e2m1x2_t*>(packed),
                                             reinterpret_cast<float8_e4m3fn_t*>(scales), bf, first, stream));
}

int cast_e2m1fn_to_e4m3fn(std::uint8_t const* x, std::uint8_t const* scale, backend::block_grid g, std::uint8_t* out,
                          std::uint8_t* out_scale, unsigned long long* first, stream_t st) {
  return static_cast<int>(
      qtl::cuda::convert::cast_e2m1fn_to_e4m3fn(x, scale, grid_of(g), out, out_scale, first, as_stream(st)));
}

int fp8_checkpoint_quantize(float_type type, void const* w, index_t m, index_t k, fp8_checkpoint_options const& opt,
                            std::uint8_t* codes, float* scales, unsigned long long* first, stream_t st) {
  auto const stream = as_stream(st);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(qtl::cuda::fp8_checkpoint_quantize(
        make_view(static_cast<T const*>(w), m, k), make_view(reinterpret_cast<float8_e4m3fn_t*>(codes), m, k), scales,
        opt, first, stream));
  });
}

int fp4_moe(moe_op op, index_t hidden, index_t inter, index_t experts, bool gated, index_t min_alignment,
            view3d<std::uint8_t const> const* in, view3d<std::uint8_t> const* out, stream_t s) {
  auto const stream = as_stream(s);
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> const i{in[0], in[1], in[2], in[3]};
  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const o{out[0], out[1], out[2], out[3]};
  switch (op) {
    case moe_op::prepare_trtllm:
      return static_cast<int>(qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe(
          qtl::trtllm_fp4_moe_shape{hidden, inter, experts, gated}, i, o, stream));
    case moe_op::align_intermediate:
      return static_cast<int>(qtl::cuda::align_fp4_moe_weights_for_fi(i, o, gated, min_alignment, stream));
    default: return static_cast<int>(qtl::cuda::align_fp4_moe_hidden_dim_for_fi(i, o, min_alignment, stream));
  }
}

int moe_rows(rows_op op, view3d<std::uint8_t const> in, view3d<std::uint8_t> out, index_t param, stream_t s) {
  auto const stream = as_stream(s);
  if (op == rows_op::interleave) {
    return static_cast<int>(qtl::cuda::interleave_linear_and_gate(in, out, param, stream));
  }
  if (op == rows_op::swap_halves) {
    return static_cast<int>(qtl::cuda::swap_halves(in, out, stream));
  }
  view2d<std::uint8_t const> const in2{in.data, {in.extent[1], in.extent[2]}, {in.stride[1], in.stride[2]}};
  view2d<std::uint8_t> const out2{out.data, {out.extent[1], out.extent[2]}, {out.stride[1], out.stride[2]}};
  return static_cast<int>(qtl::cuda::pad_nvfp4_weight_for_cutlass(in2, out2, param, stream));
}

int reorder_w13_to_w31(bool interleaved, view3d<std::uint8_t const> w13, view3d<std::uint8_t const> w13_scale,
                       view3d<std::uint8_t> w13_out, view3d<std::uint8_t> w13_scale_out, stream_t s) {
  return static_cast<int>(qtl::cuda::reorder_w13_to_w31_for_flashinfer_cutedsl(interleaved, w13, w13_scale, w13_out,
                                                                               w13_scale_out, as_stream(s)));
}

int trtllm_pair(trtllm_pair_op op, bool gated, view3d<std::uint8_t const> a, view3d<std::uint8_t const> b,
                view3d<std::uint8_t> oa, view3d<std::uint8_t> ob, stream_t s) {
  auto const stream = as_stream(s);
  switch (op) {
    case trtllm_pair_op::deepseek_fp8:
      return static_cast<int>(qtl::cuda::shuffle_deepseek_fp8_moe_weights(a, b, oa, ob, stream));
    case trtllm_pair_op::fp8_per_tensor:
      return static_cast<int>(qtl::cuda::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(a, b, gated, oa, ob, stream));
    default:
      return static_cast<int>(
          qtl::cuda::convert_moe_weights_to_flashinfer_trtllm_block_layout(a, b, gated, oa, ob, stream));
  }
}

int mxfp8_moe(bool inverse, bool gated, view3d<std::uint8_t const> const* in, view3d<std::uint8_t> const* out,
              stream_t s) {
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> const i{in[0], in[1], in[2], in[3]};
  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const o{out[0], out[1], out[2], out[3]};
  return static_cast<int>(inverse ? qtl::cuda::unshuffle_mxfp8_moe_weights(i, o, gated, as_stream(s))
                                  : qtl::cuda::shuffle_mxfp8_moe_weights(i, o, gated, as_stream(s)));
}

int mxint4_moe(bool inverse, index_t hidden, index_t inter, index_t experts, bool uint4b8,
               view3d<std::uint8_t const> const* w_in, view3d<std::uint16_t const> const* s_in,
               view3d<std::uint8_t> const* w_out, view3d<std::uint16_t> const* s_out, stream_t s) {
  qtl::trtllm_mxint4_moe_shape const shape{
      .hidden_size = hidden, .intermediate_size = inter, .num_experts = experts, .uint4b8 = uint4b8};
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint16_t const> const i{w_in[0], s_in[0], w_in[1], s_in[1]};
  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint16_t> const o{w_out[0], s_out[0], w_out[1], s_out[1]};
  return static_cast<int>(inverse ? qtl::cuda::unprepare_static_weights_for_trtllm_mxint4_moe(shape, i, o, as_stream(s))
                                  : qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe(shape, i, o, as_stream(s)));
}

int trtllm_unshuffle_rows(view3d<std::uint8_t const> in, view3d<std::uint8_t> out, trtllm_row_map map, index_t block_k,
                          stream_t s) {
  return static_cast<int>(qtl::cuda::trtllm_moe_unshuffle_rows(in, out, map, block_k, false, as_stream(s)));
}

int int4b_reorder(int4b_op op, std::uint8_t const* in, index_t experts, index_t n, index_t k, std::uint8_t* out,
                  stream_t s) {
  auto const stream = as_stream(s);
  switch (op) {
    case int4b_op::plain:
      return experts == 1 ? static_cast<int>(qtl::cuda::encode_and_reorder_int4b(in, n, k, out, stream))
                          : static_cast<int>(cudaErrorInvalidValue);
    case int4b_op::grouped:
      return static_cast<int>(qtl::cuda::encode_and_reorder_int4b_grouped(in, experts, n, k, out, stream));
    default: return static_cast<int>(qtl::cuda::decode_and_unreorder_int4b(in, experts, n, k, out, stream));
  }
}

int pack_scale_fp8(std::uint8_t const* scales, index_t count, std::uint8_t* packed, stream_t s) {
  return static_cast<int>(qtl::cuda::pack_scale_fp8(reinterpret_cast<float8_e4m3fn_t const*>(scales), count,
                                                    reinterpret_cast<float8_e4m3fn_t*>(packed), as_stream(s)));
}

int uint4b8_to_int4(std::int32_t const* in, index_t count, std::int32_t* out, stream_t s) {
  return static_cast<int>(qtl::cuda::convert_packed_uint4b8_to_signed_int4(in, count, out, as_stream(s)));
}

int w4a8_scale_split(float_type type, bool divide, void const* scales, index_t rows, index_t cols, std::uint8_t* fp8,
                     float* chan, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(qtl::cuda::convert_bf16_scales_to_fp8(
        make_view(static_cast<T const*>(scales), rows, cols),
        divide ? fp8_scale_op::divide : fp8_scale_op::multiply_reciprocal,
        make_view(reinterpret_cast<float8_e4m3fn_t*>(fp8), rows, cols), make_view(chan, rows), stream));
  });
}

int interleave_scales(bool inverse, float_type type, void const* in, index_t experts, index_t rows, index_t cols,
                      void* out, index_t scale_pack, stream_t s) {
  auto const stream = as_stream(s);
  index_t const out_rows = scale_pack > 0 ? cols / scale_pack : 0;
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    auto const i = make_view(static_cast<T const*>(in), experts, rows, cols);
    auto const o = make_view(static_cast<T*>(out), experts, out_rows, rows * scale_pack);
    return static_cast<int>(inverse ? qtl::cuda::deinterleave_scales(i, scale_pack, o, stream)
                                    : qtl::cuda::interleave_scales(i, scale_pack, o, stream));
  });
}

int ct_pack_quantize(float_type type, void const* w, index_t m, index_t k, int bits, index_t group_size, bool symmetric,
                     std::int32_t* packed, void* scales, std::int32_t* zero_points, int* nonfinite, stream_t s) {
  auto const stream = as_stream(s);
  index_t const groups = group_size == -1 ? 1 : k / group_size;
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(qtl::cuda::ct_pack_quantize(
        make_view(static_cast<T const*>(w), m, k), bits, group_size, symmetric, make_view(packed, m, k / (32 / bits)),
        make_view(static_cast<T*>(scales), m, groups), make_view(zero_points, symmetric ? 0 : m, groups), nonfinite,
        stream));
  });
}

int gptq_checkpoint_quantize(float_type type, void const* w, index_t m, index_t k, int bits, index_t group_size,
                             bool symmetric, std::int32_t* qweight, void* scales, std::int32_t* zeros, int* flags,
                             stream_t s) {
  auto const stream = as_stream(s);
  index_t const groups = k / group_size;
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(qtl::cuda::gptq_checkpoint_quantize(
        make_view(static_cast<T const*>(w), m, k), bits, group_size,
        symmetric ? qtl::gptq_rule::symmetric : qtl::gptq_rule::asymmetric, make_view(qweight, k / (32 / bits), m),
        make_view(static_cast<half_t*>(scales), groups, m), make_view(zeros, groups, m), flags, flags + 1, stream));
  });
}

int ct_block_quantize(block_format f, float_type type, void const* w, index_t m, index_t k, float global_scale,
                      std::uint8_t* values, std::uint8_t* scales, int* nonfinite, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    auto const wv = make_view(static_cast<T const*>(w), m, k);
    auto const fp4 = make_view(reinterpret_cast<float4_e2m1x2_t*>(values), m, k / 2);
    auto const e8m0 = make_view(reinterpret_cast<float8_e8m0fnu_t*>(scales), m, k / 32);
    switch (f) {
      case block_format::nvfp4:
        return static_cast<int>(qtl::cuda::ct_nvfp4_quantize(
            wv, global_scale, fp4, make_view(reinterpret_cast<float8_e4m3fn_t*>(scales), m, k / 16), stream));
      case block_format::mxfp4: return static_cast<int>(qtl::cuda::ct_mxfp4_quantize(wv, fp4, e8m0, nonfinite, stream));
      default:
        return static_cast<int>(qtl::cuda::ct_mxfp8_quantize(
            wv, make_view(reinterpret_cast<float8_e4m3fn_t*>(values), m, k), e8m0, nonfinite, stream));
    }
  });
}

int amax(float_type type, void const* in, index_t m, index_t k, float* out, stream_t s) {
  auto const stream = as_stream(s);
  return with_float(type, [&]<class T>(std::type_identity<T>) {
    return static_cast<int>(qtl::cuda::fp8_amax(make_view(static_cast<T const*>(in), m, k), out, stream));
  });
}

}  // namespace

backend const* get() {
  static constexpr backend table{
#ifdef QTL_CUDA_SIM
      .name = "cuda-sim",
#else
      .name = "cuda",
#endif
      .current_device = &current_device,
      .malloc = &device_malloc,
      .free = &device_free,
      .copy_to_host = &copy_to_host,
      .copy_to_device = &copy_to_device,
      .error_string = &error_string,
      .order_after = &order_after,
      .pack = &pack,
      .pack_dim = &pack_dim,
      .blockscale = &blockscale,
      .per_tensor_dequantize = &per_tensor_dequantize,
      .quantize_weights = &quantize_weights,
      .marlin_repack = &marlin_repack,
      .scaled_fp8_quant = &scaled_fp8_quant,
      .gptq_quantize_weights = &gptq_quantize_weights,
      .permute_rows = &permute_rows,
      .sort_weights = &sort_weights,
      .block_quantize = &block_quantize,
      .block_dequantize = &block_dequantize,
      .scaled_quantize = &scaled_quantize,
      .scaled_dequantize = &scaled_dequantize,
      .group_broadcast = &group_broadcast,
      .fnuz = &fnuz,
      .requantize_with_max_scale = &requantize_with_max_scale,
      .fp8_compare = &fp8_compare,
      .marlin_permute_scales = &marlin_permute_scales,
      .marlin_unrepack = &marlin_unrepack,
      .block_quant_dequant = &block_quant_dequant,
      .per_block_cast_to_fp8 = &per_block_cast_to_fp8,
      .requant_weight_ue8m0 = &requant_weight_ue8m0,
      .deepgemm_unpack_ue8m0 = &deepgemm_unpack_ue8m0,
      .deepgemm_pack = &deepgemm_pack,
      .fp8_block_to_mxfp4 = &fp8_block_to_mxfp4,
      .fp8_block_to_nvfp4 = &fp8_block_to_nvfp4,
      .cast_e2m1fn_to_e4m3fn = &cast_e2m1fn_to_e4m3fn,
      .fp8_checkpoint_quantize = &fp8_checkpoint_quantize,
      .fp4_moe = &fp4_moe,
      .moe_rows = &moe_rows,
      .reorder_w13_to_w31 = &reorder_w13_to_w31,
      .trtllm_pair = &trtllm_pair,
      .mxfp8_moe = &mxfp8_moe,
      .mxint4_moe = &mxint4_moe,
      .trtllm_unshuffle_rows = &trtllm_unshuffle_rows,
      .int4b_reorder = &int4b_reorder,
      .pack_scale_fp8 = &pack_scale_fp8,
      .uint4b8_to_int4 = &uint4b8_to_int4,
      .w4a8_scale_split = &w4a8_scale_split,
      .interleave_scales = &interleave_scales,
      .ct_pack_quantize = &ct_pack_quantize,
      .gptq_checkpoint_quantize = &gptq_checkpoint_quantize,
      .ct_block_quantize = &ct_block_quantize,
      .amax = &amax,
#ifdef QTL_CUDA_SIM
      .bind_extras = &bind_sim,
#else
      .bind_extras = nullptr,
#endif
  };
  return &table;
}

}  // namespace qtl::py::device
