#!/bin/bash
# The device's functional test, run the way QEMU runs tests/functional:
# Debian 11's kernel, whose in-tree vmw_balloon knows nothing of this
# project, boots with a busybox initramfs on a machine that looks like
# VMware, and balloons 128 MiB in and out against the device (patch 5 of
# the series, qemu-cloud/qemu/test_x86_64_vmware_balloon.py here).  QEMU's
# own harness (tests/functional/qemu_test and python/qemu from the cached
# source) runs it against the cached build; its assets (the kernel and
# busybox .debs, from deb.debian.org) are cached by hash in
# ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-test-assets.
# Prints the harness's TAP, then "N passed, N failed".  VMB_QEMU: a
# binary to test instead of the cached build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/tests/lib/need-packages" git python3 binutils tar ca-certificates \
	'python3-pycotap/bookworm-backports' qemu-system-data seabios ipxe-qemu

qemu=${VMB_QEMU:-$("$root/qemu-cloud/qemu/build.sh" | tail -n 1)}
src=$("$root/qemu-cloud/qemu/source.sh")
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
git --git-dir="$src/git" archive "$(<"$src/base")" python/qemu tests/functional/qemu_test |
	tar -x -C "$work"
test_py=$work/tests/functional/test_x86_64_vmware_balloon.py
cp "$root/qemu-cloud/qemu/test_x86_64_vmware_balloon.py" "$test_py"
mkdir -p "$work/build"

echo "# qemu: $qemu"
rc=0
out=$(cd "$work/build" &&
	QEMU_TEST_QEMU_BINARY=$qemu QEMU_BUILD_ROOT=$work/build \
	QEMU_TEST_CACHE_DIR=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-test-assets \
	PYTHONPATH=$work/python:$work/tests/functional \
	timeout 900 /usr/bin/python3 "$test_py" 2>&1) || rc=$?
echo "$out"
if ((rc != 0)); then
	for log in "$work"/build/tests/functional/*/*/base.log "$work"/build/tests/functional/*/*/console.log; do
		[[ -r $log ]] || continue
		echo "# --- ${log#"$work"/build/} (last 40 lines)"
		tail -n 40 "$log" | sed 's/^/#   /'
	done
fi
passed=$(grep -c '^ok ' <<<"$out" || true)
failed=$(grep -c '^not ok ' <<<"$out" || true)
# a harness that ran nothing, or exited non-zero, is a failure
((passed + failed > 0 && rc == 0)) || failed=$((failed + 1))
grep -q '# SKIP' <<<"$out" && { echo "the test was skipped: a missing asset or device is a failure here"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
((failed == 0))
