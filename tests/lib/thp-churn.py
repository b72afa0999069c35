# thp-churn.py MIB SECONDS: in a guest, for SECONDS, map MIB MiB of
# anonymous memory asking for transparent huge pages (MADV_HUGEPAGE),
# touch every 4 KiB of it, unmap it, pause half a second, and again: a
# workload of 2 MiB allocations that comes and goes about once a second.
# Prints "rounds N" and exits 1 if any round read back what it did not
# write. Copied into the guest by tests/guest/reclaim.sh.
import mmap
import sys
import time

mib, seconds = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + seconds
rounds = 0
while time.monotonic() < end:
    # private: a shared anonymous mapping is shmem, which gets no THP here
    m = mmap.mmap(-1, mib << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE)
    for off in range(0, mib << 20, 4096):
        m[off] = 0x5a
    bad = any(m[off] != 0x5a for off in range(0, mib << 20, 1 << 20))
    m.close()
    if bad:
        print("rounds %d, CORRUPT" % rounds)
        sys.exit(1)
    rounds += 1
    time.sleep(0.5)
print("rounds %d" % rounds)
