"""The GPU catalog: the names drivers report map to the right part, capacities are
what devices report (binary), and every entry is complete."""

from __future__ import annotations

import pytest

from profiling import hardware


@pytest.mark.parametrize(
    ("reported", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIE"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA GH200 480GB", None),  # a Grace Hopper superchip is not an H200 card
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIE"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("AMD Instinct MI300X", "MI300X"),
    ],
)
def test_a_driver_reported_name_finds_its_own_part(reported, key):
    found = hardware.match_device_name(reported)
    assert (found.key if found else None) == key


def test_capacities_are_what_the_devices_report_in_binary_units():
    catalog = hardware.catalog()
    assert catalog["A100-80GB"].memory_bytes == 80 * 2**30
    assert catalog["H100-SXM"].memory_bytes == 81_559 * 2**20  # nvidia-smi's total
    for gpu in catalog.values():
        assert gpu.memory_bytes % 2**20 == 0 or gpu.vendor == "amd", gpu.key


def test_every_entry_has_a_peak_a_bandwidth_and_a_link():
    for gpu in hardware.catalog().values():
        assert gpu.memory_bandwidth_bytes_per_second > 0, gpu.key
        assert gpu.peak_flops("bfloat16") or gpu.peak_flops("float16"), gpu.key
        assert gpu.interconnect_bytes_per_second >= 16e9, gpu.key
