#!/usr/bin/env python3
"""Writes the golden cases 2204-2207 of `deepgemm-post-process-e8m0` (DeepSeek-V4's FP8-block
weights with E8M0 scales -> DeepGEMM's packed scale layout, no requant) into ops/ (and prints their
cases.jsonl lines) from vLLM's own `deepgemm_post_process_fp8_weight_block(wq, ws, (128, 128),
use_e8m0, is_bmm, bmm_batch_size)` and `_upcast_e8m0_to_fp32`, taken by name (`ast`) from the
files given and run on CPU torch (docs/spec/deepseek_v4.md §4 names the copies read).

vLLM's function calls `vllm.utils.deep_gemm.transform_sf_into_required_layout`, i.e. DeepGEMM's
compiled `transform_sf_into_required_layout`, which needs a GPU; here it is DeepGEMM's own torch
path (`csrc/jit_kernels/impls/smxx_layout.hpp`, `get_mn_major_tma_aligned_packed_ue8m0_tensor_torch`,
54e2261) after the SFB row broadcast of `csrc/apis/layout.hpp` for a float32 (1, 128, 128) recipe on
SM100, transcribed below (`transform_sf`). `current_platform` is an SM100 one (not the SM120 family,
whose bmm branch returns float32 scales).

  2204  [128, 520]: one matrix, kb = 5 (two packed words, the second with three zero bytes).
  2205  [130, 300]: N and K not multiples of 128 (partial blocks), N not a multiple of 4 (pad rows).
  2206  [2, 130, 256]: two stacked experts (num_groups = 2) with a partial block row.
  2207  [512, 256] with is_bmm and bmm_batch_size 4 (`wo_a`): viewed [4, 128, 256], scales [4, 1, 2].

Scale codes are random in 1..254 (0 and 255 upcast to 0.0 and Inf, which DeepGEMM's kernels trap
on; QTL refuses them). The recorded scale is the packed tensor's storage [G, P, A] (the returned
view is [G, N, P] with strides (P*A, 1, A), squeezed for a 2-D weight).

    python make_dsv4_deepgemm_cases.py VLLM_PY [VLLM_PY ...] OPS_DIR
"""
import ast
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

NAMES = ["deepgemm_post_process_fp8_weight_block", "_upcast_e8m0_to_fp32"]


def transform_sf(sf, mn, k, recipe, num_groups=None, is_sfa=False):
    """DeepGEMM's transform_sf_into_required_layout for float32 SFB scales, recipe (1, 128, 128),
    on SM100: each block row broadcast to its rows, then the torch packing path."""
    assert sf.dtype == torch.float32 and not is_sfa and tuple(recipe) == (1, 128, 128)
    gran_mn, gran_k = recipe[1], recipe[2]
    sf3 = sf.unsqueeze(0) if sf.dim() == 2 else sf
    assert sf3.shape[-2] == -(-mn // gran_mn) and sf3.shape[-1] == -(-k // gran_k)
    assert num_groups is None or sf3.shape[0] == num_groups
    sf3 = sf3.index_select(-2, torch.arange(mn) // gran_mn)
    ue8m0 = (sf3.contiguous().view(torch.int32) >> 23).to(torch.uint8)
    b, m, kk = sf3.shape
    aligned_mn, aligned_k = -(-m // 4) * 4, -(-kk // 4) * 4
    padded = torch.zeros((b, aligned_mn, aligned_k), dtype=torch.uint8)
    padded[:, :m, :kk] = ue8m0
    padded = padded.view(-1).view(torch.int32).view(b, aligned_mn, aligned_k // 4)
    out = torch.empty_strided((b, aligned_mn, aligned_k // 4), (aligned_mn * (aligned_k // 4), 1, aligned_mn),
                              dtype=torch.int32)
    out = out.copy_(padded)[:, :m, :]
    return out.squeeze(0) if sf.dim() == 2 else out


def load_vllm(paths):
    """vLLM's function and the upcast it calls, executed with torch and the stand-ins above."""
    body = []
    for path in paths:
        tree = ast.parse(open(path).read())
        body += [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in NAMES]
    assert sorted(n.name for n in body) == sorted(NAMES), [n.name for n in body]

    def no_requant(*args, **kwargs):
        raise AssertionError("E8M0 scales are not requantized")

    ns = {"torch": torch, "transform_sf_into_required_layout": transform_sf,
          "current_platform": types.SimpleNamespace(is_device_capability_family=lambda family: False),
          "requant_weight_ue8m0_inplace": no_requant}
    exec(compile(ast.Module(body=body, type_ignores=[]), "vllm", "exec"), ns)
    return ns["deepgemm_post_process_fp8_weight_block"]


def raw(t):
    return t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes()


def case(fn, g, shape, bmm=0):
    w = torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)
    sshape = shape[:-2] + [-(-shape[-2] // 128), -(-shape[-1] // 128)]
    s = torch.randint(1, 255, sshape, generator=g, dtype=torch.int64).to(torch.uint8)
    s.view(-1)[0], s.view(-1)[-1] = 1, 254
    wq, dg = fn(w.view(torch.float8_e4m3fn), s.view(torch.float8_e8m0fnu), (128, 128), True,
                is_bmm=bmm > 0, bmm_batch_size=bmm)
    assert dg.dtype == torch.int32 and torch.equal(wq.contiguous().view(torch.uint8).reshape(-1), w.reshape(-1))
    groups, m, p = ([1] + list(dg.shape)) if dg.dim() == 2 else list(dg.shape)
    a = dg.stride(-1)
    assert a == -(-m // 4) * 4 and dg.stride(-2) == 1 and (dg.dim() == 2 or dg.stride(0) == p * a)
    assert dg.storage_offset() == 0
    storage = torch.as_strided(dg, (groups, p, a), (p * a, a, 1))
    out_shape = [p, a] if dg.dim() == 2 else [groups, p, a]
    params = {"bmm-batch": bmm} if bmm else {}
    return shape, "deepgemm-post-process-e8m0", params, \
        [("weight", "F8_E4M3", shape, raw(w)), ("scale", "F8_E8M0", sshape, raw(s))], \
        [("weight", "F8_E4M3", list(wq.shape), raw(w)), ("scale", "I32", out_shape, raw(storage))]


def main():
    fn = load_vllm(sys.argv[1:-1])
    g = torch.Generator().manual_seed(2204)
    cases = [case(fn, g, [128, 520]), case(fn, g, [130, 300]), case(fn, g, [2, 130, 256]),
             case(fn, g, [512, 256], bmm=4)]
    write_golden_cases(sys.argv[-1], 2204, cases)


if __name__ == "__main__":
    main()
