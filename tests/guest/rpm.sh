#!/bin/bash
# The .rpm on a VMware-like guest. There is no RPM-based guest here, so a
# bookworm guest gets Debian's rpm (fetched on the host, handed in on a
# disk: the guest has no network) and installs the package with
# `rpm -i --nodeps`, since rpm's own database there knows nothing of dkms.
# Its %post runs dkms add, build and install; after a reboot the DKMS module
# autoloads and balloons; with module signatures enforced the kernel's own
# loads in its place and balloons; `rpm -e` removes it and the kernel's own
# driver comes back. Verdicts come from the guest and from the emulated host.
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
suite=bookworm
GUEST=${GUEST:-vmb-test-rpm}

rpm=$root/build/rpm/RPMS/noarch/vmw-balloon-dkms-$version-1.noarch.rpm
mkdir -p "$root/build"
(
	flock 9
	[[ -f $rpm ]] || make -C "$root" rpm >&2
) 9>"$root/build/.package.lock" || bail "cannot build $rpm"
image=$("$vm" image --suite "$suite" | tail -n 1) || bail "no $suite disk image"
debs=$("$root/tests/lib/fetch-debs" "$(dirname "$image")/dpkg-status" rpm | tail -n 1) ||
	bail "cannot fetch Debian's rpm for the guest"
hand_in_as rpm-tool "$debs"

"$vm" stop "$GUEST" --kill >/dev/null 2>&1
"$vm" start "$GUEST" --suite "$suite" --mem 2G --file "$rpm" --file "$handed/rpm-tool" >&2 ||
	bail "the VMware-like $suite guest did not boot"
kver=$(guest uname -r)
note "$suite guest, kernel $kver, package $version (.rpm)"
learn_kernel_module
guest "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /opt/vmb/rpm-tool/*.deb" >&2 ||
	bail "installing Debian's rpm in the guest failed"

out=$(guest "rpm -i --nodeps /opt/vmb/$(basename "$rpm") 2>&1")
rc=$?
sed 's/^/#   | /' <<<"$out" | tail -n 20
check_eq "rpm -i: the package installs" "$rc" 0
check_eq "rpm -q: rpm knows it" "$(guest rpm -q vmw-balloon-dkms)" "vmw-balloon-dkms-$version-1.noarch"
check_dkms_installed "rpm %post"
check "rpm %post: the sources are where dkms.conf says" guest "test -f /usr/src/vmw_balloon-$version/dkms.conf"

"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
check_autoloaded
want=$((512 * 1024 / 4))
balloon_keep 1536
check "balloon: the host holds $want frames within 60 s" wait_for 60 host_locked_is "$want"
check "balloon: the driver's debugfs current agrees" wait_for 30 eval '[[ $(guest_stat current) == "$want" ]]'
balloon_keep 2048
check "balloon: it empties within 60 s" wait_for 60 host_locked_is 0

# Module signatures enforced (turned on at run time, as module.sig_enforce=1
# at boot would have them): the kernel refuses DKMS's module, and the
# package's install rule loads the kernel's own instead. Here DKMS (Debian's
# 3.0) left that module in the kernel's tree; RPM systems' DKMS moves it to
# /var/lib/dkms, which the loader looks in first (the trixie Secure Boot
# test covers that path).
check "sig_enforce: setup: enforcement on, DKMS's module unloaded" \
	guest 'echo Y > /sys/module/module/parameters/sig_enforce && rmmod vmw_balloon'
check "sig_enforce: modprobe vmw_balloon succeeds" guest modprobe vmw_balloon
check "sig_enforce: the loaded vmw_balloon is the kernel's own" \
	guest 'test -d /sys/module/vmw_balloon && test ! -e /sys/module/vmw_balloon/version &&
		! grep -q O /sys/module/vmw_balloon/taint'
check "sig_enforce: the journal says what was loaded instead, and why" \
	guest "journalctl -b -o cat -t vmw-balloon-dkms | grep -q \"the kernel refused DKMS's vmw_balloon $version .*: loaded the kernel's own vmw_balloon instead\""
balloon_keep 1536
check "sig_enforce: the kernel's own driver balloons $want frames" wait_for 120 host_locked_is "$want"
balloon_keep 2048
check "sig_enforce: and empties" wait_for 120 host_locked_is 0

# A kernel on which the build fails: the .rpm's kernel-install plugin, run
# as kernel-install runs it for a new kernel ("add KVER IMAGE"), before
# dkms's own plugin, must exit 0 and mark the kernel, so that kernel-install
# goes on to the plugins after it (initramfs, boot entry) and dkms's
# autoinstall leaves vmw_balloon out. The running kernel stands in for the
# new one: DKMS's module is removed for it and its headers are made to fail
# every build (an #error in the generated autoconf.h), then restored.
# (Debian has no kernel that runs kernel-install, so the plugin is run by
# hand: what is tested is the plugin's contract, not RPM's kernel packages.)
plugin=/usr/lib/kernel/install.d/39-vmw-balloon-dkms.install
autoconf=/lib/modules/$kver/build/include/generated/autoconf.h
check "kernel plugin: setup: DKMS's module removed for $kver, its headers broken" \
	guest "dkms remove -m vmw_balloon -v $version -k $kver >/dev/null &&
		{ test -n \"\$(dkms status -m vmw_balloon -v $version)\" || dkms add -m vmw_balloon -v $version >/dev/null; } &&
		cp -a \$(readlink -f $autoconf) /root/autoconf.h.saved &&
		echo '#error vmb-test: this kernel fails every module build' >>\$(readlink -f $autoconf)"
out=$(guest "$plugin add $kver /boot/vmlinuz-$kver 2>&1")
rc=$?
sed 's/^/#   | /' <<<"$out" | tail -n 5
check_eq "kernel plugin: a failed build exits 0 (kernel-install goes on)" "$rc" 0
check "kernel plugin: it says the kernel keeps its own vmw_balloon" grep -qF \
	"vmw-balloon-dkms: DKMS's vmw_balloon $version is not installed for $kver: its build failed" <<<"$out"
check "kernel plugin: the kernel is marked, so autoinstall leaves it out" \
	guest "grep -q 'its build failed' /var/lib/vmw-balloon-dkms/not-built/$kver"
check "kernel plugin: the loader names the failed build and loads the kernel's own" \
	guest "rmmod vmw_balloon && modprobe vmw_balloon && ! grep -q O /sys/module/vmw_balloon/taint &&
		journalctl -b -o cat -t vmw-balloon-dkms | grep -qF \"DKMS's vmw_balloon was not installed for $kver when the kernel was: its build failed\""
check "kernel plugin: setup: headers restored" \
	guest "cp -a /root/autoconf.h.saved \$(readlink -f $autoconf)"
out=$(guest "$plugin add $kver /boot/vmlinuz-$kver 2>&1")
check_eq "kernel plugin: with working headers it exits 0" "$?" 0
check_dkms_installed "kernel plugin: it builds and installs for $kver"
check "kernel plugin: the mark is gone" guest "test ! -e /var/lib/vmw-balloon-dkms/not-built/$kver"
check "kernel plugin: other commands (remove) exit 0 and leave DKMS's module installed" \
	guest "$plugin remove $kver && dkms status -m vmw_balloon -v $version -k $kver | grep -q ': installed'"

out=$(guest "rpm -e vmw-balloon-dkms 2>&1")
rc=$?
sed 's/^/#   | /' <<<"$out" | tail -n 20
check_eq "rpm -e: the package goes" "$rc" 0
check_eq "rpm -e: dkms knows no vmw_balloon" "$(guest dkms status vmw_balloon)" ""
check "rpm -e: its sources are gone" guest "test ! -e /usr/src/vmw_balloon-$version"
check_eq "rpm -e: modinfo -n is the kernel's own module again" "$(guest modinfo -n vmw_balloon)" "$intree"
check "rpm -e: the kernel's own vmw_balloon loads in place of DKMS's" \
	guest "rmmod vmw_balloon && modprobe vmw_balloon && test ! -e /sys/module/vmw_balloon/version &&
		! grep -q O /sys/module/vmw_balloon/taint"
check_dmesg_clean "rpm guest"

finish
