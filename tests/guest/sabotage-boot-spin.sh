#!/bin/bash
# Sabotage: a boot that hangs because a module spins with its interrupts
# off must fail the step that reboots into it, not be reset away. The
# harness (qemu-cloud/vm reboot) resets a boot only for a timer-starved
# RCU stall of the emulation itself: the stalled CPU idles in its NMI
# backtrace and no frame of a vmb_ or vmw_balloon function shows. Here a
# test-only module (tests/guest/sabotage/) is loaded once, early in the
# first boot after it was armed, and hangs its CPU; a boot after a reset
# would come up clean, so a harness that reset the hang away would pass.
# Verdicts: `vm reboot` fails, the ledger holds no reset or relaunch for
# this guest, and the console shows the module's hang (the setup happened).
#
#   tests/guest/sabotage-boot-spin.sh [SUITE]    trixie (default)
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
use_suite "${1:-trixie}"
GUEST=${GUEST:-vmb-test-sabotage-$suite}
VMB_RUN_DIR=${VMB_RUN_DIR:-/tmp/vmb-run}
ledger=${VMB_LEDGER:-$VMB_RUN_DIR/recoveries}

hand_in_as sabotage "$root/tests/guest/sabotage"
"$vm" stop "$GUEST" --kill >/dev/null 2>&1
"$vm" start "$GUEST" --suite "$suite" --mem 2G --file "$handed/sabotage" >&2 ||
	bail "the VMware-like $suite guest did not boot"
kver=$(guest uname -r)
note "$suite guest, kernel $kver"

out=$(guest "cp -r /opt/vmb/sabotage /root/sabotage && cd /root/sabotage &&
	make -C /lib/modules/$kver/build M=/root/sabotage modules 2>&1 &&
	install -D -m 0644 vmb_sabotage_spin.ko /lib/modules/$kver/updates/vmb_sabotage_spin.ko &&
	depmod $kver && install -m 0644 vmb-sabotage-once.service /etc/systemd/system/ &&
	systemctl enable vmb-sabotage-once.service 2>&1 && touch /etc/vmb-sabotage-once && sync")
rc=$?
sed 's/^/#   | /' <<<"$out" | tail -n 5
check_eq "setup: the spinning module is built and armed for the next boot only" "$rc" 0
check_eq "setup: modprobe knows it" "$(guest modinfo -n vmb_sabotage_spin)" "/lib/modules/$kver/updates/vmb_sabotage_spin.ko"
ledger_before=$(grep -c -P "\t$GUEST\t" "$ledger" 2>/dev/null)

console=$VMB_RUN_DIR/$GUEST/console.log
since=$(stat -c %s "$console")
start=$SECONDS
out=$("$vm" reboot "$GUEST" --timeout 300 2>&1)
rc=$?
# what vm said, without the console's end that it appends
grep -av '^ *|' <<<"$out" | sed 's/^/#   vm | /' | tail -n 12
note "vm reboot exited $rc after $((SECONDS - start)) s"
check "sabotage: vm reboot fails (the hung boot is not reset away)" test "$rc" -ne 0
ledger_after=$(grep -c -P "\t$GUEST\t" "$ledger" 2>/dev/null)
grep -P "\t$GUEST\t" "$ledger" 2>/dev/null | sed 's/^/#   ledger | /'
check_eq "sabotage: the ledger holds no reset or relaunch of this guest" "${ledger_after:-0}" "${ledger_before:-0}"
hang=$(tail -c +$((since + 1)) "$console" | LC_ALL=C tr -d '\r' |
	grep -a -E 'vmb_sabotage_spin|rcu.*stall|soft lockup|timer wakeup' | head -n 12)
sed 's/^/#   console | /' <<<"$hang"
check "sabotage: setup: the console shows the module spinning" \
	grep -q "vmb_sabotage_spin: spinning with interrupts off" <<<"$hang"
"$vm" stop "$GUEST" --kill >/dev/null 2>&1
finish
