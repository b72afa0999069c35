#!/bin/bash
# Fetch, or reuse from the cache, Debian's QEMU 10.0 source: the tree the
# vmware-balloon series (series.sh) is written against and build.sh builds.
#
# Prints the cache folder of that source as the last line of stdout;
# progress goes to stderr.  The folder holds:
#   debian-version   the Debian source version (with its epoch)
#   base             the commit id of the unpacked tree in git/
#   git/             a bare git repository with one commit, branch
#                    "debian": the source as `apt-get source` unpacks it
#                    (upstream QEMU plus Debian's patches)
#
# The source is the newest 10.0.x that trixie (trixie, trixie-updates,
# trixie-security) or bookworm-backports has: trixie's 1:10.0.13+ds-0+deb13u1
# when this was written.  bookworm-backports' 1:10.0.2+ds-2+deb13u1~bpo12+1
# is the same upstream series built for Debian 12; it can be asked for with
# VMB_QEMU_DEBIAN_VERSION if the mirror has its files.  Apt runs with a
# private configuration and state: the machine's own stays untouched.
#
# Cache: ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-source/<version
# without epoch>/.  A cached source is reused without asking the archive:
# the one of VMB_QEMU_DEBIAN_VERSION if given, else the newest cached one.
#
# Environment:
#   VMB_CACHE_DIR            cache root (see above)
#   VMB_QEMU_DEBIAN_VERSION  this Debian version of qemu (e.g.
#                            1:10.0.13+ds-0+deb13u1); default: the newest
#                            10.0.x
#   VMB_QEMU_REFRESH=1       ask the archive for the newest version even if
#                            a cached source exists
#   VMB_DEBIAN_MIRROR, VMB_DEBIAN_SECURITY   archive URLs
set -euo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/qemu-source
want_version=${VMB_QEMU_DEBIAN_VERSION:-}
refresh=${VMB_QEMU_REFRESH:-0}
mirror=${VMB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${VMB_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
suites=(trixie trixie-updates bookworm-backports)
security_suite=trixie-security
series=10.0
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

log() { printf 'qemu/source.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The cached source of version $1 if given, else the newest one.
find_cached() {
	local dir dirs=()
	for dir in "$cache"/*/; do
		dir=${dir%/}
		[[ -r $dir/debian-version && -r $dir/base && -d $dir/git ]] && dirs+=("$dir")
	done
	pick_cached "${1:-}" "${dirs[@]}"
}

if [[ $refresh != 1 ]] && dir=$(find_cached "$want_version"); then
	printf '%s\n' "$dir"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ $refresh != 1 ]] && dir=$(find_cached "$want_version"); then
	printf '%s\n' "$dir"
	exit 0
fi
for stale in "$cache"/.fetch-*; do
	rm -rf -- "$stale"
done
work=$(mktemp -d "$cache/.fetch-XXXXXX")
trap 'rm -rf -- "$work"' EXIT

"$repo/tests/lib/need-packages" dpkg-dev git debian-archive-keyring >&2

apt_dir=$work/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" \
	"$apt_dir/parts"
{
	for suite in "${suites[@]}"; do
		echo "deb-src [signed-by=$keyring] $mirror $suite main"
	done
	echo "deb-src [signed-by=$keyring] $security $security_suite main"
} >"$apt_dir/sources.list"
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

log "reading the source lists of ${suites[*]} $security_suite"
apt-get "${apt_opts[@]}" -q update >"$work/apt.log" 2>&1 ||
	{ cat "$work/apt.log" >&2; die "apt-get update failed"; }

if [[ -z $want_version ]]; then
	want_version=$(apt-cache "${apt_opts[@]}" showsrc --only-source qemu |
		sed -n 's/^Version: //p' | { grep -E "^([0-9]+:)?${series//./\\.}[.+~]" || true; } |
		{
			best=
			while read -r v; do
				if [[ -z $best ]] || dpkg --compare-versions "$v" gt "$best"; then
					best=$v
				fi
			done
			printf '%s\n' "$best"
		})
	[[ -n $want_version ]] || die "no qemu $series source package found in ${suites[*]}"
fi
log "Debian qemu source version: $want_version"

if dir=$(find_cached "$want_version"); then
	printf '%s\n' "$dir"
	exit 0
fi

mkdir "$work/src"
log "fetching and unpacking qemu $want_version"
(cd "$work/src" && apt-get "${apt_opts[@]}" -q source --only-source \
	"qemu=$want_version") >"$work/source.log" 2>&1 ||
	{ tail -n 30 "$work/source.log" >&2; die "apt-get source failed"; }
srcdir=("$work"/src/qemu-*/)
((${#srcdir[@]} == 1)) || die "cannot find the unpacked qemu tree"
srcdir=${srcdir[0]%/}

log "recording the tree as a git commit"
out=$work/out
mkdir "$out"
git init -q --bare "$out/git"
export GIT_DIR=$out/git GIT_WORK_TREE=$srcdir GIT_INDEX_FILE=$work/index
export GIT_AUTHOR_NAME=Debian GIT_AUTHOR_EMAIL=debian-qemu@lists.debian.org
export GIT_COMMITTER_NAME=Debian GIT_COMMITTER_EMAIL=debian-qemu@lists.debian.org
export GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z'
# everything, whatever .gitignore files the tree carries
git add -A -f .
tree=$(git write-tree)
base=$(git commit-tree "$tree" -m "Debian qemu $want_version, as apt-get source unpacks it")
git update-ref refs/heads/debian "$base"
git symbolic-ref HEAD refs/heads/debian
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
printf '%s\n' "$want_version" >"$out/debian-version"
printf '%s\n' "$base" >"$out/base"

dest=$cache/${want_version#*:}
rm -rf -- "$dest"
mv -T -- "$out" "$dest"
log "cached in $dest"
printf '%s\n' "$dest"
