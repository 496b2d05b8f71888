"""The GPU catalog: the names drivers report map to the right part, capacities are
what devices report (binary), and every entry is complete."""

from __future__ import annotations

import pytest

from profiling.measure import hardware


@pytest.mark.parametrize(
    ("reported", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIE"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA GH200 480GB", "GH200"),  # a Grace Hopper superchip is not an H200 card
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),  # nor is a Grace Blackwell one a B200
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIE"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB-PCIE"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI325X", "MI325X"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40", "L40"),  # neither an L4 nor an L40S
        ("NVIDIA A100 (a name no driver prints)", None),  # not an A10
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


@pytest.mark.parametrize(
    ("named", "key"),
    [("GH200", "GH200"), ("GH200 144GB", "GH200-144GB"), ("MI325X", "MI325X"), ("h200", "H200")],
)
def test_the_names_users_type_find_their_part(named, key):
    assert hardware.lookup(named).key == key


def test_every_figure_names_its_source():
    for gpu in hardware.catalog().values():
        domain = {"nvidia": "nvidia.com/", "amd": "www.amd.com/"}[gpu.vendor]
        assert gpu.source.startswith("https://") and domain in gpu.source, gpu.key
        assert gpu.memory_source in ("driver", "datasheet"), gpu.key
        if gpu.memory_source == "datasheet":  # the datasheet's GB, read as the GiB devices count
            assert gpu.memory_bytes % 2**30 == 0, gpu.key


ALIASES = [(name, key) for key, gpu in hardware._raw()["gpus"].items()
           for name in gpu.get("aliases", [])]  # fmt: skip


@pytest.mark.parametrize(("alias", "key"), ALIASES)
def test_every_alias_names_its_own_part_and_no_other(alias, key):
    assert hardware.lookup(alias).key == key
    assert hardware.lookup(alias.lower().replace("-", " ")).key == key
