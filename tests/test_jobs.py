"""Job setup: the steady heap every model job runs under (glibc's allocator thresholds, fixed)."""

import ctypes
import ctypes.util
import subprocess
import sys
import textwrap

import pytest

from entropy_lens.workflow import jobs

LIBC = ctypes.util.find_library("c")
GLIBC = bool(LIBC) and hasattr(ctypes.CDLL(LIBC), "gnu_get_libc_version")

# A fresh interpreter mallocs 40 MiB, writes it (resident), frees it and prints how much of it stayed resident.
_RETAINED = textwrap.dedent(
    """
    import ctypes, ctypes.util, sys
    from entropy_lens.workflow.jobs import steady_heap
    def rss():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    if sys.argv[1] == "steady":
        assert steady_heap()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size = 40 << 20
    before = rss()
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
    print((rss() - before) / size)
    """
)


def _retained(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", _RETAINED, mode], capture_output=True, text=True, check=True)
    return float(done.stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt thresholds")
def test_steady_heap_keeps_a_freed_block_below_the_thresholds_resident():
    """Under the steady heap a freed 40 MiB block stays in the heap for the next allocation, as in every run
    (below the 64 MiB mmap threshold, the heap's free top under the 128 MiB trim threshold); glibc's default
    maps it on its own and returns it at once (its dynamic threshold starts at 128 KiB)."""
    assert _retained("steady") > 0.9
    assert _retained("default") < 0.1


def test_steady_heap_says_whether_it_could_fix_the_thresholds():
    assert jobs.steady_heap() is GLIBC
    assert jobs.HEAP_MMAP_THRESHOLD < jobs.HEAP_TRIM_THRESHOLD  # the heap's top is trimmed only above a mapped block
