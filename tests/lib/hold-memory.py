# hold-memory.py MIB FILE: in a guest, write a pattern into MIB MiB of
# anonymous memory, say "holding", and hold it until FILE exists; then
# check every 4 KiB of it and say "intact" or "CORRUPT" (exit 1). Copied
# into the guest by tests/guest/reclaim.sh.
import mmap
import os
import sys
import time

mib, until = int(sys.argv[1]), sys.argv[2]
m = mmap.mmap(-1, mib << 20)
for off in range(0, mib << 20, 4096):
    m[off:off + 8] = (off // 4096).to_bytes(8, "little")
print("holding %d MiB" % mib, flush=True)
while not os.path.exists(until):
    time.sleep(1)
bad = sum(1 for off in range(0, mib << 20, 4096)
          if m[off:off + 8] != (off // 4096).to_bytes(8, "little"))
print("%d MiB held: %s" % (mib, "intact" if not bad else "CORRUPT (%d pages)" % bad), flush=True)
sys.exit(1 if bad else 0)
