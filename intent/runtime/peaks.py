"""Peak memory bandwidth and dense f16 tensor-core throughput of known devices, by name (the profiler's
and `bench/gpu.py`'s "% of peak")."""

from __future__ import annotations

from dataclasses import dataclass

# (name fragment, peak memory bandwidth in bytes/s, dense f16 tensor-core peak in FLOP/s); the first
# fragment found in torch.cuda.get_device_name() wins, so more specific names come first.
DEVICE_PEAKS: tuple[tuple[str, float, float], ...] = (
    ("GH200", 4.0e12, 989e12),
    ("H200", 4.8e12, 989e12),
    ("H100 NVL", 3.9e12, 835e12),
    ("H100 PCIe", 2.0e12, 756e12),
    ("H100", 3.35e12, 989e12),
    ("B200", 8.0e12, 2250e12),
    ("A100-SXM4-80GB", 2.039e12, 312e12),
    ("A100 80GB PCIe", 1.935e12, 312e12),
    ("A100", 1.555e12, 312e12),
    ("L40S", 0.864e12, 362e12),
    ("RTX 4090", 1.008e12, 165e12),
)


@dataclass(frozen=True)
class Peaks:
    device: str
    bandwidth: float | None  # bytes/s
    flops: float | None  # FLOP/s


def device_peaks(name: str, override_gbs: float | None = None) -> Peaks:
    for fragment, bandwidth, flops in DEVICE_PEAKS:
        if fragment in name:
            return Peaks(name, override_gbs * 1e9 if override_gbs else bandwidth, flops)
    return Peaks(name, override_gbs * 1e9 if override_gbs else None, None)
