#!/bin/bash
# Shape a freshly bootstrapped Debian root into the test guest.
#
# Called by build.sh as mmdebstrap's customize hook, so /proc, /sys and /dev
# are mounted inside the root and `chroot` works:
#
#     customize.sh ROOT ROOT_FS_UUID VARIANT
#
# It lays our files over the root, trims what slows a boot under TCG, and
# prepares GRUB the way grub-install would have (modules under /boot/grub,
# a core image, a grub.cfg), since grub-install cannot see our disk.
set -euo pipefail

root=$1
uuid=$2
variant=$3 # full, secureboot: the kernel's headers must be there; genericcloud: none
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { echo "customize: $*" >&2; }
in_root() { chroot "$root" "$@"; }

say "laying overlay/ over the root"
cp -a --no-preserve=ownership "$here/overlay/." "$root/"

say "the root file system is found by UUID"
cat >"$root/etc/fstab" <<EOF
UUID=$uuid / ext4 errors=remount-ro 0 1
EOF

say "one kernel, and (full) its matching headers"
mapfile -t kernels < <(cd "$root/boot" && ls vmlinuz-* | sed 's/^vmlinuz-//')
if ((${#kernels[@]} != 1)); then
	say "expected exactly one kernel in /boot, found: ${kernels[*]:-none}"
	exit 1
fi
kver=${kernels[0]}
if [[ $variant != genericcloud ]] &&
	! in_root dpkg-query -W -f='${Status}\n' "linux-headers-$kver" | grep -q 'install ok installed'; then
	say "linux-headers-$kver is not installed"
	exit 1
fi
echo "$kver" >"$root/boot/.vmb-kernel-version"

say "a small initramfs (overlay/etc/initramfs-tools)"
in_root update-initramfs -u -k "$kver" >&2

# cloud-init up to 24.x (bookworm): the network stage alone finds the
# NoCloud seed; the local stage exists to configure networking before it
# comes up, which our guest leaves to systemd-networkd, and would cost one
# more Python start-up. From 24.3 on (trixie, sid) one main process,
# cloud-init-main.service, runs the stages in order, each when its unit
# signals it over a socket: without the local stage's unit it waits forever
# at the first, so there that unit must stay.
unneeded=()
if [[ ! -e $root/usr/lib/systemd/system/cloud-init-main.service &&
	! -e $root/lib/systemd/system/cloud-init-main.service ]]; then
	unneeded+=(cloud-init-local.service)
fi
# genericcloud keeps what touches dpkg on Debian's genericcloud image: apt's
# daily timers (apt-daily-upgrade runs unattended-upgrades) and the dpkg
# database backup, so that a first boot there meets apt's locks as a real
# one may; the images the other tests use mask them, so that no apt run
# of their own starts in the middle of a test.
if [[ $variant != genericcloud ]]; then
	unneeded+=(apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer)
fi
say "services: networkd on, nothing that waits for or reaches the network"
in_root systemctl enable systemd-networkd.service >/dev/null 2>&1
in_root systemctl mask "${unneeded[@]}" \
	systemd-binfmt.service \
	systemd-networkd-wait-online.service \
	man-db.timer e2scrub_all.timer e2scrub_reap.service \
	fstrim.timer logrotate.timer \
	>/dev/null 2>&1

say "a fresh machine-id on every guest's first boot"
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"

if [[ $variant == secureboot ]]; then
	# The signed GRUB on the ESP (build.sh) carries its modules inside and
	# reads /boot/grub/grub.cfg; nothing to prepare here.
	part=part_gpt
else
	part=part_msdos
	say "GRUB: modules under /boot/grub, core image, grub.cfg"
	# grub-pc upgrades inside the guest may reinstall GRUB to the virtio disk.
	echo "grub-pc grub-pc/install_devices multiselect /dev/vda" | in_root debconf-set-selections
	mkdir -p "$root/boot/grub/i386-pc"
	cp "$root"/usr/lib/grub/i386-pc/*.mod "$root"/usr/lib/grub/i386-pc/*.lst "$root/boot/grub/i386-pc/"
	# The core image first looks for our root file system by UUID and falls back
	# to the first partition of the boot disk.
	cat >"$root/boot/grub/i386-pc/vmb-early.cfg" <<EOF
search --no-floppy --fs-uuid --set=root $uuid
set prefix=(\$root)/boot/grub
EOF
	in_root grub-mkimage -O i386-pc \
		-o /boot/grub/i386-pc/core.img \
		-p '(hd0,msdos1)/boot/grub' \
		-c /boot/grub/i386-pc/vmb-early.cfg \
		biosdisk part_msdos ext2 normal linux serial terminal \
		search search_fs_uuid search_label configfile echo
	cp "$root/usr/lib/grub/i386-pc/boot.img" "$root/boot/grub/i386-pc/boot.img"
fi

# What update-grub writes inside the guest looks much the same; until the
# guest runs it, this boots the one kernel we installed.
. "$root/etc/default/grub.d/50-vmb.cfg"
cat >"$root/boot/grub/grub.cfg" <<EOF
# Written by qemu-cloud/image/customize.sh; update-grub in the guest replaces it.
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=$GRUB_TIMEOUT
insmod $part
insmod ext2
search --no-floppy --fs-uuid --set=root $uuid
menuentry 'Debian GNU/Linux' {
	linux /boot/vmlinuz-$kver root=UUID=$uuid ro $GRUB_CMDLINE_LINUX
	initrd /boot/initrd.img-$kver
}
EOF

# build.sh installs with dpkg's force-unsafe-io (no fsync while a root
# that is thrown away on failure is made); the guest's dpkg syncs as usual.
rm -f "$root/etc/dpkg/dpkg.cfg.d/99mmdebstrap"

say "done: kernel $kver"
