#!/bin/bash
# Build, or reuse from the cache, a debug kernel for the test guests:
# trixie's linux-source-6.12 with Debian's cloud-amd64 config plus
# debug.config (KASAN, lockdep, DEBUG_ATOMIC_SLEEP, DEBUG_PAGEALLOC,
# PAGE_OWNER, ...) and only the modules the test guests load
# (guest-modules), packaged by `make bindeb-pkg` as linux-image and
# linux-headers .debs, so that DKMS in a trixie guest builds against it.
# It builds in a trixie root (tests/matrix/make-root), with trixie's
# compiler, the one the guest's DKMS builds modules with.
#
#     qemu-cloud/kernel/build.sh     # last stdout line: the folder of .debs
#
# Cache: ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/kernel/<key>/ where
# <key> is the sha256 of this folder's files, tests/matrix/make-root and
# the versions of linux-source-6.12 and of the cloud headers it takes its
# config from. Progress goes to stderr; the full log to build.log beside
# the .debs (or last-failed-build.log in the cache).
#
# Environment: VMB_CACHE_DIR, VMB_DEBIAN_MIRROR, VMB_BUILD_JOBS (default nproc),
# VMB_KERNEL_NICE (default 19: a long build yields to the guests it runs beside)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/kernel
mirror=${VMB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security
jobs=${VMB_BUILD_JOBS:-$(nproc)}
nice_level=${VMB_KERNEL_NICE:-19}
say() { echo "kernel/build.sh: $*" >&2; }
die() { say "error: $*" && exit 1; }

"$repo/tests/lib/need-packages" mmdebstrap debian-archive-keyring apt util-linux >&2

# The versions the key depends on, asked of trixie's package lists through
# a private apt configuration.
apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts"
cat >"$apt_dir/sources.list" <<SOURCES
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $security trixie-security main
SOURCES
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=$apt_dir/parts"
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Etc::Preferences=/dev/null"
	-o "Dir::Etc::PreferencesParts=$apt_dir/parts" -o "Dir::State::status=/dev/null"
	-o "APT::Architecture=amd64" -o "APT::Sandbox::User=root" -o "Acquire::Languages=none")
apt-get "${apt_opts[@]}" -q update >"$apt_dir/update.log" 2>&1 ||
	{ cat "$apt_dir/update.log" >&2 && die "apt-get update failed"; }
candidate() { apt-cache "${apt_opts[@]}" policy "$1" | sed -n 's/^  Candidate: //p'; }
source_version=$(candidate linux-source-6.12)
config_version=$(candidate linux-headers-cloud-amd64)
[[ -n $source_version && $source_version != "(none)" ]] || die "trixie has no linux-source-6.12"

key=$( (cd "$here" && sha256sum build.sh debug.config guest-modules
	sha256sum <"$repo/tests/matrix/make-root"
	echo "$source_version $config_version") | sha256sum | cut -c1-16)
dest=$cache/$source_version-$key
if [[ -f $dest/.complete ]]; then
	echo "$dest"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
[[ -f $dest/.complete ]] && { echo "$dest" && exit 0; }
find "$cache" -maxdepth 1 -name '.build-*' -exec rm -rf --one-file-system {} +
work=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf --one-file-system "$work" "$apt_dir"' EXIT
log=$work/build.log
started=$SECONDS

say "making a trixie root with linux-source $source_version (log: $log)"
"$repo/tests/matrix/make-root" "$work/root" trixie \
	"linux-source-6.12,linux-headers-cloud-amd64,build-essential,bc,bison,flex,libelf-dev,libssl-dev,cpio,kmod,rsync,python3,xz-utils,zstd,dpkg-dev,debhelper,openssl,perl" \
	"" "deb $mirror trixie main" "deb $mirror trixie-updates main" "deb $security trixie-security main" \
	>>"$log" 2>&1 || { tail -n 30 "$log" >&2 && die "cannot make the trixie root"; }

say "configuring: the cloud config plus debug.config"
cp "$here/debug.config" "$work/root/debug.config"
cp "$here/guest-modules" "$work/root/guest-modules"
cat >"$work/root/build-kernel" <<'SCRIPT'
#!/bin/bash
set -euo pipefail
jobs=$1
mkdir -p /build && cd /build
tar -xaf /usr/src/linux-source-6.12.tar.xz
cd linux-source-6.12
cp "$(ls -d /usr/src/linux-headers-*-cloud-amd64 | sort -V | tail -n 1)/.config" .config
# fragment lines CONFIG_X=y|n|"string": each replaces what the cloud
# config says of X
while IFS= read -r line; do
	[[ $line =~ ^CONFIG_([A-Z0-9_]+)=(.*)$ ]] || continue
	name=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
	sed -i -e "/^CONFIG_$name=/d" -e "/^# CONFIG_$name is not set$/d" .config
	if [[ $value == n ]]; then
		echo "# CONFIG_$name is not set" >>.config
	else
		echo "CONFIG_$name=$value" >>.config
	fi
done </debug.config
make olddefconfig
# Modules: only those the test guests load (guest-modules, in lsmod's
# format, read from VMware-like and plain-PC guests), and what they need;
# the cloud config's other 1100 or so would triple the build's time
# (yes dies of SIGPIPE when make stops reading: not a failure)
{ yes '' || true; } | make LSMOD=/guest-modules localmodconfig
make olddefconfig
# every line of the fragment must have held after olddefconfig
bad=0
while IFS= read -r line; do
	[[ $line =~ ^CONFIG_([A-Z0-9_]+)=(.*)$ ]] || continue
	name=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
	if [[ $value == n ]]; then
		! grep -q "^CONFIG_$name=" .config || { echo "config: CONFIG_$name did not stay off" && bad=1; }
	elif [[ $value == '""' ]]; then # empty, or gone with what it depends on
		! grep -q "^CONFIG_$name=\"[^\"]" .config || { echo "config: CONFIG_$name did not stay empty" && bad=1; }
	else
		grep -qxF "CONFIG_$name=$value" .config || { echo "config: CONFIG_$name=$value did not hold" && bad=1; }
	fi
done </debug.config
((bad == 0))
make -j"$jobs" bindeb-pkg KDEB_SOURCENAME=linux-vmbdebug
SCRIPT
chmod +x "$work/root/build-kernel"

say "building with $jobs jobs at nice $nice_level (an hour or more on 2 cores)"
mount --bind /proc "$work/root/proc" && mount --bind /dev "$work/root/dev"
rc=0
nice -n "$nice_level" chroot "$work/root" /build-kernel "$jobs" >>"$log" 2>&1 || rc=$?
umount "$work/root/proc" "$work/root/dev"
if ((rc != 0)); then
	tail -n 40 "$log" >&2
	cp "$log" "$cache/last-failed-build.log"
	die "the kernel build failed (full log: $cache/last-failed-build.log)"
fi

mkdir "$work/out"
mv "$work"/root/build/linux-image-*.deb "$work"/root/build/linux-headers-*.deb "$work/out/"
rm -f "$work"/out/*-dbg_*.deb
cp "$log" "$work/out/build.log"
echo "$source_version (config of linux-headers-cloud-amd64 $config_version), built in $((SECONDS - started)) s" \
	>"$work/out/BUILD-INFO"
touch "$work/out/.complete"
rm -rf "$dest"
mv "$work/out" "$dest"
say "built in $((SECONDS - started)) s: $dest"
echo "$dest"
