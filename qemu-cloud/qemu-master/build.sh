#!/bin/bash
# Check the master series (series.sh here) as a maintainer would: QEMU's
# own scripts/checkpatch.pl, of the tree the series is based on, on every
# patch (the lab-only patch too), with no error and no warning; then build
# QEMU with the series applied and run the device's qtest; then apply the
# lab-only patch on top, build again and run the qtest again.  A
# check-long step (tests/checks/qemu-master-series.sh).  The lab's own
# QEMU is still qemu-cloud/qemu/build.sh's, from Debian's 10.0 source.
#
# Prints the cache folder of the result as the last line of stdout
# (checkpatch.log, qtest.log, qtest-lab.log, build.log, BUILD-INFO,
# series/); progress goes to stderr.  Nothing is installed; no binary is
# kept.
#
# Cache: ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-master/
#   <key>/  a passed check, <key> = the base commit's first 12 hex digits
#           + the first 16 of the sha256 over the patches series.sh wrote
#           (series and lab-only, whose index lines name the base's
#           blobs), this script and lib.sh; reused as is.  A failed check
#           leaves last-failed.log.
#   tree-<base commit>/  the source tree (a git repository of the base)
#           and its build folder, kept for the next check: a new series
#           on the same base resets the tree to the base with git (only
#           changed files get new times) and rebuilds incrementally, a
#           few minutes instead of a cold build.  Only the newest tree is
#           kept.
#
# Environment: as series.sh and source.sh; VMB_BUILD_JOBS (default 2).
set -euo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=SCRIPTDIR/../qemu/lib.sh
. "$repo/qemu-cloud/qemu/lib.sh"
cache=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-master
jobs=${VMB_BUILD_JOBS:-2}
binary_name=qemu-system-x86_64

log() { printf 'qemu-master/build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

"$repo/tests/lib/need-packages" build-essential git patch python3 \
	python3-venv 'meson>=1.5/bookworm-backports' ninja-build pkg-config \
	libglib2.0-dev libpixman-1-dev libslirp-dev libfdt-dev zlib1g-dev \
	bzip2 seabios ipxe-qemu qemu-system-data >&2

src=$("$here/source.sh")
base=$(<"$src/base")
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
"$here/series.sh" "$work/series" >/dev/null
patches=("$work"/series/0*.patch)
lab_patches=("$work"/series/lab/*.patch)
series_sha=$( (cd "$work/series" && sha256sum -- 0*.patch lab/*.patch
	sha256sum <"$here/build.sh"; sha256sum <"$repo/qemu-cloud/qemu/lib.sh") |
	sha256sum)
key=${base:0:12}-${series_sha:0:16}
if [[ -r $cache/$key/BUILD-INFO ]]; then
	log "checked before: $cache/$key"
	printf '%s\n' "$cache/$key"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
out=$work/out
mkdir -p "$out"
failed() {
	cat -- "$out"/*.log >"$cache/last-failed.log" 2>/dev/null || true
	die "$1 (logs: $cache/last-failed.log)"
}

# --- the tree: the base, kept with its build folder --------------------------
tree=$cache/tree-$base
for old in "$cache"/tree-*; do
	[[ $old == "$tree" ]] || { log "removing the old tree $old"; rm -rf -- "$old"; }
done
export GIT_DIR=$tree/git GIT_WORK_TREE=$tree/src
if [[ ! -d $tree/git ]]; then
	mkdir -p "$tree/src"
	git init -q
	git fetch -q "$src/git" base
	git update-ref refs/heads/base FETCH_HEAD
	git symbolic-ref HEAD refs/heads/base
	# files already in src/ that match the base keep their times
	git read-tree base
	git update-index -q --refresh >/dev/null || true
fi
# only the files that differ from the base are written
git reset -q --hard base
git clean -q -f -d -e /build/
unset GIT_DIR GIT_WORK_TREE
s=$tree/src

# --- checkpatch: the base's own ---------------------------------------------
log "checkpatch, the base's own, on every patch"
cp_fail=0
for p in "${patches[@]:1}" "${lab_patches[@]}"; do
	{
		echo "== ${p#"$work/series/"}"
		perl "$s/scripts/checkpatch.pl" --no-tree "$p" 2>&1 || true
	} >>"$out/checkpatch.log"
done
grep -E '^total: ' "$out/checkpatch.log" >&2
if grep -E '^total: ' "$out/checkpatch.log" | grep -qv '^total: 0 errors, 0 warnings,'; then
	cp_fail=1
fi
((cp_fail == 0)) || failed "checkpatch has errors or warnings"

# --- build with the series ---------------------------------------------------
for p in "$src"/build-fixes/*.patch "${patches[@]:1}"; do
	patch -d "$s" -p1 --fuzz=0 --batch --forward --no-backup-if-mismatch \
		<"$p" >&2 || failed "${p##*/} does not apply"
done
if [[ ! -r $s/build/build.ninja ]]; then
	log "configuring (${configure_args[*]})"
	rm -rf -- "$s/build"
	mkdir "$s/build"
	(cd "$s/build" && nice -n 19 ../configure "${configure_args[@]}") \
		>>"$out/build.log" 2>&1 || failed "configure failed"
fi
build() { # build: the binary and the qtest, warnings in the device's files fail
	local mark=$1
	log "building ($mark, $jobs jobs; a cold build takes most of an hour)"
	echo "== $mark" >>"$out/build.log"
	nice -n 19 ninja -C "$s/build" -j "$jobs" "$binary_name" \
		tests/qtest/vmware-balloon-test >>"$out/build.log" 2>&1 ||
		failed "the build fails ($mark)"
	if sed -n "/^== $mark\$/,\$p" "$out/build.log" |
		grep -E 'vmware-balloon[-a-z]*\.[ch]:[0-9]+:[0-9]+: (warning|error)' >&2; then
		failed "the device's sources have compiler warnings ($mark)"
	fi
}
mkdir -p "$work/qtest-bin"
write_firmware_wrapper "$work/qtest-bin/$binary_name" "$s/build/$binary_name"
qtest() { # qtest LOG
	log "running the qtest"
	env -C "$work" QTEST_QEMU_BINARY="$work/qtest-bin/$binary_name" \
		timeout 600 "$s/build/tests/qtest/vmware-balloon-test" --tap -k \
		>"$out/$1" 2>&1 || { tail -n 30 "$out/$1" >&2; failed "the qtest fails ($1)"; }
	grep -E '^(not )?ok' "$out/$1" >&2
}
build series
"$s/build/$binary_name" -device vmware-balloon,help 2>&1 | grep -q ' x-' &&
	failed "the series' device has x- properties"
qtest qtest.log

# --- and with the lab-only patch ---------------------------------------------
for p in "${lab_patches[@]}"; do
	patch -d "$s" -p1 --fuzz=0 --batch --forward --no-backup-if-mismatch \
		<"$p" >&2 || failed "${p##*/} does not apply"
done
build lab-only
"$s/build/$binary_name" -device vmware-balloon,help 2>&1 | grep -q ' x-legacy=' ||
	failed "the lab-only patch's device has no x- properties"
qtest qtest-lab.log

{
	echo "based on: $(<"$src/based-on")"
	echo "base commit: $base"
	echo "series: $(cd "$work/series" && echo 0*.patch lab/*.patch)"
	echo "configure: ${configure_args[*]}"
	echo "checked: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -r)"
} >"$out/BUILD-INFO"
cp -r -- "$work/series" "$out/series"
rm -rf -- "${cache:?}/$key"
mv -T -- "$out" "$cache/$key"
log "passed: $cache/$key"
printf '%s\n' "$cache/$key"
