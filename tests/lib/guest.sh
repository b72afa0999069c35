# shellcheck shell=bash
# What the guest tests share: TAP output, running commands in the guest,
# and reading the emulated host (the vmware-balloon device) over QMP.
# A test sets GUEST (the guest's name) before calling anything here, and
# boots it with `"$vm" start "$GUEST" --suite "$suite" ...`.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
vm=$root/qemu-cloud/vm
version=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$/\1/p' "$root/dkms.conf")
deb=$root/build/deb/vmw-balloon-dkms_${version}_all.deb
device=/machine/peripheral/vmb0
kver= # the guest's `uname -r`: each test sets it once its guest is up
mirror_opts=() # options for tests/lib/partial-mirror (boot_genericcloud)

tap_n=0 tap_passed=0 tap_failed=0 tap_skipped=0

pass() {
	tap_n=$((tap_n + 1)) tap_passed=$((tap_passed + 1))
	echo "ok $tap_n - $*"
}

fail() {
	tap_n=$((tap_n + 1)) tap_failed=$((tap_failed + 1))
	echo "not ok $tap_n - $*"
}

# skip DESCRIPTION REASON: a test that cannot run here (e.g. the kernel
# lacks the feature), printed as a TAP skip; it counts as passed
skip() {
	tap_n=$((tap_n + 1)) tap_passed=$((tap_passed + 1)) tap_skipped=$((tap_skipped + 1))
	echo "ok $tap_n - $1 # SKIP $2"
}

# check DESCRIPTION COMMAND...: one test, passing when COMMAND succeeds
check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

# check_eq DESCRIPTION GOT WANT
check_eq() {
	if [[ $2 == "$3" ]]; then
		pass "$1"
	else
		fail "$1"
		echo "#   got '$2', want '$3'"
	fi
}

# check_range DESCRIPTION VALUE LOW HIGH (integers, inclusive)
check_range() {
	if (($2 >= $3 && $2 <= $4)); then
		pass "$1 ($2)"
	else
		fail "$1"
		echo "#   got $2, want $3..$4"
	fi
}

note() {
	echo "# $*"
}

# Stop everything and print the summary; the exit status says if all passed.
finish() {
	"$vm" stop "$GUEST" >/dev/null 2>&1 || true
	echo "1..$tap_n"
	((tap_skipped == 0)) || echo "# $tap_skipped of the passed were skipped"
	echo "$tap_passed passed, $tap_failed failed"
	((tap_failed == 0 && tap_n > 0))
}

# Give up on the remaining tests, with the reason and the guest's console.
bail() {
	fail "$*"
	"$vm" console "$GUEST" -n 30 2>/dev/null | sed 's/^/#   | /'
	finish
	exit 1
}

# guest COMMAND: run COMMAND in the guest as root, for at most
# $guest_timeout seconds (900 unless a caller sets it)
guest() {
	"$vm" ssh "$GUEST" --timeout "${guest_timeout:-900}" -- "$@" </dev/null
}

# host_get PROPERTY: a counter or setting of the emulated host
host_get() {
	"$vm" qmp "$GUEST" qom-get "{\"path\": \"$device\", \"property\": \"$1\"}"
}

# host_set PROPERTY JSON-VALUE: fault injection and settings
host_set() {
	"$vm" qmp "$GUEST" qom-set "{\"path\": \"$device\", \"property\": \"$1\", \"value\": $2}" >/dev/null
}

# QMP events.  A client that listens for them needs a QMP monitor of its
# own: a monitor serves one client at a time, and each `vm qmp` call is
# one.  Boot with "$(events_monitor_arg)" among the `vm start` arguments,
# then listen_for_events; what the client saw is in $events_log.
events_monitor_arg() {
	echo "--qemu-arg=unix:${VMB_RUN_DIR:-/tmp/vmb-run}/$GUEST-events.sock,server=on,wait=off"
}
listen_for_events() {
	events_log=${VMB_RUN_DIR:-/tmp/vmb-run}/$GUEST-events.log
	"$root/tests/lib/qmp-events" "${VMB_RUN_DIR:-/tmp/vmb-run}/$GUEST-events.sock" 3600 \
		>"$events_log" 2>&1 &
	events_pid=$!
	wait_for 30 grep -qx ready "$events_log"
}
stop_listening() {
	kill "${events_pid:-}" 2>/dev/null
	wait "${events_pid:-}" 2>/dev/null
	events_pid=
}
# last_balloon_change: "actual" of the last BALLOON_CHANGE event seen (the
# monitor passes on at most one a second, the newest at the end of it)
last_balloon_change() {
	grep '"BALLOON_CHANGE"' "$events_log" | tail -n 1 |
		/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["actual"])' 2>/dev/null
}

# balloon_keep MIB: ask, as QEMU's `balloon` command does, that the guest
# keep MIB of its memory; the rest goes into the balloon.
balloon_keep() {
	"$vm" qmp "$GUEST" balloon "{\"value\": $(($1 * 1024 * 1024))}" >/dev/null
}

# check_balloons LABEL SECONDS: in a 2 GiB guest, the host holds 1 GiB
# within SECONDS of asking the guest to keep 1 GiB, and nothing within
# SECONDS of asking it to keep all
check_balloons() {
	local want=$((1024 * 1024 / 4))
	balloon_keep 1024
	check "$1: the host holds $want frames (1 GiB) within $2 s" wait_for "$2" host_locked_is "$want"
	balloon_keep 2048
	check "$1: back to 0 frames within $2 s" wait_for "$2" host_locked_is 0
}

# guest_meminfo FIELD: a /proc/meminfo value of the guest, in KiB
guest_meminfo() {
	guest "awk '\$1 == \"$1:\" {print \$2}' /proc/meminfo"
}

# guest_stat NAME: a number from the driver's debugfs file
guest_stat() {
	guest "awk -F: '\$1 ~ /^$1 *\$/ {gsub(/ /, \"\", \$2); print \$2}' /sys/kernel/debug/vmmemctl"
}

# A guest shell snippet printing, in KiB, what the guest could give once its
# page cache is dropped: MemAvailable plus the free pages parked on the
# per-CPU lists, which MemAvailable leaves out (up to some 30 MiB a CPU:
# 2 MiB pages the balloon frees land there too).
# shellcheck disable=SC2016 # expanded in the guest
available_kib_sh='sync; echo 3 > /proc/sys/vm/drop_caches
	echo $(( $(awk "\$1 == \"MemAvailable:\" {print \$2}" /proc/meminfo) +
		4 * $(awk "\$1 == \"count:\" {n += \$2} END {print n + 0}" /proc/zoneinfo) ))'

# guest_available_kib: that number
guest_available_kib() {
	guest "$available_kib_sh"
}

# measure_avail_noise: how much that number moves in an idle guest, as
# the leak checks sample it (one ssh call each): its spread (max - min)
# over 20 samples, into avail_noise_kib; avail_tolerance_kib is twice
# that, but at least 4 MiB. The leak checks that compare it allow
# avail_tolerance_kib either way. The floor is measured too: in a
# reliability run whose 20 idle samples spread over 500 KiB, one case's
# single baseline sample stood 2.3 MiB above every other case's, for no
# page held by host or driver (their counts were exactly 0).
measure_avail_noise() {
	local i a lo='' hi=''
	for i in $(seq 20); do
		a=$(guest_available_kib)
		[[ $a =~ ^[0-9]+$ ]] || bail "cannot read the guest's available memory (sample $i: '$a')"
		if [[ -z $lo ]] || ((a < lo)); then lo=$a; fi
		if [[ -z $hi ]] || ((a > hi)); then hi=$a; fi
	done
	avail_noise_kib=$((hi - lo))
	avail_tolerance_kib=$((2 * avail_noise_kib > 4096 ? 2 * avail_noise_kib : 4096))
	note "idle noise of the available memory: $lo..$hi KiB over 20 samples;" \
		"the leak checks allow +-$avail_tolerance_kib KiB"
}

# avail_settled LO HI: the available memory (guest_available_kib) once it
# is in LO..HI, sampled every 5 s for up to 60 s; else the last sample.
# Right after a deflation or a restore from a migration stream the guest
# still holds a few MiB it frees a moment later (one reliability run read
# 27 MiB short just after a restore, and back within 113 pages a minute
# later); a leak never comes back, so the bound stays the same.
avail_settled() {
	local lo=$1 hi=$2 a i
	for i in $(seq 12); do
		a=$(guest_available_kib)
		if [[ $a =~ ^[0-9]+$ ]] && ((a >= lo && a <= hi)); then
			break
		fi
		((i < 12)) && sleep 5
	done
	echo "$a"
}

# driver_counts: what the driver says it holds, from its debugfs file:
# "current 4K-PAGES 2M-PAGES". The per-size counts follow from the page
# counters: a 2 MiB page is in the balloon once allocated, unless the host
# refused it or it was freed (alloc - errAlloc - free); a 4 KiB page once
# allocated or cut from a refused 2 MiB page that was not freed whole
# (512 each), unless freed or freed as refused. "missing" if a line is.
driver_counts() {
	# shellcheck disable=SC2016 # an awk program
	local prog='{k = $1; gsub(/ /, "", k); v = $2; sub(/\(.*/, "", v); s[k] = v + 0; seen[k] = 1}
		END {
			n = split("current alloc(4k) alloc(2M) errAlloc(2M) errFree(2M) errFree(4k) free(4k) free(2M)", need, " ")
			for (i = 1; i <= n; i++) if (!seen[need[i]]) {print "missing", need[i]; exit}
			print s["current"],
				s["alloc(4k)"] + 512 * (s["errAlloc(2M)"] - s["errFree(2M)"]) - s["errFree(4k)"] - s["free(4k)"],
				s["alloc(2M)"] - s["errAlloc(2M)"] - s["free(2M)"]
		}'
	guest "awk -F: '$prog' /sys/kernel/debug/vmmemctl"
}

# check_nothing_held WHAT: after deflating, neither side holds one page:
# the host's locked frames and 2 MiB entries, the driver's current and
# its per-size counts (driver_counts) are all exactly 0
check_nothing_held() {
	check_eq "$1: nothing held: host x-locked-frames, x-locked-2m; driver current, 4k and 2M pages" \
		"$(host_get x-locked-frames) $(host_get x-locked-2m) $(driver_counts)" "0 0 0 0 0"
}

# use_caps CAPS: the host offers CAPS, resets, and the driver takes them:
# a check, since every case after it needs them. The reset goes to the
# driver's next command, whichever it is; what is waited for is the
# driver's reset count going up, so a driver that already used CAPS
# cannot satisfy the wait before the reset happened.
use_caps() {
	local resets0
	want_caps=$(($1))
	resets0=$(guest_stat reset)
	host_set x-offered-capabilities "$want_caps"
	host_set x-reset-next true
	check "caps $1: the driver started again with $1" wait_for "${fill_seconds:-60}" eval \
		'(( $(guest_stat reset) > resets0 && $(guest_stat "used capabilities") == want_caps )) &&
		[[ $(guest_stat "is resetting") == n ]]'
}

# fill WHAT FRAMES: a case's setup, the balloon at FRAMES within
# $fill_seconds (default 120): a check, since a case that goes on without
# it would test nothing
fill() {
	host_set x-target-frames "$2"
	check "$1: setup: the balloon holds $2 frames" wait_for "${fill_seconds:-120}" host_locked_is "$2"
}

# reload_cycles CYCLES FRAMES SECONDS: in the guest, to be quick: unload
# vmw_balloon with the balloon full, load it, wait (at most SECONDS) for
# the driver to hold FRAMES again, and again; prints the cycles completed
# (and, as TAP comments on stderr, how long each unload and refill took)
reload_cycles() {
	# the ssh's own limit: SECONDS of waiting is counted in polls, and
	# an unload and the polls' awk take long on a debug kernel under TCG
	"$vm" ssh "$GUEST" --timeout $(($1 * (3 * $3 + 300))) -- "n=0
		for i in \$(seq $1); do
			start=\$(date +%s)
			rmmod vmw_balloon || break
			unloaded=\$(date +%s)
			modprobe vmw_balloon || break
			t=0
			until [ \"\$(awk -F: '/^current/ {print \$2 + 0}' /sys/kernel/debug/vmmemctl 2>/dev/null)\" = $2 ]; do
				t=\$((t + 1)); [ \$t -le $(($3 * 5)) ] || break 2; sleep 0.2
			done
			n=\$((n + 1))
			echo \"# reload \$i: unload \$((unloaded - start)) s, load and refill \$((\$(date +%s) - unloaded)) s\" >&2
		done; echo \$n" </dev/null
}

# guest_vmstat NAME: a counter of the guest's /proc/vmstat (empty if it has none)
guest_vmstat() {
	guest "awk '\$1 == \"$1\" {print \$2}' /proc/vmstat"
}

# qemu_rss_kib: the resident memory of the guest's QEMU process
qemu_rss_kib() {
	awk '$1 == "VmRSS:" {print $2}' "/proc/$("$vm" pid "$GUEST")/status"
}

# wait_for SECONDS COMMAND...: poll once a second until COMMAND succeeds
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 1
	done
}

# migrate_to_file FILE: stop $GUEST and save its whole state to FILE (QMP
# migrate to "exec:cat > FILE"), for `vm start --incoming FILE`; succeeds
# when QEMU says the migration completed
migrate_to_file() {
	rm -f "$1"
	"$vm" qmp "$GUEST" stop >/dev/null
	"$vm" qmp "$GUEST" migrate "{\"uri\": \"exec:cat > $1\"}" >/dev/null
	wait_for 600 migration_status_is "completed|failed"
	migration_status_is completed
}
migration_status_is() {
	"$vm" qmp "$GUEST" query-migrate | grep -Eq "\"status\": \"($1)\""
}

# device_state FILE [desc]: the vmware-balloon device's part of the
# migration stream FILE as JSON, read by QEMU's own analyze-migration.py
# (of the QEMU the guests run): its field values, or with desc its VMState
# description (name, type and size of every field)
device_state() {
	local qemu=${VMB_QEMU:-$("$root/qemu-cloud/qemu/build.sh" | tail -n 1)}
	/usr/bin/python3 "$(dirname "$qemu")/../scripts/analyze-migration.py" -f "$1" ${2:+-d "$2"} 2>/dev/null |
		/usr/bin/python3 -c 'import json, sys
j = json.load(sys.stdin)
if "devices" in j:
    print(json.dumps(next(d for d in j["devices"] if d["name"] == "vmware-balloon")))
else:
    print(json.dumps(next(v for k, v in j.items() if k.startswith("vmware-balloon"))))'
}
# device_state_bytes FILE: the size of that state, the sum of its fields
device_state_bytes() {
	device_state "$1" desc | /usr/bin/python3 -c 'import json, sys
print(sum(f["size"] * f.get("array_len", 1) for f in json.load(sys.stdin)["fields"]))'
}

host_locked_is() {
	[[ $(host_get x-locked-frames) == "$1" ]]
}

# Make the host really back the guest's free memory: a never-touched page
# costs the host nothing, so ballooning it would show no change in RSS.
# Fill a tmpfs with all the memory the guest can spare, then free it.
dirty_guest_memory() {
	guest 'sync; echo 3 > /proc/sys/vm/drop_caches
		mib=$(( $(awk "\$1 == \"MemAvailable:\" {print \$2}" /proc/meminfo) / 1024 - 64 ))
		mkdir -p /mnt/fill && mount -t tmpfs -o size=${mib}M none /mnt/fill &&
		dd if=/dev/zero of=/mnt/fill/f bs=1M count=$mib status=none
		umount /mnt/fill; echo 3 > /proc/sys/vm/drop_caches'
}

# Fail on anything alarming in the guest kernel's log.
check_dmesg_clean() {
	local bad
	bad=$(guest dmesg | grep -E 'BUG|WARNING|Oops|soft lockup|hung task|Out of memory|oom-kill|Call Trace' || true)
	if [[ -z $bad ]]; then
		pass "$1: dmesg has no BUG, WARNING, Oops, lockup, hung task or OOM kill"
	else
		fail "$1: dmesg has no BUG, WARNING, Oops, lockup, hung task or OOM kill"
		sed 's/^/#   /' <<<"$bad" | head -n 30
	fi
}

# ere TEXT: TEXT as an extended regular expression that matches it literally
# (kernel versions have dots and pluses)
ere() {
	sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$1"
}

# use_suite [SUITE]: the Debian release the test's guest runs (its first
# argument, else $VMB_SUITE, else bookworm) into $suite.
use_suite() {
	suite=${1:-${VMB_SUITE:-bookworm}}
	case $suite in
	bullseye | bookworm | trixie | sid) ;;
	*) echo "unknown suite '$suite' (bullseye, bookworm, trixie or sid)" >&2 && exit 2 ;;
	esac
}

# The kernel's own vmw_balloon, asked before the package is installed:
# its path tells where this kernel keeps its modules and how it compresses
# them (bookworm: .ko; trixie and later: .ko.xz), so the checks expect the
# same of DKMS's copy. Sets intree, moddir and ko.
# shellcheck disable=SC2034 # moddir and ko are the test's to read
learn_kernel_module() {
	intree=$(guest modinfo -k "$kver" -n vmw_balloon)
	note "the kernel's own module: $intree"
	if [[ $intree =~ ^(/usr)?/lib/modules/"$kver"/kernel/drivers/misc/vmw_balloon(\.ko(\.xz|\.zst|\.gz)?)$ ]]; then
		pass "the kernel has its own vmw_balloon module in its tree"
		ko=${BASH_REMATCH[2]}
		moddir=${intree%/kernel/drivers/misc/*}
	else
		fail "the kernel has its own vmw_balloon module in its tree"
		echo "#   got '$intree'"
		ko=.ko moddir=/lib/modules/$kver
	fi
}

# check_dkms_installed WHAT: dkms status says installed for $kver, and
# nothing else. DKMS 3.1 and later move the kernel's own module away on
# install (and say "(Original modules exist)"); 3.0 (bookworm) and 2.8
# (bullseye) leave it. 2.8 separates module and version with ", ", later
# ones with "/".
check_dkms_installed() {
	local status moved
	status=$(guest dkms status vmw_balloon)
	note "dkms status: $status"
	check "$1: dkms status says installed for $kver" grep -Eqx \
		"vmw_balloon(/|, )$(ere "$version"), $(ere "$kver"), x86_64: installed( \(Original modules exist\))?" <<<"$status"
	check "$1: dkms status has no WARNING" eval '! grep -q WARNING <<<"$status"'
	moved=$(guest "test -e '$intree' && echo kept || echo moved")
	if [[ $moved == moved ]]; then
		check "$1: DKMS moved the kernel's own module away and says so" \
			grep -q "installed (Original modules exist)$" <<<"$status"
	else
		check "$1: DKMS left the kernel's own module in place and says so" \
			grep -q "installed$" <<<"$status"
	fi
}

# After a boot: udev loaded DKMS's module (in $moddir, named like the
# kernel's own, see learn_kernel_module), the very file DKMS built.
check_autoloaded() {
	local file
	check "autoload: vmw_balloon is loaded after boot" guest 'test -d /sys/module/vmw_balloon'
	file=$(guest modinfo -n vmw_balloon)
	check_eq "autoload: modinfo -n is DKMS's copy" "$file" "$moddir/updates/dkms/vmw_balloon$ko"
	check_eq "autoload: the loaded module's version" "$(guest cat /sys/module/vmw_balloon/version)" "$version"
	check_eq "autoload: the loaded module's srcversion is the DKMS-built file's" \
		"$(guest cat /sys/module/vmw_balloon/srcversion)" "$(guest modinfo -F srcversion "$file")"
}

# The package under test, built if it is not there yet or out of date.
# Guest tests may run beside one another: one builds it, the others wait.
ensure_deb() {
	mkdir -p "$root/build"
	(
		flock 9
		# make rebuilds it when anything it packages changed (its rule
		# names the sources): a guest must never test yesterday's driver
		make -s -C "$root" deb >&2
	) 9>"$root/build/.package.lock" || bail "cannot build $deb"
}

# boot_with_deb KIND [VM-START-ARGS...]: boot $GUEST afresh, a 2 GiB
# $suite guest with the package's .deb in /opt/vmb; KIND names it in the
# failure ("VMware-like", or "plain" with --plain). Sets kver.
boot_with_deb() {
	local kind=$1
	shift
	ensure_deb
	"$vm" stop "$GUEST" --kill >/dev/null 2>&1
	"$vm" start "$GUEST" --suite "$suite" --mem 2G --file "$deb" "$@" >&2 ||
		bail "the $kind $suite guest did not boot"
	kver=$(guest uname -r)
	note "$suite guest, kernel $kver, package $version"
}

# install_deb: apt installs the package in the guest; DKMS builds there.
install_deb() {
	guest "DEBIAN_FRONTEND=noninteractive apt-get install -y /opt/vmb/$(basename "$deb")" >&2 ||
		bail "apt install of the package failed"
}

# copy_touch_memory: the program that touches memory as a workload
# (tests/lib/touch-memory.py) to /root/touch-memory.py in $GUEST
copy_touch_memory() {
	"$vm" ssh "$GUEST" -- "cat > /root/touch-memory.py" <"$root/tests/lib/touch-memory.py" ||
		bail "copy touch-memory.py into the guest"
}

# hand_in_as NAME DIR: `vm start --file` puts a folder in /opt/vmb under
# its path's last name; this names DIR NAME, as "$handed/NAME" (a link
# in a temporary folder that goes when the test ends).
hand_in_as() {
	if [[ -z ${handed:-} ]]; then
		handed=$(mktemp -d)
		# shellcheck disable=SC2064 # the folder is known now
		trap "rm -rf '$handed'" EXIT
	fi
	ln -sfn "$2" "$handed/$1"
}

# hand_in_backports_kernel VARIANT: $suite-backports' cloud kernel and
# headers, with what they need that the suite's VARIANT image lacks,
# fetched on the host (tests/lib/fetch-debs) and handed in as
# "$handed/kernel" (for `vm start --file`). Sets new (its release).
hand_in_backports_kernel() {
	local image debs
	image=$("$vm" image --suite "$suite" --variant "$1" | tail -n 1) || bail "no $suite $1 disk image"
	debs=$("$root/tests/lib/fetch-debs" --suite "$suite" "$(dirname "$image")/dpkg-status" \
		"linux-image-cloud-amd64/$suite-backports" "linux-headers-cloud-amd64/$suite-backports" | tail -n 1) ||
		bail "cannot fetch $suite-backports' kernel"
	new=$(find "$debs" -name 'linux-image-*-cloud-amd64_*.deb' ! -name 'linux-image-cloud-amd64_*' \
		-printf '%f\n' | sed 's/^linux-image-\([^_]*\)_.*/\1/')
	note "the new kernel: $new, $(find "$debs" -name '*.deb' | wc -l) packages from $debs"
	hand_in_as kernel "$debs"
}

# The project's apt repository (debian/make-repo, as `make repo` makes
# it) for the tests, in build/test-repo, made again whenever the .deb is
# newer (a published repository keeps its versions, and refuses a version
# rebuilt with other bytes; this one starts afresh); guest tests beside
# one another make it once. Sets repo_dir.
ensure_repo() {
	repo_dir=$root/build/test-repo
	mkdir -p "$root/build"
	(
		flock 9
		if [[ ! -f $repo_dir/dists/vmw-balloon-dkms/InRelease || ! $repo_dir -nt $deb ]]; then
			rm -rf "$repo_dir" && "$root/debian/make-repo" "$repo_dir" "$deb" >/dev/null
		fi
	) 9>"$root/build/.package.lock" || bail "cannot build the apt repository"
}

# boot_genericcloud KIND [VM-START-ARGS...]: boot $GUEST afresh from the
# genericcloud image (no dkms, compiler or headers), with the project's
# repository and a partial Debian mirror for it (tests/lib/partial-mirror)
# handed in as /opt/vmb/repo and /opt/vmb/debian; the array mirror_opts,
# if set, holds options for partial-mirror. Sets kver.
boot_genericcloud() {
	local kind=$1 mirror
	shift
	ensure_deb
	ensure_repo
	mirror=$("$root/tests/lib/partial-mirror" "${mirror_opts[@]}" "$suite" "$repo_dir" | tail -n 1) ||
		bail "cannot make the partial Debian mirror for the $suite guest"
	hand_in_as repo "$repo_dir"
	hand_in_as debian "$mirror"
	boot_with_deb "$kind" --variant genericcloud --file "$handed/repo" --file "$handed/debian" "$@"
}

# add_repository: what an admin does before installing: the project's
# repository (handed in as /opt/vmb/repo) added with its keyring as
# signed-by. The image's Debian sources, which the guest cannot reach, are
# put aside; a partial mirror handed in as /opt/vmb/debian stands in for
# them when there is one.
add_repository() {
	guest "install -D -m 644 /opt/vmb/repo/vmw-balloon-dkms-archive-keyring.gpg \
			/usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg &&
		sed 's|^URIs: .*|URIs: file:/opt/vmb/repo|' /opt/vmb/repo/vmw-balloon-dkms.sources \
			>/etc/apt/sources.list.d/vmw-balloon-dkms.sources &&
		mkdir -p /etc/apt/offline && mv /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources /etc/apt/offline/ 2>/dev/null;
		if [ -d /opt/vmb/debian ]; then
			sed -e 's|^URIs: .*|URIs: file:/opt/vmb/debian|' -e 's|^Suites: .*|Suites: stable|' \
				/opt/vmb/repo/vmw-balloon-dkms.sources >/etc/apt/sources.list.d/debian-partial.sources
		fi &&
		apt-get -o DPkg::Lock::Timeout=600 update -q" >&2 || bail "apt cannot read the repository"
}

# install_from_repository: add_repository, then `apt install
# vmw-balloon-dkms` by name. Leaves apt's output in $apt_output.
install_from_repository() {
	add_repository
	apt_output=$(guest "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y vmw-balloon-dkms 2>&1")
	local rc=$?
	sed 's/^/#   | /' <<<"$apt_output" | grep -Ei 'vmw|dkms|headers|error|warning' | head -n 30
	check_eq "install: apt install vmw-balloon-dkms from the repository exits 0" "$rc" 0
}

# build_test_hooks KVER: in the guest, build the package's source as a
# test build (VMB_TEST_HOOKS=1: the fault points of src/linux_pages.h)
# for kernel KVER, into /root/vmb-test-hooks-KVER; a check. A debug
# kernel's is built while the guest still runs its own kernel, as DKMS's.
build_test_hooks() {
	check "setup: the test build of the module builds for $1" guest \
		"d=/root/vmb-test-hooks-$1; rm -rf \$d && cp -a /usr/src/vmw_balloon-$version \$d &&
		 make -C /lib/modules/$1/build M=\$d VMB_TEST_HOOKS=1 modules >\$d.log 2>&1 &&
		 test -f \$d/vmw_balloon.ko"
}

# unload_race MODE FRAMES: unload while compaction holds a ballooned page
# isolated, made certain by the driver's fault point: the test build of
# build_test_hooks for the running kernel is loaded in place of DKMS's,
# the host offers 4 KiB pages only, the balloon fills to FRAMES,
# test_park_migration=MODE parks the first migration compaction makes of
# a ballooned page (1: before the driver's part, which unload's fence
# then refuses; 2: after it, so that the new page joins the list after
# unload emptied it), and rmmod comes while it is parked. Checks: the
# unload finishes, says it waited for the isolated page and that every
# page was freed; the host holds not one frame; the kernel log since the
# load has no BUG, WARNING, Oops, KASAN or lockdep report. Then DKMS's
# module is loaded again, with the host's usual capabilities (0x2e).
# Waits $fill_seconds (default 120), as fill does.
unload_race() {
	local mode=$1 frames=$2 what="unload race (park $1)" mark out rc bad t0
	mark=$(guest 'dmesg | wc -l')
	if ! guest "rmmod vmw_balloon && insmod /root/vmb-test-hooks-\$(uname -r)/vmw_balloon.ko &&
		test -e /sys/module/vmw_balloon/parameters/test_park_migration"; then
		fail "$what: setup: the test build replaces DKMS's module"
		return 1
	fi
	pass "$what: setup: the test build replaces DKMS's module"
	use_caps 0x26
	# compaction first: the balloon then fills the low memory compaction
	# just freed, where its next pass moves pages (filled first, 512 MiB
	# was never migrated in 2 minutes: balloon_migrate stayed 0)
	host_set x-target-frames 0
	wait_for 120 host_locked_is 0
	guest "echo $mode > /sys/module/vmw_balloon/parameters/test_park_migration || exit 1
		nohup sh -c 'while :; do echo 1 > /proc/sys/vm/compact_memory; sleep 1; done' </dev/null >/dev/null 2>&1 &
		echo \$! >/run/vmb-compactor.pid"
	fill "$what" "$frames"
	check "$what: setup: compaction parked a migration of a ballooned page" \
		wait_for "${fill_seconds:-120}" eval "guest 'dmesg | tail -n +$((mark + 1))' | grep -q 'test: migration parked'"
	t0=$SECONDS
	out=$(guest 'rmmod vmw_balloon' 2>&1)
	rc=$?
	note "$what: rmmod took $((SECONDS - t0)) s"
	guest 'kill $(cat /run/vmb-compactor.pid)'
	check_eq "$what: rmmod succeeds with a page isolated${out:+ ($out)}" "$rc" 0
	out=$(guest "dmesg | tail -n +$((mark + 1))")
	grep -E 'test: |unload wait' <<<"$out" | sed 's/^/#   | /'
	check "$what: unload said it waited for the page compaction isolated" \
		grep -qE 'unload waits for [1-9][0-9]* ballooned pages compaction isolated' <<<"$out"
	check "$what: then that every page was freed" \
		grep -qE 'unload waited [0-9]+ ms for the pages compaction held; every page is freed' <<<"$out"
	check_eq "$what: the host holds no frame after the unload (x-locked-frames, x-locked-2m)" \
		"$(host_get x-locked-frames) $(host_get x-locked-2m)" "0 0"
	bad=$(grep -E 'BUG|WARNING|KASAN|lockdep|circular locking|inconsistent lock|sleeping function|Oops|Call Trace|soft lockup|hung task' <<<"$out" || true)
	check_eq "$what: no BUG, WARNING, Oops, KASAN or lockdep report" "$bad" ""
	[[ -z $bad ]] || sed 's/^/#   /' <<<"$bad" | head -n 40
	guest 'modprobe vmw_balloon' || bail "$what: DKMS's vmw_balloon does not load again"
	use_caps 0x2e
}
