#!/bin/bash
# The vmware-balloon series for QEMU master (long step: a cold build of
# QEMU takes most of an hour on 2 loaded cores; a series changed on the
# same base rebuilds incrementally in minutes, and an unchanged one is
# not checked again).  qemu-cloud/qemu-master/build.sh writes the series
# afresh on the newest upstream tree it can get (qemu-master/source.sh:
# VMB_QEMU_MASTER_GIT, a git directory of QEMU's repository, or else
# Debian's newest upstream tarball), runs that tree's own
# scripts/checkpatch.pl on every patch (and on the lab-only patch), builds
# QEMU with the series and runs the device's qtest, then does both again
# with the lab-only patch on top.  Its result, with the logs, is cached
# by the base commit and a hash of the patches.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$("$root/qemu-cloud/qemu-master/build.sh")
echo "based on: $(sed -n 's/^based on: //p' "$dir/BUILD-INFO")"
grep -E '^(== |total: )' "$dir/checkpatch.log"
for log in qtest.log qtest-lab.log; do
	echo "$log:"
	grep -E '^(not )?ok' "$dir/$log"
done
echo "ok: checkpatch clean, built, qtest passed, with and without the lab-only patch ($dir)"
