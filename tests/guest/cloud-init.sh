#!/bin/bash
# The package rolled out with cloud-init, as a fleet does: a fresh guest of
# the genericcloud image (no dkms, compiler or kernel headers; apt's daily
# timers and unattended-upgrades on, as on Debian's own image) boots with
# the project's cloud-config (cloud-init-user-data.yaml, made by
# debian/make-repo from debian/cloud-init-user-data.yaml.in, keyring
# embedded, repository URI file:/opt/vmb/repo) and nothing else from the
# test but:
#  - the guest's way to packages: the repository and a partial Debian
#    mirror (tests/lib/partial-mirror) handed in as files, and the image's
#    unreachable Debian sources put aside;
#  - what a real first boot may meet: unattended-upgrades run at first boot
#    (unattended-upgrade run from bootcmd, to its end; then apt-daily and
#    apt-daily-upgrade.service started, which run once the network is up,
#    beside the project's runcmd, if they get to it: their state is shown), and dpkg's locks held from bootcmd
#    until the project's runcmd is seen waiting for them (released then;
#    without the wait the install fails, and the holder keeps the lock for
#    15 minutes). bootcmd runs before sysinit.target: what it starts must
#    not wait for it (systemctl --no-block, DefaultDependencies=no);
#  - a balloon target set before boot (256 MiB), so that the kernel's own
#    vmw_balloon, which udev loads, holds memory when the package arrives.
# Verdicts come from the guest and from the emulated host: the first boot
# completes, the runcmd waited for the lock, the keyring package owns the
# keyring, nothing recommended came along; the kernel's own driver kept
# the balloon (the host saw one START, no unload); after a reboot DKMS's
# module runs and balloons 1 GiB.
#
# --without-headers: the host-served mirror has neither the running
# kernel's headers nor its flavour's headers metapackage (an archive that
# has moved on); no target before boot. The first boot completes, the
# package is installed, its log names exactly what is missing, and the
# kernel's own driver balloons 1 GiB.
#
#   tests/guest/cloud-init.sh [--without-headers] [SUITE]   SUITE: trixie
#                                       (default), bookworm or sid
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
without_headers=0
if [[ ${1:-} == --without-headers ]]; then
	without_headers=1
	shift
fi
use_suite "${1:-trixie}"
mode=$( ((without_headers)) && echo -no-headers)
GUEST=${GUEST:-vmb-test-cloud-init-$suite$mode}

work=$root/build/guest-cloud-init-$suite$mode
ensure_deb
rm -rf "$work"
mkdir -p "$work"
repo_dir=$(VMB_REPO_URI=file:/opt/vmb/repo "$root/debian/make-repo" "$work/repo" "$deb" | tail -n 1) ||
	bail "cannot make the repository"
user_data=$repo_dir/cloud-init-user-data.yaml
mirror_opts=()
((without_headers == 0)) || mirror_opts=(--without-running-headers)
mirror=$("$root/tests/lib/partial-mirror" "${mirror_opts[@]}" "$suite" "$repo_dir" | tail -n 1) ||
	bail "cannot make the partial Debian mirror for the $suite guest"
note "the Debian mirror handed in: $(find "$mirror/pool" -name 'linux-headers-*' -printf '%f ' | xargs) ($(find "$mirror/pool" -name '*.deb' | wc -l) packages)"
hand_in_as repo "$repo_dir"
hand_in_as debian "$mirror"

# The test's own part. The harness copies the handed-in files to /opt/vmb
# in an earlier bootcmd; write_files runs after bootcmd, the project's
# runcmd last. bootcmd runs at every boot: cloud-init-per once keeps
# unattended-upgrades and the lock to the first.
cat >"$work/first-boot.yaml" <<'CLOUD'
#cloud-config
bootcmd:
  - [sh, -c, "mkdir -p /etc/apt/offline && mv /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources /etc/apt/offline/ 2>/dev/null; true"]
  - [cloud-init-per, once, vmb-test-uu, sh, -c, "unattended-upgrade -v; echo \"vmb-test: unattended-upgrade exited $?\"; systemctl start --no-block apt-daily.service apt-daily-upgrade.service"]
  - [cloud-init-per, once, vmb-test-lock, systemd-run, --no-block, -p, DefaultDependencies=no, --unit=vmb-test-dpkg-lock, python3, -c, "import fcntl, os, time\nlocks = [open(p, 'a') for p in ('/var/lib/dpkg/lock-frontend', '/var/lib/dpkg/lock')]\nfor f in locks:\n    fcntl.lockf(f, fcntl.LOCK_EX)\nopen('/run/vmb-test-dpkg-locked', 'w').close()\nend = time.time() + 900\nwhile time.time() < end:\n    try:\n        if 'Waiting for cache lock' in open('/var/log/cloud-init-output.log', errors='replace').read():\n            break\n    except OSError:\n        pass\n    time.sleep(1)\ntime.sleep(5)\nprint('vmb-test: dpkg lock released', flush=True)\n"]
  - [cloud-init-per, once, vmb-test-locked, sh, -c, "for i in $(seq 60); do [ -e /run/vmb-test-dpkg-locked ] && exit 0; sleep 1; done; echo vmb-test: the lock holder did not start; exit 1"]
write_files:
  - path: /etc/apt/sources.list.d/debian-partial.sources
    content: |
      Types: deb
      URIs: file:/opt/vmb/debian
      Suites: stable
      Components: main
      Signed-By: /opt/vmb/debian/vmw-balloon-dkms-archive-keyring.gpg
CLOUD
note "the project's cloud-config ($user_data), without the keyring:"
grep -v '^    content: [A-Za-z0-9+/=]*$' "$user_data" | grep -v '^#' | sed 's/^/#   | /'

target_mib=256
device_opts=()
((without_headers)) || device_opts=(--device-opts "x-target-frames=$((target_mib * 256))")
"$vm" stop "$GUEST" --kill >/dev/null 2>&1
start=$SECONDS
"$vm" start "$GUEST" --suite "$suite" --variant genericcloud --mem 2G "${device_opts[@]}" \
	--file "$handed/repo" --file "$handed/debian" \
	--user-data "$user_data" --user-data "$work/first-boot.yaml" --timeout 2400 >&2 ||
	bail "the genericcloud $suite guest did not finish its first boot with the user-data"
note "first boot with the user-data, cloud-init included: $((SECONDS - start)) s"
kver=$(guest uname -r)
note "$suite genericcloud guest, kernel $kver, package $version"
output=$(guest cat /var/log/cloud-init-output.log)
grep -Ei 'vmb-test|vmw-balloon|dkms|headers|waiting for cache lock|error' <<<"$output" | uniq -c | head -n 40 | sed 's/^/#   | /'

# The first boot: cloud-init done without errors, after meeting
# unattended-upgrades and a held dpkg lock
check_eq "cloud-init: status done" "$(guest cloud-init status | awk '/^status:/ {print $2}')" "done"
check_eq "cloud-init: no errors in result.json" \
	"$(guest "python3 -c 'import json; print(len(json.load(open(\"/run/cloud-init/result.json\"))[\"v1\"][\"errors\"]))'")" 0
check "first boot: unattended-upgrades ran (its log)" \
	guest "grep -q 'Starting unattended upgrades script' /var/log/unattended-upgrades/unattended-upgrades.log"
# apt's daily services were started beside the runcmd: whether they got to
# run before it ended is a race, so it is reported, not judged
note "apt-daily.service and apt-daily-upgrade.service: $(guest "systemctl show -P ActiveState -P Result -P ExecMainStartTimestamp apt-daily.service apt-daily-upgrade.service" | xargs)"
check "first boot: the timers that run apt are on (apt-daily, apt-daily-upgrade)" \
	guest "systemctl is-enabled apt-daily.timer apt-daily-upgrade.timer | grep -vqx enabled && exit 1; true"
check "first boot: the project's runcmd waited for dpkg's lock ('Waiting for cache lock' in its output)" \
	grep -q 'Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend' <<<"$output"
check "first boot: the lock holder let go once the wait was seen" \
	guest "journalctl -u vmb-test-dpkg-lock -o cat | grep -qx 'vmb-test: dpkg lock released'"

# What was installed
check_eq "install: dpkg has vmw-balloon-dkms $version" \
	"$(guest "dpkg-query -W -f='\${db:Status-Abbrev} \${Version}' vmw-balloon-dkms" | xargs)" "ii $version"
check_eq "install: the keyring package owns the keyring the sources entry names" \
	"$(guest dpkg -S /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg)" \
	"vmw-balloon-dkms-archive-keyring: /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg"
check "install: the sources entry is Signed-By that keyring" \
	guest "grep -qx 'Signed-By: /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg' /etc/apt/sources.list.d/vmw-balloon-dkms.sources"
check_eq "install: nothing recommended came along (no fakeroot, no generic headers)" \
	"$(guest "dpkg-query -W -f='\${db:Status-Abbrev} \${Package}\n' fakeroot linux-headers-amd64 2>/dev/null | awk '\$1 == \"ii\" {print \$2}'")" ""
meta=linux-headers-$(sed 's/^[0-9][0-9.]*\(-[0-9][0-9]*\)\{0,1\}\(+[^-]*\)\{0,1\}-//' <<<"$kver")
installed() { guest "dpkg-query -W -f='\${db:Status-Abbrev}' $1 2>/dev/null | grep -q '^ii'"; }
journal=$(guest journalctl -t vmw-balloon-dkms -o cat)
note "the journal, -t vmw-balloon-dkms:"
sed 's/^/#   | /' <<<"$journal"

if ((without_headers)); then
	check "headers: linux-headers-$kver is not installed (the mirror lacks it)" eval "! installed linux-headers-$kver"
	check "log: says linux-headers-$kver is not in the archive, and what that means" grep -Fq \
		"first boot: linux-headers-$kver is not in the archive: DKMS cannot build vmw_balloon for the running kernel $kver" <<<"$journal"
	check "log: says $meta is not in the archive" grep -Fq "first boot: $meta is not in the archive" <<<"$journal"
	check "log: the same lines in cloud-init's output" grep -Fq \
		"vmw-balloon-dkms: linux-headers-$kver is not in the archive" <<<"$output"
	check "running: the kernel's own vmw_balloon (no version, no out-of-tree taint)" \
		guest "test -d /sys/module/vmw_balloon && test ! -e /sys/module/vmw_balloon/version && ! grep -q O /sys/module/vmw_balloon/taint"
	# the next boot: the package's loader finds no DKMS module for this
	# kernel, loads the kernel's own, and names the packages to install
	"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
	boot_journal=$(guest journalctl -b -t vmw-balloon-dkms -o cat)
	sed 's/^/#   journal, after reboot | /' <<<"$boot_journal"
	check "after reboot: the loader says there are no headers and names both packages" grep -Fq \
		"DKMS has not built vmw_balloon for $kver: its headers are not installed. To build it for this kernel and the next ones: apt install linux-headers-$kver $meta: loaded the kernel's own" <<<"$boot_journal"
	check "after reboot: the kernel's own vmw_balloon is loaded" \
		guest "test -d /sys/module/vmw_balloon && test ! -e /sys/module/vmw_balloon/version"
	check_balloons "balloon: the kernel's own driver" 180
	check_dmesg_clean "cloud-init guest, no headers"
	finish
	exit
fi

check "headers: the running kernel's ($kver) are installed" installed "linux-headers-$kver"
check "headers: its flavour's metapackage, $meta, is installed" installed "$meta"
status=$(guest dkms status vmw_balloon)
note "dkms status: $status"
check "install: dkms status says installed for $kver" grep -Eqx \
	"vmw_balloon/$(ere "$version"), $(ere "$kver"), x86_64: installed( \(Original modules exist\))?" <<<"$status"

# The kernel's own driver held $target_mib MiB when the package came: it
# keeps it (not unloaded: the host saw that driver's one START only)
frames=$((target_mib * 256))
check "first boot: the kernel's own vmw_balloon still runs" \
	guest "test -d /sys/module/vmw_balloon && test ! -e /sys/module/vmw_balloon/version"
check "log: the runcmd left it, saying it holds the balloon" grep -Eq \
	"first boot: the kernel's own vmw_balloon holds $frames pages: it keeps them until the next boot" <<<"$journal"
check_eq "host: one START in the whole first boot (no driver was unloaded and loaded)" "$(host_get x-calls-start)" 1
check_eq "host: the balloon still holds $frames frames" "$(host_get x-locked-frames)" "$frames"

# The next boot: DKMS's module
"$vm" reboot "$GUEST" >&2 || bail "the guest did not come back from reboot"
file=$(guest modinfo -n vmw_balloon)
check "after reboot: modinfo -n is DKMS's copy ($file)" \
	grep -Eqx "(/usr)?/lib/modules/$(ere "$kver")/updates/dkms/vmw_balloon\.ko(\.xz|\.zst|\.gz)?" <<<"$file"
check_eq "after reboot: the loaded module's version (the kernel's own has none)" \
	"$(guest cat /sys/module/vmw_balloon/version 2>/dev/null)" "$version"
check "after reboot: taint shows an out-of-tree module" guest 'grep -q O /sys/module/vmw_balloon/taint'

# The host: 1 GiB locked after a 1 GiB target
want=$((1024 * 1024 / 4))
balloon_keep 1024
start=$SECONDS
check "balloon: the host holds $want frames (1 GiB) within 60 s" wait_for 60 host_locked_is "$want"
note "inflated in $((SECONDS - start)) s"
# shellcheck disable=SC2016 # evaluated by wait_for
check "balloon: the driver's debugfs current agrees" wait_for 30 eval '[[ $(guest_stat current) == "$want" ]]'
balloon_keep 2048
check "balloon: deflates to 0" wait_for 60 host_locked_is 0
check_dmesg_clean "cloud-init guest"

finish
