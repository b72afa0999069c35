#!/bin/bash
# Each patch of the QEMU series builds on its own (long step: a full QEMU
# build, about 40 minutes on 2 loaded cores).  The series is written
# afresh (qemu-cloud/qemu/series.sh), then applied one patch at a time to
# the QEMU source it is written against; after each one qemu-system-x86_64
# is built again (incrementally: one configure, one full build, then what
# each patch changes), with the configure options build.sh uses
# (qemu-cloud/qemu/lib.sh).  After the device's patch the
# binary must list the device and its source must compile without a
# warning; after the last one the qtest is built and run.
#
# Environment: VMB_BUILD_JOBS (default: nproc); VMB_TMPDIR, where the
# ~1 GiB tree is built (default /var/tmp).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/tests/lib/need-packages" build-essential patch git python3 \
	python3-venv 'meson>=1.5/bookworm-backports' ninja-build pkg-config \
	libglib2.0-dev libpixman-1-dev libslirp-dev libfdt-dev zlib1g-dev \
	seabios ipxe-qemu qemu-system-data

jobs=${VMB_BUILD_JOBS:-$(nproc)}
work=$(mktemp -d "${VMB_TMPDIR:-/var/tmp}/vmb-qemu-series-XXXXXX")
trap 'rm -rf -- "$work"' EXIT
src=$("$root/qemu-cloud/qemu/source.sh")
echo "qemu source: $(<"$src/debian-version")"
"$root/qemu-cloud/qemu/series.sh" "$work/series" >/dev/null
tree=$work/qemu
mkdir "$tree"
git --git-dir="$src/git" archive "$(<"$src/base")" | tar -x -C "$tree"
# shellcheck source=../../qemu-cloud/qemu/lib.sh
. "$root/qemu-cloud/qemu/lib.sh"

passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
not_ok() { echo "FAIL: $*"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; ((failed == 0)); exit; }

binary=$tree/build/qemu-system-x86_64
configured=0
for p in "$work"/series/[0-9]*.patch; do
	name=${p##*/}
	[[ $name == 0000-cover-letter.patch ]] && continue
	if ! patch -d "$tree" -p1 --fuzz=0 --batch --forward \
		--no-backup-if-mismatch <"$p" >/dev/null; then
		not_ok "$name does not apply"
		finish
	fi
	log=$work/${name%.patch}.log
	if ((!configured)); then
		mkdir "$tree/build"
		if ! (cd "$tree/build" && ../configure "${configure_args[@]}") >"$log" 2>&1; then
			tail -n 40 "$log"
			not_ok "configure fails after $name"
			finish
		fi
		configured=1
	fi
	targets=(qemu-system-x86_64)
	[[ $name == 0004-* ]] && targets+=(tests/qtest/vmware-balloon-test)
	start=$SECONDS
	if ninja -C "$tree/build" -j "$jobs" "${targets[@]}" >>"$log" 2>&1; then
		ok "the tree builds with $name ($((SECONDS - start)) s)"
	else
		tail -n 40 "$log"
		not_ok "the tree does not build with $name"
		finish
	fi
	if grep -E 'vmware-balloon[-a-z]*\.[ch]:[0-9]+:[0-9]+: (warning|error)' "$log"; then
		not_ok "$name: the compiler warns about the device's sources"
	fi
	if "$binary" -device help 2>&1 | grep -q '"vmware-balloon"'; then
		has_device=1
	else
		has_device=0
	fi
	case $name in
	0001-*)
		((has_device == 0)) && ok "no device yet after $name" ||
			not_ok "$name: a device already"
		;;
	*)
		((has_device)) && ok "the binary has the device after $name" ||
			not_ok "$name: the binary has no vmware-balloon device"
		;;
	esac
done

if [[ -x $tree/build/tests/qtest/vmware-balloon-test ]]; then
	mkdir "$work/bin"
	write_firmware_wrapper "$work/bin/qemu-system-x86_64" "$binary"
	if (cd "$work" && QTEST_QEMU_BINARY=$work/bin/qemu-system-x86_64 \
		timeout 600 "$tree/build/tests/qtest/vmware-balloon-test" --tap -k); then
		ok "the qtest passes"
	else
		not_ok "the qtest fails"
	fi
else
	not_ok "no qtest was built"
fi
finish
