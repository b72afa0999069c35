#!/bin/bash
# The package rolled out with cloud-init, as a fleet does: a fresh guest of
# the genericcloud image (no dkms, compiler or kernel headers) boots with
# the project's cloud-config (build/.../cloud-init-user-data.yaml, made by
# debian/make-repo from debian/cloud-init-user-data.yaml.in, the key
# embedded and the repository's URI file:/opt/vmb/repo) and nothing else
# from the test but the guest's way to packages: the repository and a
# partial Debian mirror (tests/lib/partial-mirror) handed in as files, and
# a cloud-config of the test's own that puts the image's unreachable
# Debian sources aside and adds the mirror. After that first boot, with no
# other step, DKMS's module (not the kernel's) runs and the guest balloons
# 1 GiB. The project's cloud-config swaps the modules itself (no reboot).
# Verdicts come from the guest and from the emulated host.
#
#   tests/guest/cloud-init.sh [SUITE]   bookworm (default: $VMB_SUITE or
#                                       bookworm), trixie or sid
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
use_suite "$@"
GUEST=${GUEST:-vmb-test-cloud-init-$suite}

work=$root/build/guest-cloud-init-$suite
ensure_deb
mkdir -p "$work"
repo_dir=$(VMB_REPO_URI=file:/opt/vmb/repo "$root/debian/make-repo" "$work/repo" "$deb" | tail -n 1) ||
	bail "cannot make the repository"
user_data=$repo_dir/cloud-init-user-data.yaml
mirror=$("$root/tests/lib/partial-mirror" "$suite" "$repo_dir" | tail -n 1) ||
	bail "cannot make the partial Debian mirror for the $suite guest"
hand_in_as repo "$repo_dir"
hand_in_as debian "$mirror"

# The test's own part: only what stands in for the network the guest
# lacks. The harness copies the handed-in files to /opt/vmb in an earlier
# bootcmd; write_files runs after bootcmd, the project's runcmd last.
cat >"$work/offline.yaml" <<'CLOUD'
#cloud-config
bootcmd:
  - [sh, -c, "mkdir -p /etc/apt/offline && mv /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources /etc/apt/offline/ 2>/dev/null; true"]
write_files:
  - path: /etc/apt/sources.list.d/debian-partial.sources
    content: |
      Types: deb
      URIs: file:/opt/vmb/debian
      Suites: stable
      Components: main
      Signed-By: /opt/vmb/debian/vmw-balloon-dkms-archive-keyring.gpg
CLOUD
note "the project's cloud-config ($user_data), without the key:"
grep -v '^      [A-Za-z0-9+/=]*$' "$user_data" | grep -v '^#' | sed 's/^/#   | /'

"$vm" stop "$GUEST" --kill >/dev/null 2>&1
start=$SECONDS
"$vm" start "$GUEST" --suite "$suite" --variant genericcloud --mem 2G \
	--file "$handed/repo" --file "$handed/debian" \
	--user-data "$user_data" --user-data "$work/offline.yaml" --timeout 2400 >&2 ||
	bail "the genericcloud $suite guest did not finish its first boot with the user-data"
note "first boot with the user-data, cloud-init included: $((SECONDS - start)) s"
kver=$(guest uname -r)
note "$suite genericcloud guest, kernel $kver, package $version"
guest "grep -Ei 'vmw|dkms|headers|error|warning' /var/log/cloud-init-output.log" | head -n 40 | sed 's/^/#   | /'

# The guest: cloud-init done without errors, the package and the running
# kernel's headers installed, DKMS's module the one running
check_eq "cloud-init: status done" "$(guest cloud-init status | awk '/^status:/ {print $2}')" "done"
check_eq "cloud-init: no errors in result.json" \
	"$(guest "python3 -c 'import json; print(len(json.load(open(\"/run/cloud-init/result.json\"))[\"v1\"][\"errors\"]))'")" 0
check "repository: added signed-by the project's key" \
	guest "grep -qx 'Signed-By: /etc/apt/keyrings/vmw-balloon-dkms-archive-keyring.asc' /etc/apt/sources.list.d/vmw-balloon-dkms.sources &&
		grep -q 'BEGIN PGP PUBLIC KEY BLOCK' /etc/apt/keyrings/vmw-balloon-dkms-archive-keyring.asc"
check_eq "install: dpkg has vmw-balloon-dkms $version" \
	"$(guest "dpkg-query -W -f='\${db:Status-Abbrev} \${Version}' vmw-balloon-dkms" | xargs)" "ii $version"
check "install: the running kernel's headers are installed" \
	guest "dpkg-query -W -f='\${db:Status-Abbrev}' linux-headers-$kver | grep -q '^ii'"
status=$(guest dkms status vmw_balloon)
note "dkms status: $status"
check "install: dkms status says installed for $kver" grep -Eqx \
	"vmw_balloon/$(ere "$version"), $(ere "$kver"), x86_64: installed( \(Original modules exist\))?" <<<"$status"
file=$(guest modinfo -n vmw_balloon)
check "running: modinfo -n is DKMS's copy ($file)" \
	grep -Eqx "(/usr)?/lib/modules/$(ere "$kver")/updates/dkms/vmw_balloon\.ko(\.xz|\.zst|\.gz)?" <<<"$file"
check_eq "running: the loaded module's version (the kernel's own has none)" \
	"$(guest cat /sys/module/vmw_balloon/version 2>/dev/null)" "$version"
check_eq "running: the loaded module's srcversion is the DKMS-built file's" \
	"$(guest cat /sys/module/vmw_balloon/srcversion)" "$(guest modinfo -F srcversion "$file")"
check "running: taint shows an out-of-tree module" guest 'grep -q O /sys/module/vmw_balloon/taint'

# The host: 1 GiB locked after a 1 GiB target
want=$((1024 * 1024 / 4))
balloon_keep 1024
start=$SECONDS
check "balloon: the host holds $want frames (1 GiB) within 60 s" wait_for 60 host_locked_is "$want"
note "inflated in $((SECONDS - start)) s"
note "the host's 2 MiB entries: $(host_get x-locked-2m)"
# shellcheck disable=SC2016 # evaluated by wait_for
check "balloon: the driver's debugfs current agrees" wait_for 30 eval '[[ $(guest_stat current) == "$want" ]]'
balloon_keep 2048
check "balloon: deflates to 0" wait_for 60 host_locked_is 0
check_dmesg_clean "cloud-init guest"

finish
