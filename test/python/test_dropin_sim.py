"""The engine's drop-in on device arrays, in CI: dropin_engine's `process_weights_after_loading`
(sglang's load-time step for FP8 and NVFP4 linear layers and NVFP4/FP8 MoE layers) run with
`ops = qtl` twice on the same loaded tensors, once on the host and once with every tensor on the
simulated device (scripts/python-ci.sh's test build: qtl._sim hands out "device" arrays). Every
tensor the step leaves in the layers must be on the device and equal the host run's bit for bit;
the in-place requantization must have written the loaded device weight itself. (The host path
against the reference: the torch tier; on a GPU with torch tensors: torch/test_dropin_device.py.)"""

import numpy as np
import pytest

import dropin_engine
import qtl

sim = getattr(qtl._qtl, "_sim", None)
if sim is None:
    pytest.skip("needs the test build against the simulated device", allow_module_level=True)


def to_device(v):
    """A simulated-device copy of a loaded host tensor (FP8 as its uint8 codes, as DLPack carries
    it); other values as they are."""
    if isinstance(v, np.ndarray):
        return sim.from_host(np.require(v.view(np.uint8) if v.dtype.itemsize == 1 else v, requirements="C"))
    return v


def host_bytes(v):
    if isinstance(v, qtl._qtl.DeviceArray):
        assert v.__dlpack_device__() == (2, 0), "every tensor stays on the device"
        v = sim.to_host(v)
    return np.asarray(v)


def test_process_weights_after_loading_on_device_equals_host():
    import ml_dtypes

    host_model = dropin_engine.make_model(np.random.default_rng(5), np, ml_dtypes)
    device_model = {kind: {name: to_device(v) for name, v in layer.items()} for kind, layer in host_model.items()}
    loaded_fp8 = device_model["fp8_linear"]["weight"]
    dropin_engine.process_weights_after_loading(qtl, host_model)
    dropin_engine.process_weights_after_loading(qtl, device_model)
    assert device_model["fp8_linear"]["weight"] is loaded_fp8  # requantized in place, as the reference
    checked = 0
    for kind, layer in host_model.items():
        assert layer.keys() == device_model[kind].keys()
        for name, want in layer.items():
            if name == "logical_widths":
                continue
            got, want = host_bytes(device_model[kind][name]), np.asarray(want)
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), f"{kind}.{name}"
            checked += 1
    assert checked == 21
