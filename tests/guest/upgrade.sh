#!/bin/bash
# A kernel upgrade under the package. A guest with vmw-balloon-dkms
# installed gets its release's backports cloud kernel and headers, fetched
# on the host (tests/lib/fetch-debs) and handed in on a disk, since the
# guest has no network. DKMS builds for the new kernel while it installs;
# the guest boots it (update-grub made it the default); DKMS's module
# autoloads there and balloons; purging the old kernel leaves DKMS clean.
# Verdicts come from the guest and from the emulated host.
#
#   tests/guest/upgrade.sh [--genericcloud] [SUITE]   trixie (default: 6.12
#                                    to trixie-backports' 7.x) or bookworm
#                                    (6.1 to bookworm-backports' 6.12)
#
# --genericcloud: as an admin's cloud guest gets a new kernel. The guest
# starts as the genericcloud image; the package is installed by name from
# the repository, with the headers it names (the running kernel's and the
# flavour's metapackage). Then the host's partial mirror is replaced by
# one that also carries the backports' cloud image and headers
# metapackages (tests/lib/partial-mirror --with-backports-kernel), as a
# point release brings newer ones, and a plain `apt full-upgrade` moves to
# the new kernel: the headers metapackage brings its headers, and no
# generic-flavour headers ever come.
#
# The new kernel is then booted $VMB_UPGRADE_BOOTS times in all (default
# 10 for bookworm, whose backports kernel died at boot under QEMU 7.2's
# multi-threaded TCG, 1 for trixie), each boot with 2 vCPUs checked for a
# clean kernel log and the DKMS module loaded.
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
genericcloud=0
if [[ ${1:-} == --genericcloud ]]; then
	genericcloud=1
	shift
fi
suite=${1:-trixie}
case $suite in
bookworm) new_series='6\.12\.' boots=${VMB_UPGRADE_BOOTS:-10} ;;
trixie) new_series='7\.' boots=${VMB_UPGRADE_BOOTS:-1} ;;
*) echo "unknown suite '$suite' (trixie or bookworm)" >&2 && exit 2 ;;
esac
GUEST=${GUEST:-vmb-test-upgrade-$suite$( ((genericcloud)) && echo -gc)}

if ((genericcloud)); then
	boot_genericcloud VMware-like
	old=$kver
	learn_kernel_module
	install_from_repository
	headers=$(tr -d '\r' <<<"$apt_output" |
		sed -n 's/^vmw-balloon-dkms: .*, run: apt install \(linux-headers-.*\)$/\1/p' | tail -n 1)
	note "the package names: ${headers:-nothing}"
	check "install: the package names the cloud flavour's headers metapackage" \
		grep -qw -- "linux-headers-cloud-amd64" <<<"$headers"
	# DKMS builds while they install: under TCG beside other guests
	# that can take longer than guest's default 15 minutes
	guest_timeout=2400 check "install: apt installs what the package named" \
		guest "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y ${headers:-nothing-named} >/tmp/headers.log 2>&1"
	check_dkms_installed "before the upgrade"
	check_eq "before the upgrade: DKMS built for the running kernel only" \
		"$(guest "dkms status vmw_balloon | wc -l")" 1
	# The newer kernel arrives, as a point release or a security update
	# does: the guest's mirror is replaced by one that also carries the
	# backports' flavour metapackages, with the kernel and headers they
	# bring
	new_mirror=$("$root/tests/lib/partial-mirror" --with-backports-kernel "$suite" "$repo_dir" | tail -n 1) ||
		bail "cannot make the partial Debian mirror with the backports kernel"
	guest "rm -rf /opt/vmb/debian /opt/vmb/$(basename "$new_mirror")" &&
		"$vm" copy "$GUEST" "$new_mirror" /opt/vmb/ >&2 &&
		guest "mv /opt/vmb/$(basename "$new_mirror") /opt/vmb/debian &&
			for try in 1 2 3 4 5; do apt-get -o DPkg::Lock::Timeout=600 update && exit 0; sleep 10; done; exit 1" >&2 ||
		bail "cannot hand the new mirror to the guest"
	start=$SECONDS
	out=$(guest_timeout=2400 guest "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 full-upgrade -y 2>&1")
	rc=$?
	note "apt full-upgrade took $((SECONDS - start)) s"
	sed 's/^/#   | /' <<<"$out" | grep -Ei 'dkms|vmw_balloon|error|warning|grub|initramfs|linux-(image|headers)' | head -n 40
	check_eq "upgrade: apt full-upgrade exits 0" "$rc" 0
	new=$(guest "ls /boot/vmlinuz-* | sed 's|^/boot/vmlinuz-||' | sort -V | tail -n 1")
	check "upgrade: full-upgrade brought a $new_series cloud kernel ($new)" \
		grep -Eqx "$new_series.*-cloud-amd64" <<<"$new"
	check "upgrade: ... and its headers, through the flavour's metapackage" \
		guest "dpkg-query -W -f='\${db:Status-Abbrev}' linux-headers-$new | grep -q '^ii'"
	check "upgrade: no generic-flavour headers (linux-headers-amd64) ever came" \
		guest "! dpkg-query -W -f='\${db:Status-Abbrev}' linux-headers-amd64 2>/dev/null | grep -q '^ii'"
else
	hand_in_backports_kernel full
	[[ $new =~ ^$new_series ]] || bail "expected one $new_series cloud kernel among the packages, found '$new'"

	boot_with_deb VMware-like --file "$handed/kernel"
	old=$kver
	learn_kernel_module
	install_deb
	check_dkms_installed "before the upgrade"

	# The new kernel and headers: DKMS builds for them from the kernel's hooks.
	start=$SECONDS
	out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /opt/vmb/kernel/*.deb 2>&1")
	rc=$?
	note "installed the new kernel in $((SECONDS - start)) s"
	sed 's/^/#   | /' <<<"$out" | grep -Ei 'dkms|vmw_balloon|error|warning|grub|initramfs' | head -n 40
	check_eq "upgrade: apt installs the new kernel and headers" "$rc" 0
fi
kver=$new
status=$(guest dkms status vmw_balloon -k "$new")
note "dkms status for $new: $status"
check "upgrade: DKMS built and installed for $new while it installed" grep -Eqx \
	"vmw_balloon/$(ere "$version"), $(ere "$new"), x86_64: installed( \(Original modules exist\))?" <<<"$status"
check "upgrade: dkms status has no WARNING" eval '! guest dkms status | grep -q WARNING'
check "upgrade: update-grub made $new the default" \
	guest "grep -m1 -E '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg | grep -qF 'vmlinuz-$new '"

# The kernel's own module of the new kernel, as its package ships it (DKMS
# 3.1 and later move the file aside): how it is compressed tells what
# DKMS's copy must be called.
new_intree=$(guest "dpkg -S '*/modules/$new/kernel/drivers/misc/vmw_balloon.ko*'" | sed 's/^[^:]*: //')
note "the new kernel's own module: $new_intree"
ko=${new_intree##*/vmw_balloon}
check "upgrade: the new kernel has its own vmw_balloon in its tree" \
	grep -Eqx "(/usr)?/lib/modules/$(ere "$new")/kernel/drivers/misc/vmw_balloon\.ko(\.xz|\.zst|\.gz)?" <<<"$new_intree"

"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from the reboot into $new"
check_eq "reboot: the guest runs the new kernel" "$(guest uname -r)" "$new"
check "reboot: vmw_balloon is loaded after boot" guest 'test -d /sys/module/vmw_balloon'
file=$(guest modinfo -n vmw_balloon)
check "reboot: modinfo -n is DKMS's copy" \
	grep -Eqx "(/usr)?/lib/modules/$(ere "$new")/updates/dkms/vmw_balloon$(ere "$ko")" <<<"$file"
check_eq "reboot: the loaded module's version" "$(guest cat /sys/module/vmw_balloon/version)" "$version"
check_eq "reboot: the loaded module's srcversion is the DKMS-built file's" \
	"$(guest cat /sys/module/vmw_balloon/srcversion)" "$(guest modinfo -F srcversion "$file")"

want=$((1024 * 1024 / 4))
balloon_keep 1024
check "reboot: the host holds $want frames within 60 s" wait_for 60 host_locked_is "$want"
check "reboot: the driver's debugfs current agrees" wait_for 30 eval '[[ $(guest_stat current) == "$want" ]]'
balloon_keep 2048
check "reboot: the balloon empties within 60 s" wait_for 60 host_locked_is 0
check_dmesg_clean "boot 1 of $new"

# More boots of the new kernel: each must come up with a clean log and
# DKMS's module loaded.
for ((boot = 2; boot <= boots; boot++)); do
	if ! "$vm" reboot "$GUEST" >&2; then
		fail "boot $boot of $new: the guest came back"
		"$vm" console "$GUEST" -n 60 | sed 's/^/#   /'
		break
	fi
	check "boot $boot of $new: it runs $new with DKMS's vmw_balloon loaded" \
		guest "test \"\$(uname -r)\" = '$new' && test -e /sys/module/vmw_balloon/version"
	check_dmesg_clean "boot $boot of $new"
done

# The old kernel goes: its image and headers, purged.
old_packages=$(guest "dpkg-query -W -f='\${Package}\n' 'linux-image-$old' 'linux-headers-$old' \
	'linux-headers-${old%-cloud-amd64}-common' 2>/dev/null" | tr '\n' ' ')
note "purging $old_packages"
out=$(guest "DEBIAN_FRONTEND=noninteractive apt-get purge -y $old_packages 2>&1")
rc=$?
sed 's/^/#   | /' <<<"$out" | grep -Ei 'dkms|vmw_balloon|error|warning' | head -n 40
check_eq "purge old: apt purges the $old image and headers" "$rc" 0
check "purge old: no error or warning while removing" eval '! grep -Eqi "error|warning" <<<"$out"'
status=$(guest dkms status vmw_balloon)
note "dkms status: $status"
check "purge old: dkms status shows only $new, installed" grep -Eqx \
	"vmw_balloon/$(ere "$version"), $(ere "$new"), x86_64: installed( \(Original modules exist\))?" <<<"$status"
check "purge old: nothing of DKMS's is left for $old" \
	guest "test ! -e '/var/lib/dkms/vmw_balloon/$version/$old' && ! ls /lib/modules/$old/updates/dkms/vmw_balloon.ko* 2>/dev/null"
check_dmesg_clean "upgraded guest"

finish
