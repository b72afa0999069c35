#!/bin/bash
# The package on an ordinary (non-VMware) PC that still has the balloon
# device: it installs and builds, but the module neither autoloads nor
# loads, and never talks to the host.
#
#   tests/guest/plain.sh [SUITE]    bookworm (default: $VMB_SUITE or
#                                   bookworm), trixie or sid
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
use_suite "$@"
GUEST=${GUEST:-vmb-test-plain-$suite}

boot_with_deb plain --plain
learn_kernel_module

check "plain: the kernel found no VMware hypervisor" \
	eval '! guest "dmesg | grep -q \"Hypervisor detected: VMware\""'

# f. install, build, no autoload, no load
install_deb
check_dkms_installed plain
check_eq "plain: modinfo -n is DKMS's copy" "$(guest modinfo -n vmw_balloon)" \
	"$moddir/updates/dkms/vmw_balloon$ko"
# replay the boot-time device events, as udev's coldplug does
guest 'udevadm trigger --action=add && udevadm settle'
check "plain: vmw_balloon is not autoloaded" guest '! test -d /sys/module/vmw_balloon'
out=$(guest modprobe vmw_balloon 2>&1)
rc=$?
note "modprobe said: $out"
check "plain: modprobe vmw_balloon fails" test "$rc" -ne 0
check "plain: ... with No such device" grep -q "No such device" <<<"$out"
calls=0
for cmd in start target lock unlock guest-id batch-lock batch-unlock 2m-lock 2m-unlock doorbell-set; do
	calls=$((calls + $(host_get "x-calls-$cmd")))
done
check_eq "plain: the host saw no command at all" "$calls" 0
check_dmesg_clean "plain guest"

guest "DEBIAN_FRONTEND=noninteractive apt-get purge -y vmw-balloon-dkms" >&2
check_eq "plain: purge leaves dkms knowing no vmw_balloon" "$(guest dkms status vmw_balloon)" ""
check_eq "plain: purge brings the kernel's own module back" "$(guest modinfo -n vmw_balloon)" "$intree"
check "plain: the kernel's own module file is there" guest test -f "$intree"

finish
