#!/bin/bash
# A kernel on which DKMS cannot build the module must still install, and
# boot with the kernel's own vmw_balloon. A trixie guest (dkms 3.2, whose
# failed autoinstall fails the kernel package's configuration) with
# vmw-balloon-dkms installed gets trixie-backports' cloud kernel and
# headers, as tests/guest/upgrade.sh does. A test hook breaks the new
# kernel's headers at a defined point: /etc/kernel/{header_,}postinst.d/
# 00-vmb-test-break-headers, which run-parts runs before every other hook,
# adds an #error to the new kernel's generated autoconf.h, so that every
# build against it fails. The package's own hook (50-vmw-balloon-dkms)
# then meets a failing build before dkms's hook does.
#
# Verdicts come from the guest and the emulated host: apt's exit status and
# dpkg's state of the kernel packages, dkms status, the mark the package
# hook leaves, the kernel the guest boots, the module it loaded, the
# journal, and the frames the host holds.
#
#   tests/guest/kernel-build-fails.sh [SUITE]   trixie (default) or sid
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
suite=${1:-trixie}
GUEST=${GUEST:-vmb-test-build-fails-$suite}

hand_in_backports_kernel full
[[ -n $new ]] || bail "no backports cloud kernel among the packages"
boot_with_deb VMware-like --file "$handed/kernel"
old=$kver
learn_kernel_module
install_deb
check_dkms_installed "before the new kernel"

# The sabotage, as a hook that sorts before every other (00-).
"$vm" ssh "$GUEST" -- "cat >/tmp/00-vmb-test-break-headers" <<EOF || bail "cannot write the test hook"
#!/bin/sh
# vmb-test: breaks the headers of $new, so that any module build fails
[ "\$1" = "$new" ] || exit 0
f=/usr/src/linux-headers-$new/include/generated/autoconf.h
[ -e "\$f" ] || exit 0
grep -q vmb-test "\$f" || echo '#error "vmb-test: these headers are broken on purpose"' >>"\$f"
echo "vmb-test: broke \$f" >&2
EOF
guest "head -n 1 /tmp/00-vmb-test-break-headers | grep -qx '#!/bin/sh' &&
	install -m 0755 /tmp/00-vmb-test-break-headers /etc/kernel/postinst.d/ &&
	install -m 0755 /tmp/00-vmb-test-break-headers /etc/kernel/header_postinst.d/" ||
	bail "cannot install the test hook"

start=$SECONDS
out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /opt/vmb/kernel/*.deb 2>&1")
rc=$?
note "installed $new in $((SECONDS - start)) s"
sed 's/^/#   | /' <<<"$out" | grep -Ei 'vmb-test|vmw-balloon|dkms|error|autoinstall|grub' | head -n 40
check "setup: the test hook broke $new's headers" grep -q "vmb-test: broke " <<<"$out"
check "setup: a build against them fails (the kernel hook saw its build fail)" \
	grep -qE "vmw-balloon-dkms: DKMS's vmw_balloon $(ere "$version") is not installed for $(ere "$new"): its build failed" <<<"$out"
check_eq "apt install of $new exits 0" "$rc" 0
check "dpkg: linux-image-$new and linux-headers-$new are installed and configured" \
	guest "dpkg-query -W -f='\${db:Status-Abbrev}\n' linux-image-$new linux-headers-$new | grep -vq '^ii' && exit 1; true"
check "dpkg: nothing is left half-configured (dpkg --audit is empty)" \
	eval '[[ -z $(guest "dpkg --audit") ]]'
status=$(guest dkms status vmw_balloon -k "$new")
note "dkms status for $new: ${status:-(nothing)}"
check "dkms: vmw_balloon is not installed for $new" eval '! grep -q ": installed" <<<"$status"'
check "the kernel hook marked $new (/var/lib/vmw-balloon-dkms/not-built/$new)" \
	guest "grep -q 'its build failed' /var/lib/vmw-balloon-dkms/not-built/$new"
check "dkms: $old keeps DKMS's module" \
	guest "dkms status vmw_balloon -k $old | grep -q ': installed'"
check "update-grub made $new the default" \
	guest "grep -m1 -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | grep -qF 'vmlinuz-$new '"

"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from the reboot into $new"
kver=$new
check_eq "reboot: the guest runs $new" "$(guest uname -r)" "$new"
check "reboot: vmw_balloon is loaded after boot" guest 'test -d /sys/module/vmw_balloon'
file=$(guest modinfo -n vmw_balloon)
note "modinfo -n vmw_balloon: $file"
check "reboot: it is the kernel's own (in the kernel's tree)" \
	grep -Eq "^(/usr)?/lib/modules/$(ere "$new")/kernel/drivers/misc/vmw_balloon\.ko" <<<"$file"
check "reboot: the loaded module has no version (the kernel's own has none)" \
	guest '! test -e /sys/module/vmw_balloon/version'
journal=$(guest journalctl -b -o cat -t vmw-balloon-dkms)
sed 's/^/#   journal | /' <<<"$journal"
check "reboot: the journal says why DKMS's module is not there, and which module loaded" \
	grep -qE "DKMS's vmw_balloon was not installed for $(ere "$new") when the kernel was: its build failed .*: loaded the kernel's own" <<<"$journal"

check_balloons "balloon: the kernel's own driver" 180
check_dmesg_clean "boot of $new"
finish
