#!/bin/bash
# The driver under the kernel's own checkers. A trixie guest boots the debug
# kernel of qemu-cloud/kernel/build.sh (trixie's 6.12 with KASAN, lockdep,
# DEBUG_ATOMIC_SLEEP, DEBUG_PAGEALLOC, PAGE_OWNER, ...), the package's DKMS
# builds against its headers, and the driver goes through the cases where
# its locking and page handling are most at risk: both page sizes, a reset
# storm, rmmod/modprobe cycles with 1 GiB of 4 KiB pages ballooned while
# the guest compacts memory in a loop, memory pressure, suspend to RAM,
# and unload while a migration of a ballooned page is parked across it
# (the driver's fault point, in a test build).
# Verdicts: the kernel log has no KASAN, lockdep, sleeping-in-atomic, BUG
# or WARNING report from the moment the package went in, and once the
# balloon has deflated page_owner lists not one page whose allocation
# passed through vmw_balloon (checked to find the balloon's pages while it
# is full, so that a count of 0 means something).
#
#   tests/guest/debug-kernel.sh     VMB_DEBUG_RELOADS cycles (default 200)
#
# It needs the debug kernel's .debs: built here on first use (an hour or
# more on 2 cores, then cached).
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
suite=trixie
GUEST=${GUEST:-vmb-test-debug-kernel}
reloads=${VMB_DEBUG_RELOADS:-200}
mib=256 # frames in a MiB
gib=$((1024 * mib))

kdebs=$("$root/qemu-cloud/kernel/build.sh" | tail -n 1) || bail "no debug kernel (qemu-cloud/kernel/build.sh failed)"
dk=$(find "$kdebs" -name 'linux-image-*-vmbdebug_*.deb' ! -name '*-dbg_*' -printf '%f\n' |
	sed 's/^linux-image-\([^_]*\)_.*/\1/')
[[ $dk == *-vmbdebug ]] || bail "expected one -vmbdebug linux-image in $kdebs, found '$dk'"
note "the debug kernel: $dk, from $kdebs"
hand_in_as debug-kernel "$kdebs"

boot_with_deb VMware-like --s3 --file "$handed/debug-kernel" --timeout 1200

# The debug kernel becomes the default by name (trixie's own 6.12 may sort
# above it) and boots with page_owner on, and with the console kept through
# suspend so that a resume that hangs says where.
out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		/opt/vmb/debug-kernel/linux-image-${dk}_*.deb /opt/vmb/debug-kernel/linux-headers-${dk}_*.deb 2>&1 &&
	printf '%s\n' 'GRUB_DEFAULT=\"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux $dk\"' \
		'GRUB_CMDLINE_LINUX=\"\$GRUB_CMDLINE_LINUX page_owner=on no_console_suspend\"' >/etc/default/grub.d/90-vmb-debug.cfg &&
	update-grub 2>&1")
rc=$?
sed 's/^/#   | /' <<<"$out" | grep -Ei 'error|warning|vmbdebug' | head -n 20
check_eq "setup: the debug kernel and its headers install" "$rc" 0
# the debug kernel's own module, learnt before DKMS (3.1 and later) moves
# it away on install
kver=$dk
learn_kernel_module
# The package goes in while trixie's own kernel still runs: DKMS builds
# for it and for the debug kernel (the newest), without KASAN slowing the
# compiler down (over 30 minutes under the debug kernel).
guest_timeout=3600 install_deb
# the fault points' test build for the debug kernel, for part 7
guest_timeout=3600 build_test_hooks "$dk"
"$vm" reboot "$GUEST" --timeout 1200 >&2 || bail "the guest did not come back in the debug kernel"
kver=$(guest uname -r)
check_eq "setup: the guest runs the debug kernel" "$kver" "$dk"
check "setup: KASAN, lockdep and page_owner are on" guest \
	"grep -q page_owner=on /proc/cmdline && test -r /sys/kernel/debug/page_owner_stacks/show_stacks &&
	 grep -q 'kasan' /proc/kallsyms && test -e /proc/lockdep"

check_dkms_installed "debug kernel"
# DKMS's module autoloaded at boot: loaded again after the mark, so that
# its load is checked too
guest 'rmmod vmw_balloon; modprobe vmw_balloon' ||
	bail "DKMS's vmw_balloon does not load on the debug kernel"
check_eq "setup: DKMS's module is the one loaded" "$(guest cat /sys/module/vmw_balloon/srcversion)" \
	"$(guest modinfo -F srcversion "$moddir/updates/dkms/vmw_balloon$ko")"
mark=$(guest 'dmesg | wc -l')

# reports: what the checkers said since the package was loaded
reports() {
	guest "dmesg | tail -n +$((mark + 1))" |
		grep -E 'BUG|WARNING|KASAN|lockdep|circular locking|inconsistent lock|sleeping function|Oops|Call Trace|soft lockup|hung task' || true
}
check_reports() {
	local bad
	bad=$(reports)
	check_eq "$1: no KASAN, lockdep, sleeping-in-atomic, BUG or WARNING report" "$bad" ""
	[[ -z $bad ]] || sed 's/^/#   /' <<<"$bad" | head -n 40
}
# KASAN, lockdep and DEBUG_PAGEALLOC under TCG: every wait is longer
fill_seconds=600

# 1. both page sizes
use_caps 0x2e
fill "2 MiB pages" "$gib"
fill "2 MiB pages, deflated" 0
use_caps 0x26
fill "4 KiB pages" "$gib"
fill "4 KiB pages, deflated" 0
check_reports "inflate and deflate"

# 2. a reset on every 7th command while the target moves
use_caps 0x2e
host_set x-reset-every 7
for t in $((512 * mib)) $((64 * mib)) "$gib" $((256 * mib)); do
	host_set x-target-frames "$t"
	sleep 10
done
host_set x-reset-every 0
fill "reset storm: then settles" $((256 * mib))
fill "reset storm: and deflates" 0
check_reports "reset storm"

# 3. rmmod/modprobe with 1 GiB of 4 KiB pages held while the guest
# compacts without pause: unload must wait for pages compaction holds.
use_caps 0x26
fill "reloads: setup" "$gib"
guest 'nohup sh -c "while :; do echo 1 > /proc/sys/vm/compact_memory; done" >/dev/null 2>&1 &
	echo $! >/run/compactor.pid'
reload_start=$SECONDS
done_cycles=$(reload_cycles "$reloads" "$gib" 240)
guest 'kill $(cat /run/compactor.pid)'
migrated=$(guest_vmstat balloon_migrate)
note "reloads: $done_cycles cycles in $((SECONDS - reload_start)) s; balloon_migrate $migrated since boot"
check_eq "reloads: $reloads cycles completed, each refilling 1 GiB of 4 KiB pages" "$done_cycles" "$reloads"
check_range "reloads: compaction migrated ballooned pages meanwhile" "${migrated:-0}" 1 $((1 << 62))
use_caps 0x2e
fill "reloads: deflates" 0
check_reports "reloads under compaction"

# 4. memory pressure: a workload that needs more than the balloon leaves
fill "pressure: setup" "$gib"
shrunk0=$(guest_stat shrinkFree)
# touched whole however slow the kernel is (stress-ng's 30 s ran out on
# this kernel before its workers had touched it all)
copy_touch_memory
check "pressure: an 1100 MiB workload touches all of it and ends intact" guest \
	'python3 /root/touch-memory.py 1100 0'
# read from the driver's count, not the host's size: once the workload
# ends the driver may already have refilled the balloon
check "pressure: the balloon gave memory back (shrinkFree went up)" eval '(( $(guest_stat shrinkFree) > shrunk0 ))'
fill "pressure: deflates" 0
check_reports "pressure"

# 5. the exact leak check, to the page: page_owner's stacks file (6.10+)
# gives, for every allocation stack, the base pages it holds now; summed
# over the stacks in which vmw_balloon called the page allocator itself
# (tests/lib/page-owner-balloon.awk), it is the balloon, exactly, while the
# balloon is full, and 0 once it is empty. (Reading
# /sys/kernel/debug/page_owner itself, a record per allocated page with
# its stack symbolized, gave an empty count here under TCG, full or not:
# too slow for the ssh limit, or it failed.) page_owner names the module
# only while it is loaded: a page leaked by an instance unloaded in the
# reload cycles shows as a bare address, which this does not count (the
# reload case's slab and MemAvailable checks in reliability.sh look for
# those). An unreadable or empty file gives no count, never 0.
balloon_pages_owned() {
	local stacks
	stacks=$(guest cat /sys/kernel/debug/page_owner_stacks/show_stacks) || return 1
	grep -q '^nr_base_pages: ' <<<"$stacks" || return 1
	awk -f "$root/tests/lib/page-owner-balloon.awk" <<<"$stacks"
}
fill "page_owner: setup" $((512 * mib))
full=$(balloon_pages_owned)
check_eq "page_owner: with 512 MiB ballooned its stacks hold exactly the balloon's pages" "${full:-none}" $((512 * mib))
fill "page_owner: deflates" 0
check_nothing_held "page_owner"
empty=$(balloon_pages_owned)
check_eq "page_owner: once the balloon is empty no page allocated through vmw_balloon is left" "${empty:-none}" 0

# 6. suspend to RAM with the balloon full, then wake up
qemu_status_is() {
	[[ $("$vm" qmp "$GUEST" query-status | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])') == "$1" ]]
}
fill "S3: setup" $((512 * mib))
guest 'systemd-run --quiet --on-active=2 sh -c "echo mem > /sys/power/state"'
check "S3: QEMU sees the guest suspended" wait_for 120 qemu_status_is suspended
"$vm" qmp "$GUEST" system_wakeup >/dev/null
check "S3: system_wakeup resumes it" wait_for 60 qemu_status_is running
wait_for 600 eval '"$vm" ssh "$GUEST" --timeout 30 -- true </dev/null' ||
	bail "S3: the guest does not answer after resuming"
pass "S3: the guest answers after resuming"
fill "S3: the balloon is whole again" $((512 * mib))
check_reports "S3"

# 7. unload while compaction holds a ballooned page isolated, made certain
# by the driver's fault point (unload_race, tests/lib/guest.sh): a
# migration parked across the unload before the driver's part and after
# it; unload must wait for the page, then free it and the balloon without
# a KASAN (use-after-free) or DEBUG_PAGEALLOC report. The test build was
# made at setup, for the debug kernel, while trixie's own kernel ran.
fill "unload race: setup" 0
unload_race 1 $((512 * mib))
unload_race 2 $((512 * mib))
fill "unload race: deflates" 0
check_nothing_held "unload race"
check_reports "unload race"

check_reports "the whole run"
finish
