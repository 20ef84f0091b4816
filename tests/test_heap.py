"""The CLI's allocator policy (dmlconform.runner.heap): freed large blocks stay in the process for
the next case, and the memory check counts them as available. Each check runs in a fresh
interpreter, so the test process keeps glibc's defaults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dmlconform.runner import heap, tiers

pytestmark = pytest.mark.skipif(heap._glibc() is None, reason="glibc's mallopt/mallinfo2 only")

_FREE_64_MIB = """
import numpy as np
from dmlconform.runner import heap
retain = {retain}
if retain:
    assert heap.retain_freed_memory()
a = np.ones(2**23)  # 64 MiB
del a
print(heap._glibc().mallinfo2().fordblks, heap.retained_free_bytes())
"""

# a backend call runs on a thread of its own (the guard's timeout), the kernels on the pool's:
# a block larger than a thread arena's heap (64 MiB) is mapped on its own there whatever
# M_MMAP_MAX says, and unmapped when freed
_FREE_128_MIB_ON_A_THREAD = """
import threading
import numpy as np
from dmlconform.runner import heap
retain = {retain}
if retain:
    assert heap.retain_freed_memory()
def case():
    a = np.ones(2**24)
    del a
t = threading.Thread(target=case)
t.start()
t.join()
print(heap._glibc().mallinfo2().fordblks, heap.retained_free_bytes())
"""


def _free_after(retain: bool, program: str = _FREE_64_MIB) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", program.format(retain=retain)], capture_output=True, text=True, check=True
    )
    free, retained = out.stdout.split()
    return int(free), int(retained)


def _same(retained: int, free: int) -> bool:
    """The heap's free bytes read twice, a moment apart: the interpreter may allocate between the
    reads (1392 bytes once, on a busy worker), far below the blocks these tests free."""
    return abs(retained - free) < 2**16


def test_a_freed_large_block_stays_in_the_heap_only_when_retaining() -> None:
    free, retained = _free_after(retain=True)
    assert free >= 2**26 and _same(retained, free)
    free, retained = _free_after(retain=False)  # glibc's default: an mmap of its own, unmapped
    assert free < 2**26 and retained == 0


def test_a_large_block_freed_on_another_thread_stays_too() -> None:
    free, retained = _free_after(retain=True, program=_FREE_128_MIB_ON_A_THREAD)
    assert free >= 2**27 and _same(retained, free)
    free, _ = _free_after(retain=False, program=_FREE_128_MIB_ON_A_THREAD)
    assert free < 2**27


def test_the_cli_retains(tmp_path) -> None:  # type: ignore[no-untyped-def]
    probe = (
        "import sys\nfrom dmlconform import cli\nfrom dmlconform.runner import heap\n"
        "cli.main(['validate', '-l', '6_4', sys.argv[1]])\nprint('retaining', heap._retaining)"
    )
    desc = tmp_path / "missing.json"
    out = subprocess.run([sys.executable, "-c", probe, str(desc)], capture_output=True, text=True)
    assert "retaining True" in out.stdout


def test_available_memory_counts_the_retained_free_bytes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(tiers.MEMORY_LIMIT_ENV, raising=False)
    monkeypatch.setattr(tiers, "_meminfo_available", lambda: 5 * 2**30)
    monkeypatch.setattr(tiers, "_cgroup_available", lambda: 3 * 2**30)
    monkeypatch.setattr(heap, "retained_free_bytes", lambda: 2**30)
    assert tiers.available_memory() == 4 * 2**30
    monkeypatch.setenv(tiers.MEMORY_LIMIT_ENV, "1G")  # a stated budget is the budget
    assert tiers.available_memory() == 2**30
