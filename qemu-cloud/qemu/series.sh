#!/bin/bash
# Write the vmware-balloon device as a git format-patch series, with a
# cover letter, against Debian's QEMU 10.0 source (source.sh): `make
# qemu-series`.  build.sh builds from this same series, so the files below
# are the one source of the device; nothing else in the repository holds a
# copy of it.
#
#   qemu-cloud/qemu/series.sh [OUTDIR]     (default: build/qemu-series)
#
# Prints OUTDIR as the last line of stdout; progress goes to stderr.
# OUTDIR gets 0000-cover-letter.patch and one numbered file per patch
# (any older *.patch there is removed first).
#
# The patches, in order (messages in series/<n>-*.txt, the cover letter in
# series/cover-letter.txt):
#   1  include/hw/i386/vmware-balloon-wire.h: the protocol's numbers, the
#      project's src/wire.h with its tabs expanded (QEMU indents with
#      spaces), + a MAINTAINERS section
#   2  hw/i386/vmware-balloon.c (vmware-balloon.c here) and its Kconfig,
#      meson and trace-events lines (series/2-device.diff)
#   3  docs/system/devices/vmware-balloon.rst (vmware-balloon.rst here), its
#      place in the device-emulation index (series/3-docs.diff)
#   4  tests/qtest/vmware-balloon-test.c (vmware-balloon-test.c here),
#      registered in tests/qtest/meson.build (series/4-qtest.diff)
#   5  tests/functional/test_x86_64_vmware_balloon.py (the same name
#      here), registered in tests/functional/meson.build
#      (series/5-functional.diff)
# Each patch adds its own files to the MAINTAINERS section.
#
# The commits are made in a scratch repository that borrows the cached
# source's objects (nothing is checked out), with a fixed author and date,
# so the same inputs give the same files.  A diff that does not apply
# exactly fails.
#
# Environment: as source.sh (VMB_CACHE_DIR, VMB_QEMU_DEBIAN_VERSION, ...);
#   VMB_QEMU_SERIES_AUTHOR   "Name <address>" for From: and Signed-off-by:
#                            (default: the project's address)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/build/qemu-series}
author=${VMB_QEMU_SERIES_AUTHOR:-vmw-balloon-dkms developers <dev@vmw-balloon-dkms.invalid>}
[[ $author =~ ^([^<]+[^<[:space:]])\ *\<([^>]+)\>$ ]] ||
	{ echo "series.sh: VMB_QEMU_SERIES_AUTHOR is not \"Name <address>\"" >&2; exit 2; }
author_name=${BASH_REMATCH[1]} author_email=${BASH_REMATCH[2]}

log() { printf 'qemu/series.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

"$repo/tests/lib/need-packages" git >&2
src=$("$here/source.sh")
version=$(<"$src/debian-version")
base=$(<"$src/base")

work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
git init -q --bare "$work/repo"
echo "$src/git/objects" >"$work/repo/objects/info/alternates"
export GIT_DIR=$work/repo GIT_INDEX_FILE=$work/index
export GIT_AUTHOR_NAME=$author_name GIT_AUTHOR_EMAIL=$author_email
export GIT_COMMITTER_NAME=$author_name GIT_COMMITTER_EMAIL=$author_email
export GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
git config core.abbrev 12
git read-tree "$base"
head=$base

# add_file QEMU-PATH REPO-FILE [expand]: a new file of the next commit
add_file() {
	local blob
	[[ -r $2 ]] || die "missing $2"
	if [[ ${3:-} == expand ]]; then
		blob=$(expand -t 8 "$2" | git hash-object -w --stdin)
	else
		blob=$(git hash-object -w -- "$2")
	fi
	git update-index --add --cacheinfo "100644,$blob,$1"
}
# apply DIFF: changes to existing files (paths a/... b/...)
apply() {
	git apply --cached --whitespace=error-all -- "$1" ||
		die "${1#"$repo"/} does not apply to qemu $version"
}
# commit MESSAGE-FILE: the next patch (its message plus Signed-off-by)
commit() {
	local tree msg=$work/msg
	{ cat -- "$1"; printf '\nSigned-off-by: %s\n' "$author"; } >"$msg"
	tree=$(git write-tree)
	head=$(git commit-tree "$tree" -p "$head" -F "$msg")
}

s=$here/series
add_file include/hw/i386/vmware-balloon-wire.h "$repo/src/wire.h" expand
apply "$s/1-header.diff"
commit "$s/1-header.txt"

add_file hw/i386/vmware-balloon.c "$here/vmware-balloon.c"
apply "$s/2-device.diff"
commit "$s/2-device.txt"

add_file docs/system/devices/vmware-balloon.rst "$here/vmware-balloon.rst"
apply "$s/3-docs.diff"
commit "$s/3-docs.txt"

add_file tests/qtest/vmware-balloon-test.c "$here/vmware-balloon-test.c"
apply "$s/4-qtest.diff"
commit "$s/4-qtest.txt"

add_file tests/functional/test_x86_64_vmware_balloon.py "$here/test_x86_64_vmware_balloon.py"
apply "$s/5-functional.diff"
commit "$s/5-functional.txt"

git update-ref refs/heads/vmware-balloon "$head"
# the cover letter: its first line is the subject, the rest the body
{ cat -- "$s/cover-letter.txt"; echo; echo "Based on Debian's qemu $version."; } >"$work/cover"
git config branch.vmware-balloon.description "$(cat "$work/cover")"

mkdir -p "$out"
rm -f -- "$out"/*.patch
git format-patch -q --cover-letter --cover-from-description=subject \
	--subject-prefix=PATCH --no-signature \
	-o "$out" "$base..vmware-balloon" >/dev/null
log "$(find "$out" -name '*.patch' | wc -l) files in $out"
printf '%s\n' "$out"
