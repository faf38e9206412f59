"""A small engine's load-time step, the way sglang writes `process_weights_after_loading`
(`fp8.py`'s Fp8LinearMethod, `modelopt_quant.py`'s NVFP4 linear and fused-MoE methods): each layer
holds the tensors the loader filled, and the step replaces them by what the reference's
functions (`requantize_with_max_scale`, `swizzle_blockscale`, `reorder_w1w3_to_w3w1`,
`swap_w13_to_w31`, `prepare_static_weights_for_trtllm_fp4_moe`, `per_tensor_dequantize`) make of
them. The functions are looked up on `ops` at the call: the reference module, or `qtl`, the
drop-in. Nothing here moves an array: the layer's tensors stay where the loader put them (host,
or a CUDA device), which is the point of the drop-in.

Used by test_dropin_sim.py (the simulated device, in CI) and torch/test_dropin_device.py (torch
CUDA tensors, where a GPU is lent)."""


def fp8_linear(ops, layer):
    """Fp8LinearMethod with per-tensor checkpoint scales of a fused layer (qkv_proj): one scale per
    shard, the weight requantized in place to the largest; also the dequantized weight a
    ROCm/fallback path builds."""
    layer["weight_scale"], layer["weight"] = ops.requantize_with_max_scale(layer["weight"], layer["weight_scale"],
                                                                           layer["logical_widths"])
    layer["dequantized"] = ops.per_tensor_dequantize(layer["weight"], layer["weight_scale"])


def nvfp4_linear(ops, layer):
    """ModelOptFp4LinearMethod: the E4M3 block scales swizzled for the CUTLASS FP4 GEMM."""
    layer["weight_scale_interleaved"] = ops.swizzle_blockscale(layer["weight_scale"])


def nvfp4_moe_cutlass(ops, layer):
    """ModelOptNvFp4FusedMoEMethod, FlashInfer CUTLASS path: [w1; w3] -> [w3; w1] with the scales,
    then both scale tensors swizzled."""
    layer["w13_weight"], w13_scale = ops.reorder_w1w3_to_w3w1(layer["w13_weight"], layer["w13_weight_scale"])
    layer["w13_blockscale_swizzled"] = ops.swizzle_blockscale(w13_scale)
    layer["w2_blockscale_swizzled"] = ops.swizzle_blockscale(layer["w2_weight_scale"])


def nvfp4_moe_trtllm(ops, layer):
    """ModelOptNvFp4FusedMoEMethod, FlashInfer TRT-LLM path: the static weight preparation (its
    own w3/w1 row order, epilogue-tile shuffle and scale interleave) for all experts."""
    e, two_i, half_h = layer["w13_weight"].shape
    (layer["gemm1_weights_fp4_shuffled"], layer["gemm1_scales_fp4_shuffled"], layer["gemm2_weights_fp4_shuffled"],
     layer["gemm2_scales_fp4_shuffled"]) = ops.prepare_static_weights_for_trtllm_fp4_moe(
         layer["w13_weight"], layer["w2_weight"], layer["w13_weight_scale"], layer["w2_weight_scale"], 2 * half_h,
         two_i // 2, e)


def fp8_moe_trtllm(ops, layer):
    """The FP8 MoE's TRT-LLM path: the gate/up halves of w13 swapped."""
    layer["w13_weight"] = ops.swap_w13_to_w31(layer["w13_weight"])


#: Each layer kind's step, in the order the engine runs them.
STEPS = {"fp8_linear": fp8_linear, "nvfp4_linear": nvfp4_linear, "nvfp4_moe_cutlass": nvfp4_moe_cutlass,
         "nvfp4_moe_trtllm": nvfp4_moe_trtllm, "fp8_moe_trtllm": fp8_moe_trtllm}


def process_weights_after_loading(ops, model):
    """Runs every layer's step (model: {kind: layer dict}) with the functions of `ops`."""
    for kind, layer in model.items():
        STEPS[kind](ops, layer)
    return model


def make_model(rng, np, ml_dtypes, hidden=256, inter=128, experts=3):
    """A model's loaded tensors on the host (numpy): one layer of each kind, random bytes in the
    checkpoint's dtypes and shapes (FP8 weights with no NaN code)."""
    def fp8(shape):
        codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
        codes[(codes & 0x7F) == 0x7F] = 0
        return codes.view(ml_dtypes.float8_e4m3fn)

    def scales(shape):  # E4M3 block scales: positive normal codes
        return rng.integers(0x08, 0x77, size=shape, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)

    def fp4(shape):
        return rng.integers(0, 256, size=shape, dtype=np.uint8)

    return {
        "fp8_linear": {"weight": fp8((3 * 64, hidden)), "weight_scale": np.array([0.5, 0.25, 0.75], np.float32),
                       "logical_widths": [64, 64, 64]},
        "nvfp4_linear": {"weight": fp4((200, hidden // 2)), "weight_scale": scales((200, hidden // 16))},
        "nvfp4_moe_cutlass": {"w13_weight": fp4((experts, 2 * inter, hidden // 2)),
                              "w13_weight_scale": scales((experts, 2 * inter, hidden // 16)),
                              "w2_weight": fp4((experts, hidden, inter // 2)),
                              "w2_weight_scale": scales((experts, hidden, inter // 16))},
        "nvfp4_moe_trtllm": {"w13_weight": fp4((experts, 2 * inter, hidden // 2)),
                             "w13_weight_scale": scales((experts, 2 * inter, hidden // 16)),
                             "w2_weight": fp4((experts, hidden, inter // 2)),
                             "w2_weight_scale": scales((experts, hidden, inter // 16))},
        "fp8_moe_trtllm": {"w13_weight": fp8((experts, 2 * inter, hidden))},
    }
