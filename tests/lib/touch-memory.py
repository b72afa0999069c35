# touch-memory.py MIB HOLD: in a guest, touch MIB MiB of anonymous memory,
# hold it HOLD seconds, check it is still what was written, and say so.
# Exits 1 if any of it changed.  Copied in by copy_touch_memory
# (tests/lib/guest.sh).
import mmap
import sys
import time

mib, hold = int(sys.argv[1]), float(sys.argv[2])
start = time.monotonic()
m = mmap.mmap(-1, mib << 20)
chunk = b"\x5a" * (1 << 20)
for i in range(mib):
    m[i << 20:(i + 1) << 20] = chunk
took = time.monotonic() - start
time.sleep(hold)
ok = all(m[(i << 20) + 4095] == 0x5a for i in range(mib))
print("touched %d MiB in %.1f s, %s" % (mib, took, "intact" if ok else "CORRUPT"))
sys.exit(0 if ok else 1)
