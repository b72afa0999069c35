#!/bin/bash
# Memory pressure: the balloon gives memory back when the guest needs it.
# A 2 GiB VMware-like guest with the package; the host inflates the
# balloon until about 300 MiB is free, then a program in the guest touches
# 800 MiB. It must complete with no OOM kill, the balloon must shrink by
# at least what the program lacked (the host sees the UNLOCKs), and once
# it ends the balloon must be back at the host's target within 60 s.
# Before the workload, reclaim with memory to spare: 256M written to the
# root cgroup's memory.reclaim of the idle guest at its target, with
# 150 MiB of page cache to take; the balloon must give nothing back.
# Verdicts come from the guest and from the emulated host.
#
#   tests/guest/pressure.sh [SUITE]    bookworm (default: $VMB_SUITE or
#                                      bookworm), bullseye, trixie or sid
#
# VMB_PRESSURE_COMPARE=1 adds a measurement, after the checks: the same
# workload with the shrinker off, so that only the OOM notifier gives
# memory back (what virtio_balloon does since 5.7). It prints notes only.
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
use_suite "$@"
GUEST=${GUEST:-vmb-test-pressure-$suite}

free_target_mib=300	# what the balloon leaves free
workload_mib=800	# what the program touches
hold_s=10		# how long it keeps it

# a QMP monitor for a client that listens for BALLOON_CHANGE, as libvirt does
boot_with_deb VMware-like --qemu-arg=-qmp "$(events_monitor_arg)"

install_deb
# The kernel's own driver may have loaded at boot (DMI alias): ours instead.
guest 'modprobe -r vmw_balloon; modprobe vmw_balloon' ||
	bail "cannot load the package's vmw_balloon"
check_eq "load: the package's module is loaded" \
	"$(guest cat /sys/module/vmw_balloon/version)" "$version"
check_eq "load: giving memory back is on by default" \
	"$(guest cat /sys/module/vmw_balloon/parameters/vmwballoon_shrinker_enable)" Y
check "load: the kernel log says so" \
	guest "dmesg | grep -q 'vmw_balloon: version $version loaded.*gives memory back under pressure'"

copy_touch_memory

# baseline: no balloon, caches dropped
check "setup: the balloon is empty at the start" wait_for 30 host_locked_is 0
avail_now() {
	guest_available_kib
}
measure_avail_noise
avail0=$(avail_now)
meminfo0=$(guest cat /proc/meminfo)
# pages in the per-CPU free lists, which MemFree does not count
pcp_pages() {
	guest "awk '\$1 == \"count:\" {n += \$2} END {print n + 0}' /proc/zoneinfo"
}
note "baseline: available (MemAvailable + per-CPU free) $avail0 KiB, $(pcp_pages) pages in per-CPU lists"

# Inflate until about 300 MiB is free.
balloon_mib=$((avail0 / 1024 - free_target_mib))
want=$((balloon_mib * 256))
discarded0=$(host_get x-discarded-frames)
check "events: a second QMP client listens" listen_for_events
balloon_keep $((2048 - balloon_mib))
check "inflate: the host holds $want frames ($balloon_mib MiB) within 120 s" \
	wait_for 120 host_locked_is "$want"
ram_bytes=$(($(host_get x-ram-frames) * 4096))
check "inflate: the client was told BALLOON_CHANGE, actual = RAM - balloon" \
	wait_for 10 eval '[[ $(last_balloon_change) == $((ram_bytes - want * 4096)) ]]'
note "$(grep -c '"BALLOON_CHANGE"' "$events_log") BALLOON_CHANGE events while $balloon_mib MiB inflated"
stop_listening
# the driver counts a page once the host has answered: it may lag a moment
check "inflate: the driver's debugfs current agrees" wait_for 30 eval '[[ $(guest_stat current) == "$want" ]]'
# memory.reclaim on the root cgroup: reclaim that runs with memory to
# spare (as node reclaim and hibernation do), which the balloon must not
# answer. It has page cache to take, so that it surely runs: 150 MiB of a
# file, written and read back clean. memory.reclaim is 5.19 and later.
check_reclaim_with_memory_to_spare() {
	local reclaim_mib=256 cache_mib=150 cached0 cached1 shrinks_r0 shrunk_r0 unlocks_r0 reclaim_out
	guest "dd if=/dev/zero of=/var/tmp/cache.bin bs=1M count=$cache_mib status=none && sync &&
		cat /var/tmp/cache.bin >/dev/null" || bail "cannot fill the page cache"
	# free and low watermark of every zone, for the record
	note "zones (free/low frames): $(guest "awk '\$1 == \"Node\" {z = \$4} \$1 == \"pages\" && \$2 == \"free\" {f = \$3} \$1 == \"low\" {printf \"%s %s/%s \", z, f, \$2}' /proc/zoneinfo")"
	cached0=$(guest_meminfo Cached)
	shrinks_r0=$(guest_stat shrink)
	shrunk_r0=$(guest_stat shrinkFree)
	unlocks_r0=$(($(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock)))
	reclaim_out=$(guest "echo ${reclaim_mib}M > /sys/fs/cgroup/memory.reclaim" 2>&1)
	note "memory.reclaim ${reclaim_mib}M: exit $?${reclaim_out:+ ($reclaim_out)}"
	cached1=$(guest_meminfo Cached)
	note "memory.reclaim: page cache $cached0 -> $cached1 KiB"
	check_range "memory.reclaim: it ran: the page cache fell by at least 100 MiB (KiB)" \
		$((cached0 - cached1)) $((100 * 1024)) $((1 << 40))
	check_eq "memory.reclaim: the driver gave nothing back (shrinkFree)" \
		"$(guest_stat shrinkFree)" "$shrunk_r0"
	check_eq "memory.reclaim: the driver counted no request (shrink)" \
		"$(guest_stat shrink)" "$shrinks_r0"
	check_eq "memory.reclaim: the host saw no UNLOCK" \
		$(($(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock))) "$unlocks_r0"
	sleep 5
	check "memory.reclaim: 5 s later the host still holds $want frames" host_locked_is "$want"
	guest 'rm -f /var/tmp/cache.bin'
}
if guest 'test -e /sys/fs/cgroup/memory.reclaim'; then
	check_reclaim_with_memory_to_spare
else
	skip "memory.reclaim: reclaim with memory to spare gives nothing back" \
		"this kernel ($(guest uname -r)) has no memory.reclaim (5.19 and later)"
fi

# What the host gave back is counted from its side below: frames it
# released (x-discarded-frames, one per frame locked) less what it still
# holds. That needs a host that releases every frame it locks.
discarded1=$(host_get x-discarded-frames)
check_range "setup: the host released the memory of every frame it locked (x-discarded-frames)" \
	$((discarded1 - discarded0)) "$want" $((1 << 40))
avail1=$(avail_now)
# MemAvailable is an estimate: it leaves out the kernel's reserve, which
# the kernel still hands out in part under pressure before it asks the
# balloon, and up to which kswapd reclaims before it stops. That reserve
# is totalreserve_pages, what MemAvailable subtracts: per zone its high
# watermark plus the largest of its lowmem reserves ("protection"), at
# most its managed pages; read from the guest's /proc/zoneinfo. It is the
# allowance either way below.
# shellcheck disable=SC2016 # an awk program
reserve_prog='$1 == "Node" {z++} $1 == "high" {h[z] = $2} $1 == "managed" {m[z] = $2}
	$1 == "protection:" {gsub(/[(),]/, " "); p[z] = 0; for (i = 2; i <= NF; i++) if ($i + 0 > p[z]) p[z] = $i + 0}
	END {for (k in h) {r = h[k] + p[k]; if (r > m[k]) r = m[k]; n += r}; print n + 0}'
reserve=$(guest "awk '$reserve_prog' /proc/zoneinfo")
check_range "setup: the guest's zones have a reserve (high watermarks and lowmem reserves, frames)" "$reserve" 1 $((1 << 30))
note "free before the workload: MemAvailable $avail1 KiB, balloon $want frames," \
	"$(host_get x-locked-2m) of them in 2 MiB entries; the kernel's reserve $reserve frames"
shrinks0=$(guest_stat shrink)
shrunk0=$(guest_stat shrinkFree)
migrated0=$(guest_vmstat balloon_migrate)
unlocks0=$(($(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock)))

# The workload, with the host's balloon sampled every second meanwhile.
samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
(
	while :; do
		echo "$SECONDS $(host_get x-locked-frames)"
		sleep 1
	done
) >"$samples" 2>/dev/null &
sampler=$!
start=$SECONDS
out=$(guest "python3 /root/touch-memory.py $workload_mib $hold_s" 2>&1)
rc=$?
ended=$SECONDS
note "workload: $out (exit $rc, $((ended - start)) s)"
check_eq "workload: touched $workload_mib MiB and completed" "$rc" 0
check "workload: no OOM kill" \
	eval '! guest dmesg | grep -Eq "Out of memory|oom-kill|Killed process"'

# Back at target within 60 s of its end, as the sampler saw it.
back=
while ((SECONDS - ended <= 60)); do
	last=$(tail -n 1 "$samples")
	if [[ ${last#* } == "$want" ]]; then
		back=$((${last%% *} - ended))
		break
	fi
	sleep 1
done
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
check "after: the balloon is back at $want frames within 60 s" test -n "$back"

min=$(awk 'NF == 2 && $2 ~ /^[0-9]+$/ {print $2}' "$samples" | sort -n | head -n 1)
# re-inflations while the program held its memory: rises between samples
regrow=$(awk -v end="$ended" 'NF == 2 && $1 <= end { if (prev != "" && $2 > prev) n++; prev = $2 } END {print n + 0}' "$samples")
shrinks=$(($(guest_stat shrink) - shrinks0))
shrunk=$(($(guest_stat shrinkFree) - shrunk0))
unlocks=$(($(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock) - unlocks0))
lacked=$((workload_mib * 256 - avail1 / 4))
# frames the host saw unlocked for good: released frames less those it
# still holds (a balloon page that compaction moved is one unlock and one
# lock, not a frame given back)
given=$((want + $(host_get x-discarded-frames) - discarded1 - $(host_get x-locked-frames) -
	(${migrated0:+$(guest_vmstat balloon_migrate) - }${migrated0:-0})))
note "balloon: before $want, minimum ${min:-?} (sampled every second), after $(host_get x-locked-frames) frames;" \
	"back at target ${back:-never} s after the workload ended"
note "gave back $given frames ($((given / 256)) MiB) as the host counts them;" \
	"the workload lacked $lacked frames ($((lacked / 256)) MiB) of what was free," \
	"and touched $((workload_mib * 256)) frames in all"
note "driver: $shrinks reclaim requests, $shrunk frames given back" \
	"($(guest dmesg | grep -c 'ran short of memory') by the OOM notifier);" \
	"host: $unlocks UNLOCK commands; $regrow re-inflations while the workload ran"
# The balloon gives back what the workload lacked, give or take the
# kernel's reserve: at least that less the reserve; and at most twice it
# plus the reserve (several reclaim passes may run at once, and kswapd
# reclaims up to the high watermarks), not the whole balloon.
check_range "setup: the workload needs more than was free (frames lacked)" "$lacked" 1 $((1 << 40))
note "given back: $((shrunk * 100 / (lacked > 0 ? lacked : 1)))% of what the workload lacked"
check_range "the host saw the balloon give back what the workload lacked, less the reserve, at most twice it plus the reserve (frames)" \
	"$given" $((lacked - reserve)) $((2 * lacked + reserve))
check_range "the driver counted as much given back (shrinkFree), within the same bounds" \
	"$shrunk" $((lacked - reserve)) $((2 * lacked + reserve))
check "the host was told with UNLOCKs" test "$unlocks" -gt 0

# The end of every case: host and driver agree, nothing leaked, a clean log.
check "end: the host's locked frames are the driver's current" \
	wait_for 30 eval '[[ $(host_get x-locked-frames) == "$(guest_stat current)" ]]'
balloon_keep 2048
check "end: the balloon deflates to 0 within 60 s" wait_for 60 host_locked_is 0
check "end: the driver's current is 0" wait_for 30 eval '[[ $(guest_stat current) == 0 ]]'
check_nothing_held end
# The workload evicted mapped file pages (executables, libraries) that
# dropping caches cannot: MemAvailable credits up to half of the page
# cache as available, so their eviction raises it. One run ended 7 MiB
# lower in Cached and 4.4 MiB higher in MemAvailable, with nothing held by
# host or driver. What Cached shrank by is the allowance above.
cached0=$(awk '$1 == "Cached:" {print $2}' <<<"$meminfo0")
guest 'sync; echo 3 > /proc/sys/vm/drop_caches'
cached2=$(guest_meminfo Cached)
evicted_kib=$((cached0 > cached2 ? cached0 - cached2 : 0))
avail2=$(avail_settled $((avail0 - avail_tolerance_kib)) $((avail0 + avail_tolerance_kib + evicted_kib)))
note "after deflating: available $avail2 KiB (baseline $avail0), $(pcp_pages) pages in per-CPU lists"
# where any difference went: the meminfo lines that moved by 1 MiB or more
guest cat /proc/meminfo | awk 'NR == FNR {was[$1] = $2; next}
	($2 - was[$1] >= 1024 || was[$1] - $2 >= 1024) {printf "# meminfo %s %d -> %d KiB\n", $1, was[$1], $2}' \
	<(echo "$meminfo0") -
check_range "end: available memory (MemAvailable + per-CPU free) back within $avail_tolerance_kib KiB (idle noise) of the baseline, up to $evicted_kib KiB (page cache the workload evicted) above (KiB)" \
	"$avail2" $((avail0 - avail_tolerance_kib)) $((avail0 + avail_tolerance_kib + evicted_kib))
check_dmesg_clean "pressure"
check_eq "end: the guest still answers" "$(guest echo alive)" alive

# The alternative, measured: the OOM notifier alone.
if [[ ${VMB_PRESSURE_COMPARE:-0} == 1 ]]; then
	guest 'modprobe -r vmw_balloon && modprobe vmw_balloon vmwballoon_shrinker_enable=0 && dmesg -C'
	balloon_keep $((2048 - balloon_mib))
	wait_for 120 host_locked_is "$want" || note "oom only: the balloon did not reach $want"
	avail1=$(avail_now)
	shrinks0=$(guest_stat shrink)
	start=$SECONDS
	out=$(guest "timeout 600 python3 /root/touch-memory.py $workload_mib $hold_s" 2>&1)
	rc=$?
	took=$((SECONDS - start))
	locked=$(host_get x-locked-frames)
	note "oom only: MemAvailable before $avail1 KiB; workload: $out (exit $rc, $took s)"
	note "oom only: balloon $want -> $locked frames, $(($(guest_stat shrink) - shrinks0)) OOM notifier calls," \
		"$(guest dmesg | grep -c 'ran short of memory') logged, $(guest dmesg | grep -c 'Killed process') OOM kills"
	balloon_keep 2048
	wait_for 60 host_locked_is 0 || note "oom only: the balloon did not deflate"
fi

finish
