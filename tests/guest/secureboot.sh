#!/bin/bash
# The package on a VMware-like guest booted with UEFI Secure Boot, before
# any key is enrolled (`vm start --secure-boot`: shim, signed GRUB, signed
# cloud kernel, OVMF with Microsoft's keys). The kernel is locked down and
# refuses DKMS's module, whose key nobody enrolled. Installing the package
# must not take ballooning away: after a reboot the package's modprobe.d
# install rule has the kernel try DKMS's module, the kernel refuses it, and
# the kernel's own vmw_balloon is loaded instead, from wherever DKMS left
# it (DKMS 3.0, bookworm, leaves it in the kernel's tree; 3.1 and later,
# trixie and sid, move it to /var/lib/dkms), and balloons 1 GiB. The
# package says, at install and in the journal at every load, what to run.
# Then the running kernel's headers go, and DKMS's module with them: after a
# reboot the journal names the exact headers packages to install (the
# kernel's and its flavour's metapackage) and the kernel's own balloons.
# Verdicts come from the guest and from the emulated host.
#
#   tests/guest/secureboot.sh [--enroll] [SUITE]    bookworm (default) or trixie
#
# --enroll (step guest-secureboot-enroll, in `make check-long`) goes on as
# an admin does: `mokutil --import` of DKMS's key with a one-time
# password, a reboot into shim's MokManager, driven by key presses (QMP
# send-key on the PS/2 keyboard, reading its screens on the serial
# console), Enroll MOK, Continue, Yes, the password, Reboot; then DKMS's
# module must autoload, signed by that key, under lockdown, and balloon.
# Then the suite's backports kernel is installed: DKMS builds and signs
# for it with the same key, and after the reboot into it the module loads
# with no new enrollment. Then DKMS's key is made anew (the old one stays
# enrolled): the kernel's own module loads and balloons, and the journal
# says why; then a purge puts the kernel's own module back, verified by
# dpkg.
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
enroll=0
if [[ ${1:-} == --enroll ]]; then
	enroll=1
	shift
fi
use_suite "$@"
GUEST=${GUEST:-vmb-test-sb-$suite}
step_start=$SECONDS

# --enroll ends with a kernel upgrade: the suite's backports cloud kernel
# (signed by Debian) and its headers, fetched on the host and handed in
kernel_args=()
if ((enroll)); then
	hand_in_backports_kernel secureboot
	[[ $new == *-cloud-amd64 ]] || bail "expected one signed cloud kernel among the packages, found '$new'"
	kernel_args=(--file "$handed/kernel")
fi

boot_with_deb "VMware-like Secure Boot" --secure-boot "${kernel_args[@]}"
note "booted in $((SECONDS - step_start)) s"

# a. the guest: Secure Boot on, the kernel locked down, still VMware
sb_state=$(guest mokutil --sb-state 2>&1)
lockdown=$(guest cat /sys/kernel/security/lockdown 2>&1)
note "mokutil --sb-state: $sb_state"
note "/sys/kernel/security/lockdown: $lockdown"
check "secure boot: mokutil says SecureBoot enabled" grep -qx "SecureBoot enabled" <<<"$sb_state"
check "secure boot: the kernel is locked down (integrity or confidentiality)" \
	grep -Eq '\[(integrity|confidentiality)\]' <<<"$lockdown"
check "secure boot: the kernel saw VMware" guest 'dmesg | grep -q "Hypervisor detected: VMware"'
learn_kernel_module
check "before install: the kernel's own vmw_balloon is loaded, not out-of-tree" \
	guest "test -d /sys/module/vmw_balloon && ! grep -q O /sys/module/vmw_balloon/taint"
# what tells the kernel's own module from DKMS's once loaded
intree_ids=$(guest 'cat /sys/module/vmw_balloon/srcversion /sys/module/vmw_balloon/version 2>/dev/null')

# b. install: DKMS builds and signs with its own key, which the kernel
# does not trust; the package says so and exactly what to run
start=$SECONDS
apt_output=$(guest "DEBIAN_FRONTEND=noninteractive apt-get install -y /opt/vmb/$(basename "$deb") 2>&1")
rc=$?
note "apt install took $((SECONDS - start)) s"
grep 'vmw-balloon-dkms:' <<<"$apt_output" | sed 's/^/#   | /'
check_eq "install: apt install exits 0" "$rc" 0
check_dkms_installed install
dkms_ko=$moddir/updates/dkms/vmw_balloon$ko
signer=$(guest modinfo -F signer "$dkms_ko")
note "DKMS's module is signed by: '${signer:-nobody}'"
check "install: DKMS signed its module" test -n "$signer"
check "install: the package says the kernel does not hold the key that signed the module" \
	grep -qE "vmw-balloon-dkms: Secure Boot .* is on and the kernel may refuse DKMS's vmw_balloon $(ere "$version") for $(ere "$kver"): the kernel does not hold the key that signed it" <<<"$apt_output"
check "install: the package says exactly what to run" \
	grep -qF "vmw-balloon-dkms: to have DKMS's vmw_balloon loaded, enroll its key: mokutil --import /var/lib/dkms/mok.pub" <<<"$apt_output"
check "install: the key it names is DKMS's" guest test -s /var/lib/dkms/mok.pub
check "install: every load of vmw_balloon goes through the package's install rule" \
	guest 'modprobe -c | grep -q "^install vmw_balloon .*/usr/lib/vmw-balloon-dkms/load-vmw-balloon"'
where=$(guest "test -e '$intree' && echo kept || echo moved")
note "after the install, the kernel's own module was $where by DKMS"
if [[ $suite == bookworm ]]; then
	check_eq "install: DKMS 3.0 left the kernel's own module in its tree" "$where" kept
else
	check_eq "install: DKMS 3.1 or later moved the kernel's own module away" "$where" moved
fi

# c. reboot: udev's load tries DKMS's module, the kernel refuses it, and
# the kernel's own is loaded instead
"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
check "reboot: vmw_balloon is loaded" guest 'test -d /sys/module/vmw_balloon'
check "reboot: it is the kernel's own (not out-of-tree)" guest '! grep -q O /sys/module/vmw_balloon/taint'
check_eq "reboot: it is the kernel's own build (its srcversion or, unversioned, no version)" \
	"$(guest 'cat /sys/module/vmw_balloon/srcversion /sys/module/vmw_balloon/version 2>/dev/null')" \
	"$intree_ids"
check "reboot: still locked down" guest "grep -Eq '\[(integrity|confidentiality)\]' /sys/kernel/security/lockdown"
journal=$(guest journalctl -b -o cat -t vmw-balloon-dkms)
sed 's/^/#   journal | /' <<<"$journal"
check "reboot: the journal says the kernel refused DKMS's module and the kernel's own was loaded" \
	grep -qE "the kernel refused DKMS's vmw_balloon $(ere "$version") .*: loaded the kernel's own vmw_balloon instead" <<<"$journal"
check "reboot: the journal of this boot says what to run" \
	grep -qF "enroll its key: mokutil --import /var/lib/dkms/mok.pub" <<<"$journal"
check "reboot: at warning priority" \
	guest 'journalctl -b -p warning -o cat -t vmw-balloon-dkms | grep -q "refused DKMS"'
check "reboot: one load, one fallback (the journal has one refusal)" \
	eval '(( $(guest "journalctl -b -o cat -t vmw-balloon-dkms | grep -c \"refused DKMS\"") == 1 ))'

# d. it balloons: 1 GiB of the 2 GiB guest, and back
want=$((1024 * 1024 / 4))
balloon_keep 1024
start=$SECONDS
check "balloon: the host holds $want frames within 120 s" wait_for 120 host_locked_is "$want"
note "inflated in $((SECONDS - start)) s"
balloon_keep 2048
check "balloon: back to 0 frames within 120 s" wait_for 120 host_locked_is 0

note "the no-key part took $((SECONDS - step_start)) s"
if ((!enroll)); then
	# d2. no headers on a UEFI guest: the running kernel's headers go (as
	# on a guest that never had them) and with them DKMS's module; after a
	# reboot the loader loads the kernel's own and names, in the journal,
	# the exact packages that would bring DKMS's module back
	out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get purge -y linux-headers-$kver 2>&1 &&
		dkms remove -m vmw_balloon -v $version -k $kver 2>&1 &&
		{ test -n \"\$(dkms status -m vmw_balloon -v $version)\" || dkms add -m vmw_balloon -v $version 2>&1; }")
	check_eq "no headers: the headers are purged, DKMS's module removed (its source still added)" "$?" 0 ||
		sed 's/^/#   | /' <<<"$out" | tail -n 15
	check "no headers: the headers' build tree is gone" guest "! test -e /lib/modules/$kver/build/include"
	check_eq "no headers: modprobe's vmw_balloon is the kernel's own again" \
		"$(guest modinfo -k "$kver" -n vmw_balloon)" "$intree"
	"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from its reboot without headers"
	journal=$(guest journalctl -b -o cat -t vmw-balloon-dkms)
	sed 's/^/#   journal | /' <<<"$journal"
	# a cloud kernel (every Secure Boot image boots one, with its flavour's
	# linux-image-cloud-amd64): its headers and the flavour's metapackage
	[[ $kver == *-cloud-amd64 ]] || bail "expected a cloud kernel, got $kver"
	check "no headers: setup: the flavour's linux-image-cloud-amd64 is installed" \
		guest "dpkg-query -W -f '\${Status}' linux-image-cloud-amd64 | grep -q ' installed\$'"
	want="linux-headers-$kver linux-headers-cloud-amd64"
	note "the packages the journal should name: $want"
	check "no headers: the journal names the exact packages to install, and that the kernel's own loaded" \
		grep -qF "DKMS has not built vmw_balloon for $kver: its headers are not installed. To build it for this kernel and the next ones: apt install $want: loaded the kernel's own $intree" <<<"$journal"
	check "no headers: the kernel's own vmw_balloon is loaded" \
		guest 'test -d /sys/module/vmw_balloon && ! grep -q O /sys/module/vmw_balloon/taint'
	check_balloons "no headers" 120

	# e. purge: DKMS's module goes, the kernel's own is back where its
	# package put it (DKMS 3.1 and later move it back), and the kernel's
	# package verifies clean
	out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get purge -y vmw-balloon-dkms 2>&1")
	check_eq "purge: apt purge exits 0" "$?" 0
	check_eq "purge: dkms knows no vmw_balloon" "$(guest dkms status vmw_balloon)" ""
	check "purge: the kernel's own module is back in its place" guest test -f "$intree"
	check_eq "purge: modinfo -n is the kernel's own module" "$(guest modinfo -n vmw_balloon)" "$intree"
	# dpkg knows the file by the path its package gives (/lib or /usr/lib)
	image_pkg=$(guest "dpkg -S '$intree' 2>/dev/null || dpkg -S \"\$(readlink -f '$intree')\"" | cut -d: -f1)
	verify=$(guest dpkg --verify "$image_pkg" 2>&1)
	note "dpkg --verify $image_pkg: ${verify:-clean}"
	check_eq "purge: dpkg --verify of the kernel's package ($image_pkg) is clean" "$verify" ""
	check "purge: no install rule for vmw_balloon is left" \
		guest '! modprobe -c | grep -q "^install vmw_balloon "'
	finish
	exit
fi
[[ $tap_failed == 0 ]] || bail "the no-key part failed: not enrolling"

# e. enrollment, as an admin does it, with MokManager driven by keys
enroll_start=$SECONDS
password=vmbmok42
guest "printf '%s\n%s\n' $password $password | mokutil --import /var/lib/dkms/mok.pub" >&2 ||
	guest "mokutil --generate-hash=$password >/root/mok.hash && mokutil --import /var/lib/dkms/mok.pub --hash-file /root/mok.hash" >&2
check "enroll: mokutil has a request pending for DKMS's key" \
	guest 'mokutil --list-new | grep -q "DKMS module signing key"'

# key NAME...: press (and release) each key on the guest's keyboard
key() {
	local k
	for k in "$@"; do
		"$vm" qmp "$GUEST" send-key "{\"keys\": [{\"type\": \"qcode\", \"data\": \"$k\"}]}" >/dev/null
		sleep 0.5
	done
}
# console_shows TEXT: the serial console, after offset $since and without
# its escape sequences, holds TEXT (MokManager draws its screens there)
VMB_RUN_DIR=${VMB_RUN_DIR:-/tmp/vmb-run}
console=$VMB_RUN_DIR/$GUEST/console.log
console_shows() {
	tail -c +$((since + 1)) "$console" 2>/dev/null |
		LC_ALL=C sed 's/\x1b\[[0-9;=]*[A-Za-z]//g' | grep -aqF -- "$1"
}
# screen TEXT SECONDS: wait until the console shows TEXT
screen() {
	wait_for "$2" console_shows "$1"
}
since=$(stat -c %s "$console")
"$vm" reboot "$GUEST" --timeout 900 >&2 &
reboot_pid=$!
# answer TEXT KEY...: once the console shows TEXT, press the keys; the
# next screen is looked for only in what comes after
answer() {
	local text=$1
	shift
	screen "$text" 60 || { fail "enroll: MokManager showed '$text'"; return 1; }
	since=$(stat -c %s "$console")
	key "$@"
}
if screen "Press any key to perform MOK management" 600; then
	pass "enroll: shim started MokManager"
	since=$(stat -c %s "$console")
	key spc
	# shellcheck disable=SC2046 # the password, one key a letter
	answer "Enroll MOK" down ret &&
		answer "View key" down ret &&
		answer "Enroll the key" down ret &&
		answer "Password" $(sed 's/./& /g' <<<"$password") ret &&
		answer "Reboot" ret &&
		pass "enroll: MokManager enrolled the key and rebooted"
else
	fail "enroll: shim started MokManager"
fi
wait "$reboot_pid" || bail "the guest did not come back after MokManager"
note "enrollment (reboot, MokManager, boot) took $((SECONDS - enroll_start)) s"

# f. DKMS's module, trusted now
check "enrolled: mokutil says DKMS's key is enrolled" \
	guest 'mokutil --test-key /var/lib/dkms/mok.pub | grep -q "is already enrolled"'
check "enrolled: still Secure Boot and locked down" \
	guest "mokutil --sb-state | grep -qx 'SecureBoot enabled' && grep -Eq '\[(integrity|confidentiality)\]' /sys/kernel/security/lockdown"
check "enrolled: the journal says DKMS's module was loaded" \
	guest "journalctl -b -o cat -t vmw-balloon-dkms | grep -q \"loaded DKMS's vmw_balloon $version\""
check_autoloaded
check_eq "enrolled: modinfo -F signer names DKMS's key" "$(guest modinfo -F signer vmw_balloon)" "$signer"
check "enrolled: the kernel refused no module" \
	guest '! dmesg | grep -Ei "Key was rejected|module verification failed"'
balloon_keep 1024
check "enrolled: the host holds $want frames within 120 s" wait_for 120 host_locked_is "$want"
balloon_keep 2048
check "enrolled: back to 0 frames within 120 s" wait_for 120 host_locked_is 0
note "the enrollment part took $((SECONDS - enroll_start)) s"

# g. a kernel upgrade: DKMS builds for it and signs with the same key, and
# the module loads after the reboot with no new enrollment
upgrade_start=$SECONDS
out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /opt/vmb/kernel/*.deb 2>&1")
rc=$?
sed 's/^/#   | /' <<<"$out" | grep -Ei 'dkms|vmw_balloon|sign|error|warning' | head -n 20
check_eq "kernel upgrade: apt installs $new and its headers" "$rc" 0
status=$(guest dkms status vmw_balloon -k "$new")
note "dkms status for $new: $status"
check "kernel upgrade: DKMS built and installed for $new" grep -Eqx \
	"vmw_balloon(/|, )$(ere "$version"), $(ere "$new"), x86_64: installed( \(Original modules exist\))?" <<<"$status"
new_ko=$(guest "ls /lib/modules/$new/updates/dkms/vmw_balloon.ko*" | head -n 1)
check_eq "kernel upgrade: DKMS signed the $new module with the enrolled key" \
	"$(guest modinfo -F signer "${new_ko:-none}")" "$signer"
check "kernel upgrade: no key waits to be enrolled" \
	guest '! mokutil --list-new 2>&1 | grep -q "DKMS module signing key"'
since=$(stat -c %s "$console")
"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from the reboot into $new"
check "kernel upgrade: shim went straight to GRUB, no MokManager" \
	eval 'console_shows "Welcome to GRUB" && ! console_shows "perform MOK management"'
check_eq "kernel upgrade: the guest runs $new" "$(guest uname -r)" "$new"
kver=$new moddir=/lib/modules/$new
ko=${new_ko##*/vmw_balloon}
check "kernel upgrade: still Secure Boot and locked down" \
	guest "mokutil --sb-state | grep -qx 'SecureBoot enabled' && grep -Eq '\[(integrity|confidentiality)\]' /sys/kernel/security/lockdown"
check_autoloaded
check_eq "kernel upgrade: the loaded module's signer is the enrolled key" \
	"$(guest modinfo -F signer vmw_balloon)" "$signer"
check "kernel upgrade: the kernel refused no module" \
	guest '! dmesg | grep -Ei "Key was rejected|module verification failed"'
balloon_keep 1024
check "kernel upgrade: the host holds $want frames within 120 s" wait_for 120 host_locked_is "$want"
balloon_keep 2048
check "kernel upgrade: back to 0 frames within 120 s" wait_for 120 host_locked_is 0
note "the kernel upgrade part took $((SECONDS - upgrade_start)) s"

# h. DKMS's key made anew after the enrollment (the old key stays
# enrolled, the new one signs): the kernel refuses the module signed by
# the new key, the kernel's own loads in its place and balloons, and the
# journal says the enrolled DKMS key is another one. The loader runs at
# every load, so `rmmod; modprobe` is enough, no reboot.
guest "mkdir -p /root/old-mok && mv /var/lib/dkms/mok.key /var/lib/dkms/mok.pub /root/old-mok/" ||
	bail "cannot move DKMS's key aside"
# (dkms install --force reinstalls the module built before, signature
# and all: a build is needed to sign with the new key)
out=$(guest "dkms remove vmw_balloon/$version -k $new && dkms install vmw_balloon/$version -k $new 2>&1")
check_eq "new key: dkms remove, then dkms install rebuilds and signs with a new key" "$?" 0
new_signer=$(guest "openssl x509 -inform DER -in /var/lib/dkms/mok.pub -noout -serial 2>/dev/null")
note "the enrolled key's serial: $(guest "openssl x509 -inform DER -in /root/old-mok/mok.pub -noout -serial"), the new one's: $new_signer"
check "new key: the new key is not the enrolled one" \
	guest 'test -s /var/lib/dkms/mok.pub && ! cmp -s /var/lib/dkms/mok.pub /root/old-mok/mok.pub &&
		mokutil --test-key /var/lib/dkms/mok.pub | grep -q "is not enrolled"'
new_ko=$(guest "ls /lib/modules/$new/updates/dkms/vmw_balloon.ko*" | head -n 1)
check_eq "new key: the module DKMS installed is signed by the new key" \
	"$(guest modinfo -F signer "${new_ko:-none}")" "DKMS module signing key"
check "new key: ... whose serial is the new key's, not the enrolled one's" \
	eval '[[ $(guest "modinfo -F sig_key ${new_ko:-none} | tr -d : | tr A-F a-f | sed s/^0*//") == $(guest "openssl x509 -inform DER -in /var/lib/dkms/mok.pub -noout -serial | sed s/^serial=// | tr A-F a-f | sed s/^0*//") ]]'
journal_lines=$(guest "journalctl -b -o cat -t vmw-balloon-dkms | wc -l")
out=$(guest "rmmod vmw_balloon && modprobe vmw_balloon 2>&1")
rc=$?
check_eq "new key: rmmod, then modprobe vmw_balloon succeeds" "$rc" 0
journal=$(guest "journalctl -b -o cat -t vmw-balloon-dkms | tail -n +$((journal_lines + 1))")
sed 's/^/#   journal | /' <<<"$journal"
check "new key: the kernel refused DKMS's module, the kernel's own was loaded" \
	grep -qE "the kernel refused DKMS's vmw_balloon $(ere "$version") .*: loaded the kernel's own vmw_balloon instead" <<<"$journal"
check "new key: the journal says the enrolled DKMS key is another one" \
	grep -qF "the DKMS key the kernel holds is another one" <<<"$journal"
check "new key: the loaded module is the kernel's own (no version)" \
	guest 'test -d /sys/module/vmw_balloon && ! test -e /sys/module/vmw_balloon/version'
check_balloons "new key: the kernel's own" 120

# i. purge after an enrollment: the kernel's own module is back where its
# package put it and verifies clean; the key stays enrolled (README.Debian
# says how to delete it)
out=$(guest "rmmod vmw_balloon; DEBIAN_FRONTEND=noninteractive apt-get purge -y vmw-balloon-dkms 2>&1")
check_eq "purge after enrollment: apt purge exits 0" "$?" 0
check_eq "purge after enrollment: dkms knows no vmw_balloon" "$(guest dkms status vmw_balloon)" ""
own=$(guest modinfo -n vmw_balloon)
check "purge after enrollment: modinfo -n is $new's own module, in its tree" \
	grep -Eq "^(/usr)?/lib/modules/$(ere "$new")/kernel/drivers/misc/vmw_balloon\.ko" <<<"$own"
image_pkg=$(guest "dpkg -S '$own' 2>/dev/null || dpkg -S \"\$(readlink -f '$own')\"" | cut -d: -f1)
verify=$(guest dpkg --verify "$image_pkg" 2>&1)
note "dpkg --verify $image_pkg: ${verify:-clean}"
check_eq "purge after enrollment: dpkg --verify of $new's package ($image_pkg) is clean" "$verify" ""
check "purge after enrollment: the kernel's own loads under lockdown" \
	guest 'modprobe vmw_balloon && test -d /sys/module/vmw_balloon && ! test -e /sys/module/vmw_balloon/version'
check "purge after enrollment: the enrolled key stays enrolled (mokutil --delete removes it)" \
	guest 'mokutil --test-key /root/old-mok/mok.pub | grep -q "is already enrolled"'
finish
