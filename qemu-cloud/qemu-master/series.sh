#!/bin/bash
# Write the vmware-balloon device as the patch series for QEMU master (the
# one to submit upstream), plus the lab-only patch that goes on top of it
# in the project's own builds: `make qemu-series` runs this after
# qemu-cloud/qemu/series.sh (the 10.0 series the lab builds).
#
#   qemu-cloud/qemu-master/series.sh [OUTDIR]
#                                (default: build/qemu-series-master)
#
# Prints OUTDIR as the last line of stdout; progress goes to stderr.
# OUTDIR gets (older *.patch files there are removed first):
#   0000-cover-letter.patch, 0001-...0004-*.patch   the series to submit
#   lab/0001-*.patch   the lab-only patch: applies after the series, is not
#                      sent; it puts back the device's test interface
#   BASE               what the series is based on (source.sh)
#
# One source for the device.  The 10.0 files in qemu-cloud/qemu/ (which
# build.sh builds for the lab) stay the source; what master needs is kept
# here as diffs against them, applied with patch --fuzz=0, so that a change
# to the 10.0 device that the master diffs do not fit stops this script
# instead of drifting apart silently:
#   device-port.diff      qemu/vmware-balloon.c -> the device as the lab
#                         builds it on master: master's API (system/
#                         headers, class_init's const data), SPDX only, the
#                         protocol's numbers private to the .c (no
#                         include/ header), VMState version 1
#   device-lab-only.diff  the submitted device -> the lab's device: the
#                         test interface (about 25 "x-" properties:
#                         counters, fault injection, x-legacy) and the
#                         rate limit of guest-triggered messages.  The
#                         submitted device is the lab's with this diff
#                         reversed; the lab-only patch is this diff.
#   docs-port.diff        qemu/vmware-balloon.rst -> the master docs
#   functional-port.diff  qemu/test_x86_64_vmware_balloon.py -> the master
#                         functional test (snapshot.debian.org assets,
#                         only QMP-visible checks)
#   vmware-balloon-test.c the master qtest (libqtest, no "x-" property,
#                         a boot sector that speaks the protocol, bounded
#                         waits); the 10.0 qtest stays with the 10.0 series
#   series/<n>-*.diff     changes to QEMU's own files (MAINTAINERS,
#                         Kconfig, meson, trace-events, docs index)
#   series/<n>-*.txt, series/lab-only.txt, series/cover-letter.txt
#
# The patches:
#   1  hw/i386/vmware-balloon.c, Kconfig, meson, trace-events, MAINTAINERS
#   2  docs/system/devices/vmware-balloon.rst
#   3  tests/qtest/vmware-balloon-test.c
#   4  tests/functional/x86_64/test_vmware_balloon.py
#   lab/1  the test interface (hw/i386/vmware-balloon.c only)
#
# Environment: as source.sh (VMB_QEMU_MASTER_GIT, VMB_CACHE_DIR, ...);
#   VMB_QEMU_SERIES_AUTHOR as for qemu-cloud/qemu/series.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
q10=$repo/qemu-cloud/qemu
out=${1:-$repo/build/qemu-series-master}
author=${VMB_QEMU_SERIES_AUTHOR:-vmw-balloon-dkms developers <dev@vmw-balloon-dkms.invalid>}
[[ $author =~ ^([^<]+[^<[:space:]])\ *\<([^>]+)\>$ ]] ||
	{ echo "series.sh: VMB_QEMU_SERIES_AUTHOR is not \"Name <address>\"" >&2; exit 2; }
author_name=${BASH_REMATCH[1]} author_email=${BASH_REMATCH[2]}

log() { printf 'qemu-master/series.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

"$repo/tests/lib/need-packages" git patch >&2
src=$("$here/source.sh")
base=$(<"$src/base")
based_on=$(<"$src/based-on")

work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT

# port NAME 10.0-FILE DIFF [-R]: the file made from 10.0-FILE and DIFF
port() {
	cp -- "$2" "$work/$1"
	patch --quiet --fuzz=0 --batch --no-backup-if-mismatch ${4:+"$4"} \
		"$work/$1" <"$3" >&2 ||
		die "${3#"$repo"/} does not fit ${2#"$repo"/} any more"
}
port lab.c "$q10/vmware-balloon.c" "$here/device-port.diff"
port device.c "$work/lab.c" "$here/device-lab-only.diff" -R
port docs.rst "$q10/vmware-balloon.rst" "$here/docs-port.diff"
port functional.py "$q10/test_x86_64_vmware_balloon.py" "$here/functional-port.diff"

git init -q --bare "$work/repo"
echo "$src/git/objects" >"$work/repo/objects/info/alternates"
export GIT_DIR=$work/repo GIT_INDEX_FILE=$work/index
export GIT_AUTHOR_NAME=$author_name GIT_AUTHOR_EMAIL=$author_email
export GIT_COMMITTER_NAME=$author_name GIT_COMMITTER_EMAIL=$author_email
export GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
git config core.abbrev 12
git read-tree "$base"
head=$base

# add_file QEMU-PATH FILE [MODE]: a new file of the next commit
add_file() {
	local blob
	blob=$(git hash-object -w -- "$2")
	git update-index --add --cacheinfo "${3:-100644},$blob,$1"
}
apply() {
	git apply --cached --whitespace=error-all -- "$1" ||
		die "${1#"$repo"/} does not apply to $based_on"
}
commit() {
	local tree msg=$work/msg
	{ cat -- "$1"; printf '\nSigned-off-by: %s\n' "$author"; } >"$msg"
	tree=$(git write-tree)
	head=$(git commit-tree "$tree" -p "$head" -F "$msg")
}

s=$here/series
add_file hw/i386/vmware-balloon.c "$work/device.c"
apply "$s/1-device.diff"
commit "$s/1-device.txt"

add_file docs/system/devices/vmware-balloon.rst "$work/docs.rst"
apply "$s/2-docs.diff"
commit "$s/2-docs.txt"

add_file tests/qtest/vmware-balloon-test.c "$here/vmware-balloon-test.c"
apply "$s/3-qtest.diff"
commit "$s/3-qtest.txt"

add_file tests/functional/x86_64/test_vmware_balloon.py "$work/functional.py" 100755
apply "$s/4-functional.diff"
commit "$s/4-functional.txt"
series_head=$head

add_file hw/i386/vmware-balloon.c "$work/lab.c"
commit "$s/lab-only.txt"
lab_head=$head

git update-ref refs/heads/vmware-balloon "$series_head"
{ cat -- "$s/cover-letter.txt"; echo; echo "Based on $based_on."; } >"$work/cover"
git config branch.vmware-balloon.description "$(cat "$work/cover")"

mkdir -p "$out/lab"
rm -f -- "$out"/*.patch "$out"/lab/*.patch
git format-patch -q --cover-letter --cover-from-description=subject \
	--subject-prefix=PATCH --no-signature \
	-o "$out" "$base..vmware-balloon" >/dev/null
git format-patch -q --subject-prefix="PATCH lab-only" --no-signature \
	-o "$out/lab" "$series_head..$lab_head" >/dev/null
printf '%s\n' "$based_on" >"$out/BASE"
log "$(find "$out" -maxdepth 1 -name '*.patch' | wc -l) files in $out, and the lab-only patch in $out/lab"
printf '%s\n' "$out"
