#!/bin/bash
# Build (or reuse) the test guest's disk image and print its path.
#
#     qemu-cloud/image/build.sh [--suite SUITE] [--variant VARIANT]
#                                       # last stdout line: .../disk.qcow2
#
# SUITE is the Debian release: bookworm (the default), bullseye, trixie or sid.
# The guest is that Debian shaped like Debian's genericcloud image
# (cloud-init, cloud kernel, GRUB, ssh). VARIANT `full` (the default) adds
# what most tests need inside (dkms, build-essential, the kernel's headers,
# stress-ng); `genericcloud` has none of those, as a user's fresh cloud
# guest has not, and gets them from apt like one (tests/guest/vmware.sh
# serves it a partial mirror); `secureboot` is `full` booted by UEFI with
# Secure Boot (`vm start --secure-boot`): Debian's signed shim, signed GRUB
# and signed cloud kernel, and mokutil. It is made
# from Debian's packages with mmdebstrap, as root, and needs no network
# inside the guest, ever.
#
# The disk is a real one: an MBR, GRUB's core image in the gap before the
# first partition, and one ext4 partition holding everything, /boot/grub
# included, so whatever the guest decides with update-grub is what boots next.
# The secureboot variant's disk is GPT: an EFI system partition (FAT, 63 MiB
# at 1 MiB) with shim as the removable-media loader EFI/BOOT/BOOTX64.EFI,
# MokManager and the signed GRUB beside it (and in EFI/debian), whose
# grub.cfg hands over to /boot/grub/grub.cfg on the ext4 root at 64 MiB.
# The guest does not mount the ESP: update-grub in the guest still decides
# what boots next.
#
# Images are cached in ${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/image/NAME-KEY/
# where NAME is SUITE (full) or SUITE-genericcloud, and KEY is the sha256 of
# this recipe (every file under qemu-cloud/image/), the suite and the variant. A cached image is reused at once. Building one keeps the
# three newest images of its own suite and never touches another suite's.
# Progress goes to stderr.
#
# Environment:
#   VMB_SUITE           the suite when --suite is not given (default bookworm)
#   VMB_IMAGE_VARIANT   the variant when --variant is not given (default full)
#   VMB_CACHE_DIR       cache root (default /var/cache/vmw-balloon-dkms)
#   VMB_DEBIAN_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#   VMB_IMAGE_REBUILD=1 build even if a cached image exists
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
say() { echo "image: $*" >&2; }

suite=${VMB_SUITE:-bookworm}
variant=${VMB_IMAGE_VARIANT:-full}
while (($#)); do
	case $1 in
	--suite) suite=${2:-} && shift 2 ;;
	--suite=*) suite=${1#--suite=} && shift ;;
	--variant) variant=${2:-} && shift 2 ;;
	--variant=*) variant=${1#--variant=} && shift ;;
	*) say "usage: $0 [--suite bullseye|bookworm|trixie|sid] [--variant full|genericcloud|secureboot]" && exit 2 ;;
	esac
done
case $suite in
bullseye | bookworm | trixie | sid) ;;
*) say "unknown suite '$suite' (bullseye, bookworm, trixie or sid)" && exit 2 ;;
esac
case $variant in
full) name=$suite ;;
genericcloud) name=$suite-genericcloud ;;
secureboot) name=$suite-secureboot ;;
*) say "unknown variant '$variant' (full, genericcloud or secureboot)" && exit 2 ;;
esac

# What goes into the guest.
disk_size_mib=8192 # virtual; the qcow2 holds only what is used
packages=(
	# a Debian cloud system
	systemd-sysv udev dbus iproute2 netbase
	linux-image-cloud-amd64 zstd
	cloud-init cloud-guest-utils fdisk openssh-server sudo
	kmod procps python3
)
if [[ $variant == secureboot ]]; then
	# UEFI with Secure Boot: shim signed by Microsoft, GRUB and the kernel
	# by Debian (linux-image-*-cloud-amd64 is the signed one)
	packages+=(grub-efi-amd64 grub-efi-amd64-signed shim-signed mokutil)
else
	packages+=(grub-pc)
fi
if [[ $variant == genericcloud ]]; then
	# Debian's cloud images install security updates by themselves
	packages+=(unattended-upgrades)
fi
if [[ $variant == full || $variant == secureboot ]]; then
	# what most tests use inside the guest
	packages+=(linux-headers-cloud-amd64 dkms build-essential stress-ng)
fi

# 1. The recipe's key: every file of the recipe, by path and content, and the suite.
key=$(cd "$here" && {
	find . -type f ! -name '*~' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
	echo "suite $suite"
	[[ $variant == full ]] || echo "variant $variant"
	[[ $variant != secureboot ]] || echo "disk gpt+esp 1"
} | sha256sum | cut -c1-16)
cache=${VMB_CACHE_DIR:-/var/cache/vmw-balloon-dkms}/image
image_dir=$cache/$name-$key
image=$image_dir/disk.qcow2

# 2. Reuse what is there.
if [[ -f $image && ${VMB_IMAGE_REBUILD:-0} != 1 ]]; then
	echo "$image"
	exit 0
fi

# 3. Build it, one builder per suite at a time (suites build side by side).
mkdir -p "$cache"
exec 9>"$cache/.lock-$name"
say "waiting for the $name image lock" && flock 9
if [[ -f $image && ${VMB_IMAGE_REBUILD:-0} != 1 ]]; then
	echo "$image" # another builder just made it
	exit 0
fi
if ((EUID != 0)); then
	say "building the image needs root (mmdebstrap, chroot)"
	exit 1
fi
"$repo/tests/lib/need-packages" mmdebstrap fdisk e2fsprogs qemu-utils util-linux
[[ $variant != secureboot ]] || "$repo/tests/lib/need-packages" dosfstools mtools

started=$SECONDS
work=$(mktemp -d "$cache/.build-$key.XXXXXX")
# --one-file-system: should mmdebstrap leave /proc or /dev mounted in the
# root, the host's own stay untouched
trap 'rm -rf --one-file-system "$work"' EXIT
uuid=$(cat /proc/sys/kernel/random/uuid)
mirror=${VMB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security
apt_options=(--aptopt='Acquire::Retries "3"')
if [[ $suite == sid ]]; then
	# sid has no -updates or -security, and its Release file here may be
	# older than its Valid-Until.
	sources=("deb $mirror sid main")
	apt_options+=(--aptopt='Acquire::Check-Valid-Until "false"')
elif [[ $suite == bullseye ]]; then
	# bullseye's LTS ended in August 2026, and bullseye-security here
	# names kernel packages its pool no longer has (404): the image takes
	# the last point release's kernel (5.10.223) from bullseye itself.
	sources=("deb $mirror bullseye main" "deb $mirror bullseye-updates main")
else
	sources=("deb $mirror $suite main" "deb $mirror $suite-updates main"
		"deb $security $suite-security main")
fi

say "bootstrapping Debian $suite into $work/root (a few minutes)"
mmdebstrap --mode=root --variant=minbase --format=directory "${apt_options[@]}" \
	--dpkgopt=force-unsafe-io \
	--include="$(
		IFS=,
		echo "${packages[*]}"
	)" \
	--customize-hook="'$here/customize.sh' \"\$1\" $uuid $variant" \
	"$suite" "$work/root" "${sources[@]}" >&2

# mmdebstrap leaves the host's name and resolver behind.
cp "$here/overlay/etc/hostname" "$work/root/etc/hostname"
echo "nameserver 10.0.2.3" >"$work/root/etc/resolv.conf"
kver=$(cat "$work/root/boot/.vmb-kernel-version")

raw=$work/disk.raw
truncate -s "${disk_size_mib}M" "$raw"
if [[ $variant == secureboot ]]; then
	say "making the disk: GPT, EFI system partition at 1 MiB, ext4 at 64 MiB"
	esp_mib=63
	root_start=$(((1 + esp_mib) * 2048))
	printf 'label: gpt\nstart=2048, size=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=ESP\nstart=%d, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root\n' \
		$((esp_mib * 2048)) $root_start | sfdisk -q "$raw" >&2
	esp=$work/esp.img
	# what shim's GRUB reads next to itself: on to the root's grub.cfg
	printf 'search --no-floppy --fs-uuid --set=root %s\nset prefix=($root)/boot/grub\nconfigfile $prefix/grub.cfg\n' \
		"$uuid" >"$work/esp-grub.cfg"
	mkfs.vfat -C -F 32 -n VMB-ESP "$esp" $((esp_mib * 1024)) >/dev/null
	mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/EFI/debian
	for dir in BOOT debian; do
		mcopy -i "$esp" "$work/root/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" "::/EFI/$dir/grubx64.efi"
		mcopy -i "$esp" "$work/root/usr/lib/shim/mmx64.efi.signed" "::/EFI/$dir/mmx64.efi"
		mcopy -i "$esp" "$work/esp-grub.cfg" "::/EFI/$dir/grub.cfg"
	done
	mcopy -i "$esp" "$work/root/usr/lib/shim/shimx64.efi.signed" ::/EFI/BOOT/BOOTX64.EFI
	mcopy -i "$esp" "$work/root/usr/lib/shim/shimx64.efi.signed" ::/EFI/debian/shimx64.efi
	dd if="$esp" of="$raw" bs=1M seek=1 conv=notrunc status=none
	rm -f "$esp"
	mkfs.ext4 -q -F -L vmb-root -U "$uuid" -d "$work/root" \
		-E offset=$((root_start * 512)),nodiscard,lazy_itable_init=0,lazy_journal_init=0 \
		"$raw" "$(((disk_size_mib - 1 - esp_mib - 1) * 1024))k" >&2
else
	say "making the disk: MBR, GRUB in the gap, ext4 at 1 MiB"
	echo 'label: dos
start=2048, type=83, bootable' | sfdisk -q "$raw" >&2
	mkfs.ext4 -q -F -L vmb-root -U "$uuid" -d "$work/root" \
		-E offset=$((2048 * 512)),nodiscard,lazy_itable_init=0,lazy_journal_init=0 \
		"$raw" "$(((disk_size_mib - 1) * 1024))k" >&2
	grub=$work/root/boot/grub/i386-pc
	dd if="$grub/boot.img" of="$raw" bs=446 count=1 conv=notrunc status=none
	core_bytes=$(stat -c %s "$grub/core.img")
	if ((core_bytes > 2047 * 512)); then
		say "GRUB core image ($core_bytes bytes) does not fit before the partition"
		exit 1
	fi
	dd if="$grub/core.img" of="$raw" bs=512 seek=1 conv=notrunc status=none
fi

say "converting to qcow2"
mkdir "$work/out"
qemu-img convert -f raw -O qcow2 "$raw" "$work/out/disk.qcow2"
rm -f "$raw"
echo "$kver" >"$work/out/kernel-version"
chroot "$work/root" dpkg-query -W -f='${Package} ${Version}\n' >"$work/out/packages.txt"
# What is installed, for apt on the host to work out what the guest lacks.
cp "$work/root/var/lib/dpkg/status" "$work/out/dpkg-status"
chmod 0444 "$work/out/disk.qcow2"

# 4. Into place atomically: a half-built image is never seen under $key.
rm -rf "$image_dir.old"
[[ -e $image_dir ]] && mv "$image_dir" "$image_dir.old"
mv "$work/out" "$image_dir"
rm -rf "$image_dir.old"
# Keep the three newest images of this suite and variant (other checkouts
# may use older recipes); other suites' and variants' are theirs to prune.
ls -1dt "$cache/$name"-????????????????/ | tail -n +4 | while read -r old; do
	say "pruning old image ${old%/}" && rm -rf "${old%/}"
done
say "built $name in $((SECONDS - started)) s: kernel $kver, $(du -h "$image" | cut -f1) on disk"
echo "$image"
