#!/bin/bash
# The package upgraded, pinned, downgraded and purged as an admin does it,
# from the project's signed repository as it lives on: it first carries the
# tree's version (OLD), then also a newer one built for this test from the
# same tree (NEW: the patch number plus one, tests/lib/bumped-deb),
# published into the same repository (debian/make-repo keeps the pool),
# while its signing key is rotated from A to B (test keys): OLD is signed
# by A, the publication of NEW by A and B, the last one by B alone. On a
# VMware-like guest of the full image (dkms, a compiler and the running
# kernel's headers already there: the genericcloud path is vmware.sh's and
# cloud-init.sh's; this test is about versions and keys):
#
#   the keyring package and vmw-balloon-dkms=OLD installed, reboot: OLD
#   autoloads;
#   NEW published (A and B): apt offers OLD and NEW; with OLD pinned, apt
#   upgrade takes the keyring package that holds B and keeps OLD;
#   unpinned, apt upgrade: DKMS removes OLD's build and builds NEW, dkms
#   status names NEW only; reboot: NEW autoloads and balloons 1 GiB;
#   published again by B alone: apt accepts it with no step of the admin's
#   and takes the keyring package that holds B alone;
#   apt install --allow-downgrades vmw-balloon-dkms=OLD: OLD only again;
#   apt purge: no trace in DKMS or /lib/modules, the kernel's own
#   vmw_balloon loads and balloons again.
#
# Verdicts come from the guest (apt, dpkg, dkms, modinfo, /sys/module) and
# from the emulated host (its locked frames).
#
#   tests/guest/upgrade-package.sh [SUITE]   bookworm (default: $VMB_SUITE
#                                            or bookworm), trixie or sid
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
use_suite "$@"
GUEST=${GUEST:-vmb-test-upgrade-package-$suite}

old=$version
new=$(awk -F. '{print $1 "." $2 "." $3 + 1}' <<<"$old")
work=$root/build/upgrade-package
ensure_deb
new_deb=$("$root/tests/lib/bumped-deb" "$new" "$work/deb" | tail -n 1) || bail "cannot build the $new .deb"
rm -rf "$work/repo" "$work/gnupg"
mkdir -p -m 700 "$work/gnupg"
export GNUPGHOME=$work/gnupg
for k in A B; do
	gpg --batch --passphrase '' --quick-gen-key "upgrade test key $k" rsa2048 sign never 2>/dev/null ||
		bail "cannot make test key $k"
done
fpr_of() { gpg --batch --with-colons --list-keys "$1" | awk -F: '$1 == "fpr" {print $10; exit}'; }
key_a=$(fpr_of "upgrade test key A") key_b=$(fpr_of "upgrade test key B")
# publish KEYS [DEB]: DEB (if any) into the repository, signed by KEYS
publish() {
	VMB_SIGNING_KEY=$1 VMB_REPO_URI=file:/opt/vmb/repo "$root/debian/make-repo" "$work/repo" "${@:2}" >/dev/null ||
		bail "cannot publish ${2:-the repository} signed by $1"
}
# push_repo: the guest's copy of the repository made the host's again
push_repo() {
	guest rm -rf /opt/vmb/repo && "$vm" copy "$GUEST" "$work/repo" /opt/vmb/ >&2 ||
		bail "cannot copy the repository into the guest"
}
publish "$key_a" "$deb"
repo_dir=$work/repo
hand_in_as repo "$repo_dir"
boot_with_deb VMware-like --file "$handed/repo"
learn_kernel_module
add_repository
guest "DEBIAN_FRONTEND=noninteractive apt-get install -y vmw-balloon-dkms-archive-keyring" >&2
check_eq "repository: the keyring package (1) owns the keyring" \
	"$(guest "dpkg-query -W -f='\${Version}\n' vmw-balloon-dkms-archive-keyring && dpkg -S /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg | cut -d: -f1" | xargs)" \
	"1 vmw-balloon-dkms-archive-keyring"
release=$(guest "apt-cache policy | grep -A1 'file:/opt/vmb/repo' | grep -o 'release .*'")
note "apt's view of the repository: $release"
check "repository: its release is o=vmw-balloon-dkms,a=vmw-balloon-dkms,n=vmw-balloon-dkms (no a=stable)" \
	grep -q 'o=vmw-balloon-dkms,a=vmw-balloon-dkms,n=vmw-balloon-dkms' <<<"$release"
# note_lines TEXT: each line of TEXT as a comment of the log
note_lines() {
	local line
	while IFS= read -r line; do echo "#     $line"; done <<<"$1"
}
# installed_version: what dpkg says is installed (empty if nothing)
installed_version() {
	guest "dpkg-query -W -f='\${db:Status-Abbrev} \${Version}' vmw-balloon-dkms 2>/dev/null" |
		awk '$1 == "ii" {print $2}'
}
# apt_run WHAT COMMAND: COMMAND (apt) in the guest, its DKMS lines in
# the log; checks that it exits 0
apt_run() {
	local out rc start=$SECONDS
	out=$(guest "DEBIAN_FRONTEND=noninteractive $2 2>&1")
	rc=$?
	note "$1: $2 took $((SECONDS - start)) s"
	grep -Ei 'vmw|dkms|error|warning' <<<"$out" | head -n 30 | sed 's/^/#   | /'
	check_eq "$1: $2 exits 0" "$rc" 0
}
# dkms_only WHAT VERSION: dkms status has one line for vmw_balloon, VERSION
# installed for the running kernel; /var/lib/dkms and /usr/src hold
# VERSION only; the module file in updates/dkms is VERSION's
dkms_only() {
	local status
	status=$(guest dkms status vmw_balloon)
	note "$1: dkms status: $status"
	check_eq "$1: dkms status has one line for vmw_balloon" "$(grep -c . <<<"$status")" 1
	check "$1: ... $2 installed for $kver" grep -Eqx \
		"vmw_balloon/$(ere "$2"), $(ere "$kver"), x86_64: installed( \(Original modules exist\))?" <<<"$status"
	check_eq "$1: DKMS keeps $2 only (/var/lib/dkms/vmw_balloon)" \
		"$(guest "ls /var/lib/dkms/vmw_balloon | grep -E '^[0-9]' | xargs")" "$2"
	check_eq "$1: /usr/src holds $2's sources only" \
		"$(guest "ls -d /usr/src/vmw_balloon-* | xargs")" "/usr/src/vmw_balloon-$2"
	check_eq "$1: the module in updates/dkms is $2" \
		"$(guest modinfo -F version "$moddir/updates/dkms/vmw_balloon$ko")" "$2"
}

# madison: the versions of vmw-balloon-dkms apt offers, oldest first
madison() {
	guest "apt-cache madison vmw-balloon-dkms | awk -F'|' '{gsub(/ /, \"\", \$2); print \$2}' | sort -V | xargs"
}
check_eq "repository: apt offers $old" "$(madison)" "$old"

# a. OLD by name, then a reboot: OLD autoloads
apt_run "install $old" "apt-get install -y vmw-balloon-dkms=$old"
check_eq "install $old: dpkg has $old installed" "$(installed_version)" "$old"
dkms_only "install $old" "$old"
check_dkms_installed "install $old"
"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
check_autoloaded

# NEW published into the same repository, signed by A and B
publish "$key_a $key_b" "$new_deb"
note "the pool: $(cd "$work/repo/pool/main" && echo *)"
push_repo
note "rotation, A and B: apt-get update says:"
note_lines "$(guest apt-get update 2>&1)"
check_eq "repository: apt offers $old and $new (the pool kept $old)" "$(madison)" "$old $new"
check "repository: apt's candidate is $new" \
	guest "apt-cache policy vmw-balloon-dkms | grep -qx '  Candidate: $(ere "$new")'"
keyring_version() { guest "dpkg-query -W -f='\${db:Status-Abbrev} \${Version}' vmw-balloon-dkms-archive-keyring" | awk '$1 == "ii" {print $2}'; }
guest_keyring_is_published() {
	[[ $(guest sha256sum /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg | cut -d' ' -f1) == \
		$(sha256sum <"$work/repo/vmw-balloon-dkms-archive-keyring.gpg" | cut -d' ' -f1) ]]
}

# OLD pinned: apt upgrade takes the new keyring package, not NEW
guest "printf 'Package: vmw-balloon-dkms\nPin: version $old\nPin-Priority: 1001\n' >/etc/apt/preferences.d/vmw-balloon-dkms"
apt_run "pinned" "apt-get upgrade -y"
check_eq "pinned: dpkg still has $old" "$(installed_version)" "$old"
check_eq "rotation: apt upgrade took keyring package 2 (A and B)" "$(keyring_version)" 2
check "rotation: the guest's keyring is the published one (A and B)" guest_keyring_is_published
guest rm /etc/apt/preferences.d/vmw-balloon-dkms

# b. apt upgrade: DKMS removes OLD's build and builds NEW
before=$(guest dkms status)
apt_run "upgrade" "apt-get upgrade -y"
after=$(guest dkms status)
note "dkms status before the upgrade:"
note_lines "$before"
note "dkms status after the upgrade:"
note_lines "$after"
check_eq "upgrade: dpkg has $new installed" "$(installed_version)" "$new"
dkms_only "upgrade" "$new"
check_eq "upgrade: until a reboot, the running module is still $old" \
	"$(guest cat /sys/module/vmw_balloon/version)" "$old"

# c. reboot: NEW autoloads and balloons
"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
version=$new check_autoloaded
want=$((1024 * 1024 / 4))
balloon_keep 1024
start=$SECONDS
check "$new: the host holds $want frames (1 GiB) within 60 s" wait_for 60 host_locked_is "$want"
note "inflated in $((SECONDS - start)) s"
# shellcheck disable=SC2016 # evaluated by wait_for
check "$new: the driver's debugfs current agrees" wait_for 30 eval '[[ $(guest_stat current) == "$want" ]]'
balloon_keep 2048
check "$new: deflates to 0" wait_for 60 host_locked_is 0

# Published again by B alone: the guest follows with no step of its own
publish "$key_b"
push_repo
update_out=$(guest apt-get update 2>&1)
note "rotation, B alone: apt-get update says:"
note_lines "$update_out"
check "rotation: apt update reports no signature problem" \
	eval '! grep -Ei "NO_PUBKEY|not signed|EXPKEYSIG|BADSIG|is not valid|^(W|E):" <<<"$update_out"'
apt_run "rotation, B alone" "apt-get upgrade -y"
check_eq "rotation: apt upgrade took keyring package 3 (B alone)" "$(keyring_version)" 3
check "rotation: the guest's keyring is the published one (B alone)" guest_keyring_is_published
check_eq "rotation: the published keyring holds B alone" \
	"$(gpg --batch --with-colons --show-keys "$work/repo/vmw-balloon-dkms-archive-keyring.gpg" | awk -F: '$1 == "pub" {p = 1} $1 == "fpr" && p {print $10; p = 0}' | xargs)" "$key_b"

# d. downgrade to OLD
apt_run "downgrade" "apt-get install -y --allow-downgrades vmw-balloon-dkms=$old"
note "dkms status after the downgrade:"
note_lines "$(guest dkms status)"
check_eq "downgrade: dpkg has $old installed" "$(installed_version)" "$old"
dkms_only "downgrade" "$old"

# e. purge: nothing of ours is left, and the kernel's own driver is back
apt_run "purge" "apt-get purge -y vmw-balloon-dkms"
note "dkms status after the purge: '$(guest dkms status)'"
check_eq "purge: dpkg knows no vmw-balloon-dkms" \
	"$(guest "dpkg-query -W -f='\${db:Status-Abbrev}' vmw-balloon-dkms 2>/dev/null | xargs")" ""
check_eq "purge: dkms status has no vmw_balloon" "$(guest "dkms status | grep vmw_balloon")" ""
check "purge: /var/lib/dkms has no vmw_balloon" guest test ! -e /var/lib/dkms/vmw_balloon
check_eq "purge: /usr/src has no vmw_balloon sources" "$(guest "ls -d /usr/src/vmw_balloon-* 2>/dev/null")" ""
check_eq "purge: no vmw_balloon under any updates/ of /lib/modules" \
	"$(guest "find /lib/modules/ /usr/lib/modules/ -path '*/updates/*' -name 'vmw_balloon*' 2>/dev/null")" ""
check_eq "purge: modinfo -n is the kernel's own module" "$(guest modinfo -n vmw_balloon)" "$intree"
check "purge: the kernel's own module file is there" guest test -f "$intree"
check "purge: the kernel's own vmw_balloon loads in place of DKMS's" \
	guest "rmmod vmw_balloon && modprobe vmw_balloon && test ! -e /sys/module/vmw_balloon/version &&
		! grep -q O /sys/module/vmw_balloon/taint"
balloon_keep 1024
check "purge: the kernel's own driver balloons 1 GiB within 180 s" wait_for 180 host_locked_is "$want"
balloon_keep 2048
check "purge: and deflates to 0" wait_for 180 host_locked_is 0
check_dmesg_clean "upgrade and downgrade"

finish
