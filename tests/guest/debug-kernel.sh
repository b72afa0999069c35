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
# or WARNING report from the moment the package went in, and page_owner
# holds, to the page, what the driver should: the balloon and its batch
# page while loaded (checked with 4 KiB and 2 MiB pages), and nothing after
# each unload of the reload cycles. A page counts as the driver's when its
# allocation stack calls the page allocator from the driver's code, found
# by address: the instance loaded now, every instance unloaded in this
# boot and __init code that has run (tests/lib/page-owner-balloon.awk).
#
#   tests/guest/debug-kernel.sh     VMB_DEBUG_RELOADS cycles (default 20,
#                                   about half an hour here; 200 take
#                                   about five hours)
#   VMB_DEBUG_SABOTAGE=leak-batch-page tests/guest/debug-kernel.sh
#       the same with a driver whose unload does not free its batch page:
#       one page a reload that the leak checks must find (they fail)
#
# It needs the debug kernel's .debs: built here on first use (an hour or
# more on 2 cores, then cached).
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
suite=trixie
GUEST=${GUEST:-vmb-test-debug-kernel}
reloads=${VMB_DEBUG_RELOADS:-20}
sabotage=${VMB_DEBUG_SABOTAGE:-}
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
if [[ $sabotage == leak-batch-page ]]; then
	# the driver's unload no longer frees the page it allocated at init
	# (the last __free_page of it in the glue is the unload's), rebuilt
	# for the debug kernel only
	out=$(guest "f=/usr/src/vmw_balloon-$version/linux_glue.c
		n=\$(grep -n '__free_page(vb->batch_page);' \$f | tail -n 1 | cut -d: -f1)
		[ -n \"\$n\" ] && sed -i \"\${n}s|__free_page(vb->batch_page);|/* sabotage: batch page leaked */|\" \$f &&
		grep -q 'sabotage: batch page leaked' \$f &&
		dkms remove -m vmw_balloon -v $version -k $dk && dkms install -m vmw_balloon -v $version -k $dk 2>&1")
	check_eq "sabotage: setup: a driver that leaks its batch page at each unload, built for $dk" "$?" 0 ||
		sed 's/^/#   | /' <<<"$out" | tail -n 20
elif [[ -n $sabotage ]]; then
	bail "unknown VMB_DEBUG_SABOTAGE '$sabotage' (leak-batch-page)"
fi
# the fault points' test build for the debug kernel, for part 7
guest_timeout=3600 build_test_hooks "$dk"
"$vm" reboot "$GUEST" --timeout 1200 >&2 || bail "the guest did not come back in the debug kernel"
kver=$(guest uname -r)
check_eq "setup: the guest runs the debug kernel" "$kver" "$dk"
check "setup: KASAN, lockdep and page_owner are on" guest \
	"grep -q page_owner=on /proc/cmdline && test -r /sys/kernel/debug/page_owner_stacks/show_stacks &&
	 grep -q 'kasan' /proc/kallsyms && test -e /proc/lockdep"

check_dkms_installed "debug kernel"
# what the page_owner checks need in the guest: the counter, and the
# recorder of where each loaded instance's code is
"$vm" ssh "$GUEST" -- "cat > /root/page-owner-balloon.awk" <"$root/tests/lib/page-owner-balloon.awk" &&
	"$vm" ssh "$GUEST" -- "cat > /root/module-code-ranges && chmod +x /root/module-code-ranges" \
		<"$root/tests/lib/module-code-ranges" || bail "copy the page_owner helpers into the guest"
# record_code: add the code ranges of the vmw_balloon loaded now to the
# boot's list (guest-side, run before every unload)
record_code='/root/module-code-ranges vmw_balloon >>/run/vmb-code-ranges'
# balloon_pages_owned: the pages page_owner says the driver holds, from its
# stacks file (6.10+), by the driver's code; an unreadable or empty file
# gives no count, never 0. (Reading /sys/kernel/debug/page_owner itself, a
# record per page, gave an empty count here under TCG: too slow.)
owned='f=/sys/kernel/debug/page_owner_stacks/show_stacks
	s=$(cat $f) && printf "%s\n" "$s" | grep -q "^nr_base_pages: " &&
	printf "%s\n" "$s" | awk -v ranges=/run/vmb-code-ranges -f /root/page-owner-balloon.awk'
balloon_pages_owned() {
	guest "$owned"
}
# DKMS's module autoloaded at boot: loaded again after the mark, so that
# its load is checked too
guest "$record_code && rmmod vmw_balloon; modprobe vmw_balloon" ||
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
# compacts without pause: unload must wait for pages compaction holds, and
# after each unload page_owner must hold not one page from the driver's
# code (the instance just unloaded included, found by address).
use_caps 0x26
fill "reloads: setup" "$gib"
guest 'nohup sh -c "while :; do echo 1 > /proc/sys/vm/compact_memory; done" >/dev/null 2>&1 &
	echo $! >/run/compactor.pid'
reload_start=$SECONDS
# in the guest, to be quick: each cycle records the instance's code, unloads
# it with the balloon full, counts what page_owner says it left, loads it
# again and waits (at most 240 s) for the refill; prints "CYCLES LEFT..."
cycles_out=$("$vm" ssh "$GUEST" --timeout $((reloads * 1200 + 300)) -- "n=0 left=
	owned() { $owned; }
	for i in \$(seq $reloads); do
		start=\$(date +%s)
		$record_code || break
		rmmod vmw_balloon || break
		unloaded=\$(date +%s)
		p=\$(owned) || p=unreadable
		left=\"\$left \$p\"
		modprobe vmw_balloon || break
		t=0
		until [ \"\$(awk -F: '/^current/ {print \$2 + 0}' /sys/kernel/debug/vmmemctl 2>/dev/null)\" = $gib ]; do
			t=\$((t + 1)); [ \$t -le 1200 ] || break 2; sleep 0.2
		done
		n=\$((n + 1))
		echo \"# reload \$i: unload \$((unloaded - start)) s, then page_owner held \$p of its pages; load and refill \$((\$(date +%s) - unloaded)) s\" >&2
	done; echo \$n\$left" </dev/null)
guest 'kill $(cat /run/compactor.pid)'
read -r done_cycles left_counts <<<"$cycles_out"
migrated=$(guest_vmstat balloon_migrate)
note "reloads: ${done_cycles:-0} cycles in $((SECONDS - reload_start)) s; balloon_migrate $migrated since boot"
note "reloads: pages page_owner held from the driver's code after each unload: ${left_counts:-none}"
check_eq "reloads: $reloads cycles completed, each refilling 1 GiB of 4 KiB pages" "${done_cycles:-0}" "$reloads"
check_eq "reloads: after every unload page_owner holds not one page from the driver's code" \
	"$(tr ' ' '\n' <<<"${left_counts:-none}" | grep -v '^0$' | grep -c .)" 0
check_eq "reloads: page_owner was read after each of the $reloads unloads" "$(wc -w <<<"${left_counts:-}")" "$reloads"
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

# 5. the exact count, to the page: page_owner's stacks file (6.10+) gives,
# for every allocation stack, the base pages it holds now; summed over the
# stacks in which the driver's code called the page allocator itself
# (tests/lib/page-owner-balloon.awk), it is the balloon plus the one batch
# page the driver allocated at init, exactly, with either page size; once
# the balloon is empty, the batch page alone; once unloaded, nothing.
for caps in 0x26 0x2e; do
	size=$([[ $caps == 0x26 ]] && echo "4 KiB" || echo "2 MiB")
	use_caps "$caps"
	fill "page_owner, $size pages: setup" $((512 * mib))
	full=$(balloon_pages_owned)
	check_eq "page_owner, $size pages: with 512 MiB ballooned it holds the balloon's pages and the batch page" \
		"${full:-none}" $((512 * mib + 1))
	fill "page_owner, $size pages: deflates" 0
done
check_nothing_held "page_owner"
empty=$(balloon_pages_owned)
check_eq "page_owner: once the balloon is empty only the batch page is left" "${empty:-none}" 1
guest "$record_code && rmmod vmw_balloon" || bail "page_owner: vmw_balloon does not unload"
gone=$(balloon_pages_owned)
check_eq "page_owner: once unloaded not one page from the driver's code is left" "${gone:-none}" 0
guest modprobe vmw_balloon || bail "page_owner: vmw_balloon does not load again"

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
