#!/bin/bash
# The upstream QEMU tree that the master series (series.sh here) is written
# against, cached.  Prints the cache folder as the last line of stdout;
# progress goes to stderr.  The folder holds:
#   base         the commit id of the tree in git/
#   based-on     one line for the cover letter: what the tree is
#   git/         a bare git repository with that commit (branch "base")
#   build-fixes/ patches the build needs on this tree but that are not part
#                of the series (may be empty), applied by build.sh only
#
# Where the tree comes from, in this order:
#   1. VMB_QEMU_MASTER_GIT: a git directory of QEMU's public repository
#      (e.g. a clone of https://gitlab.com/qemu-project/qemu.git, or the
#      git directory of a snapshot of github.com/qemu/qemu), at
#      VMB_QEMU_MASTER_REF (default: HEAD).  This is the real thing: QEMU
#      master.  The tree is taken as `git archive` gives it.
#   2. Otherwise: the newest upstream QEMU that Debian unstable or
#      experimental carries, as its "+ds" orig tarball (upstream's release
#      tarball less the firmware blobs, not Debian's patches).  That is the
#      closest to master that can be had from a Debian mirror; it is not
#      master, and based-on says so.  build-fixes/ then gets Debian's two
#      patches that let the "+ds" tree build without its blobs.
#
# Cache: ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-master-source/
# <commit id, or the Debian version without epoch>/.  A cached tree is
# reused without asking the mirror; VMB_QEMU_REFRESH=1 asks again.
#
# Environment: VMB_CACHE_DIR, VMB_QEMU_MASTER_GIT, VMB_QEMU_MASTER_REF,
#   VMB_QEMU_REFRESH, VMB_DEBIAN_MIRROR (default http://deb.debian.org/debian)
set -euo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-master-source
refresh=${VMB_QEMU_REFRESH:-0}
mirror=${VMB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
master_git=${VMB_QEMU_MASTER_GIT:-}
master_ref=${VMB_QEMU_MASTER_REF:-HEAD}

log() { printf 'qemu-master/source.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

"$repo/tests/lib/need-packages" dpkg-dev git xz-utils \
	debian-archive-keyring >&2
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
for stale in "$cache"/.fetch-*; do
	rm -rf -- "$stale"
done
work=$(mktemp -d "$cache/.fetch-XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# record_tree DIR KEY BASED-ON: DIR's files as the commit of the cache entry
record_tree() {
	local out=$work/out base
	mkdir -p "$out/build-fixes"
	git init -q --bare "$out/git"
	(
		export GIT_DIR=$out/git GIT_WORK_TREE=$1 GIT_INDEX_FILE=$work/index
		export GIT_AUTHOR_NAME=QEMU GIT_AUTHOR_EMAIL=qemu-devel@nongnu.org
		export GIT_COMMITTER_NAME=QEMU GIT_COMMITTER_EMAIL=qemu-devel@nongnu.org
		export GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z'
		git add -A -f .
		base=$(git commit-tree "$(git write-tree)" -m "$3")
		git update-ref refs/heads/base "$base"
		git symbolic-ref HEAD refs/heads/base
		printf '%s\n' "$base" >"$out/base"
	)
	printf '%s\n' "$3" >"$out/based-on"
}
finish() { # finish KEY: move the entry into place, print it
	local dest=$cache/$1
	rm -rf -- "$dest"
	mv -T -- "$work/out" "$dest"
	log "cached in $dest"
	printf '%s\n' "$dest"
}

if [[ -n $master_git ]]; then
	commit=$(git --git-dir="$master_git" rev-parse --verify "$master_ref^{commit}") ||
		die "no commit $master_ref in $master_git"
	if [[ $refresh != 1 && -r $cache/$commit/base ]]; then
		printf '%s\n' "$cache/$commit"
		exit 0
	fi
	date=$(git --git-dir="$master_git" log -1 --format=%cs "$commit")
	log "QEMU master at $commit ($date)"
	mkdir "$work/tree"
	git --git-dir="$master_git" archive "$commit" | tar -x -C "$work/tree"
	record_tree "$work/tree" "$commit" \
		"QEMU master at commit $commit ($date)"
	finish "$commit"
	exit 0
fi

# --- Debian's newest upstream tarball ----------------------------------------
newest_cached() {
	local dir best='' best_ver='' ver
	for dir in "$cache"/*/; do
		dir=${dir%/}
		[[ -r $dir/debian-version && -r $dir/base ]] || continue
		ver=$(<"$dir/debian-version")
		if [[ -z $best ]] || dpkg --compare-versions "$ver" gt "$best_ver"; then
			best=$dir best_ver=$ver
		fi
	done
	[[ -n $best ]] && printf '%s\n' "$best"
}
if [[ $refresh != 1 ]] && dir=$(newest_cached); then
	printf '%s\n' "$dir"
	exit 0
fi

apt_dir=$work/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" \
	"$apt_dir/parts"
for suite in sid experimental; do
	echo "deb-src [signed-by=$keyring] $mirror $suite main"
done >"$apt_dir/sources.list"
apt_opts=(
	-o "Dir::Etc::SourceList=$apt_dir/sources.list"
	-o "Dir::Etc::SourceParts=$apt_dir/parts"
	-o "Dir::State::Lists=$apt_dir/lists"
	-o "Dir::Cache=$apt_dir/cache"
	-o "Dir::Etc::Preferences=/dev/null"
	-o "Dir::Etc::PreferencesParts=$apt_dir/parts"
	-o "APT::Sandbox::User=root"
	-o "Acquire::Languages=none"
)
log "reading the source lists of sid and experimental"
apt-get "${apt_opts[@]}" -q update >"$work/apt.log" 2>&1 ||
	{ cat "$work/apt.log" >&2; die "apt-get update failed"; }
# newest first; a version whose files the mirror lacks is skipped
mapfile -t versions < <(apt-cache "${apt_opts[@]}" showsrc --only-source qemu |
	sed -n 's/^Version: //p' | sort -u |
	while read -r v; do printf '%s\n' "$v"; done |
	python3 -c 'import sys, functools, subprocess
vs = [l.strip() for l in sys.stdin if l.strip()]
def cmp(a, b):
    if subprocess.call(["dpkg", "--compare-versions", a, "gt", b]) == 0:
        return -1
    return 1 if a != b else 0
print("\n".join(sorted(vs, key=functools.cmp_to_key(cmp))))')
((${#versions[@]})) || die "no qemu source package in sid or experimental"
for version in "${versions[@]}"; do
	mkdir -p "$work/dl"
	if (cd "$work/dl" && apt-get "${apt_opts[@]}" -q source --download-only \
		--only-source "qemu=$version") >"$work/source.log" 2>&1; then
		break
	fi
	log "qemu $version: the mirror lacks its files; trying an older one"
	rm -rf -- "$work/dl"
	version=
done
[[ -n $version ]] || die "no qemu source in sid or experimental could be downloaded"
upstream=${version#*:}
upstream=${upstream%-*}
orig=("$work"/dl/qemu_"$upstream".orig.tar.*)
debian=("$work"/dl/qemu_"$upstream"-*.debian.tar.*)
((${#orig[@]} == 1 && ${#debian[@]} == 1)) || die "unexpected files for qemu $version"
log "Debian qemu $version: unpacking its orig tarball"
mkdir "$work/tree"
tar -x -C "$work/tree" --strip-components=1 -f "${orig[0]}"
record_tree "$work/tree" "$upstream" \
	"QEMU ${upstream%+ds} (upstream's release, from Debian's qemu_$upstream.orig tarball; not master)"
for p in skip-unpack-edk2-blobs.patch skip-install-dtb.patch; do
	tar -x -O -f "${debian[0]}" "debian/patches/$p" >"$work/out/build-fixes/$p" ||
		die "Debian's qemu $version has no $p"
done
printf '%s\n' "$version" >"$work/out/debian-version"
finish "$upstream"
