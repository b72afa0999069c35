#!/bin/bash
# The driver against a faulty, confused or hostile host, in one VMware-like
# guest with the package installed: host resets (one during a 1 GiB
# inflation, a storm of them while the target moves), START failing, BUSY
# answers, refused pages, every capability set a host may grant (and a
# protocol-v2 host, in a second, short boot), targets beyond the guest's
# RAM, rmmod/modprobe cycles with a full balloon, suspend to RAM, QEMU
# stop/cont and migration to a file and back. Every case ends with the
# same checks (end_case): the host holds exactly the driver's balloon, the
# balloon deflates to 0, after which neither the host nor the driver holds
# a single page (the host's locked counts, the driver's current and its
# per-size page counts are exactly 0) and the guest has its memory back
# (MemAvailable within the idle guest's own noise, measured at the start,
# of the case's start), dmesg is clean, no OOM kill happened and the guest
# still answers. A case whose setup did not happen (the balloon did not
# fill, the capabilities did not change, a fault was not injected) fails.
# Faults that must land mid-operation are injected by the host at a
# defined point (x-reset-at-locked), never by polling the guest.
#
#   tests/guest/reliability.sh [--long] [SUITE]
#
# Two tiers, chosen by --long or VMB_RELIABILITY=long; together they hold
# every case:
#   ci (default; `make check`, step guest-reliability): a RESET during a
#       1 GiB inflation; RESET on every 7th command for 30 s; START failing
#       10 times; BUSY answers; PPN_PINNED on every 7th page; every page
#       refused; capabilities 0x00 and 0x0a; a target of all ones; a new
#       target every second for 20 s; 10 rmmod/modprobe cycles; suspend to
#       RAM; stop/cont; migration to a file, restored in a new QEMU;
#       unload with a ballooned page parked in migration (both tiers);
#   long (`make check-long`, step guest-reliability-long): RESET on every
#       7th command for 3 minutes; a new target every second for 2
#       minutes; 200 rmmod/modprobe cycles; PPN_INVALID and PPN_NOTNEEDED
#       on every 7th page; capabilities 0x02, 0x06, 0x0e and 0x2e; targets
#       above the guest's RAM and above 32 bits without 64_BIT_TARGET; a
#       protocol-v2 host (a second boot).
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
tier=${VMB_RELIABILITY:-ci}
if [[ ${1:-} == --long ]]; then
	tier=long
	shift
fi
use_suite "$@"
case $tier in
ci)
	storm_seconds=30 chaos_seconds=20 reload_cycles=10
	refusals=(5:PPN_PINNED) caps_sets=(0x00 0x0a)
	;;
long)
	storm_seconds=180 chaos_seconds=120 reload_cycles=200
	refusals=(2:PPN_INVALID 6:PPN_NOTNEEDED) caps_sets=(0x02 0x06 0x0e 0x2e)
	;;
*) echo "VMB_RELIABILITY: ci or long, not '$tier'" >&2 && exit 2 ;;
esac
in_tier() { [[ $tier == "$1" ]]; }
GUEST=${GUEST:-rel-reliability-$suite}
legacy_guest=${GUEST%-"$suite"}-legacy-$suite
mib=256 # frames in a MiB
half_gib=$((512 * mib))

# --- what every case shares ---------------------------------------------

# What the guest could give, in KiB, once the page cache is dropped:
# MemAvailable plus the free pages parked on the per-CPU lists, which
# MemAvailable leaves out (up to some 30 MiB a CPU here: 2 MiB pages the
# balloon frees land there too); then vmstat's oom_kill and dmesg's length.
guest_snapshot() {
	# shellcheck disable=SC2016 # expanded in the guest
	guest "echo \$($available_kib_sh)"' $(awk "\$1 == \"oom_kill\" {print \$2}" /proc/vmstat) $(dmesg | wc -l)'
}
avail_now() {
	local avail rest
	read -r avail rest < <(guest_snapshot)
	echo "$avail"
}

# the number after NAME in the driver's debugfs file ("start: 12 (3 failed)"
# gives 12; with failed, 3)
stat_calls() {
	guest "awk -F: '\$1 ~ /^$1 *\$/ {print \$2 + 0}' /sys/kernel/debug/vmmemctl"
}
stat_failed() {
	guest "awk -F: '\$1 ~ /^$1 *\$/ {sub(/.*\\(/, \"\", \$2); print \$2 + 0}' /sys/kernel/debug/vmmemctl"
}
# a per page size counter summed over both sizes, e.g. errAlloc
stat_both_sizes() {
	guest "awk -F: '\$1 ~ /^$1 *\\(/ {n += \$2} END {print n + 0}' /sys/kernel/debug/vmmemctl"
}

guest_answers() {
	"$vm" ssh "$GUEST" --timeout 60 -- true </dev/null
}

# The faults the host injected so far: the device's own counters.
faults_now() {
	echo $(($(host_get x-resets-sent) + $(host_get x-busy-sent) + $(host_get x-refused-frames) + $(host_get x-failures-start)))
}

host_and_driver_agree() {
	local locked current
	locked=$(host_get x-locked-frames)
	current=$(guest_stat current)
	[[ $locked == "$current" ]]
}

# The largest balloon the driver's floor allows (an eighth of the guest's
# RAM is never ballooned: see src/balloon.h, VMB_FLOOR_SHIFT)
most_frames() {
	local ram=$(($(guest_meminfo MemTotal) / 4))
	echo $((ram - (ram >> 3)))
}

# begin_case NAME: the balloon is empty; take the case's baselines
cases=0 total_faults=0 total_leaked=0
begin_case() {
	case_name=$1
	cases=$((cases + 1))
	case_start=$SECONDS
	note "== case $cases: $case_name"
	host_set x-target-frames 0
	check "$case_name: setup: the balloon is empty at the start" wait_for 120 host_locked_is 0
	faults0=$(faults_now)
	read -r avail_base oom0 dmesg_mark < <(guest_snapshot)
}

# end_case: the checks every case ends with
end_case() {
	local what="$case_name" avail oom lines bad faults leaked
	check "$what: the host's locked frames equal the driver's current" \
		wait_for 60 host_and_driver_agree
	host_set x-target-frames 0
	check "$what: deflates to 0, host and driver agreeing" \
		wait_for 300 eval 'host_locked_is 0 && [[ $(guest_stat current) == 0 ]]'
	check_nothing_held "$what"
	read -r avail oom lines < <(guest_snapshot)
	check "$what: the guest still answers" test -n "$lines"
	if ((avail < avail_base - avail_tolerance_kib || avail > avail_base + avail_tolerance_kib)); then
		avail=$(avail_settled $((avail_base - avail_tolerance_kib)) $((avail_base + avail_tolerance_kib)))
	fi
	leaked=$(((avail_base - avail) / 4))
	check_range "$what: MemAvailable back within $avail_tolerance_kib KiB (idle noise) of its $avail_base KiB (KiB)" \
		"$avail" $((avail_base - avail_tolerance_kib)) $((avail_base + avail_tolerance_kib))
	bad=$(guest "dmesg | tail -n +$((dmesg_mark + 1))" |
		grep -E 'BUG|WARNING|Oops|soft lockup|hung task|Out of memory|oom-kill|Call Trace' || true)
	check_eq "$what: dmesg has no BUG, WARNING, Oops, lockup, hung task or OOM kill" "$bad" ""
	check_eq "$what: no OOM kill (vmstat oom_kill)" "$oom" "$oom0"
	faults=$(($(faults_now) - faults0))
	total_faults=$((total_faults + faults)) total_leaked=$((total_leaked + leaked))
	note "$what: $faults faults injected, $leaked pages leaked (MemAvailable), $((SECONDS - case_start)) s"
}

# --- the guest ----------------------------------------------------------

ensure_deb
"$vm" stop "$GUEST" --kill >/dev/null 2>&1
"$vm" start "$GUEST" --suite "$suite" --mem 2G --s3 --file "$deb" >&2 ||
	bail "the VMware-like $suite guest did not boot"
kver=$(guest uname -r)
note "$suite guest, kernel $kver, package $version, tier $tier"
guest "DEBIAN_FRONTEND=noninteractive apt-get install -y /opt/vmb/$(basename "$deb")" >&2 ||
	bail "apt install of the package failed"
# the kernel's own module was loaded at boot: load DKMS's in its place
guest 'rmmod vmw_balloon 2>/dev/null; modprobe vmw_balloon' || bail "modprobe vmw_balloon failed"
check_eq "the package's module is loaded" "$(guest cat /sys/module/vmw_balloon/version)" "$version"
wait_for 30 eval '[[ $(guest_stat "used capabilities") == 0x2e ]]' || bail "the driver did not start"
measure_avail_noise
suite_avail0=$(avail_now)
most=$(most_frames)
note "the guest's RAM: $(guest_meminfo MemTotal) KiB; the floor leaves a balloon of at most $most frames"

# --- 2. host faults -----------------------------------------------------

# A RESET while 1 GiB inflates, at a defined point: the host itself
# answers RESET to the LOCK that brings what it holds to 512 MiB
# (x-reset-at-locked), and to every command until the next START. Without
# 2 MiB pages the driver locks 512 frames a batch, and after a RESET its
# next command is START (it frees its pages without telling the host), so
# the host sends exactly one RESET, whatever the driver's speed.
if in_tier ci; then
	use_caps 0x26
	begin_case "RESET during a 1 GiB inflation, at 512 MiB locked"
	resets0=$(guest_stat reset) starts0=$(stat_calls start) sent0=$(host_get x-resets-sent)
	host_set x-reset-at-locked $((512 * mib))
	check_eq "reset mid-inflation: setup: the host will reset at 131072 frames locked" \
		"$(host_get x-reset-at-locked)" $((512 * mib))
	host_set x-target-frames $((1024 * mib))
	check "reset mid-inflation: the host fired its reset (x-reset-at-locked back at 0)" \
		wait_for 180 eval '[[ $(host_get x-reset-at-locked) == 0 ]]'
	check "reset mid-inflation: then the balloon reaches 1 GiB" wait_for 300 host_locked_is $((1024 * mib))
	check_eq "reset mid-inflation: the host sent exactly one RESET" $(($(host_get x-resets-sent) - sent0)) 1
	check_eq "reset mid-inflation: the driver completed one reset (debugfs reset)" $(($(guest_stat reset) - resets0)) 1
	check_eq "reset mid-inflation: ... with one START (debugfs start)" $(($(stat_calls start) - starts0)) 1
	end_case
	use_caps 0x2e
fi

# RESET on every 7th command while the target moves.
begin_case "RESET on every 7th command for $storm_seconds s, the target moving"
resets0=$(guest_stat reset)
sent0=$(host_get x-resets-sent)
host_set x-reset-every 7
# The storm lasts its time, and then as long as it takes (at most 5
# minutes more) for the host to have sent 3 RESETs and the driver to have
# completed one, so that the checks below hold for a driver of any speed.
stop_at=$((SECONDS + storm_seconds)) moves=0
while ((SECONDS < stop_at)) || { ((SECONDS < stop_at + 300)) &&
	(($(host_get x-resets-sent) - sent0 < 3 || $(guest_stat reset) - resets0 < 1)); }; do
	host_set x-target-frames $(((moves % 4 + 1) * 64 * mib))
	moves=$((moves + 1))
	sleep 2
done
host_set x-reset-every 0
check "storm: the driver is not resetting once the storm is over" \
	wait_for 60 eval '[[ $(guest_stat "is resetting") == n ]]'
sent=$(($(host_get x-resets-sent) - sent0)) resets=$(($(guest_stat reset) - resets0))
note "storm: $moves targets, $sent RESETs sent, the driver completed $resets resets"
check_range "storm: the host sent RESETs" "$sent" 1 $((1 << 30))
check_range "storm: the driver started over after them" "$resets" 1 "$sent"
host_set x-target-frames "$half_gib"
check "storm: then the balloon reaches 512 MiB" wait_for 120 host_locked_is "$half_gib"
end_case

# 4. a new target every cycle (the driver polls once a second)
begin_case "a different target every second for $chaos_seconds s"
ram_frames=$(host_get x-ram-frames)
stop_at=$((SECONDS + chaos_seconds)) max=0 n=0
while ((SECONDS < stop_at)); do
	case $((n % 5)) in
	0) target=$((RANDOM * 32768 + RANDOM)) target=$((target % ram_frames)) ;;
	1) target=$((ram_frames * 2)) ;;
	2) target=18446744073709551615 ;;
	3) target=0 ;;
	4) target=$(((RANDOM % 2048) * mib)) ;;
	esac
	host_set x-target-frames "$target"
	n=$((n + 1))
	sleep 1
	locked=$(host_get x-locked-frames)
	((locked > max)) && max=$locked
done
note "changing targets: $n targets, the balloon peaked at $max frames"
check_range "changing targets: the balloon stays within RAM minus the floor (frames)" "$max" 0 "$most"
host_set x-target-frames "$half_gib"
check "changing targets: then the balloon settles at 512 MiB" wait_for 120 host_locked_is "$half_gib"
end_case

# --- 5. rmmod and modprobe, each with 512 MiB inflated ------------------

slab_now() {
	guest 'sync; echo 3 > /proc/sys/vm/drop_caches; awk "\$1 == \"SUnreclaim:\" {print \$2}" /proc/meminfo'
}
begin_case "$reload_cycles rmmod/modprobe cycles with 512 MiB inflated"
slab0=$(slab_now)
fill reload "$half_gib"
bye0=$(host_get x-start-zero)
done_cycles=$(reload_cycles "$reload_cycles" "$half_gib" 60)
check_eq "reload: cycles completed in the guest, each refilling 512 MiB" "$done_cycles" "$reload_cycles"
check_eq "reload: the host heard goodbye (START 0) at every unload" $(($(host_get x-start-zero) - bye0)) "$reload_cycles"
check "reload: the balloon is at 512 MiB after the last load" wait_for 60 host_locked_is "$half_gib"
host_set x-target-frames 0
check "reload: the balloon empties before the slab is measured" wait_for 120 host_locked_is 0
slab=$(slab_now)
note "reload: $done_cycles cycles; unreclaimable slab $slab0 -> $slab KiB"
check_range "reload: unreclaimable slab back to its baseline, within 1 MiB (KiB)" "$slab" 0 $((slab0 + 1024))
end_case

# --- 2. host faults, continued ------------------------------------

if in_tier ci; then
	# START failing 10 times before it succeeds.
	begin_case "START failing 10 times"
	fill "failing START" "$half_gib"
	failed0=$(stat_failed start) host_failed0=$(host_get x-failures-start) resets0=$(guest_stat reset)
	host_set x-fail-start 10
	host_set x-reset-next true
	check "failing START: the driver retries until START succeeds, back at 512 MiB" \
		wait_for 120 eval '(( $(host_get x-failures-start) - host_failed0 == 10 )) && host_locked_is "$half_gib"'
	check_eq "failing START: the driver counted 10 failed STARTs" $(($(stat_failed start) - failed0)) 10
	check_eq "failing START: ... and one completed reset" $(($(guest_stat reset) - resets0)) 1
	end_case
fi

if in_tier ci; then
	# BUSY answers: to START once, then to every third command while the
	# balloon fills and half empties.
	begin_case "BUSY answers"
	busy0=$(host_get x-busy-sent) resets0=$(guest_stat reset)
	start_failed0=$(host_get x-failures-start) driver_start_failed0=$(stat_failed start)
	# Both faults set while the guest is stopped: the RESET goes to its
	# next command, and then, a pending reset answering RESET to anything
	# but START, the BUSY goes to the START that follows, at no one's pace.
	"$vm" qmp "$GUEST" stop >/dev/null
	host_set x-reset-next true
	host_set x-busy-next true
	"$vm" qmp "$GUEST" cont >/dev/null
	check "BUSY: the driver completed a reset after the BUSY START" \
		wait_for 60 eval '(( $(guest_stat reset) > resets0 )) && [[ $(guest_stat "is resetting") == n ]]'
	check_eq "BUSY: the host answered BUSY once, to START (x-busy-sent, x-failures-start)" \
		"$(($(host_get x-busy-sent) - busy0)) $(($(host_get x-failures-start) - start_failed0))" "1 1"
	check_eq "BUSY: the driver counted that START as failed" $(($(stat_failed start) - driver_start_failed0)) 1
	check_eq "BUSY: ... and completed exactly one reset" $(($(guest_stat reset) - resets0)) 1
	# Every third command BUSY while the balloon fills and half empties.
	# 512 MiB takes at least 8 locks of at most 32 pages of 2 MiB, and a
	# cycle's locks follow one another until one fails, so at most 2 can
	# succeed before the third command is a lock answered BUSY: BUSY hits
	# a lock whatever the timing. (Not so an unlock: 384 MiB go back in
	# one command, which may fall between two BUSY answers.)
	busy1=$(host_get x-busy-sent) lockf0=$(host_get x-failures-2m-lock)
	host_set x-busy-every 3
	host_set x-target-frames "$half_gib"
	check "BUSY: inflates to 512 MiB through BUSY answers" wait_for 120 host_locked_is "$half_gib"
	host_set x-target-frames $((128 * mib))
	check "BUSY: deflates to 128 MiB, BUSY on every third command" wait_for 120 host_locked_is $((128 * mib))
	host_set x-busy-every 0
	busy=$(($(host_get x-busy-sent) - busy1))
	note "BUSY: $busy BUSY answers while the balloon moved"
	check_range "BUSY: the host answered BUSY to 2 MiB locks" $(($(host_get x-failures-2m-lock) - lockf0)) 1 $((1 << 30))
	end_case
fi

# Per-entry refusals on every 7th page, with each status a host may give.
for status in "${refusals[@]}"; do
	code=${status%%:*} name=${status#*:}
	begin_case "$name on every 7th page"
	refused0=$(host_get x-refused-frames) err0=$(stat_both_sizes errAlloc)
	host_set x-refuse-status "$code"
	host_set x-refuse-every 7
	host_set x-target-frames "$half_gib"
	check "$name: the balloon reaches 512 MiB around the refusals" wait_for 120 host_locked_is "$half_gib"
	host_set x-refuse-every 0
	refused=$(($(host_get x-refused-frames) - refused0))
	note "$name: $refused pages refused"
	check_range "$name: the host refused pages" "$refused" 1 $((1 << 30))
	check_eq "$name: the driver counted each refusal (errAlloc)" $(($(stat_both_sizes errAlloc) - err0)) "$refused"
	end_case
done
host_set x-refuse-status 5

if in_tier ci; then
	# Every page refused for a while: refused 2 MiB pages are split and tried
	# as 4 KiB pages in the same cycle (the device cannot refuse 2 MiB
	# entries alone), and nothing stays in the balloon.
	begin_case "every page refused, 2 MiB falling back to 4 KiB"
	lock2m0=$(host_get x-calls-2m-lock) lock4k0=$(host_get x-calls-batch-lock)
	host_set x-refuse-every 1
	host_set x-target-frames "$half_gib"
	check "all refused: the driver tried 2 MiB pages" wait_for 30 eval '(( $(host_get x-calls-2m-lock) > lock2m0 ))'
	check "all refused: ... then 4 KiB ones" wait_for 30 eval '(( $(host_get x-calls-batch-lock) > lock4k0 ))'
	check_eq "all refused: the host holds nothing" "$(host_get x-locked-frames)" 0
	host_set x-refuse-every 0
	check "all refused: once the host takes pages, the balloon reaches 512 MiB" wait_for 120 host_locked_is "$half_gib"
	end_case
fi

# --- 3. every capability set a host may grant ---------------------------

for caps in "${caps_sets[@]}"; do
	caps_mark=$(guest 'dmesg | wc -l')
	use_caps "$caps"
	begin_case "capabilities $caps"
	declare -A calls0=()
	for cmd in lock batch-lock 2m-lock; do calls0[$cmd]=$(host_get "x-calls-$cmd"); done
	host_set x-target-frames "$half_gib"
	case $caps in
	0x00) used=none ;;
	0x02 | 0x0a) used=lock ;; # 2 MiB pages travel in batches only
	0x06) used=batch-lock ;;
	*) used=2m-lock ;;
	esac
	if [[ $used == none ]]; then
		# the driver has read the target, and then, after one more reset,
		# it must not say it again
		check "caps $caps: the driver read the 512 MiB target" \
			wait_for 60 eval '[[ $(guest_stat current) == 0 && $(guest_stat target | head -n 1) == "$half_gib" ]]'
		resets0=$(guest_stat reset)
		host_set x-reset-next true
		check "caps $caps: the driver started again after a reset" \
			wait_for 60 eval '(( $(guest_stat reset) > resets0 )) && [[ $(guest_stat "is resetting") == n ]]'
		check_eq "caps $caps: the host holds nothing" "$(host_get x-locked-frames)" 0
		said=$(guest "dmesg | tail -n +$((caps_mark + 1)) | grep -c 'not ballooning'")
		check_eq "caps $caps: the driver says once that it will not balloon" "$said" 1
	else
		check "caps $caps: the balloon reaches 512 MiB" wait_for 300 host_locked_is "$half_gib"
		check "caps $caps: locked with $used" eval '(( $(host_get x-calls-$used) > ${calls0[$used]} ))'
		for cmd in lock batch-lock 2m-lock; do
			[[ $cmd == "$used" ]] && continue
			check_eq "caps $caps: no $cmd" "$(host_get "x-calls-$cmd")" "${calls0[$cmd]}"
		done
	fi
	end_case
done
use_caps 0x2e

# --- 4. targets from a hostile or confused host -------------------------

# watch_max SECONDS: the largest balloon the host sees meanwhile
watch_max() {
	local stop_at=$((SECONDS + $1)) max=0 locked
	while ((SECONDS < stop_at)); do
		locked=$(host_get x-locked-frames)
		((locked > max)) && max=$locked
		sleep 0.5
	done
	echo "$max"
}

hostile_target() {
	local what=$1 target=$2 max target_seen
	host_set x-target-frames "$target"
	# the balloon has gone beyond 512 MiB, then is watched for 30 s
	check "$what: the balloon grows beyond 512 MiB" wait_for 300 eval '(( $(host_get x-locked-frames) > half_gib ))'
	max=$(watch_max 30)
	target_seen=$(guest_stat target | head -n 1)
	note "$what: target $target, the driver read $target_seen, the balloon peaked at $max frames"
	check_range "$what: the balloon stays within RAM minus the floor (frames)" "$max" $((half_gib + 1)) "$most"
}

ram_frames=$(host_get x-ram-frames)
if in_tier long; then
	begin_case "a target above the guest's RAM"
	hostile_target "above RAM" $((ram_frames + 4096))
	end_case
fi

if in_tier ci; then
	begin_case "a target of all ones"
	hostile_target "all ones" 18446744073709551615
	end_case
fi

if in_tier long; then
	use_caps 0x0e
	begin_case "a target above 32 bits without 64_BIT_TARGET"
	# the low 32 bits alone would be 512 MiB: the balloon must go beyond
	hostile_target "beyond 32 bits" $(((1 << 32) + half_gib))
	end_case
	use_caps 0x2e
fi

# --- 6. suspend to RAM, and QEMU stop/cont ------------------------------

qemu_status() {
	"$vm" qmp "$GUEST" query-status | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'
}
qemu_status_is() { [[ $(qemu_status) == "$1" ]]; }

if in_tier ci; then
	begin_case "suspend to RAM with 512 MiB inflated"
	fill S3 "$half_gib"
	check "S3: the guest can suspend to RAM (mem in /sys/power/state)" guest 'grep -qw mem /sys/power/state'
	guest 'systemd-run --quiet --on-active=2 sh -c "echo mem > /sys/power/state"'
	check "S3: QEMU sees the guest suspended" wait_for 60 qemu_status_is suspended
	check_eq "S3: the host holds the balloon while the guest sleeps" "$(host_get x-locked-frames)" "$half_gib"
	host_set x-target-frames $((256 * mib)) # changed while it sleeps
	"$vm" qmp "$GUEST" system_wakeup >/dev/null
	check "S3: system_wakeup resumes it" wait_for 60 qemu_status_is running
	check "S3: the guest answers after resuming" wait_for 120 guest_answers
	check "S3: the kernel went through suspend and resume" \
		guest "dmesg | tail -n +$((dmesg_mark + 1)) | grep -q 'PM: suspend exit'"
	check "S3: the balloon follows the target set while asleep" wait_for 60 host_locked_is $((256 * mib))
	end_case

	begin_case "QEMU stop and cont with 512 MiB inflated"
	fill stop "$half_gib"
	"$vm" qmp "$GUEST" stop >/dev/null
	check "stop: QEMU says it is paused" qemu_status_is paused
	targets0=$(host_get x-calls-target)
	host_set x-target-frames $((768 * mib))
	sleep 5 # time in which a running guest would have asked
	check_eq "stop: no command and nothing moves while QEMU is stopped (GET_TARGETs, frames)" \
		"$(($(host_get x-calls-target) - targets0)) $(host_get x-locked-frames)" "0 $half_gib"
	"$vm" qmp "$GUEST" cont >/dev/null
	check "cont: the balloon moves on to 768 MiB" wait_for 60 host_locked_is $((768 * mib))
	end_case
fi

# --- 7. migration to a file and back, in a new QEMU ---------------------

if in_tier ci; then
	# The device's migration state of a 2 GiB guest ballooned to 1.5 GiB,
	# as QEMU's analyze-migration.py reads it; QEMU then goes on (cont).
	begin_case "the device's migration state with 1.5 GiB inflated"
	fill "state size" $((1536 * mib))
	state=${VMB_RUN_DIR:-/tmp/vmb-run}/$GUEST.sized
	check "state size: QMP migrate to a file completed" migrate_to_file "$state"
	"$vm" qmp "$GUEST" cont >/dev/null
	check_eq "state size: analyze-migration.py reads the host's 1.5 GiB of locks" \
		"$(device_state "$state" | python3 -c 'import json, sys; print(int(json.load(sys.stdin)["locked_frames"], 0))')" \
		$((1536 * mib))
	note "device state: $(device_state_bytes "$state") bytes, a 2 GiB guest ballooned to 1.5 GiB"
	rm -f "$state"
	end_case

	begin_case "migration to a file and back with 512 MiB inflated"
	fill migration "$half_gib"
	granted=$(host_get x-granted-capabilities)
	faults_before=$(($(faults_now) - faults0)) # the new QEMU counts from 0
	state=${VMB_RUN_DIR:-/tmp/vmb-run}/$GUEST.migration
	check "migration: QMP migrate to a file completed" migrate_to_file "$state"
	"$vm" stop "$GUEST" --kill >&2
	"$vm" start "$GUEST" --incoming "$state" >&2 || bail "the migrated guest did not come back in a new QEMU"
	rm -f "$state"
	faults0=$(($(faults_now) - faults_before))
	check_eq "migration: the new host holds the balloon's frames" "$(host_get x-locked-frames)" "$half_gib"
	check_eq "migration: and knows what it granted" "$(host_get x-granted-capabilities)" "$granted"
	# a load releases nothing: the frames arrived as zero pages, never backed
	check_eq "migration: and released no memory when it loaded" "$(host_get x-discarded-frames)" 0
	check "migration: the driver agrees with the new host" wait_for 60 host_and_driver_agree
	host_set x-target-frames $((768 * mib))
	check "migration: the balloon inflates to 768 MiB afterwards" wait_for 120 host_locked_is $((768 * mib))
	host_set x-target-frames $((256 * mib))
	check "migration: and deflates to 256 MiB" wait_for 120 host_locked_is $((256 * mib))
	end_case
fi

# --- 8. unload while compaction holds a ballooned page isolated ---------

# Both tiers: the driver's fault point (unload_race in tests/lib/guest.sh)
# parks one migration of a ballooned 4 KiB page across the unload, before
# the driver's part and after it; unload must wait for the page, then free
# it and everything else.
build_test_hooks "$kver"
begin_case "unload while compaction holds a ballooned page isolated"
unload_race 1 "$half_gib"
unload_race 2 "$half_gib"
end_case

# --- the whole run ------------------------------------------------------

suite_avail=$(avail_settled $((suite_avail0 - avail_tolerance_kib)) $((suite_avail0 + avail_tolerance_kib)))
note "whole run: MemAvailable $suite_avail0 -> $suite_avail KiB ($(((suite_avail0 - suite_avail) / 4)) pages)"
check_range "whole run: MemAvailable back within $avail_tolerance_kib KiB (idle noise) of the start (KiB)" "$suite_avail" \
	$((suite_avail0 - avail_tolerance_kib)) $((suite_avail0 + avail_tolerance_kib))

# --- a protocol-v2 host: its own, short boot, the module copied over ----

if in_tier long; then
	ko=$(guest modinfo -n vmw_balloon)
	mkdir -p "$root/build/reliability"
	"$vm" copy "$GUEST" --from "$ko" "$root/build/reliability/" >&2
	"$vm" stop "$GUEST" >/dev/null 2>&1
	GUEST=$legacy_guest
	"$vm" stop "$GUEST" --kill >/dev/null 2>&1
	"$vm" start "$GUEST" --suite "$suite" --mem 2G --device-opts x-legacy=on >&2 ||
		bail "the legacy-host guest did not boot"
	"$vm" copy "$GUEST" "$root/build/reliability/${ko##*/}" /root/ >&2
	guest "rmmod vmw_balloon 2>/dev/null; insmod /root/${ko##*/}" || bail "insmod of the package's module failed"
	check_eq "legacy: the package's module is loaded" "$(guest cat /sys/module/vmw_balloon/version)" "$version"
	check "legacy: a protocol-v2 host gives the basic commands (0x2)" \
		wait_for 30 eval '[[ $(guest_stat "used capabilities") == 0x2 ]]'
	measure_avail_noise # this guest's own
	begin_case "a protocol-v2 host"
	lock0=$(host_get x-calls-lock)
	host_set x-target-frames "$half_gib"
	check "legacy: the balloon reaches 512 MiB" wait_for 300 host_locked_is "$half_gib"
	check "legacy: locked with single-page LOCK" eval '(( $(host_get x-calls-lock) - lock0 >= half_gib ))'
	end_case
fi

note "tier $tier: $cases cases, $total_faults faults injected, $total_leaked pages leaked in all (sum of the cases' MemAvailable differences), $SECONDS s"
finish
