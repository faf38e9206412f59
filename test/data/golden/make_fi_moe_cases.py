#!/usr/bin/env python3
"""Writes the golden cases 2400.. of the FlashInfer / TRT-LLM MoE weight preparations into ops/ (and
prints their cases.jsonl lines), from vLLM's own functions run on CPU torch:

- `prepare-trtllm-fp4-moe`: vLLM's `prepare_static_weights_for_trtllm_fp4_moe(...,
  is_gated_activation)` (`flashinfer_fp4_moe.py`), gated and not, with FlashInfer's own row-index
  helpers (`_maybe_get_cached_w3_w1_permute_indices`, `get_w2_permute_indices_with_cache`,
  `get_reorder_rows_for_gated_act_gemm_row_indices` of `flashinfer/fused_moe/core.py`,
  `get_shuffle_block_size`, `get_shuffle_matrix_a_row_indices`, `get_shuffle_matrix_sf_a_row_indices`
  and the two row maps of `flashinfer/utils.py`), all taken from those files by name (`ast`).
  FlashInfer's `nvfp4_block_scale_interleave` is a CUDA kernel; on CPU it is replaced by the torch
  128x4 interleave that vLLM's `swizzle_blockscale` writes (the pad to 128 rows and 4 columns, then
  `reshape(M/128, 4, 32, K/4, 4).permute(0, 3, 2, 1, 4)`), flattened as the kernel returns it.
- `interleave-linear-and-gate` and `reorder-w13-to-w31-for-flashinfer-cutedsl` (vLLM
  `flashinfer_fp4_moe.py`, `MoEActivation` stubbed by an enum of SWIGLUOAI and SILU): group 64
  along the rows of [E, R, C] bytes, other groups and dims, bf16 elements; gpt-oss's interleaved
  rows (SWIGLUOAI) and the half swap (SILU).
- `align-fp4-moe-weights-for-fi`, `align-fp4-moe-hidden-dim-for-fi` (vLLM `flashinfer_utils.py`) and
  `pad-nvfp4-weight-for-cutlass` (vLLM `nvfp4_utils.py`): the functions themselves (`round_up` and
  the logger stubbed), on shapes that need padding and one that does not.

Needs torch (the heavy interop venv) and the sources; the cases are committed, CI only replays them.

    python make_fi_moe_cases.py VLLM_FLASHINFER_FP4_MOE_PY VLLM_FLASHINFER_UTILS_PY VLLM_NVFP4_UTILS_PY \
        FLASHINFER_CORE_PY FLASHINFER_UTILS_PY OPS_DIR
"""
import ast
import enum
import os
import sys
import types
import typing

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402


def extract(path, names, ns):
    """Runs the top-level definitions `names` (functions or assignments) of `path` in `ns`."""
    tree = ast.parse(open(path).read())
    body = []
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name in names:
            body.append(n)
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in n.targets):
            body.append(n)
    found = {n.name if isinstance(n, ast.FunctionDef) else n.targets[0].id for n in body}
    assert found == set(names), (path, set(names) - found)
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)


def block_scale_interleave_cpu(sf):
    """The 128x4 layout of a 2-D uint8 scale matrix, padded, flattened (FlashInfer's kernel's)."""
    m, k = sf.shape
    mp, kp = (m + 127) // 128 * 128, (k + 3) // 4 * 4
    p = torch.zeros((mp, kp), dtype=sf.dtype)
    p[:m, :k] = sf
    return p.reshape(mp // 128, 4, 32, kp // 4, 4).permute(0, 3, 2, 1, 4).contiguous().reshape(-1)


class _Log:
    def info_once(self, *a):
        pass

    def warning_once(self, *a):
        pass


class MoEActivation(enum.Enum):
    SILU = "silu"
    SWIGLUOAI = "swigluoai"


def round_up(x, y):
    return (x + y - 1) // y * y


def load(vllm_fp4_moe, vllm_fi_utils, vllm_nvfp4_utils, fi_core, fi_utils):
    fi = {"torch": torch, "Union": typing.Union, "Optional": typing.Optional}
    extract(fi_utils, ["srcToDstBlk16RowMap", "srcToDstBlk32RowMap", "get_shuffle_block_size",
                       "get_shuffle_matrix_a_row_indices", "get_shuffle_matrix_sf_a_row_indices"], fi)
    extract(fi_core, ["get_reorder_rows_for_gated_act_gemm_row_indices", "_maybe_get_cached_w3_w1_permute_indices",
                      "get_w2_permute_indices_with_cache"], fi)
    # `from flashinfer import ...` inside vLLM's function reads these modules.
    pkg = types.ModuleType("flashinfer")
    pkg.nvfp4_block_scale_interleave = block_scale_interleave_cpu
    fused = types.ModuleType("flashinfer.fused_moe")
    core = types.ModuleType("flashinfer.fused_moe.core")
    for name in ("_maybe_get_cached_w3_w1_permute_indices", "get_w2_permute_indices_with_cache"):
        setattr(core, name, fi[name])
    pkg.fused_moe, fused.core = fused, core
    sys.modules.update({"flashinfer": pkg, "flashinfer.fused_moe": fused, "flashinfer.fused_moe.core": core})
    v = {"torch": torch, "round_up": round_up, "logger": _Log(), "MoEActivation": MoEActivation}
    extract(vllm_fp4_moe, ["prepare_static_weights_for_trtllm_fp4_moe", "interleave_linear_and_gate",
                           "reorder_w13_to_w31_for_flashinfer_cutedsl"], v)
    extract(vllm_fi_utils, ["align_fp4_moe_weights_for_fi", "align_fp4_moe_hidden_dim_for_fi"], v)
    extract(vllm_nvfp4_utils, ["pad_nvfp4_weight_for_cutlass"], v)
    return v


def u8(name, t):
    return (name, "U8", list(t.shape), t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes())


def f8(name, t):
    return (name, "F8_E4M3", list(t.shape), t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes())


def elem(name, t):
    """A tensor of bytes (U8) or bfloat16 (BF16)."""
    if t.dtype == torch.bfloat16:
        return (name, "BF16", list(t.shape), t.contiguous().view(torch.int16).reshape(-1).numpy().tobytes())
    return u8(name, t)


def i64(name, v):
    return (name, "I64", [], torch.tensor(v, dtype=torch.int64).numpy().tobytes())


def rand_bytes(g, *shape):
    return torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)


def rand_scales(g, *shape):
    # E4M3 bytes without the NaN codes 0x7F/0xFF (the ops move bytes; NaN bytes would move as well)
    b = torch.randint(0, 127, shape, generator=g, dtype=torch.int64)
    return (b | (torch.randint(0, 2, shape, generator=g) << 7)).to(torch.uint8).view(torch.float8_e4m3fn)


def cases(v, g):
    prep = v["prepare_static_weights_for_trtllm_fp4_moe"]
    for h, i, e, gated in [(256, 128, 2, True), (128, 64, 2, True), (256, 128, 2, False), (128, 128, 3, False)]:
        r1 = (2 if gated else 1) * i
        g1w, g1s = rand_bytes(g, e, r1, h // 2), rand_scales(g, e, r1, h // 16)
        g2w, g2s = rand_bytes(g, e, h, i // 2), rand_scales(g, e, h, i // 16)
        o = prep(g1w.clone(), g2w.clone(), g1s.clone(), g2s.clone(), h, i, e, gated)
        ins = [u8("gemm1_weights", g1w), f8("gemm1_scales", g1s), u8("gemm2_weights", g2w), f8("gemm2_scales", g2s)]
        outs = [u8("gemm1_weights_fp4_shuffled", o[0]), f8("gemm1_scales_fp4_shuffled", o[1]),
                u8("gemm2_weights_fp4_shuffled", o[2]), f8("gemm2_scales_fp4_shuffled", o[3])]
        params = {"hidden-size": h, "intermediate-size": i, "num-experts": e}
        if not gated:
            params["no-gated"] = True
        yield [e, h, i], "prepare-trtllm-fp4-moe", params, ins, outs

    align = v["align_fp4_moe_weights_for_fi"]
    # (E, H, I, is_act_and_mul, min_alignment): Gemma-4-26B-like I=176 (a TP4 shard), padded to 64 / 128
    for e, h, i, gated, a in [(2, 64, 176, True, 64), (3, 32, 48, False, 128), (2, 32, 96, True, 16),
                              (2, 48, 32, True, 64)]:
        up = 2 if gated else 1
        w13, w13s = rand_bytes(g, e, up * i, h // 2), rand_scales(g, e, up * i, h // 16)
        w2, w2s = rand_bytes(g, e, h, i // 2), rand_scales(g, e, h, i // 16)
        o = align(w13.clone(), w13s.clone(), w2.clone(), w2s.clone(), gated, a)
        ins = [u8("w13", w13), f8("w13_scale", w13s), u8("w2", w2), f8("w2_scale", w2s)]
        outs = [u8("w13", o[0]), f8("w13_scale", o[1]), u8("w2", o[2]), f8("w2_scale", o[3]),
                i64("padded_intermediate", o[4])]
        params = {"min-alignment": a}
        if gated:
            params["is-act-and-mul"] = True
        yield [e, h, i], "align-fp4-moe-weights-for-fi", params, ins, outs

    hid = v["align_fp4_moe_hidden_dim_for_fi"]
    for e, h, r1, i, a in [(1, 2880, 32, 32, 256), (3, 160, 96, 48, 256), (2, 512, 32, 32, 256), (2, 96, 32, 64, 64)]:
        w13, w13s = rand_bytes(g, e, r1, h // 2), rand_scales(g, e, r1, h // 16)
        w2, w2s = rand_bytes(g, e, h, i // 2), rand_scales(g, e, h, i // 16)
        o = hid(w13.clone(), w13s.clone(), w2.clone(), w2s.clone(), a)
        ins = [u8("w13", w13), f8("w13_scale", w13s), u8("w2", w2), f8("w2_scale", w2s)]
        outs = [u8("w13", o[0]), f8("w13_scale", o[1]), u8("w2", o[2]), f8("w2_scale", o[3]),
                i64("padded_hidden_size", o[4])]
        yield [e, h, i], "align-fp4-moe-hidden-dim-for-fi", {"min-alignment": a}, ins, outs

    pad = v["pad_nvfp4_weight_for_cutlass"]
    for n, kb, a in [(100, 40, 32), (96, 24, 32), (64, 16, 32), (50, 7, 16)]:
        w = rand_bytes(g, n, kb)
        ow, pb = pad(w.clone(), a)
        yield [n, kb], "pad-nvfp4-weight-for-cutlass", {"alignment": a}, [u8("weight", w)], \
            [u8("weight", ow), i64("weights_padding_bytes", pb)]

    inter = v["interleave_linear_and_gate"]
    for shape, group, dim, dt in [([2, 256, 48], 64, 1, torch.uint8), ([2, 128, 6], 64, 1, torch.uint8),
                                  ([3, 40], 4, -1, torch.bfloat16), ([24, 5], 3, 0, torch.uint8)]:
        x = rand_bytes(g, *shape) if dt == torch.uint8 else torch.randn(shape, generator=g).to(dt)
        o = inter(x.clone(), group, dim)
        yield shape, "interleave-linear-and-gate", {"group-size": group, "dim": dim}, [elem("x", x)], [elem("x", o)]

    reord = v["reorder_w13_to_w31_for_flashinfer_cutedsl"]
    for e, r, c, cs, act in [(2, 128, 32, 4, MoEActivation.SWIGLUOAI), (3, 64, 16, 2, MoEActivation.SILU),
                             (1, 6, 8, 1, MoEActivation.SWIGLUOAI)]:
        w, s = rand_bytes(g, e, r, c), rand_scales(g, e, r, cs)
        ow, os_ = reord(act, w.clone(), s.clone())
        params = {"swigluoai": True} if act == MoEActivation.SWIGLUOAI else {}
        yield [e, r, c], "reorder-w13-to-w31-for-flashinfer-cutedsl", params, [u8("w13", w), f8("w13_scale", s)], \
            [u8("w13", ow), f8("w13_scale", os_)]


def main():
    v = load(*sys.argv[1:6])
    g = torch.Generator().manual_seed(2400)
    write_golden_cases(sys.argv[6], 2400, list(cases(v, g)))


if __name__ == "__main__":
    main()
