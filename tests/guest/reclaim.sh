#!/bin/bash
# One reclaim decision (issue 29, item 3), proven in guests: what the
# balloon gives back, and when, under reclaim that is not a shortage and
# under 2 MiB allocations. Verdicts come from the guest (its vmstat and
# zoneinfo, the driver's debugfs) and from the emulated host (its counters
# over QMP). Parts, each in a guest of its own, all by default:
#
#   thp   a 2 GiB trixie guest, the default capabilities (2 MiB pages):
#         - ping-pong: the balloon at its target with 300 MiB free, then
#           60 s of a workload that maps 320 MiB of transparent huge pages,
#           touches it, unmaps it and pauses half a second, again and
#           again. The host's balloon, sampled every second, may not turn
#           from falling to rising sooner than 4 s after the fall (the
#           hold-off is 5 s, from the latest request), nor more than 12
#           times in the 60 s (60 s / 5 s); the workload must have met the
#           balloon (it gave back at least once, the host saw UNLOCKs)
#           and have got huge pages, or the case did not happen.
#         - watermark: the balloon inflated with 2 MiB pages only, until
#           the zone's free memory is between its min and low watermarks;
#           10 s later every zone is at or above its low watermark again
#           (kswapd was woken and restored it), from the page cache it
#           had to take: the balloon kept every frame.
#   numa  a 2 GiB guest with two NUMA nodes of 1 GiB (QEMU -numa), and
#         vm.zone_reclaim_mode=1: page cache on node 0, then a program on
#         node 0's CPU that needs more than node 0 has free: node reclaim
#         runs (node 0's page cache falls, reclaim outside kswapd and with
#         no allocation stall) while node 1 has memory to spare; the
#         balloon keeps every frame (no request counted, no UNLOCK). Then
#         a real shortage (more than the guest has free) still deflates.
#   hibernate  a 1 GiB guest with a 1 GiB swap file (resume= and
#         resume_offset= on its command line, through GRUB and the
#         initramfs), the balloon at 256 MiB, 200 MiB of random data in a
#         tmpfs and 200 MiB of a pattern a process holds: it hibernates
#         (/sys/power/disk reboot: the machine resets, the host forgets
#         its locks, the guest boots and resumes its image), with an
#         image_size of 0, so that its preallocation reclaims (swaps
#         out at least 50 MiB, or the case did not happen). The driver
#         gave nothing back while the image was made; after resume the
#         host holds the target again and host and driver agree; the
#         tmpfs data (sha256) and the process's pattern are intact.
#
#   tests/guest/reclaim.sh [thp] [numa] [hibernate]
#
# Every part ends with host and driver agreeing, a deflation to nothing
# held, and a clean kernel log.
# shellcheck source=tests/lib/guest.sh
source "$(dirname "$0")/../lib/guest.sh"
suite=trixie
parts=("$@")
((${#parts[@]})) || parts=(thp numa hibernate)
for p in "${parts[@]}"; do
	case $p in
	thp | numa | hibernate) ;;
	*) echo "unknown part '$p' (thp, numa, hibernate)" >&2 && exit 2 ;;
	esac
done

# boot_part NAME [VM-START-ARGS...]: a fresh trixie guest with the
# package installed and its module loaded in place of the kernel's own
boot_part() {
	GUEST=vmb-test-reclaim-$1
	shift
	boot_with_deb VMware-like "$@"
	install_deb
	guest 'modprobe -r vmw_balloon; modprobe vmw_balloon' ||
		bail "cannot load the package's vmw_balloon"
	check_eq "$part: setup: the package's module is loaded" \
		"$(guest cat /sys/module/vmw_balloon/version)" "$version"
	check "$part: setup: the balloon is empty at the start" wait_for 30 host_locked_is 0
}

unlocks() {
	echo $(($(host_get x-calls-batch-unlock) + $(host_get x-calls-2m-unlock) + $(host_get x-calls-unlock)))
}

# end_part: the end of every part: host and driver agree, deflate, nothing
# held, a clean log; then the guest goes
end_part() {
	check "$part: end: the host's locked frames are the driver's current" \
		wait_for 30 eval '[[ $(host_get x-locked-frames) == "$(guest_stat current)" ]]'
	host_set x-target-frames 0
	check "$part: end: the balloon deflates to 0 within 120 s" wait_for 120 host_locked_is 0
	check "$part: end: the driver's current is 0" wait_for 30 eval '[[ $(guest_stat current) == 0 ]]'
	check_nothing_held "$part: end"
	check_dmesg_clean "$part"
	"$vm" stop "$GUEST" >/dev/null 2>&1
}

# zones: "zone free min low" for every populated zone of the guest, one a line
zones() {
	# shellcheck disable=SC2016 # an awk program, for the guest
	guest "awk '\$1 == \"Node\" {z = \$2 \$4} \$1 == \"pages\" && \$2 == \"free\" {f = \$3}
		\$1 == \"min\" {m = \$2} \$1 == \"low\" {l = \$2}
		\$1 == \"managed\" && \$2 > 0 {keep[z] = 1}
		\$1 == \"high\" {line[z] = z \" \" f \" \" m \" \" l}
		END {for (z in keep) print line[z]}' /proc/zoneinfo | sort"
}

part_thp() {
	local avail0 balloon_mib want samples sampler out rc shrinks0 shrunk0 unlocks0 thp0 thp1 \
		locks0 stats reversals min_gap lowest n
	part=thp
	boot_part thp
	guest 'echo always > /sys/kernel/mm/transparent_hugepage/enabled &&
		echo always > /sys/kernel/mm/transparent_hugepage/defrag'
	check_eq "thp: setup: transparent huge pages are on, with direct reclaim (enabled, defrag)" \
		"$(guest "grep -o '\[[a-z]*\]' /sys/kernel/mm/transparent_hugepage/enabled \
			/sys/kernel/mm/transparent_hugepage/defrag | cut -d: -f2 | tr '\n' ' '")" "[always] [always] "
	"$vm" ssh "$GUEST" -- "cat > /root/thp-churn.py" <"$root/tests/lib/thp-churn.py" ||
		bail "copy thp-churn.py into the guest"

	# the balloon leaves 300 MiB free
	avail0=$(guest_available_kib)
	balloon_mib=$((avail0 / 1024 - 300))
	want=$((balloon_mib * 256 / 512 * 512))
	host_set x-target-frames "$want"
	check "thp: setup: the host holds $want frames ($((want / 256)) MiB) within 180 s" \
		wait_for 180 host_locked_is "$want"
	check_range "thp: setup: the balloon is made of 2 MiB pages (host's 2 MiB entries)" \
		"$(host_get x-locked-2m)" $((want / 512 / 2)) $((want / 512))
	guest 'sync; echo 3 > /proc/sys/vm/drop_caches'
	note "zones (zone free min low): $(zones | tr '\n' ';')"

	shrinks0=$(guest_stat shrink)
	shrunk0=$(guest_stat shrinkFree)
	unlocks0=$(unlocks)
	locks0=$(($(host_get x-calls-2m-lock) + $(host_get x-calls-batch-lock)))
	thp0=$(guest_vmstat thp_fault_alloc)
	samples=$(mktemp)
	(
		while :; do
			v=$(host_get x-locked-frames)
			echo "$EPOCHREALTIME $v"
			sleep 1
		done
	) >"$samples" 2>/dev/null &
	sampler=$!
	out=$(guest "python3 /root/thp-churn.py 320 60" 2>&1)
	rc=$?
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	thp1=$(guest_vmstat thp_fault_alloc)
	note "thp: workload: $out (exit $rc); $((thp1 - thp0)) huge pages faulted in," \
		"$(guest_vmstat thp_fault_fallback) fallbacks in all"
	check_eq "thp: the workload completed, its memory intact" "$rc" 0
	check_range "thp: setup: the workload got huge pages (thp_fault_alloc)" $((thp1 - thp0)) 10 $((1 << 40))
	check_range "thp: setup: the workload met the balloon: it gave back (driver's shrink requests)" \
		$(($(guest_stat shrink) - shrinks0)) 1 $((1 << 40))
	check_range "thp: setup: the host saw UNLOCKs" $(($(unlocks) - unlocks0)) 1 $((1 << 40))
	note "thp: driver: $(($(guest_stat shrink) - shrinks0)) requests, $(($(guest_stat shrinkFree) - shrunk0)) frames" \
		"given back; host: $(($(unlocks) - unlocks0)) UNLOCKs," \
		"$(($(host_get x-calls-2m-lock) + $(host_get x-calls-batch-lock) - locks0)) LOCKs in the 60 s"
	# shellcheck disable=SC2016 # an awk program
	stats=$(awk 'NF == 2 && $2 ~ /^[0-9]+$/ {
			if (n && $2 < prev) { fall = 1; tfall = tprev }
			if (n && $2 > prev && fall) { rev++; g = $1 - tfall; if (min == "" || g < min) min = g; fall = 0 }
			if (low == "" || $2 < low) low = $2
			prev = $2; tprev = $1; n++
		} END { printf "%d %s %s %d\n", rev, (min == "" ? "none" : sprintf("%.1f", min)), low, n }' "$samples")
	read -r reversals min_gap lowest n <<<"$stats"
	note "thp: $n samples of the host's balloon: lowest $lowest frames (target $want);" \
		"$reversals turns from falling to rising, the shortest ${min_gap} s after the fall"
	check_range "thp: setup: the host's balloon was sampled at least 30 times in the 60 s" "$n" 30 1000
	check_range "thp: no ping-pong: turns from deflating to inflating in 60 s, at most one per 5 s hold-off" \
		"$reversals" 0 12
	if [[ $min_gap == none ]]; then
		pass "thp: no ping-pong: no inflation after a deflation while the workload ran"
	else
		check "thp: no ping-pong: no inflation sooner than 4 s after a deflation (${min_gap} s)" \
			awk -v g="$min_gap" 'BEGIN {exit !(g >= 4)}'
	fi
	rm -f "$samples"
	check "thp: after: the balloon is back at $want frames within 60 s" wait_for 60 host_locked_is "$want"

	# 2 MiB ballooning into the gap between min and low
	balloon_keep 2048
	wait_for 120 host_locked_is 0 || bail "thp: the balloon did not deflate before the watermark case"
	guest 'dd if=/dev/zero of=/var/tmp/cache.bin bs=1M count=300 status=none && sync' ||
		bail "cannot fill the page cache"
	local z free mn lw target=0 below=no shrinks_w scan0
	# the DMA32 zone's free and low, 10 times a second, in the guest: with
	# kswapd woken, a moment below low may last less than a second
	"$vm" ssh "$GUEST" -- 'cat > /root/zsample.sh' <<'ZEOF'
while :; do
	awk '$1 == "Node" {z = $4} z == "DMA32" && $1 == "pages" && $2 == "free" {f = $3}
		z == "DMA32" && $1 == "low" {print f, $2; exit}' /proc/zoneinfo
	sleep 0.1
done
ZEOF
	guest 'rm -f /root/zlog; nohup sh /root/zsample.sh >/root/zlog 2>&1 &'
	scan0=$(guest_vmstat pgscan_kswapd)
	local free0 low0
	read -r z free0 mn low0 <<<"$(zones | sort -k2 -n | tail -n 1)"
	for _ in 1 2 3 4 5 6 7 8; do
		if guest "awk '\$1 < \$2 {b = 1} END {exit !b}' /root/zlog"; then
			below=yes
			break
		fi
		# the largest zone (DMA32 in a 2 GiB guest): its free frames above min
		read -r z free mn lw <<<"$(zones | sort -k2 -n | tail -n 1)"
		if ((target == 0)); then
			target=$(((free - mn) / 512 * 512 - 512))
		else
			target=$((target + 512))
		fi
		host_set x-target-frames "$target"
		wait_for 120 host_locked_is "$target" || break
		sleep 1
	done
	guest 'pkill -f zsample.sh' >/dev/null 2>&1
	read -r z free mn lw <<<"$(zones | sort -k2 -n | tail -n 1)"
	note "watermark: balloon $(host_get x-locked-frames) frames ($(host_get x-locked-2m) 2 MiB entries);" \
		"zone $z free $free, min $mn, low $lw right after; the lowest free seen: $(guest "sort -n /root/zlog | head -n 1");" \
		"kswapd scanned $(($(guest_vmstat pgscan_kswapd) - scan0)) pages meanwhile"
	check_eq "watermark: setup: the host holds the target $target" "$(host_get x-locked-frames)" "$target"
	check_eq "watermark: setup: the balloon is all 2 MiB pages (host's 2 MiB entries x 512)" \
		$(($(host_get x-locked-2m) * 512)) "$target"
	# the allocations that cross low wake kswapd, which may lift the zone
	# again within the sampler's 0.1 s: the proof that they crossed it is
	# that the balloon took more than the zone had above low, in 2 MiB pages
	check_range "watermark: setup: the 2 MiB pages took more than the zone had free above its low watermark ($((free0 - low0)) frames) (target)" \
		"$target" $((free0 - low0 + 1)) $((1 << 40))
	note "watermark: a free below low seen by the sampler: $below"
	shrinks_w=$(guest_stat shrink)
	local kswapd0
	kswapd0=$(guest_vmstat pgscan_kswapd)
	sleep 10
	note "watermark: 10 s later: $(zones | tr '\n' ';') kswapd0 $(guest "cut -d' ' -f3 /proc/\$(pgrep -x kswapd0)/stat")," \
		"scanned $(($(guest_vmstat pgscan_kswapd) - kswapd0)) pages meanwhile"
	check_eq "watermark: 10 s later no zone is left below its low watermark (zones below low)" \
		"$(zones | awk '$2 < $4' | tr '\n' ' ')" ""
	check "watermark: kswapd did it from the page cache, not the balloon: the host still holds $target" \
		host_locked_is "$target"
	check_eq "watermark: the driver counted no request (shrink)" "$(guest_stat shrink)" "$shrinks_w"
	guest 'rm -f /var/tmp/cache.bin'
	end_part
}

part_numa() {
	local nodes want avail0 fc0 fc1 free1 out rc shrinks0 shrunk0 unlocks0 stall0 stall1 steal0 steal1 \
		kswapd0 kswapd1 need free0
	part=numa
	boot_part numa \
		--qemu-arg=-object --qemu-arg=memory-backend-ram,id=m0,size=1G \
		--qemu-arg=-numa --qemu-arg=node,nodeid=0,cpus=0,memdev=m0 \
		--qemu-arg=-object --qemu-arg=memory-backend-ram,id=m1,size=1G \
		--qemu-arg=-numa --qemu-arg=node,nodeid=1,cpus=1,memdev=m1 \
		--qemu-arg=-smp --qemu-arg=2,sockets=2,cores=1,threads=1
	nodes=$(guest "ls -d /sys/devices/system/node/node[0-9]* | wc -l")
	check_eq "numa: setup: the guest has two NUMA nodes" "$nodes" 2
	guest 'sysctl -q vm.zone_reclaim_mode=1'
	check_eq "numa: setup: vm.zone_reclaim_mode is 1" "$(guest cat /proc/sys/vm/zone_reclaim_mode)" 1
	copy_touch_memory

	# node_mib N FIELD: a field of node N's meminfo, in MiB
	node_mib() {
		guest "awk '\$3 == \"$2:\" {print int(\$4 / 1024)}' /sys/devices/system/node/node$1/meminfo"
	}
	# page cache on node 0 first: a file written from node 0's CPU, clean,
	# all but 100 MiB of node 0's free memory; then the balloon, which
	# takes what node 0 has left down to its low watermark and the rest
	# from node 1, leaving 400 MiB free in all (node reclaim is off while
	# it inflates, so that it reclaims nothing on node 0)
	# Multi-gen LRU skips node reclaim that may not write or unmap (mode
	# 1): the second run saw zone_reclaim_failed 134231 and nothing
	# reclaimed. The classic LRU it is, so that mode 1 reclaims.
	note "numa: multi-gen LRU was $(guest 'cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent'); now off"
	guest 'if [ -e /sys/kernel/mm/lru_gen/enabled ]; then echo n > /sys/kernel/mm/lru_gen/enabled; fi'
	guest 'sysctl -q vm.zone_reclaim_mode=0; sync; echo 3 > /proc/sys/vm/drop_caches'
	free0=$(node_mib 0 MemFree)
	guest "taskset -c 0 dd if=/dev/zero of=/var/tmp/n0.bin bs=1M count=$((free0 - 100)) status=none && sync" ||
		bail "cannot fill node 0's page cache"
	want=$((($(guest_meminfo MemFree) / 1024 - 400) * 256 / 512 * 512))
	host_set x-target-frames "$want"
	check "numa: setup: the host holds $want frames ($((want / 256)) MiB) within 180 s" \
		wait_for 180 host_locked_is "$want"
	guest 'sysctl -q vm.zone_reclaim_mode=1'
	check_eq "numa: setup: vm.zone_reclaim_mode is 1 again" "$(guest cat /proc/sys/vm/zone_reclaim_mode)" 1
	fc0=$(node_mib 0 FilePages)
	free0=$(node_mib 0 MemFree)
	free1=$(node_mib 1 MemFree)
	note "numa: node 0: $free0 MiB free, $fc0 MiB page cache; node 1: $free1 MiB free; zones: $(zones | tr '\n' ';')"
	check_range "numa: setup: node 0 has at least 300 MiB of page cache (MiB)" "$fc0" 300 $((1 << 30))
	need=$((free0 + 200))
	check_range "numa: setup: node 1 has room for what the program needs beyond node 0's free (MiB)" \
		"$free1" $((need - free0 + 100)) $((1 << 30))
	shrinks0=$(guest_stat shrink)
	shrunk0=$(guest_stat shrinkFree)
	unlocks0=$(unlocks)
	stall0=$(guest "awk '\$1 ~ /^allocstall_/ {n += \$2} END {print n + 0}' /proc/vmstat")
	steal0=$(guest_vmstat pgsteal_direct)
	kswapd0=$(guest_vmstat pgsteal_kswapd)
	out=$(guest "taskset -c 0 python3 /root/touch-memory.py $need 5" 2>&1)
	rc=$?
	stall1=$(guest "awk '\$1 ~ /^allocstall_/ {n += \$2} END {print n + 0}' /proc/vmstat")
	steal1=$(guest_vmstat pgsteal_direct)
	kswapd1=$(guest_vmstat pgsteal_kswapd)
	fc1=$(node_mib 0 FilePages)
	note "numa: workload of $need MiB on node 0's CPU: $out (exit $rc); node 0's page cache $fc0 -> $fc1 MiB;" \
		"reclaimed outside kswapd $((steal1 - steal0)) pages, by kswapd $((kswapd1 - kswapd0)); allocation stalls $((stall1 - stall0));" \
		"node 1 free now $(node_mib 1 MemFree) MiB; zone_reclaim_failed $(guest_vmstat zone_reclaim_failed)"
	check_eq "numa: the workload completed, its memory intact" "$rc" 0
	check_range "numa: setup: node reclaim ran: node 0's page cache fell by at least 50 MiB (MiB)" \
		$((fc0 - fc1)) 50 $((1 << 30))
	check_range "numa: setup: node reclaim ran: pages reclaimed outside kswapd (pgsteal_direct)" \
		$((steal1 - steal0)) $((50 * 256)) $((1 << 40))
	check_eq "numa: setup: node reclaim ran: no allocation stalled in direct reclaim (allocstall)" \
		$((stall1 - stall0)) 0
	check_eq "numa: node reclaim: the driver counted no request (shrink)" \
		"$(guest_stat shrink)" "$shrinks0"
	check_eq "numa: node reclaim: the driver gave nothing back (shrinkFree)" \
		"$(guest_stat shrinkFree)" "$shrunk0"
	check_eq "numa: node reclaim: the host saw no UNLOCK" "$(unlocks)" "$unlocks0"
	sleep 5
	check "numa: node reclaim: 5 s later the host still holds its target $want" host_locked_is "$want"
	guest 'rm -f /var/tmp/n0.bin; sync; echo 3 > /proc/sys/vm/drop_caches'

	# a real shortage: more than the whole guest has free
	need=$(($(guest_available_kib) / 1024 + 200))
	shrunk0=$(guest_stat shrinkFree)
	unlocks0=$(unlocks)
	out=$(guest "python3 /root/touch-memory.py $need 5" 2>&1)
	rc=$?
	note "numa: shortage: $need MiB: $out (exit $rc); driver gave back $(($(guest_stat shrinkFree) - shrunk0)) frames"
	check_eq "numa: shortage: the workload completed" "$rc" 0
	check_range "numa: shortage: the driver gave back at least 100 MiB (shrinkFree, frames)" \
		$(($(guest_stat shrinkFree) - shrunk0)) $((100 * 256)) $((1 << 40))
	check_range "numa: shortage: the host saw UNLOCKs" $(($(unlocks) - unlocks0)) 1 $((1 << 40))
	check "numa: shortage: the balloon is back at $want frames within 90 s" wait_for 90 host_locked_is "$want"
	end_part
}

part_hibernate() {
	local want dev offset sum0 sum1 boot0 boots0 shrinks0 shrunk0 out swapped0
	part=hibernate
	boot_part hibernate --mem 1G
	check "hibernate: setup: the kernel can hibernate (disk in /sys/power/state)" \
		guest 'grep -qw disk /sys/power/state'
	# a swap file on the root file system, and the kernel told where it is,
	# now (for the image) and at boot (for resume, through the initramfs)
	guest 'set -e
		dd if=/dev/zero of=/swapfile bs=1M count=1024 status=none; chmod 600 /swapfile
		mkswap /swapfile >/dev/null; swapon /swapfile' || bail "cannot make the swap file"
	dev=$(guest 'findmnt -no UUID /')
	offset=$(guest "filefrag -v /swapfile | awk '\$1 == \"0:\" {sub(/\\.\\.*\$/, \"\", \$4); print \$4}'")
	note "hibernate: swap file on UUID=$dev at offset $offset"
	[[ $dev && $offset =~ ^[0-9]+$ ]] || bail "cannot find the swap file's device and offset"
	guest "set -e
		echo 'RESUME=UUID=$dev' > /etc/initramfs-tools/conf.d/resume
		echo 'GRUB_CMDLINE_LINUX_DEFAULT=\"\$GRUB_CMDLINE_LINUX_DEFAULT resume=UUID=$dev resume_offset=$offset no_console_suspend\"' \
			> /etc/default/grub.d/99-resume.cfg
		update-initramfs -u >/dev/null 2>&1; update-grub >/dev/null 2>&1
		echo $offset > /sys/power/resume_offset
		echo reboot > /sys/power/disk" >&2 || bail "cannot set up resume from the swap file"
	guest "set -e; echo \$(lsblk -no MAJ:MIN \$(findmnt -no SOURCE /) | tr -d ' ') > /sys/power/resume" ||
		bail "cannot tell the kernel the resume device"
	note "hibernate: /sys/power/resume $(guest cat /sys/power/resume), offset $(guest cat /sys/power/resume_offset)"

	want=$((256 * 256))
	host_set x-target-frames "$want"
	check "hibernate: setup: the host holds $want frames (256 MiB) within 120 s" wait_for 120 host_locked_is "$want"
	# memory written before: 200 MiB of tmpfs, and a process holding 200 MiB it checks after
	guest 'set -e; mkdir -p /mnt/pat; mount -t tmpfs -o size=256M none /mnt/pat
		head -c 200M /dev/urandom > /mnt/pat/data; sha256sum /mnt/pat/data | cut -d" " -f1 > /root/sum0' ||
		bail "cannot write the memory pattern"
	"$vm" ssh "$GUEST" -- "cat > /root/hold-memory.py" <"$root/tests/lib/hold-memory.py" ||
		bail "copy hold-memory.py into the guest"
	guest 'rm -f /root/check; nohup python3 /root/hold-memory.py 200 /root/check > /root/held.out 2>&1 &
		for i in $(seq 120); do grep -q holding /root/held.out && break; sleep 1; done' >/dev/null
	check "hibernate: setup: a process holds 200 MiB of a pattern" guest 'grep -q holding /root/held.out'
	sum0=$(guest cat /root/sum0)
	boot0=$(guest cat /proc/sys/kernel/random/boot_id)
	kernel_boots() {
		"$vm" console "$GUEST" -n 1000000 | grep -c 'Linux version'
	}
	boots0=$(kernel_boots)
	shrinks0=$(guest_stat shrink)
	shrunk0=$(guest_stat shrinkFree)
	# an image as small as it can be: the preallocation must reclaim (swap
	# out) what it can, which is the reclaim the balloon must not answer;
	# in the first run, at the default size, it may have reclaimed nothing
	guest 'echo 0 > /sys/power/image_size'
	swapped0=$(guest_vmstat pswpout)
	# the guest writes its image, resets, boots and resumes it: the ssh
	# call may die with it
	guest 'dmesg -C; nohup sh -c "sleep 2; echo disk > /sys/power/state" > /dev/null 2>&1 &' || true
	sleep 30
	check "hibernate: the guest answers again within 900 s" wait_for 900 eval '[[ $(guest_timeout=20 guest echo up 2>/dev/null) == up ]]'
	check "hibernate: the machine booted a kernel again (the console's 'Linux version' lines: $boots0 before)" \
		eval '(( $(kernel_boots) > boots0 ))'
	check "hibernate: and resumed the image (the same boot_id as before)" \
		eval '[[ $(guest cat /proc/sys/kernel/random/boot_id) == "$boot0" ]]'
	note "hibernate: the kernel's log: $(guest "dmesg | grep -E 'PM:|vmw_balloon' | head -n 20 | tr '\n' '|'")"
	check_range "hibernate: setup: the image's preallocation reclaimed: it swapped out at least 50 MiB (pswpout, pages)" \
		$(($(guest_vmstat pswpout) - swapped0)) $((50 * 256)) $((1 << 40))
	check_eq "hibernate: the driver gave nothing back while the image was made (shrink, shrinkFree)" \
		"$(guest_stat shrink) $(guest_stat shrinkFree)" "$shrinks0 $shrunk0"
	check "hibernate: after resume the host holds the target $want within 120 s" wait_for 120 host_locked_is "$want"
	check "hibernate: host and driver agree on the frames (x-locked-frames, debugfs current)" \
		wait_for 30 eval '[[ $(host_get x-locked-frames) == "$(guest_stat current)" ]]'
	sum1=$(guest 'sha256sum /mnt/pat/data | cut -d" " -f1')
	check_eq "hibernate: the 200 MiB written to tmpfs before is intact (sha256)" "$sum1" "$sum0"
	out=$(guest 'touch /root/check; for i in $(seq 120); do grep -q held: /root/held.out && break; sleep 1; done
		tail -n 1 /root/held.out')
	check "hibernate: the 200 MiB a process held through it is intact ($out)" grep -q intact <<<"$out"
	end_part
}

for part in "${parts[@]}"; do
	"part_$part"
done
finish
