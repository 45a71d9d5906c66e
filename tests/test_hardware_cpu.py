"""Tests of gpuperf_magics.hardware.cpu: ``/proc/cpuinfo`` parsing."""

from __future__ import annotations

from gpuperf_magics.hardware.cpu import parse_cpuinfo

# ---------------------------------------------------------------- /proc/cpuinfo
TWO_SOCKETS_WITH_SMT = "\n\n".join(
    f"processor\t: {cpu}\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n"
    f"cpu MHz\t\t: {2500.0 + cpu}\nphysical id\t: {cpu // 4}\ncore id\t\t: {cpu % 2}"
    for cpu in range(8)
)


def test_parse_cpuinfo_counts_physical_cores_over_sockets() -> None:
    summary = parse_cpuinfo(TWO_SOCKETS_WITH_SMT)
    assert summary.model == "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"
    assert summary.physical_cores == 4  # 2 sockets × 2 cores, hyper-threads not counted
    assert summary.mhz == 2507.0


def test_parse_cpuinfo_without_topology() -> None:
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\nprocessor\t: 1\n"
    assert parse_cpuinfo(arm) == (None, None, None)
    assert parse_cpuinfo("") == (None, None, None)
