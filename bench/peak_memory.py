"""The benches' reading of a process's own memory (Linux's ``/proc/self/status``).

A bench that runs each measured step in a child process of its own reports the child's peak
resident memory. ``getrusage(RUSAGE_SELF).ru_maxrss`` is the wrong reading for that on Linux:
the kernel carries the parent's resident size at the fork over the ``exec`` as the child's
starting maximum, so a child started by a parent that has just built a 14 GB store reports at
least 14 GB whatever it uses itself. ``VmHWM`` is the high-water mark of the child's own
address space, which ``exec`` starts afresh.
"""

from __future__ import annotations

import resource
from pathlib import Path

__all__ = ["own_peak_gb", "status_mib"]


def status_mib(field: str) -> float:
    """``VmRSS``, ``VmHWM`` (peak) or another size field of this process in MiB (Linux; NaN
    elsewhere)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return float("nan")
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def own_peak_gb() -> float:
    """This process's own peak resident memory in GiB: ``VmHWM`` where Linux gives it, else
    ``ru_maxrss`` (KiB on Linux, bytes on macOS: used only where ``/proc`` is missing)."""
    peak = status_mib("VmHWM")
    if peak == peak:  # not NaN
        return peak / 1024
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 1024**3 if maxrss > 1 << 32 else maxrss / 1024**2
