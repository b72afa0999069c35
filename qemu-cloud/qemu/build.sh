#!/bin/bash
# Build, or reuse from the cache, a qemu-system-x86_64 that has the
# project's vmware-balloon device (the hypervisor side of the VMware balloon
# protocol).  The QEMU is Debian's qemu 10.0 source (with Debian's patches),
# built on Debian 12, plus the device as the patch series that series.sh
# writes (`make qemu-series`): the patches are applied in order with
# patch -p1 --fuzz=0, so what is built is exactly what the series says.
#
# The source comes from source.sh (cached by Debian version, see there): the
# newest 10.0.x that trixie or bookworm-backports has, trixie's
# 1:10.0.13+ds-0+deb13u1 when this was written.  bookworm-backports'
# 1:10.0.2+ds-2+deb13u1~bpo12+1 is the same upstream series built for
# Debian 12; it can be asked for with VMB_QEMU_DEBIAN_VERSION if the mirror
# has its files (deb.debian.org had only its .orig.tar.xz then).  Both need
# meson >= 1.5, which Debian 12 has only in bookworm-backports (installed
# from there), and Debian's "+ds" tarball carries no meson wheel of its own.
#
# Prints the binary's absolute path as the last line of stdout; progress goes
# to stderr.  The device's qtest (tests/qtest/vmware-balloon-test) is built
# and run with the binary; a build whose qtest fails is not kept.  Its
# output stays beside bin/, in qtest.log.  Beside bin/ the build keeps QEMU's reader of migration
# streams, <binary>/../scripts/analyze-migration.py.  The binary looks
# for firmware in /usr/share/qemu,
# /usr/share/seabios and /usr/lib/ipxe/qemu (Debian's qemu-system-data,
# seabios and ipxe-qemu, installed here when a build runs); passing
# "-L /usr/share/qemu -L /usr/share/seabios -L /usr/lib/ipxe/qemu" does no
# harm.
#
# Cache: ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu/<key>/ with
# <key> = Debian source version (without epoch) + the first 16 hex digits of
# the sha256 over every file of this folder (the scripts, the series' files;
# not Python's __pycache__, which running the functional test may leave)
# and src/wire.h.  A cached build is reused without touching apt.  Builds happen in a temporary folder
# next to the cache and are renamed into place when complete.
#
# Environment:
#   VMB_CACHE_DIR            cache root (see above)
#   VMB_QEMU_DEBIAN_VERSION  build this Debian version of qemu (e.g.
#                            1:10.0.13+ds-0+deb13u1); default: the newest
#                            10.0.x (the newest cached source, see source.sh)
#   VMB_QEMU_REFRESH=1       ask the archive for the newest version even if
#                            a cached build exists
#   VMB_DEBIAN_MIRROR, VMB_DEBIAN_SECURITY   archive URLs
#   VMB_BUILD_JOBS           parallel jobs (default: nproc)
#   VMB_QEMU_KEEP            how many builds the cache keeps (default 3)
#   VMB_QEMU_SANITIZE=1      build with AddressSanitizer and UBSan
#                            (configure --enable-asan --enable-ubsan), for fuzzing
#                            the device; a cache entry of its own
set -euo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
cache=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu
want_version=${VMB_QEMU_DEBIAN_VERSION:-}
refresh=${VMB_QEMU_REFRESH:-0}
binary_name=qemu-system-x86_64
sanitize=${VMB_QEMU_SANITIZE:-0}
[[ $sanitize == [01] ]] || { echo "qemu/build.sh: VMB_QEMU_SANITIZE is 0 or 1" >&2; exit 2; }

log() { printf 'qemu/build.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- the key ---------------------------------------------------------------
inputs=()
while IFS= read -r f; do
	inputs+=("$f")
done < <(cd "$here" && find . -type f ! -path '*/__pycache__/*' | sed 's|^\./||' | LC_ALL=C sort)
wire_h=$repo/src/wire.h
inputs_sha=$( (cd "$here" && sha256sum -- "${inputs[@]}"; sha256sum <"$wire_h"
	((sanitize == 0)) || echo "--enable-asan --enable-ubsan") | sha256sum)
inputs_sha=${inputs_sha%% *}
hash16=${inputs_sha:0:16}

# The cached build for these inputs: of $1 if given, else the newest one.
find_cached() {
	local dir dirs=()
	for dir in "$cache"/*-"$hash16"; do
		[[ -x $dir/bin/$binary_name && -r $dir/debian-version ]] && dirs+=("$dir")
	done
	pick_cached "${1:-}" "${dirs[@]}"
}

if [[ $refresh != 1 ]] && dir=$(find_cached "$want_version"); then
	printf '%s\n' "$dir/bin/$binary_name"
	exit 0
fi

# --- slow path: one build at a time ---------------------------------------
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
	log "another build is running; waiting for it"
	flock 9
	if [[ $refresh != 1 ]] && dir=$(find_cached "$want_version"); then
		printf '%s\n' "$dir/bin/$binary_name"
		exit 0
	fi
fi

# Left-overs of interrupted builds (we hold the lock: nobody else builds).
for stale in "$cache"/.build-*; do
	log "removing the left-over $stale"
	rm -rf -- "$stale"
done

work=$(mktemp -d "$cache/.build-XXXXXX")
cleanup() { rm -rf -- "$work"; }
trap cleanup EXIT

# The long steps run in their own process group, in the background, so that
# a signal reaches this script at once and can stop them before cleanup.
child=
run_step() { # run_step LOG COMMAND...: COMMAND's output goes to LOG
	local log=$1 rc=0
	shift
	setsid "$@" >>"$log" 2>&1 </dev/null &
	child=$!
	wait "$child" || rc=$?
	child=
	return "$rc"
}
on_signal() {
	trap - INT TERM HUP
	if [[ -n $child ]]; then
		kill -TERM -- "-$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

start_time=$SECONDS

log "checking build dependencies"
# configure runs meson from a venv of Debian's python3 (python3-venv).
"$repo/tests/lib/need-packages" build-essential dpkg-dev patch git python3 \
	python3-venv 'meson>=1.5/bookworm-backports' ninja-build pkg-config \
	libglib2.0-dev libpixman-1-dev \
	libslirp-dev libfdt-dev zlib1g-dev debian-archive-keyring \
	seabios ipxe-qemu qemu-system-data >&2

log "getting the qemu source"
source=$("$here/source.sh")
want_version=$(<"$source/debian-version")
log "Debian qemu source version: $want_version"
if dir=$(find_cached "$want_version"); then
	printf '%s\n' "$dir/bin/$binary_name"
	exit 0
fi

srcdir=$work/src/qemu
mkdir -p "$srcdir"
git --git-dir="$source/git" archive "$(<"$source/base")" | tar -x -C "$srcdir"

log "adding the vmware-balloon device: the patch series"
VMB_QEMU_DEBIAN_VERSION=$want_version VMB_QEMU_REFRESH=0 \
	"$here/series.sh" "$work/series" >/dev/null
for p in "$work"/series/[0-9]*.patch; do
	[[ ${p##*/} == 0000-cover-letter.patch ]] && continue
	patch -d "$srcdir" -p1 --fuzz=0 --batch --forward --no-backup-if-mismatch \
		<"$p" >&2 || die "patch ${p##*/} does not apply"
done

jobs=${VMB_BUILD_JOBS:-$(nproc)}
# configure_args: the same for every build of the series (lib.sh, which
# is sourced at the top)
if ((sanitize)); then
	# (10.0 has no --enable-sanitizers any more: one option each)
	configure_args+=(--enable-asan --enable-ubsan --enable-debug-info)
	# QEMU frees not everything at exit; leaks are not what the fuzz is for
	export ASAN_OPTIONS=detect_leaks=0
fi
build_log=$work/build.log
fail_build() {
	tail -n 40 "$build_log" >&2
	cp -- "$build_log" "$cache/last-failed-build.log" 2>/dev/null || true
	die "$1 (full log: $cache/last-failed-build.log)"
}

log "configuring (${configure_args[*]})"
mkdir "$srcdir/build"
run_step "$build_log" env -C "$srcdir/build" ../configure "${configure_args[@]}" ||
	fail_build "configure failed"

log "compiling with $jobs jobs (a few minutes)"
# the binary, and the device's qtest (patch 4 of the series)
run_step "$build_log" ninja -C "$srcdir/build" -j "$jobs" "$binary_name" \
	tests/qtest/vmware-balloon-test ||
	fail_build "compilation failed"
if grep -E 'vmware-balloon[-a-z]*\.[ch]:[0-9]+:[0-9]+: (warning|error)' "$build_log" >&2; then
	fail_build "the device's sources have compiler warnings"
fi

out=$work/out
mkdir -p "$out/bin" "$out/scripts"
cp -- "$srcdir/build/$binary_name" "$out/bin/"
# QEMU's reader of migration streams, for tests of the device's state
cp -- "$srcdir/scripts/analyze-migration.py" "$out/scripts/"
qemu=$out/bin/$binary_name

log "checking the binary"
"$qemu" -device help 2>&1 | grep -q '"vmware-balloon"' ||
	die "the built QEMU has no vmware-balloon device"
check=$(printf 'info balloon\nquit\n' |
	timeout 60 "$qemu" -machine pc -accel tcg -nodefaults -display none \
		-device vmware-balloon -S -monitor stdio 2>&1) ||
	{ printf '%s\n' "$check" >&2; die "the built QEMU does not start"; }
grep -q 'actual=' <<<"$check" ||
	{ printf '%s\n' "$check" >&2; die "info balloon does not answer"; }

log "running the device's qtest"
mkdir "$work/qtest-bin"
write_firmware_wrapper "$work/qtest-bin/$binary_name" "$qemu"
run_step "$out/qtest.log" env -C "$work" \
	QTEST_QEMU_BINARY="$work/qtest-bin/$binary_name" \
	timeout 600 "$srcdir/build/tests/qtest/vmware-balloon-test" --tap -k ||
	{ tail -n 30 "$out/qtest.log" >&2; die "the device's qtest fails"; }
grep '^ok\|^not ok' "$out/qtest.log" >&2

printf '%s\n' "$want_version" >"$out/debian-version"
printf '%s\n' "$inputs_sha" >"$out/inputs-sha256"
{
	echo "debian qemu source: $want_version"
	echo "inputs: ${inputs[*]} (sha256 of their sha256sum: $inputs_sha)"
	echo "configure: ${configure_args[*]}"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -r)"
} >"$out/BUILD-INFO"
cp -- "$build_log" "$out/build.log"
cp -r -- "$work/series" "$out/series"

key=${want_version#*:}-$hash16
dest=$cache/$key
if [[ -e $dest ]]; then
	rm -rf -- "$dest"
fi
mv -T -- "$out" "$dest"
log "built in $((SECONDS - start_time)) s: $dest"

# Keep the newest few builds.  A QEMU still running from a removed one is
# not disturbed (its binary stays open).
keep=${VMB_QEMU_KEEP:-3}
old_builds=()
while IFS= read -r dir; do
	old_builds+=("$dir")
done < <(ls -1dt -- "$cache"/*-*/ 2>/dev/null | tail -n +$((keep + 1)))
for dir in "${old_builds[@]}"; do
	[[ ${dir%/} == "$dest" ]] && continue
	log "removing the old build ${dir%/}"
	rm -rf -- "${dir%/}"
done
printf '%s\n' "$dest/bin/$binary_name"
