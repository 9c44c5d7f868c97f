"""`keep_freed_memory`: a freed 100 MB block stays in the heap for the next step (glibc), unless opted out."""
import os
import subprocess
import sys

from needs import only_on

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


@only_on(sys.platform.startswith("linux"), "glibc's heap")
def test_a_freed_large_block_stays_in_the_heap_unless_opted_out():
    env = {k: v for k, v in os.environ.items() if k != "BERTFORGE_MALLOC"}

    def probe(extra: dict) -> str:
        return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env={**env, **extra},
                              check=True).stdout.strip()

    assert probe({}) == "True False True"                                   # heap block, kept after free
    assert probe({"BERTFORGE_MALLOC": "default"}) == "False True False"     # glibc: mmap-ed, unmapped on free


TRIM_PROBE = """
import ctypes, random
from bertforge.allocator import keep_freed_memory, release_freed_memory

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) // 1024

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
keep_freed_memory()
rng = random.Random(0)
blocks = []
for _ in range(60):                       # a job's temporaries: large blocks of varied sizes, touched
    size = rng.randint(4, 12) << 20
    block = libc.malloc(size)
    libc.memset(block, 1, size)
    blocks.append(block)
pin = libc.malloc(64)                     # one small survivor on top keeps the heap from shrinking at its end
for block in blocks:
    libc.free(block)
held = rss_mib()
release_freed_memory()
print(held, rss_mib())
"""


@only_on(sys.platform.startswith("linux"), "glibc's heap")
def test_release_gives_the_free_heap_back_between_jobs():
    env = {k: v for k, v in os.environ.items() if k != "BERTFORGE_MALLOC"}
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, env=env, check=True)
    held, after = map(int, out.stdout.split())
    assert held > after + 300   # ~480 MB of freed blocks stay resident until released, then go back to the OS


BOUND_PROBE = """
import ctypes, random
from bertforge.allocator import SETTLE, bound_kept_memory, keep_freed_memory, resident_bytes

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
rng = random.Random(0)

def step(mib):                            # a step's temporaries: large blocks of varied sizes, touched, then freed
    blocks = []
    while mib > 0:
        size = rng.randint(4, 12) << 20
        blocks.append(libc.malloc(size))
        libc.memset(blocks[-1], 1, size)
        mib -= size >> 20
    pins.append(libc.malloc(64))          # a small survivor on top keeps the heap from shrinking at its end
    for block in blocks:
        libc.free(block)

pins = []
kept = keep_freed_memory()
released = []
for _ in range(SETTLE):                   # the settling steps learn the working set
    step(100)
    released.append(bound_kept_memory())
step(100)
released.append(bound_kept_memory())      # the same step again: within the working set
step(600)                                 # a larger step: the heap grows past GROWTH x the working set
held = resident_bytes() >> 20
released.append(bound_kept_memory())
after = resident_bytes() >> 20
step(600)
released.append(bound_kept_memory())      # after a release the working set is learnt again
print(kept, SETTLE, *released, held - after)
"""


@only_on(sys.platform.startswith("linux"), "glibc's heap")
def test_the_training_loop_gives_back_a_grown_heap_and_only_a_grown_one():
    env = {k: v for k, v in os.environ.items() if k != "BERTFORGE_MALLOC"}

    def probe(extra: dict) -> list[str]:
        return subprocess.run([sys.executable, "-c", BOUND_PROBE], capture_output=True, text=True,
                              env={**env, **extra}, check=True).stdout.split()

    kept, settle, *released, given_back = probe({})
    assert kept == "True" and released == ["False"] * (int(settle) + 1) + ["True", "False"]
    assert int(given_back) > 300                   # the grown step's ~600 MB of free pages went back to the OS
    kept, settle, *released, given_back = probe({"BERTFORGE_MALLOC": "default"})
    assert kept == "False" and released == ["False"] * (int(settle) + 3)  # glibc as it comes: nothing to bound
