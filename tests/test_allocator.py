"""`keep_freed_memory`: a freed 100 MB block stays in the heap for the next step (glibc), unless opted out."""
import os
import subprocess
import sys

import pytest

PROBE = """
import ctypes
from bertforge.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
was_set = keep_freed_memory()
block = libc.malloc(100 << 20)
mapped_while_live = libc.mallinfo2().hblkhd            # bytes in mmap-ed blocks
libc.free(block)
kept = libc.mallinfo2().fordblks                       # free bytes the heap keeps for reuse
print(was_set, mapped_while_live >= 100 << 20, kept >= 100 << 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_a_freed_large_block_stays_in_the_heap_unless_opted_out():
    env = {k: v for k, v in os.environ.items() if k != "BERTFORGE_MALLOC"}

    def probe(extra: dict) -> str:
        return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env={**env, **extra},
                              check=True).stdout.strip()

    assert probe({}) == "True False True"                                   # heap block, kept after free
    assert probe({"BERTFORGE_MALLOC": "default"}) == "False True False"     # glibc: mmap-ed, unmapped on free
