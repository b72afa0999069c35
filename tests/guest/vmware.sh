#!/bin/bash
# The package on a VMware-like guest, end to end, installed as an admin
# does: on a guest that starts as Debian's genericcloud image (no dkms,
# compiler or kernel headers), the project's signed repository added and
# `apt install vmw-balloon-dkms` by name, apt resolving its dependencies
# from a partial Debian mirror the host serves; the package names the
# running kernel's headers, and once they are installed DKMS builds for
# it; autoload through the DMI alias after a reboot, inflate and deflate as the
# host asks, a host reset, rmmod with a full balloon, and purge. Verdicts
# come from the guest and from the emulated host, never from this script.
#
#   tests/guest/vmware.sh [SUITE]    bookworm (default: $VMB_SUITE or
#                                    bookworm), bullseye, trixie or sid
#
# VMB_INSTALL=repository (the default on trixie and bookworm, where most
# users are) installs as above; VMB_INSTALL=file (the default on bullseye
# and sid, which saves the guest some minutes of apt under TCG) boots the
# full image, which has dkms, a compiler and the headers, and installs the
# .deb by its path.
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
use_suite "$@"
GUEST=${GUEST:-vmb-test-vmware-$suite}

install_mode=${VMB_INSTALL:-$([[ $suite == bookworm || $suite == trixie ]] && echo repository || echo file)}
case $install_mode in
repository)
	boot_genericcloud VMware-like
	learn_kernel_module
	check "genericcloud: the guest has no dkms, compiler or kernel headers" \
		guest "! command -v dkms && ! command -v gcc && test ! -e /lib/modules/$kver/build"

	# a. install by name from the repository; then the running kernel's
	# headers, which apt does not pick by itself (dkms recommends the
	# generic flavour's), and DKMS builds for the running kernel
	start=$SECONDS
	install_from_repository
	note "apt install vmw-balloon-dkms took $((SECONDS - start)) s"
	# what the package says to install, as an admin copies it
	# (apt's output, through ssh, ends some lines in a carriage return)
	headers=$(tr -d '\r' <<<"$apt_output" |
		sed -n 's/^vmw-balloon-dkms: .*, run: apt install \(linux-headers-.*\)$/\1/p' | tail -n 1)
	note "the package names: ${headers:-nothing}"
	check "install: the package names the running kernel's headers" \
		grep -qwE -- "linux-headers-$(ere "$kver")" <<<"$headers"
	# genericcloud runs the cloud flavour, from linux-image-cloud-amd64
	if [[ $kver == *-cloud-amd64 ]]; then
		check "install: ... and the cloud flavour's headers metapackage" \
			grep -qw -- "linux-headers-cloud-amd64" <<<"$headers"
	fi
	start=$SECONDS
	if guest "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y \
			${headers:-nothing-named} >/tmp/headers.log 2>&1"; then
		pass "install: apt installs what the package named"
	else
		fail "install: apt installs what the package named"
		guest tail -n 15 /tmp/headers.log | sed 's/^/#   | /'
	fi
	note "the headers and DKMS's build took $((SECONDS - start)) s"
	# trixie's dkms recommends no headers, bookworm's the generic flavour's
	if [[ $kver == *-cloud-amd64 && $suite != bookworm && $suite != bullseye ]]; then
		check "install: no generic-flavour headers (linux-headers-amd64) came with it" \
			guest "! dpkg-query -W -f '\${Status}' linux-headers-amd64 2>/dev/null | grep -q ' installed'"
	fi
	;;
file)
	boot_with_deb VMware-like
	learn_kernel_module
	# a. install: DKMS builds for the running kernel
	install_deb
	;;
*) bail "VMB_INSTALL is repository or file, not '$install_mode'" ;;
esac
check_dkms_installed install

# b. reboot: udev loads our module through the DMI alias; nothing here loads it
"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
check_autoloaded
check "autoload: taint shows an out-of-tree module" guest 'grep -q O /sys/module/vmw_balloon/taint'
check "autoload: udev matched the DMI alias to vmw_balloon" \
	guest 'modprobe -R "$(cat /sys/devices/virtual/dmi/id/modalias)" | grep -qx vmw_balloon'
# the driver's first cycle (START, GUEST_ID) runs after the module loaded
check "autoload: the host granted 0x2e at START" wait_for 30 eval '[[ $(host_get x-granted-capabilities) == 46 ]]'
check "autoload: the host was told the guest is Linux" wait_for 30 eval '[[ $(host_get x-guest-id) == 1 ]]'
check "autoload: the driver uses 0x2e" wait_for 30 eval '[[ $(guest_stat "used capabilities") == 0x2e ]]'

# driver_at FRAMES: the driver's own count is FRAMES. The host's count
# moves first (the driver counts a page once the host answered), so a
# check on the driver after one on the host waits for it.
driver_at() {
	[[ $(guest_stat current) == "$1" ]]
}

# c. inflate: 1 GiB of the 2 GiB guest
dirty_guest_memory
avail0=$(guest_meminfo MemAvailable)
rss0=$(qemu_rss_kib)
inflated0=$(guest_vmstat balloon_inflate)
deflated0=$(guest_vmstat balloon_deflate)
note "before: MemAvailable $avail0 KiB, QEMU RSS $rss0 KiB," \
	"vmstat balloon_inflate ${inflated0:-none} balloon_deflate ${deflated0:-none}"
check "vmstat: the kernel has balloon_inflate and balloon_deflate" \
	test -n "$inflated0" -a -n "$deflated0"
balloon_keep 1024
want=$((1024 * 1024 / 4))
start=$SECONDS
check "inflate: the host holds $want frames within 30 s" wait_for 30 host_locked_is "$want"
note "inflated in $((SECONDS - start)) s"
check "inflate: the driver's debugfs current agrees" wait_for 30 driver_at "$want"
inflated1=$(guest_vmstat balloon_inflate)
check_range "inflate: vmstat balloon_inflate grew by at least the $want frames" \
	$((${inflated1:-0} - ${inflated0:-0})) "$want" $((1 << 62))
# Kernels with NR_BALLOON_PAGES (6.15) show "Balloon:" in /proc/meminfo:
# the whole balloon, its 2 MiB pages included.
ballooned_kib=$(guest_meminfo Balloon)
if [[ -n $ballooned_kib ]]; then
	check_eq "inflate: /proc/meminfo Balloon: is the whole balloon (KiB)" "$ballooned_kib" $((want * 4))
else
	skip "inflate: /proc/meminfo Balloon: is the whole balloon" "this kernel ($kver) has no Balloon: line in /proc/meminfo"
fi
avail1=$(guest_meminfo MemAvailable)
rss1=$(qemu_rss_kib)
note "after: MemAvailable $avail1 KiB, QEMU RSS $rss1 KiB, 2M entries $(host_get x-locked-2m)"
check_range "inflate: guest MemAvailable fell by about 1 GiB (KiB)" $((avail0 - avail1)) 943718 1153433
check_range "inflate: QEMU RSS fell by at least 0.95 GiB (KiB)" $((rss0 - rss1)) 996148 4194304
check_eq "inflate: query-balloon reports 1 GiB actual" \
	"$("$vm" qmp "$GUEST" query-balloon | python3 -c 'import json,sys; print(json.load(sys.stdin)["actual"])')" \
	$((1024 * 1024 * 1024))

# A host reset: the driver frees every page without UNLOCK, starts again
# and balloons back to the target.
# shellcheck disable=SC2034 # read by the eval below
resets=$(guest_stat reset) sent0=$(host_get x-resets-sent)
unlocks=$(( $(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock) ))
host_set x-reset-next true
# the RESET makes the host forget every lock: once it was sent, the
# balloon is back only when the driver has locked it all again
check "reset: the host sent RESET" wait_for 10 eval '(( $(host_get x-resets-sent) > sent0 ))'
check "reset: the balloon is back at $want frames" wait_for 60 host_locked_is "$want"
check "reset: the driver counted a reset" wait_for 30 eval '(( $(guest_stat reset) > resets ))'
check_eq "reset: no UNLOCK was sent for the forgotten pages" \
	$(( $(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock) )) "$unlocks"

# The kernel's 4 KiB paths: a host without 2 MiB pages (batched 4 KiB
# pages), then one with the basic commands only (one LOCK or UNLOCK per
# page). The host offers less, sends a reset, and the driver asks again.
for caps in 0x26 0x02; do
	lock_cmd=$([[ $caps == 0x26 ]] && echo batch-lock || echo lock)
	unlock_cmd=$([[ $caps == 0x26 ]] && echo batch-unlock || echo unlock)
	# shellcheck disable=SC2034 # read by the eval below
	locks=$(host_get "x-calls-$lock_cmd")
	unlocks=$(host_get "x-calls-$unlock_cmd")
	resets=$(guest_stat reset)
	host_set x-offered-capabilities $((caps))
	host_set x-reset-next true
	check "caps $caps: the driver starts again with $caps" \
		wait_for 30 eval '(( $(guest_stat reset) > resets && $(guest_stat "used capabilities") == caps ))'
	check "caps $caps: the balloon is back at $want frames" wait_for 180 host_locked_is "$want"
	check_eq "caps $caps: no 2 MiB entry locked" "$(host_get x-locked-2m)" 0
	check "caps $caps: inflated with $lock_cmd" eval '(( $(host_get x-calls-$lock_cmd) > locks ))'
	balloon_keep 1536
	check "caps $caps: deflates to $((want / 2)) frames" wait_for 180 host_locked_is $((want / 2))
	check "caps $caps: deflated with $unlock_cmd" eval '(( $(host_get x-calls-$unlock_cmd) > unlocks ))'
	check "caps $caps: the driver's debugfs current agrees" wait_for 30 driver_at $((want / 2))
	balloon_keep 1024
done
# Compaction moves ballooned 4 KiB pages (2 MiB ones are not movable).
# With a host that offers no 2 MiB pages, the balloon grows into holes
# left all over the guest's memory (every other 2 MiB file of a tmpfs),
# then the rest of the tmpfs goes and the kernel compacts all memory: it
# must move ballooned pages out of the way. Every move is an UNLOCK of the
# old page and a LOCK of the new one, so the host keeps holding exactly
# the driver's balloon.
# shellcheck disable=SC2034 # read by the eval below
resets=$(guest_stat reset)
host_set x-offered-capabilities $((0x26))
host_set x-reset-next true
check "compaction: setup: the driver starts again with 0x26" \
	wait_for 60 eval '(( $(guest_stat reset) > resets && $(guest_stat "used capabilities") == 0x26 ))'
# balloon_into_holes WHAT: an empty balloon refilled to the target through
# The kernel's balloon accounting against the driver's own count, read in
# one go in the guest: vmstat's balloon_inflate - balloon_deflate (4 KiB
# pages since boot, both page sizes) is the balloon's size in frames.
# Tens of thousands of migrations, refused ones among them, pass through
# the kernel's accounting and the driver's workarounds for it (compat.h);
# any drift shows here.
vmstat_balance_is_balloon() {
	local out
	out=$(guest "awk '\$1 == \"balloon_inflate\" {i = \$2} \$1 == \"balloon_deflate\" {d = \$2}
		END {print i - d}' /proc/vmstat; awk -F: '\$1 ~ /^current *\$/ {print \$2 + 0}' /sys/kernel/debug/vmmemctl")
	note "$1: vmstat inflate - deflate, driver's current: $(echo $out)"
	check_eq "$1: vmstat balloon_inflate - balloon_deflate is the driver's balloon (frames)" \
		"$(sed -n 1p <<<"$out")" "$(sed -n 2p <<<"$out")"
}

# memory that is fragmented, which is then freed around it
balloon_into_holes() {
	balloon_keep 2048
	check "$1: setup: the balloon empties" wait_for 120 host_locked_is 0
	check "$1: setup: the guest fills a tmpfs with 2 MiB files and removes every other one" \
		guest 'mkdir -p /mnt/holes && mount -t tmpfs -o size=1G none /mnt/holes &&
		for i in $(seq 100 399); do head -c 2M /dev/zero >/mnt/holes/$i; done &&
		rm -f /mnt/holes/*[02468]'
	balloon_keep 1024
	check "$1: setup: the 4 KiB balloon refills to $want frames among the holes" \
		wait_for 180 eval 'host_locked_is "$want" && driver_at "$want"'
	guest 'umount /mnt/holes; sync; echo 3 > /proc/sys/vm/drop_caches'
}
balloon_into_holes compaction
migrated0=$(guest_vmstat balloon_migrate)
locks0=$(host_get x-calls-batch-lock)
unlocks0=$(host_get x-calls-batch-unlock)
guest 'echo 1 > /proc/sys/vm/compact_memory'
migrated=$(( $(guest_vmstat balloon_migrate) - migrated0 ))
note "compaction migrated $migrated ballooned pages"
check_range "compaction: the kernel migrated ballooned pages" "$migrated" 1 "$want"
check "compaction: the host saw an UNLOCK and a LOCK for every move" eval \
	'(( $(host_get x-calls-batch-unlock) - unlocks0 >= migrated && $(host_get x-calls-batch-lock) - locks0 >= migrated ))'
check_eq "compaction: the host holds the driver's balloon" "$(host_get x-locked-frames)" "$(guest_stat current)"
check_eq "compaction: ... which is still the target" "$(guest_stat current)" "$want"
vmstat_balance_is_balloon compaction
# Again, the host refusing every page while the kernel compacts: a move
# whose new page is refused deflates the old page only (the path upstream
# fixed in 6.18); the driver counts one 4 KiB page freed, and the worker
# tops the balloon up again once the host takes pages again. Every page,
# not some: the worker locks pages too meanwhile (the balloon fell below
# its target), and which requests a partial refusal hits would depend on
# who comes first.
balloon_into_holes "compaction with refusals"
frees_4k() { guest "awk -F: '/^free +\\(4k\\)/ {print \$2 + 0}' /sys/kernel/debug/vmmemctl"; }
frees0=$(frees_4k)
refused0=$(host_get x-refused-frames)
host_set x-refuse-every 1
guest 'echo 1 > /proc/sys/vm/compact_memory'
host_set x-refuse-every 0
refused=$(( $(host_get x-refused-frames) - refused0 ))
freed=$(( $(frees_4k) - frees0 ))
note "compaction with refusals: the host refused $refused pages, the driver freed $freed 4 KiB pages"
check_range "compaction with refusals: moves lost their new page" "$freed" 1 "$refused"
check "compaction with refusals: the balloon is back at $want frames, host and driver agreeing" \
	wait_for 60 eval 'host_locked_is "$want" && [[ $(guest_stat current) == "$want" ]]'
if [[ -n $ballooned_kib ]]; then
	check_eq "compaction with refusals: /proc/meminfo Balloon: is still the whole balloon (KiB)" \
		"$(guest_meminfo Balloon)" $((want * 4))
else
	skip "compaction with refusals: /proc/meminfo Balloon: is still the whole balloon" "no Balloon: line"
fi
vmstat_balance_is_balloon "compaction with refusals"

host_set x-offered-capabilities $((0x2e))
host_set x-reset-next true
check "caps 0x2e again: back at $want frames" wait_for 60 eval \
	'(( $(guest_stat "used capabilities") == 0x2e )) && host_locked_is "$want"'

# avail_settled WHAT: set avail_now to MemAvailable once it is back
# above avail_floor, waiting at most 60 s; the check's range decides.
# Read at once after a 1 GiB deflation, trixie's 6.12 once showed 80 MiB
# missing. Freed pages that sit in the per-CPU lists are not counted, and
# since 6.7 those lists grow under bulk frees: the note says how full
# they were.
avail_floor=$((avail0 - 65536))
avail_is_back() {
	avail_now=$(guest_meminfo MemAvailable)
	((avail_now >= avail_floor))
}
avail_settled() {
	local pcp
	pcp=$(guest "awk '\$1 == \"count:\" {n += \$2} END {print n}' /proc/zoneinfo")
	note "$1: $((pcp * 4)) KiB in the per-CPU page lists at first"
	wait_for 60 avail_is_back || true
}

# d. deflate to 0
deflated1=$(guest_vmstat balloon_deflate)
balloon_keep 2048
check "deflate: the host holds no frame within 30 s" wait_for 30 host_locked_is 0
check "deflate: the driver's debugfs current is 0" wait_for 30 driver_at 0
check_nothing_held deflate
deflated2=$(guest_vmstat balloon_deflate)
check_range "deflate: vmstat balloon_deflate grew by at least the $want frames" \
	$((${deflated2:-0} - ${deflated1:-0})) "$want" $((1 << 62))
vmstat_balance_is_balloon deflate
avail_settled deflate
check_range "deflate: the guest's memory is back (MemAvailable KiB)" "$avail_now" "$avail_floor" $((avail0 + 1048576))

# e. rmmod with a full balloon, then modprobe
balloon_keep 1024
check "rmmod: setup: the balloon is full again ($want frames, host and driver)" \
	wait_for 60 eval 'host_locked_is "$want" && driver_at "$want"'
# shellcheck disable=SC2034 # read by the eval below
starts0=$(host_get x-start-zero)
check "rmmod: vmw_balloon unloads with a full balloon" guest rmmod vmw_balloon
check "rmmod: the host saw START(0)" eval '(( $(host_get x-start-zero) > starts0 ))'
check_eq "rmmod: the host dropped its locks" "$(host_get x-locked-frames)" 0
avail_settled rmmod
check_range "rmmod: the guest's memory is back (MemAvailable KiB)" "$avail_now" "$avail_floor" $((avail0 + 1048576))
check "modprobe: vmw_balloon loads again" guest modprobe vmw_balloon
check "modprobe: it balloons again to $want frames" wait_for 60 host_locked_is "$want"
balloon_keep 2048
check "modprobe: and deflates to 0" wait_for 30 eval 'host_locked_is 0 && driver_at 0'

# f. module signatures enforced on this BIOS guest (no Secure Boot, so no
# machine owner key: the kernel trusts only its own build key). The switch
# can be turned on at run time, never off: the same as booting with
# module.sig_enforce=1. DKMS's module, signed by DKMS's key or not at all,
# is refused; the package's install rule loads the kernel's own instead.
balloon_keep 2048
check "sig_enforce: setup: the balloon is empty" wait_for 30 eval 'host_locked_is 0 && driver_at 0'
check "sig_enforce: setup: enforcement on, DKMS's module unloaded" \
	guest 'echo Y > /sys/module/module/parameters/sig_enforce && rmmod vmw_balloon &&
		grep -qx Y /sys/module/module/parameters/sig_enforce'
check "sig_enforce: modprobe vmw_balloon succeeds" guest modprobe vmw_balloon
check "sig_enforce: the loaded vmw_balloon is the kernel's own" \
	guest 'test -d /sys/module/vmw_balloon && test ! -e /sys/module/vmw_balloon/version &&
		! grep -q O /sys/module/vmw_balloon/taint'
journal=$(guest journalctl -b -o cat -t vmw-balloon-dkms)
sed 's/^/#   journal | /' <<<"$journal" | tail -n 4
check "sig_enforce: the journal says the kernel refused DKMS's module and what was loaded instead" \
	grep -qE "the kernel refused DKMS's vmw_balloon $(ere "$version") .*: loaded the kernel's own vmw_balloon instead" <<<"$journal"
balloon_keep 1024
check "sig_enforce: the kernel's own driver balloons $want frames" wait_for 120 host_locked_is "$want"
balloon_keep 2048
check "sig_enforce: and back to 0" wait_for 120 host_locked_is 0

# h. the guest kernel's log
check_dmesg_clean "VMware guest"

# g. purge: the kernel's own module is back
guest "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 purge -y vmw-balloon-dkms" >&2
check_eq "purge: dkms knows no vmw_balloon" "$(guest dkms status vmw_balloon)" ""
check_eq "purge: modinfo -n is the kernel's own module again" "$(guest modinfo -n vmw_balloon)" "$intree"
check "purge: the kernel's own module file is there" guest test -f "$intree"
check "purge: the kernel's own vmw_balloon loads in place of DKMS's" \
	guest "rmmod vmw_balloon && modprobe vmw_balloon && test ! -e /sys/module/vmw_balloon/version &&
		! grep -q O /sys/module/vmw_balloon/taint"

finish
