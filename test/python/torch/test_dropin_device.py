"""The device form of the drop-in run, with torch CUDA tensors (a GPU and qtl's CUDA build; skipped
elsewhere: CI runs the same engine on the simulated device, test_dropin_sim.py).

dropin_engine's `process_weights_after_loading` (sglang's load-time step for FP8/NVFP4 linear and
MoE layers) runs three times on the same loaded tensors:
  - with the reference's functions replaced by qtl's, on CUDA tensors (the drop-in);
  - the same on CPU tensors (qtl's host path);
  - for the steps whose reference code runs here (the half swaps; `swizzle_blockscale`, which moves
    its result to the GPU itself), with the reference's own functions on CUDA tensors.
Every tensor the step leaves must be a CUDA tensor on the same device, equal to the CPU run bit for
bit, and to the reference where it ran. Run by scripts/python-heavy.sh on a machine with a GPU."""

import pathlib
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "Tensor"):  # this folder, imported as a namespace package where torch is not installed
    pytest.skip("torch is not installed", allow_module_level=True)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import dropin_engine  # noqa: E402
import reference_loader  # noqa: E402

import qtl  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device (the simulated-device form runs in CI: test_dropin_sim.py)", allow_module_level=True)
if not qtl.cuda_available():
    pytest.skip("qtl was built without CUDA (pip install . with nvcc on PATH)", allow_module_level=True)

REFERENCE_NAMES = ["requantize_with_max_scale", "per_tensor_dequantize", "swizzle_blockscale", "reorder_w1w3_to_w3w1",
                   "swap_w13_to_w31", "prepare_static_weights_for_trtllm_fp4_moe"]


def as_torch(v, device):
    """A loaded tensor as torch would hold it (FP8 as float8_e4m3fn), on `device`."""
    if not isinstance(v, np.ndarray):
        return v
    if v.dtype.name == "float8_e4m3fn":
        return torch.from_numpy(v.view(np.uint8).copy()).view(torch.float8_e4m3fn).to(device)
    return torch.from_numpy(v.copy()).to(device)


def bits(t):
    t = t.detach().contiguous().cpu()
    return t.view(torch.uint8) if t.element_size() == 1 else t.view({2: torch.int16, 4: torch.int32}[t.element_size()])


def test_process_weights_after_loading_on_cuda_tensors():
    import ml_dtypes

    host = dropin_engine.make_model(np.random.default_rng(5), np, ml_dtypes)
    drop_in = types.SimpleNamespace(**{n: getattr(qtl, n) for n in REFERENCE_NAMES})  # the reference's names
    on_gpu = {k: {n: as_torch(v, "cuda") for n, v in layer.items()} for k, layer in host.items()}
    on_cpu = {k: {n: as_torch(v, "cpu") for n, v in layer.items()} for k, layer in host.items()}
    loaded = on_gpu["fp8_linear"]["weight"]
    dropin_engine.process_weights_after_loading(drop_in, on_gpu)
    dropin_engine.process_weights_after_loading(drop_in, on_cpu)
    torch.cuda.synchronize()
    assert on_gpu["fp8_linear"]["weight"].data_ptr() == loaded.data_ptr()  # in place, as the reference
    for kind, layer in on_cpu.items():
        for name, want in layer.items():
            if isinstance(want, torch.Tensor):
                got = on_gpu[kind][name]
                assert got.is_cuda and got.device == loaded.device, f"{kind}.{name} left the device"
                assert torch.equal(bits(got), bits(want)), f"{kind}.{name}"


def test_reference_steps_on_cuda_tensors_equal_the_drop_in():
    if reference_loader.missing():
        pytest.skip(reference_loader.missing())
    import ml_dtypes

    ref = reference_loader.load()
    host = dropin_engine.make_model(np.random.default_rng(6), np, ml_dtypes)
    kinds = ["nvfp4_linear", "nvfp4_moe_cutlass", "fp8_moe_trtllm"]  # their reference code runs here
    want = {k: {n: as_torch(v, "cuda") for n, v in host[k].items()} for k in kinds}
    got = {k: {n: as_torch(v, "cuda") for n, v in host[k].items()} for k in kinds}
    for k in kinds:
        dropin_engine.STEPS[k](ref, want[k])
        dropin_engine.STEPS[k](qtl, got[k])
    for k in kinds:
        for name, w in want[k].items():
            assert torch.equal(bits(got[k][name]), bits(w)), f"{k}.{name}"
