#!/bin/bash
# Check the vmware-balloon device (qemu-cloud/qemu/) end to end from inside
# a guest booted with qemu-cloud/vm, and print TAP.
#
#   tests/device/run.sh          two guests.  One: hostcheck, targets (QMP
#                                and 64-bit), fault injection (x-reset-at-
#                                locked among them), host memory
#                                released and BALLOON_CHANGE events,
#                                suspend to RAM and wake-up, reboot,
#                                migration to a file and back with frames
#                                locked (the state read by QEMU's
#                                analyze-migration.py, spoiled copies
#                                refused, a load that releases nothing);
#                                locks the guest forgot (frames reused
#                                while locked, a system_reset in S3, a
#                                kexec), each with a pattern that must
#                                survive a migration; a background
#                                snapshot while frames are locked and
#                                unlocked, a postcopy migration to a second
#                                QEMU with frames locked and unlocked on
#                                the destination during its postcopy phase,
#                                random garbage and the log rate limit, a
#                                hot-plugged DIMM, unplugged with frames
#                                locked.  Two: RAM that is a private file
#                                mapping, and ivshmem, NVDIMM, virtio-pmem
#                                and virtio-mem memory the device must
#                                never take (classified once, and the time
#                                of a batch of it against ordinary RAM)
#                                Three: the fixes of the device review
#                                (issue 31), see review_checks below.
#   tests/device/run.sh --review only guest three
#   tests/device/run.sh --all    also guests with x-legacy=on and other
#                                capabilities (three more boots)
#   tests/device/run.sh --fuzz MINUTES
#                                only a long fuzz: a QEMU built with
#                                AddressSanitizer and UBSan, random calls
#                                in rounds under changing host faults; after
#                                each round the host must hold what its
#                                answers said, and QEMU must report nothing
#
# The guest is a plain PC (--plain): no balloon driver loads, hostcheck
# (tests/device/hostcheck.c, compiled in the guest) talks to port 0x5670
# itself.  Environment: VMB_DEVICE_GUEST names the guest (default
# "devcheck"); qemu-cloud/vm's variables apply.
source "$(dirname "$0")/../lib/guest.sh"
GUEST=${VMB_DEVICE_GUEST:-devcheck}
name=$GUEST
all=0 fuzz_minutes=0 review_only=0
case ${1:-} in
--all) all=1 ;;
--review) review_only=1 ;;
--fuzz) fuzz_minutes=${2:-} ;;
"") ;;
*) echo "usage: $0 [--all | --review | --fuzz MINUTES]" >&2; exit 2 ;;
esac
[[ $fuzz_minutes =~ ^[0-9]+$ ]] || { echo "usage: $0 --fuzz MINUTES" >&2; exit 2; }

qmp() { "$vm" qmp "$name" "$@"; }
# the skips a hostcheck run may have (see hostcheck_tap): the 64-bit checks
# when the target is below 2^32; those and more when no target is set; the
# video memory check in a guest without a display
below_2_32='target below 2\^32' no_target='target is 0 or 1|target below 2\^32'
no_display='no PCI display device'
run_dir=${VMB_RUN_DIR:-/tmp/vmb-run}

# hostcheck_tap DESCRIPTION SKIPS ARGS...: run the checker, its TAP as a
# subtest. It passes if every check passed and every check it skipped
# (TAP "# SKIP REASON") was skipped for a reason that matches the extended
# regular expression SKIPS ("" when none may be): a check that this run is
# there for and that did not happen fails it.
hostcheck_tap() {
	local what=$1 allowed=$2 out rc skipped unexpected
	shift 2
	out=$(guest /root/hostcheck "$@")
	rc=$?
	sed 's/^/    /' <<<"$out"
	skipped=$(grep -E '^ok [0-9]+ - .* # SKIP ' <<<"$out")
	unexpected=$(grep -Ev " # SKIP (${allowed:-^\$})" <<<"$skipped")
	check_eq "$what ($(grep -cE '^(not )?ok ' <<<"$out") checks, $(grep -c . <<<"$skipped") skipped)" \
		"$rc${unexpected:+, skipped: $unexpected}" 0
}

# raw CMD ARG1 ARG2: one call; prints the status (0x..)
raw() {
	guest /root/hostcheck --call "$@" | sed -n 's/^status=\(0x[0-9a-f]*\|0\) .*/\1/p'
}

# raw_rbx CMD ARG1 ARG2: one call; prints RBX as a decimal number
raw_rbx() {
	printf '%d\n' "$(guest /root/hostcheck --call "$@" | sed -n 's/.* rbx=\([0-9a-fx]*\) .*/\1/p')"
}

# json_get EXPRESSION: evaluate a Python expression on the JSON in stdin (j)
json_get() {
	/usr/bin/python3 -c 'import json, sys; j = json.load(sys.stdin); print('"$1"')'
}

# boot DEVICE-OPTS [VM-START-ARGS...]
boot() {
	local opts=$1
	shift
	"$vm" stop "$name" >/dev/null 2>&1 || true
	"$vm" start "$name" --plain --mem 2G --device-opts "$opts" \
		--file "$root/tests/device/hostcheck.c" --file "$root/src/wire.h" "$@" >&2 ||
		bail "boot a guest with -device vmware-balloon,$opts"
	# A plain PC loads no balloon driver; make sure, then build the checker.
	guest 'modprobe -r vmw_balloon 2>/dev/null; ! grep -q "^vmw_balloon " /proc/modules' ||
		bail "no balloon driver in the guest"
	guest 'gcc -O2 -Wall -I/opt/vmb -o /root/hostcheck /opt/vmb/hostcheck.c' >&2 ||
		bail "compile hostcheck in the guest"
}

# file_state FILE: its checksum and the blocks it has on disk (a hole
# punched into it would change either)
file_state() {
	echo "$(sha256sum <"$1" | cut -c1-64) $(stat -c %b "$1")"
}

# fuzz_rounds MINUTES: random calls against a sanitized QEMU, in rounds of
# 50000, each under other host faults, until MINUTES have passed.
fuzz_rounds() {
	local until round=0 calls=0 out rc model
	local faults=("" "x-reset-every=13 x-refuse-every=7" "x-busy-every=5 x-refuse-every=3 x-refuse-status=6"
		"x-fail-start=3 x-offered-capabilities=14" "x-refuse-every=2 x-refuse-status=2 x-offered-capabilities=42")
	local f kv clean=1
	export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
	VMB_QEMU=$(VMB_QEMU_SANITIZE=1 "$root/qemu-cloud/qemu/build.sh" | tail -n 1) ||
		bail "build QEMU with AddressSanitizer and UBSan"
	export VMB_QEMU
	boot ""
	# the clock starts now: building QEMU can take longer than the fuzz
	until=$((SECONDS + $1 * 60))
	while ((SECONDS < until)); do
		round=$((round + 1))
		f=${faults[round % ${#faults[@]}]}
		for kv in x-reset-every=0 x-refuse-every=0 x-busy-every=0 x-fail-start=0 x-refuse-status=5 \
			x-offered-capabilities=46 $f; do
			host_set "${kv%%=*}" "${kv#*=}"
		done
		out=$(guest "/root/hostcheck --fuzz 50000 --seed $round --no-bye")
		rc=$?
		calls=$((calls + 50000))
		model=$(sed -n 's/^hostcheck: model: //p' <<<"$out" | tail -n 1)
		if ((rc != 0)) || [[ "x-locked-frames $(host_get x-locked-frames), x-locked-2m $(host_get x-locked-2m)" != "${model%, foreign *}" ]]; then
			clean=0
			note "round $round (${f:-no faults}): rc $rc, host" \
				"x-locked-frames $(host_get x-locked-frames) x-locked-2m $(host_get x-locked-2m), model $model"
			sed 's/^/#   /' <<<"$out"
		fi
		guest '/root/hostcheck --call 0 0 0' >/dev/null
		"$vm" qmp "$name" query-status | grep -q running || break
	done
	note "$round rounds, $calls random calls in $1 minutes"
	check "fuzz: at least one round ran" test "$round" -gt 0
	check "fuzz: QEMU is still running after $calls calls" eval 'qmp query-status | grep -q running'
	check "fuzz: after every round the host held what its answers said, and took nothing else" \
		test "$clean" = 1
	check_eq "fuzz: nothing is locked after the goodbye" "$(host_get x-locked-frames) $(host_get x-locked-2m)" "0 0"
	check "fuzz: no AddressSanitizer or UBSan report in QEMU's log" \
		eval '! grep -E "AddressSanitizer|LeakSanitizer|runtime error:" "$run_dir/$name/qemu.log"'
	for kv in x-reset-every=0 x-refuse-every=0 x-busy-every=0 x-fail-start=0 x-refuse-status=5 x-offered-capabilities=46; do
		host_set "${kv%%=*}" "${kv#*=}"
	done
	host_set x-target-frames 1000
	hostcheck_tap "hostcheck passes after the fuzz" "$below_2_32" --target 1000
}

if ((fuzz_minutes)); then
	fuzz_rounds "$fuzz_minutes"
	finish
	exit
fi

# The fixes of the device review (issue 31), on a guest of their own: 2 GiB
# of RAM, a CPU with 46 physical address bits and a DIMM at 16 TiB (so
# that a PFN >= 2^32 is guest RAM), S3, timestamps on QEMU's messages and
# the device's load traced.  Each check here failed on the device before
# the fixes; the two timings are notes, measured before and after.
review_checks() {
	local hp free0 free1 huge_pfn far_pfn discarded out state t0 t1
	note "guest $name: the device review's fixes"
	boot "" --mem 2G,slots=2,maxmem=17T --s3 \
		--qemu-arg=-cpu --qemu-arg=qemu64,hypervisor=off,phys-bits=46 \
		--qemu-arg=-object --qemu-arg=memory-backend-ram,id=far0,size=128M \
		--qemu-arg=-device --qemu-arg=pc-dimm,id=far,memdev=far0,addr=0x100000000000 \
		--qemu-arg=-msg --qemu-arg=timestamp=on \
		--qemu-arg=-trace --qemu-arg=vmstate_load --qemu-arg=-trace --qemu-arg=vmstate_load_state_end \
		--qemu-arg=-trace --qemu-arg=vmware_balloon_load

	# A reset of a guest suspended to RAM and then stopped: the VM is
	# not "suspended" any more when it is reset, yet the firmware may
	# resume the guest.  The host must answer RESET until START, as after
	# any reset but the wake-up.
	check_eq "review: after START, GET_TARGET succeeds" "$(raw 0 0x3e 0 >/dev/null; raw 1 0 0)" 0
	guest 'systemd-run --quiet --on-active=2 sh -c "echo mem > /sys/power/state"'
	check "review: S3: the guest is suspended" wait_for 60 eval 'qmp query-status | grep -q "\"suspended\""'
	qmp stop >/dev/null
	check "review: S3, then stop: the VM is paused" eval 'qmp query-status | grep -q "\"paused\""'
	qmp system_reset >/dev/null
	wait_for 30 eval '! qmp query-status | grep -q "\"paused\""'
	qmp query-status | grep -q '"prelaunch"' && qmp cont >/dev/null
	check "review: the guest runs again after the reset" wait_for 600 eval \
		'[[ $("$vm" ssh "$name" --timeout 30 -- cat /proc/sys/kernel/random/boot_id 2>/dev/null </dev/null) =~ ^[0-9a-f-]{36}$ ]]'
	check_eq "review: reset while suspended and stopped: GET_TARGET gets RESET" "$(raw 1 0 0)" 0x7
	check_eq "review: ... and LOCK too (not CMD_INVALID)" "$(raw 2 0x100 0)" 0x7
	guest 'pkill -9 hostcheck' >/dev/null 2>&1

	# The 2^32 rule: a PFN >= 2^32 needs 64_BIT_TARGET, for a single
	# LOCK and for the batch page alike (an empty batch: only the page is
	# looked at).  Frame 2^32 is guest RAM here: the DIMM at 16 TiB.
	far_pfn=$((1 << 32))
	raw 0 0x0e 0 >/dev/null
	check_eq "review: no 64_BIT_TARGET: LOCK of PFN 2^32 (guest RAM): PPN_INVALID" "$(raw 2 $far_pfn 0)" 0x2
	check_eq "review: no 64_BIT_TARGET: a batch page at PFN 2^32 fails the batch" "$(raw 6 $far_pfn 0)" 0xffffffff
	raw 0 0x2e 0 >/dev/null
	check_eq "review: with 64_BIT_TARGET: that batch page is taken" "$(raw 6 $far_pfn 0)" 0
	raw 0 0 0 >/dev/null

	# A release that failed is tried again after a pause (x-fail-discards
	# makes the next one fail).
	# x-backed-locked-frames is the host's own count of what it still
	# backs: all 4 MiB while their release failed.
	discarded=$(host_get x-discarded-frames)
	host_set x-fail-discards 1
	check_eq "review: x-fail-discards 1 is taken" "$(host_get x-fail-discards)" 1
	guest 'nohup /root/hostcheck --hold 4 --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
	check "review: hold 4 MiB: locked" wait_for 300 host_locked_is 1024
	check_eq "review: a failed release: none of the next 4 MiB released (the pause)" \
		"$(host_get x-discarded-frames)" "$discarded"
	check_eq "review: ... the host still backs all 1024 locked frames (x-backed-locked-frames)" \
		"$(host_get x-backed-locked-frames)" 1024
	guest 'kill -USR1 $(cat /tmp/hold.pid)'
	check "review: hold ends: nothing locked" wait_for 300 host_locked_is 0
	check "review: ... the failure is logged with the retry" \
		grep -q 'cannot release the host memory of pc.ram; trying again' "$run_dir/$name/qemu.log"
	sleep 2
	guest '/root/hostcheck --hold 4 --seconds 1' >/dev/null
	check "review: after the pause the next locks are released again" \
		wait_for 10 eval '(( $(host_get x-discarded-frames) - discarded >= 1024 ))'

	# 1 GiB in one BATCHED_2M_LOCK: the port call, timed by the guest, is
	# the vCPU's time under the BQL; the device releases the memory
	# afterwards in runs of about a millisecond (x-discard-max-ns).
	guest 'sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory' >/dev/null 2>&1
	out=$(guest '/root/hostcheck --lock-2m 512')
	note "review: $out"
	note "review: the longest run releasing memory: $(host_get x-discard-max-ns 2>/dev/null || echo '?') ns"
	t0=$(sed -n 's/.*BATCHED_2M_LOCK of \([0-9]*\) entries: status 0, \([0-9]*\) locked, \([0-9]*\) ns/\3/p' <<<"$out")
	check "review: a BATCHED_2M_LOCK of at least 256 MiB locked" \
		eval '[[ $(sed -n "s/.* \([0-9]*\) locked, .*/\1/p" <<<"$out") -ge 128 ]]'
	check_range "review: each run releasing memory took at most 20 ms (ns)" \
		"$(host_get x-discard-max-ns 2>/dev/null || echo -1)" 1 20000000

	# A fragmented 4 KiB balloon (512 MiB, every other page of 1 GiB)
	# across a migration to a file and back: how long the device's load
	# takes (from QEMU's vmstate_load trace to the end of its state).
	guest 'nohup /root/hostcheck --hold 512 --sparse --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
	check "review: a fragmented balloon of 512 MiB locked" wait_for 600 host_locked_is 131072
	state=$run_dir/$name.migration
	check "review: QMP migrate to a file completed" migrate_to_file "$state"
	"$vm" stop "$name" --kill >&2
	lines=$(wc -l <"$run_dir/$name/qemu.log")
	"$vm" start "$name" --incoming "$state" >&2 || bail "review: restore the guest with -incoming"
	check_eq "review: restored: 131072 frames locked" "$(host_get x-locked-frames)" 131072
	tail -n +$((lines + 1)) "$run_dir/$name/qemu.log" | grep -E 'vmstate_load .*vmware-balloon|vmstate_load_state_end vmware-balloon end|vmware_balloon_load' |
		sed 's/^/#   | /'
	t0=$(tail -n +$((lines + 1)) "$run_dir/$name/qemu.log" | sed -n 's/^[0-9]*@\([0-9.]*\):vmstate_load .*vmware-balloon.*/\1/p' | head -n 1)
	t1=$(tail -n +$((lines + 1)) "$run_dir/$name/qemu.log" | sed -n 's/^[0-9]*@\([0-9.]*\):vmstate_load_state_end vmware-balloon end.*/\1/p' | head -n 1)
	note "review: the device's state loaded in $(python3 -c "print(round(($t1 - $t0) * 1000, 1))" 2>/dev/null || echo '?') ms"
	guest 'kill -USR1 $(cat /tmp/hold.pid)'
	check "review: restored: unlocked" wait_for 300 host_locked_is 0
	rm -f "$state"

	# hugetlbfs: 4 KiB locks inside a 2 MiB host page give the host page
	# back once all 512 of its frames are locked.  Needs 32 free huge
	# pages on this machine (echo 32 >/proc/sys/vm/nr_hugepages).
	hp() { awk '$1 == "HugePages_Free:" {print $2}' /proc/meminfo; }
	free0=$(hp)
	if ((free0 < 32)); then
		skip "review: hugetlbfs host pages released once wholly locked" \
			"only $free0 free 2 MiB huge pages on this machine, 32 needed"
	else
		guest 'echo offline >/sys/devices/system/memory/auto_online_blocks'
		qmp object-add '{"qom-type": "memory-backend-memfd", "id": "huge0mem", "size": 67108864,
			"hugetlb": true, "hugetlbsize": 2097152, "prealloc": true}' >/dev/null &&
			qmp device_add '{"driver": "pc-dimm", "id": "huge0", "memdev": "huge0mem"}' >/dev/null ||
			fail "review: hot-plug a 64 MiB hugetlbfs pc-dimm"
		free1=$(hp)
		check_eq "review: the hugetlbfs DIMM holds 32 host huge pages" $((free0 - free1)) 32
		huge_pfn=$(($(qmp query-memory-devices | json_get "[d['data']['addr'] for d in j if d['data']['id'] == 'huge0'][0]") >> 12))
		discarded=$(host_get x-discarded-frames)
		out=$(guest "/root/hostcheck --lock-range $huge_pfn 511")
		check "review: 511 frames of a host huge page locked" grep -q 'locked 511 of 511' <<<"$out"
		sleep 2
		check_eq "review: ... and the host page is kept" "$(hp)" "$free1"
		check_eq "review: the 512th frame locks" "$(raw 2 $((huge_pfn + 511)) 0)" 0
		check "review: ... and the host page is released" wait_for 10 eval '(( $(hp) == free1 + 1 ))'
		check_eq "review: ... 512 frames released" "$(host_get x-discarded-frames)" $((discarded + 512))
		# The next host page, all 512 frames in one batch (its START
		# forgets the first page's locks; that page stays released): the
		# host page is released once, not once per lock in it.
		discarded=$(host_get x-discarded-frames)
		out=$(guest "/root/hostcheck --lock-range $((huge_pfn + 512)) 512")
		check "review: a second host huge page locked in one batch" grep -q 'locked 512 of 512' <<<"$out"
		check "review: ... and released" wait_for 10 eval '(( $(hp) == free1 + 2 ))'
		sleep 1
		check_eq "review: ... once: 512 frames released" "$(host_get x-discarded-frames)" $((discarded + 512))
		raw 0 0 0 >/dev/null
	fi
	"$vm" stop "$name" >&2
}
if ((review_only)); then
	review_checks
	finish
	exit
fi

# ------------------------------------------------------------------------
note "x-refuse-status on the command line"
qemu=${VMB_QEMU:-$("$root/qemu-cloud/qemu/build.sh" | tail -n 1)}
for bad in 0 9; do
	out=$(timeout 60 "$qemu" -L /usr/share/qemu -L /usr/share/seabios \
		-L /usr/lib/ipxe/qemu -machine pc -accel tcg -nodefaults -display none \
		-S -monitor none -device "vmware-balloon,x-refuse-status=$bad" </dev/null 2>&1)
	rc=$?
	check "-device vmware-balloon,x-refuse-status=$bad: QEMU refuses to start" \
		eval '((rc != 0 && rc != 124)) && grep -q "x-refuse-status $bad is not" <<<"$out"'
done

note "guest $name: default device, a DIMM slot free, guest errors logged"
# a PCI display, so that hostcheck checks its video memory is refused; a
# QMP monitor for a client that listens for events
boot "" --mem 2G,slots=2,maxmem=4G --s3 --qemu-arg=-d --qemu-arg=guest_errors \
	--qemu-arg=-device --qemu-arg=VGA --qemu-arg=-qmp "$(events_monitor_arg)"
log_since=$SECONDS log_lines=0

ram=$(host_get x-ram-frames)
qmp balloon "{\"value\": $(((ram - 1000) * 4096))}" >/dev/null
check_eq "QMP balloon: x-target-frames = (RAM - value) / 4096" "$(host_get x-target-frames)" 1000
check_eq "query-balloon: actual = RAM with nothing locked" \
	"$(qmp query-balloon | sed -n 's/.*"actual": *\([0-9]*\).*/\1/p')" $((ram * 4096))
hostcheck_tap "hostcheck, default capabilities, target 1000" "$below_2_32" --target 1000
check_eq "hostcheck leaves nothing locked" "$(host_get x-locked-frames)" 0
check_eq "GUEST_ID recorded" "$(host_get x-guest-id)" 1

host_set x-target-frames $(((1 << 32) + 16))
hostcheck_tap "hostcheck, 64-bit target" "" --target $(((1 << 32) + 16))
qmp balloon "{\"value\": $(((ram - 1000) * 4096))}" >/dev/null

note "fault injection"
raw 0 0x3e 0 >/dev/null
resets=$(host_get x-resets-sent)
host_set x-reset-next true
check_eq "x-reset-next: the next command gets RESET" "$(raw 1 0 0)" 0x7
check_eq "reset pending: GET_TARGET gets RESET" "$(raw 1 0 0)" 0x7
check_eq "reset pending: START succeeds" "$(raw 0 0x3e 0)" 0x3000000
check_eq "then GET_TARGET succeeds" "$(raw 1 0 0)" 0
check_eq "x-resets-sent counted 2" "$(host_get x-resets-sent)" $((resets + 2))
host_set x-busy-next true
check_eq "x-busy-next: BUSY" "$(raw 1 0 0)" 0x8
check_eq "then not busy" "$(raw 1 0 0)" 0
host_set x-fail-start 1
check_eq "x-fail-start 1: START fails" "$(raw 0 0x3e 0)" 0xffffffff
check_eq "... the next START succeeds" "$(raw 0 0x3e 0)" 0x3000000
host_set x-refuse-every 4
check "x-refuse-every 4: a quarter of the locks refused" \
	eval 'guest /root/hostcheck --hold 1 --seconds 1 | grep -q "locked 192 of 256"'
host_set x-refuse-every 0
for bad in 0 9 31 4294967295; do
	check "qom-set x-refuse-status $bad fails" eval "! host_set x-refuse-status $bad 2>/dev/null"
done
check_eq "... and x-refuse-status keeps its value" "$(host_get x-refuse-status)" 5
host_set x-refuse-status 6
check_eq "qom-set x-refuse-status 6 works" "$(host_get x-refuse-status)" 6
# With every lock refused, nothing is locked: PFN 0x100 (guest RAM) is safe.
host_set x-refuse-every 1
raw 0 0x3e 0 >/dev/null
check_eq "a refused LOCK returns x-refuse-status 6" "$(raw 2 0x100 0)" 0x6
host_set x-refuse-every 0
host_set x-refuse-status 5
raw 0 0 0 >/dev/null

# x-reset-at-locked N: the LOCK that brings the host to N locked frames gets
# RESET, whatever the pace; the host forgets every lock, keeps answering
# RESET until START, and the property goes back to 0.
host_set x-reset-at-locked 1000
resets=$(host_get x-resets-sent)
out=$(guest /root/hostcheck --lock-singly 1010)
check_eq "x-reset-at-locked 1000: exactly the 1000th single LOCK gets RESET" \
	"$(sed -n 's/^hostcheck: lock \([0-9]*\) of [0-9]*: status \(0x[0-9a-f]*\)$/\1 \2/p' <<<"$out")" "1000 0x7"
check_eq "x-reset-at-locked: the host forgot every lock" "$(host_get x-locked-frames)" 0
check_eq "x-reset-at-locked: nothing granted" "$(host_get x-granted-capabilities)" 0
check_eq "x-reset-at-locked: back at 0 (one shot)" "$(host_get x-reset-at-locked)" 0
check_eq "x-reset-at-locked: one RESET sent" "$(host_get x-resets-sent)" $((resets + 1))
check_eq "x-reset-at-locked: RESET pending, GET_TARGET gets RESET" "$(raw 1 0 0)" 0x7
check_eq "x-reset-at-locked: START succeeds" "$(raw 0 0x3e 0)" 0x3000000
check "x-reset-at-locked: then 1010 single LOCKs all succeed" \
	eval 'guest /root/hostcheck --lock-singly 1010 | grep -qx "hostcheck: locked 1010 of 1010 singly"'
check_eq "x-reset-at-locked: and nothing stays locked" "$(host_get x-locked-frames)" 0
# batched: the first batch of 256 frames crosses 100
host_set x-reset-at-locked 100
resets=$(host_get x-resets-sent)
check "x-reset-at-locked 100: the batch that crosses it fails (none of 256 locked)" \
	eval 'guest /root/hostcheck --hold 1 --seconds 1 | grep -q "^hostcheck: locked 0 of 256 "'
check_eq "x-reset-at-locked 100: RESET to that batch and to the unlock before START" \
	"$(host_get x-resets-sent)" $((resets + 2))
check_eq "x-reset-at-locked 100: back at 0, nothing locked" \
	"$(host_get x-reset-at-locked) $(host_get x-locked-frames)" "0 0"

note "host memory, and BALLOON_CHANGE events"
# A QMP client that listens, as libvirt does: the device tells it when the
# balloon moved, with "actual" as query-balloon reports it.
check "a second QMP client listens for events" listen_for_events
discarded=$(host_get x-discarded-frames)
guest 'nohup /root/hostcheck --hold 512 --lock-on-signal --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "hold 512 MiB: pages filled" wait_for 300 guest 'grep -q touched /tmp/hold.log'
rss0=$(qemu_rss_kib)
host_set x-lock-resident-peak 0
resident=$(host_get x-lock-resident-frames)
guest 'kill -USR2 $(cat /tmp/hold.pid)'
check "hold 512 MiB: locked" wait_for 300 eval \
	'[[ $(host_get x-locked-frames) == 131072 ]]'
rss1=$(qemu_rss_kib)
check "BALLOON_CHANGE: the listening client is told actual = RAM - 512 MiB" \
	wait_for 10 eval '[[ $(last_balloon_change) == $(((ram - 131072) * 4096)) ]]'
check_eq "BALLOON_CHANGE: the same actual as query-balloon" \
	"$(qmp query-balloon | json_get 'j["actual"]')" $(((ram - 131072) * 4096))
note "QEMU RSS $rss0 KiB with 512 MiB filled, $rss1 KiB once they are locked"
check "the host released the locked memory" \
	wait_for 10 eval '(( $(host_get x-discarded-frames) - discarded >= 131072 ))'
check "QEMU RSS fell by at least 448 MiB" eval '(( rss0 - rss1 >= 448 * 1024 ))'
# hostcheck filled every page before locking them, 512 per batch: the host
# found each resident when locked, and backs none of them once released
check_eq "x-lock-resident-frames: all 131072 frames were resident when locked" \
	"$(( $(host_get x-lock-resident-frames) - resident ))" 131072
check_eq "x-lock-resident-peak: one batch, 512 frames" "$(host_get x-lock-resident-peak)" 512
check_eq "x-backed-locked-frames: the host backs none of the 131072 locked frames" \
	"$(host_get x-backed-locked-frames)" 0
guest 'kill -USR1 $(cat /tmp/hold.pid)' # the hold ends when the test says, not after a time
check "hold ends: nothing locked" wait_for 300 eval \
	'[[ $(host_get x-locked-frames) == 0 ]]'
check "BALLOON_CHANGE: then actual = RAM" \
	wait_for 10 eval '[[ $(last_balloon_change) == $((ram * 4096)) ]]'
note "$(grep -c '"BALLOON_CHANGE"' "$events_log") BALLOON_CHANGE events for the 512 MiB locked and unlocked"
stop_listening

note "suspend to RAM and wake up, with frames locked"
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "hold 64 MiB: locked" wait_for 300 host_locked_is 16384
guest 'systemd-run --quiet --on-active=2 sh -c "echo mem > /sys/power/state"'
check "S3: QEMU sees the guest suspended" wait_for 60 eval 'qmp query-status | grep -q "\"suspended\""'
qmp system_wakeup >/dev/null
check "S3: system_wakeup resumes it" wait_for 60 eval 'qmp query-status | grep -q "\"running\""'
check_eq "S3: the host still holds the frames after the wake-up" "$(host_get x-locked-frames)" 16384
check_eq "S3: no RESET pending, GET_TARGET succeeds" "$(raw 1 0 0)" 0
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "S3: the frames are unlocked" wait_for 300 host_locked_is 0
check "S3: every unlock succeeded (the host kept the locks)" \
	eval 'guest cat /tmp/hold.log | grep -q "unlocked 16384 of 16384"'

note "guest reboot"
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 &'
check "hold 64 MiB: locked" wait_for 300 eval \
	'[[ $(host_get x-locked-frames) == 16384 ]]'
"$vm" reboot "$name" --timeout 900 >&2 || bail "reboot the guest"
check_eq "reboot: the host forgot the locks" "$(host_get x-locked-frames)" 0
check_eq "reboot: nothing granted" "$(host_get x-granted-capabilities)" 0
check_eq "reboot: the target is kept" "$(host_get x-target-frames)" 1000
check_eq "reboot: RESET until START (GET_TARGET gets RESET)" "$(raw 1 0 0)" 0x7

note "migration to a file and back, with frames locked"
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "hold 64 MiB: locked" wait_for 300 host_locked_is 16384
granted=$(host_get x-granted-capabilities)
state=$run_dir/$name.migration
check "QMP migrate to a file completed" migrate_to_file "$state"
"$vm" stop "$name" --kill >&2
# The device's state: standard VMState fields, which QEMU's own
# analyze-migration.py reads; its size is the sum of its fields.
dev_state=$(device_state "$state")
check "analyze-migration.py reads the device's state" test -n "$dev_state"
check_eq "... locked_frames in it" \
	"$(json_get 'int(j["locked_frames"], 0)' <<<"${dev_state:-null}" 2>/dev/null)" 16384
dev_bytes=$(device_state_bytes "$state")
note "device state: ${dev_bytes:-?} bytes with 16384 4 KiB frames locked"
# A stream whose device state is wrong fails to load, with the device's
# reason, and QEMU does not crash.
for bad in count range hole sizes; do
	"$root/tests/device/corrupt-migration" "$state" "$state.$bad" "$bad" ||
		bail "write a spoiled copy ($bad) of the migration stream"
	lines=$(wc -l <"$run_dir/$name/qemu.log")
	if "$vm" start "$name" --incoming "$state.$bad" --timeout 300 >/dev/null 2>&1; then
		fail "spoiled stream ($bad): the load fails"
		"$vm" stop "$name" --kill >&2
	else
		new_log=$(tail -n +$((lines + 1)) "$run_dir/$name/qemu.log")
		sed 's/^/#   | /' <<<"$new_log" | grep -i 'vmware-balloon\|migration\|load' | head -n 5
		check "spoiled stream ($bad): the load fails with the device's reason" \
			grep -qE "vmware-balloon: (bad migration stream|the migration stream's sizes)" <<<"$new_log"
		check "spoiled stream ($bad): QEMU exits, no crash" \
			eval '! grep -qiE "abort|assert|segmentation|sanitizer|core dumped" <<<"$new_log"'
	fi
	rm -f "$state.$bad"
done
"$vm" start "$name" --incoming "$state" >&2 || bail "restore the guest with -incoming"
# the new QEMU's log limit starts afresh: count its lines only
log_since=$SECONDS log_lines=$(wc -l <"$run_dir/$name/qemu.log")
check_eq "restored: x-locked-frames" "$(host_get x-locked-frames)" 16384
check_eq "restored: x-granted-capabilities" "$(host_get x-granted-capabilities)" "$granted"
check_eq "restored: x-target-frames" "$(host_get x-target-frames)" 1000
check_eq "restored: the load released no memory (it never discards again)" "$(host_get x-discarded-frames)" 0
check "restored: the guest's hostcheck still holds its frames" guest 'kill -0 $(cat /tmp/hold.pid)'
check_eq "restored: no RESET pending, GET_TARGET succeeds" "$(raw 1 0 0)" 0
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "restored: the frames are unlocked" wait_for 300 host_locked_is 0
check "restored: every unlock succeeded (the host knew the locks)" \
	eval 'guest cat /tmp/hold.log | grep -q "unlocked 16384 of 16384"'
hostcheck_tap "hostcheck after the restore" "$below_2_32" --target 1000
rm -f "$state"

# Locks the host holds do not prove that the guest leaves those frames
# alone: a kexec'd kernel, or a driver that died without a goodbye, uses
# frames the host still counts as locked.  A load must keep their
# contents: it never discards anything again.  Each case below ends with a
# migration to a file and back (round_trip) and a pattern checked after it.
round_trip() {
	check "$1: QMP migrate to a file completed" migrate_to_file "$state"
	"$vm" stop "$name" --kill >&2
	"$vm" start "$name" --incoming "$state" >&2 || bail "$1: restore the guest with -incoming"
	log_since=$SECONDS log_lines=$(wc -l <"$run_dir/$name/qemu.log")
	rm -f "$state"
}
# write_pattern: random data in a tmpfs over all but 300 MiB of the
# guest's available memory, so that it lies on most free frames; its
# checksum goes to disk.  Prints its size in MiB.
write_pattern() {
	guest 'mib=$(( $(awk "\$1 == \"MemAvailable:\" {print \$2}" /proc/meminfo) / 1024 - 300 ))
		mkdir -p /mnt/pattern && mount -t tmpfs -o size=${mib}M none /mnt/pattern &&
		head -c ${mib}M /dev/urandom >/mnt/pattern/p &&
		sha256sum </mnt/pattern/p >/root/pattern.sha && echo $mib'
}
pattern_intact() { guest 'sha256sum </mnt/pattern/p | cmp -s - /root/pattern.sha'; }
drop_pattern() { guest 'umount /mnt/pattern; rm -f /root/pattern.sha'; }
# boot_id_now: the guest's boot id, or nothing while it does not answer
boot_id_now() {
	"$vm" ssh "$name" --timeout 30 -- cat /proc/sys/kernel/random/boot_id 2>/dev/null </dev/null
}
boot_id_is_not() {
	local id
	id=$(boot_id_now)
	[[ $id =~ ^[0-9a-f-]{36}$ && $id != "$1" ]]
}

note "frames still locked on the host hold live guest data: a migration to a file and back"
guest 'nohup /root/hostcheck --hold 64 --reuse --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "reuse: 64 MiB locked" wait_for 300 host_locked_is 16384
check "reuse: the guest wrote a pattern into all 16384 locked frames" \
	wait_for 120 guest 'grep -q "reused 16384 pages" /tmp/hold.log'
round_trip "reuse"
check_eq "reuse, restored: the host still counts the frames locked" "$(host_get x-locked-frames)" 16384
check_eq "reuse, restored: the load released no memory" "$(host_get x-discarded-frames)" 0
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "reuse, restored: the pattern in the locked frames reads back intact" \
	wait_for 300 guest 'grep -q "pattern intact in 16384 of 16384" /tmp/hold.log'
check "reuse, restored: then unlocked" wait_for 300 host_locked_is 0

# A system_reset while the guest sleeps in S3 is a cold reset for QEMU's
# devices, but SeaBIOS takes it for the wake-up and resumes the guest:
# the guest still holds the pages it handed over, and the host has
# forgotten them.  The host must say so (RESET until START), and memory
# the guest then uses must survive a migration.
note "system_reset while suspended to RAM, then a pattern across a migration to a file and back"
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "reset in S3: 64 MiB locked" wait_for 300 host_locked_is 16384
boot_id=$(guest cat /proc/sys/kernel/random/boot_id)
guest 'systemd-run --quiet --on-active=2 sh -c "echo mem > /sys/power/state"'
check "reset in S3: QEMU sees the guest suspended" wait_for 60 eval 'qmp query-status | grep -q "\"suspended\""'
qmp system_reset >/dev/null
check "reset in S3: the host forgot the locks" wait_for 30 host_locked_is 0
# QEMU leaves a machine reset while suspended in "prelaunch"
wait_for 30 eval '! qmp query-status | grep -q "\"suspended\""'
qmp query-status | grep -q '"prelaunch"' && qmp cont >/dev/null
check "reset in S3: the guest runs again" wait_for 600 eval '[[ $(boot_id_now) =~ ^[0-9a-f-]{36}$ ]]'
if [[ $(guest cat /proc/sys/kernel/random/boot_id) == "$boot_id" ]]; then
	note "reset in S3: the firmware resumed the guest (same boot)"
	check_eq "reset in S3, resumed: the host asks the guest to start over (GET_TARGET gets RESET)" \
		"$(raw 1 0 0)" 0x7
	guest 'kill -9 $(cat /tmp/hold.pid)'
else
	note "reset in S3: the guest booted afresh"
fi
mib=$(write_pattern)
check "reset in S3: the guest wrote a pattern over ${mib:-no} MiB" test -n "$mib"
round_trip "reset in S3"
check "reset in S3, restored: the pattern reads back intact" pattern_intact
check_eq "reset in S3, restored: nothing locked" "$(host_get x-locked-frames)" 0
drop_pattern
raw 0 0 0 >/dev/null

# kexec: the old kernel's locks outlive it; the new one (a plain PC loads no
# balloon driver) never says START, so the host still counts them.
note "kexec with frames locked, a migration to a file and back"
image=$("$vm" image | tail -n 1) || bail "no disk image"
debs=$("$root/tests/lib/fetch-debs" "$(dirname "$image")/dpkg-status" kexec-tools | tail -n 1) ||
	bail "cannot fetch kexec-tools for the guest"
"$vm" copy "$name" "$debs" /root/kexec-debs >&2 || bail "copy kexec-tools into the guest"
guest 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends /root/kexec-debs/*.deb' >&2 ||
	bail "install kexec-tools in the guest"
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 &'
check "kexec: 64 MiB locked" wait_for 300 host_locked_is 16384
boot_id=$(guest cat /proc/sys/kernel/random/boot_id)
guest 'kexec -l /boot/vmlinuz-$(uname -r) --initrd=/boot/initrd.img-$(uname -r) --reuse-cmdline &&
	systemctl --no-block kexec' >&2 || bail "kexec in the guest"
check "kexec: the guest runs a new kernel" wait_for 600 boot_id_is_not "$boot_id"
check_eq "kexec: the host still counts the old kernel's locks" "$(host_get x-locked-frames)" 16384
check "kexec: no balloon driver in the new kernel" guest '! grep -q "^vmw_balloon " /proc/modules'
mib=$(write_pattern)
check "kexec: the new kernel wrote a pattern over ${mib:-no} MiB" test -n "$mib"
round_trip "kexec"
check_eq "kexec, restored: the host still counts the stale locks" "$(host_get x-locked-frames)" 16384
check_eq "kexec, restored: the load released no memory" "$(host_get x-discarded-frames)" 0
check "kexec, restored: the pattern reads back intact" pattern_intact
drop_pattern
raw 0 0 0 >/dev/null
check_eq "kexec: START(0) made the host forget the stale locks" "$(host_get x-locked-frames)" 0

# While a background snapshot runs, QEMU write-protects guest RAM to save
# each page before it changes: memory released under it would be lost or
# saved wrong, so a LOCK only records the lock.  The guest locks and
# unlocks 256 MiB while the snapshot runs; restored, the 256 MiB pattern
# it wrote before reads back intact.  The snapshot is held to 64 KiB/s
# until the unlocks are done, to keep it running through the locks (at
# 1 MiB/s a loaded machine's guest once locked only 23552 frames before
# it ended).  That limit does not bound it as the pattern's size would
# suggest: in a run on an idle machine the snapshot was still running
# after the locks but had completed by the end of the unlocks.  The
# verdict is the device's trace: a snapshot that ends before the last
# LOCK is a setup that did not happen, and fails.
note "background snapshot while frames are locked and unlocked"
guest 'head -c 256M /dev/urandom >/dev/shm/pattern && sha256sum </dev/shm/pattern >/root/pattern.sha' ||
	bail "write a 256 MiB pattern in the guest"
guest 'nohup /root/hostcheck --hold 256 --lock-on-signal --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "hold 256 MiB: pages filled" wait_for 300 guest 'grep -q touched /tmp/hold.log'
snap=$run_dir/$name.snapshot
rm -f "$snap"
qmp migrate-set-capabilities '{"capabilities": [{"capability": "background-snapshot", "state": true}]}' >/dev/null
qmp migrate-set-parameters '{"max-bandwidth": 65536}' >/dev/null
discarded=$(host_get x-discarded-frames)
qmp migrate "{\"uri\": \"exec:cat > $snap\"}" >/dev/null
check "snapshot: a background snapshot runs" wait_for 30 migration_status_is active
qmp trace-event-set-state '{"name": "vmware_balloon_discard_skipped", "enable": true}' >/dev/null
trace_from=$(wc -l <"$run_dir/$name/qemu.log")
guest 'kill -USR2 $(cat /tmp/hold.pid)'
check "snapshot: the guest locked 256 MiB" wait_for 300 host_locked_is 65536
qmp trace-event-set-state '{"name": "vmware_balloon_discard_skipped", "enable": false}' >/dev/null
# The proof that the LOCKs came while the snapshot ran is the device's
# own, frame by frame: it kept each one for the snapshot.  Whether the
# snapshot is still running after the last one depends on how fast the
# guest locked (it had ended in one run): only noted.
note "snapshot: after the locks the migration is $("$vm" qmp "$GUEST" query-migrate | grep -o '"status": "[a-z-]*"' | head -n 1)"
check_eq "snapshot: the device kept every locked frame for the background snapshot (its trace)" \
	"$(tail -n +$((trace_from + 1)) "$run_dir/$name/qemu.log" |
		grep -c 'vmware_balloon_discard_skipped background snapshot: 0x1000 bytes kept')" 65536
check_eq "snapshot: no memory was released for those locks" \
	"$(host_get x-discarded-frames)" "$discarded"
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "snapshot: and unlocked them" wait_for 300 host_locked_is 0
# an UNLOCK releases nothing either way: whether the snapshot still ran
# (zero pages cost it no bandwidth: it may end first) is only noted
note "snapshot: after the unlocks the migration is $("$vm" qmp "$GUEST" query-migrate | grep -o '"status": "[a-z-]*"' | head -n 1)"
qmp migrate-set-parameters '{"max-bandwidth": 10737418240}' >/dev/null
check "snapshot: completed" wait_for 900 migration_status_is "completed|failed"
check "snapshot: completed, not failed" migration_status_is completed
"$vm" stop "$name" --kill >&2
"$vm" start "$name" --incoming "$snap" >&2 || bail "restore the guest from the background snapshot"
log_since=$SECONDS log_lines=$(wc -l <"$run_dir/$name/qemu.log")
check "snapshot restored: the 256 MiB pattern reads back intact" \
	guest 'sha256sum </dev/shm/pattern | cmp -s - /root/pattern.sha'
check_eq "snapshot restored: nothing locked (the snapshot is from before the locks)" \
	"$(host_get x-locked-frames)" 0
discarded=$(host_get x-discarded-frames)
guest 'kill -USR2 $(cat /tmp/hold.pid)'
check "snapshot restored: the guest locks its 256 MiB again" wait_for 300 host_locked_is 65536
check "snapshot restored: and now their memory is released" \
	wait_for 10 eval '(( $(host_get x-discarded-frames) - discarded >= 65536 ))'
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "snapshot restored: unlocked" wait_for 300 host_locked_is 0
check "snapshot restored: every unlock succeeded" \
	eval 'guest cat /tmp/hold.log | grep -q "unlocked 65536 of 65536"'
guest 'rm -f /dev/shm/pattern'
rm -f "$snap"

# An incoming postcopy migration fills guest RAM from the source as the
# guest touches it: memory released under it would come back as the
# source's stale copy or be lost, so a LOCK only records the lock.  The
# guest moves to a second QEMU (vm migrate --postcopy; the postcopy phase
# slowed to 16 MiB/s, the pages the guest asks for come at once), and
# locks and unlocks 256 MiB on the destination while the rest of its RAM
# is still coming; the device's trace says why it kept each locked frame.
# Then the 256 MiB pattern written before the move reads back intact, and
# the destination releases locked memory again.
note "postcopy migration to a second QEMU while frames are locked and unlocked"
guest 'head -c 256M /dev/urandom >/dev/shm/pattern && sha256sum </dev/shm/pattern >/root/pattern.sha' ||
	bail "write a 256 MiB pattern in the guest"
guest 'nohup /root/hostcheck --hold 256 --lock-on-signal --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "hold 256 MiB: pages filled" wait_for 300 guest 'grep -q touched /tmp/hold.log'
boot_id=$(guest cat /proc/sys/kernel/random/boot_id)
source_pid=$("$vm" pid "$name")
qmp migrate-set-parameters '{"max-postcopy-bandwidth": 16777216}' >/dev/null
"$vm" migrate "$name" --postcopy >"$run_dir/$name.migrate.log" 2>&1 &
migrate_pid=$!
on_destination() { [[ $("$vm" pid "$name" 2>/dev/null) =~ ^[0-9]+$ && $("$vm" pid "$name") != "$source_pid" ]]; }
wait_for 600 eval 'on_destination || ! kill -0 $migrate_pid 2>/dev/null'
check "postcopy: the guest runs on the destination QEMU" on_destination
check "postcopy: ... which is in an incoming postcopy migration" migration_status_is postcopy-active
qmp trace-event-set-state '{"name": "vmware_balloon_discard_skipped", "enable": true}' >/dev/null
trace_from=$(wc -l <"$run_dir/$name/qemu.log")
discarded=$(host_get x-discarded-frames)
guest 'kill -USR2 $(cat /tmp/hold.pid)'
check "postcopy: the guest locked 256 MiB on the destination" wait_for 300 host_locked_is 65536
# The proof that the LOCKs came during the postcopy phase: the
# destination still says so after the last one, and its device says, for
# each locked frame, that it kept it because of the incoming postcopy.  If
# the phase ended before, the setup failed: that fails here too.
check "postcopy: ... while the destination was still in postcopy" migration_status_is postcopy-active
qmp trace-event-set-state '{"name": "vmware_balloon_discard_skipped", "enable": false}' >/dev/null
check_eq "postcopy: the device kept every locked frame for the incoming postcopy (its trace)" \
	"$(tail -n +$((trace_from + 1)) "$run_dir/$name/qemu.log" |
		grep -c 'vmware_balloon_discard_skipped incoming postcopy: 0x1000 bytes kept')" 65536
check_eq "postcopy: no memory was released for those locks" "$(host_get x-discarded-frames)" "$discarded"
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "postcopy: and unlocked them" wait_for 300 host_locked_is 0
check "postcopy: every unlock succeeded" eval 'guest cat /tmp/hold.log | grep -q "unlocked 65536 of 65536"'
wait "$migrate_pid"
migrate_rc=$?
sed 's/^/#   | /' "$run_dir/$name.migrate.log"
check_eq "postcopy: vm migrate --postcopy completed" "$migrate_rc" 0
check "postcopy: the destination reports the migration completed" migration_status_is completed
check "postcopy: the source QEMU is gone" eval '! kill -0 "$source_pid" 2>/dev/null'
log_since=$SECONDS log_lines=$(wc -l <"$run_dir/$name/qemu.log")
check_eq "postcopy: the guest kept running (same boot)" "$(guest cat /proc/sys/kernel/random/boot_id)" "$boot_id"
check "postcopy: the 256 MiB pattern reads back intact" \
	guest 'sha256sum </dev/shm/pattern | cmp -s - /root/pattern.sha'
guest 'rm -f /dev/shm/pattern'
discarded=$(host_get x-discarded-frames)
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "postcopy done: the guest locks 64 MiB on the destination" wait_for 300 host_locked_is 16384
check "postcopy done: and now their memory is released" \
	wait_for 10 eval '(( $(host_get x-discarded-frames) - discarded >= 16384 ))'
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "postcopy done: unlocked" wait_for 300 host_locked_is 0
check "postcopy done: every unlock succeeded" \
	eval 'guest cat /tmp/hold.log | grep -q "unlocked 16384 of 16384"'
rm -f "$run_dir/$name.migrate.log"

note "garbage"
host_set x-refuse-every 7
host_set x-reset-every 13
out=$(guest '/root/hostcheck --fuzz 20000 --seed 1 && /root/hostcheck --fuzz 20000 --seed 2 --no-bye')
rc=$?
sed 's/^/# /' <<<"$out"
check "QEMU survived 40000 random calls" eval 'qmp query-status | grep -q running'
check_eq "the guest survived them, and the host took none of its other frames" "$rc" 0
((rc == 0)) || "$vm" console "$name" -n 30 2>/dev/null | sed 's/^/#   | /'
model=$(sed -n 's/^hostcheck: model: //p' <<<"$out" | tail -n 1)
check_eq "after the garbage the host holds what its answers said it took" \
	"x-locked-frames $(host_get x-locked-frames), x-locked-2m $(host_get x-locked-2m)" "${model%, foreign *}"
# faults off before the goodbye: a START that x-reset-every answered with
# RESET (as it does whenever the command count falls on a multiple of 13)
# would leave a reset pending for the checks below
host_set x-refuse-every 0
host_set x-reset-every 0
guest '/root/hostcheck --call 0 0 0' >/dev/null
hostcheck_tap "hostcheck passes after the garbage" "$below_2_32" --target 1000

# The fuzzing made the device log thousands of guest errors; at most 10 a
# minute may reach QEMU's log (qemu.log: QEMU's stderr), plus a line per
# minute saying how many were suppressed.
minutes=$(((SECONDS - log_since) / 60 + 1))
logged=$(tail -n +$((log_lines + 1)) "$run_dir/$name/qemu.log" | grep -c 'vmware-balloon: ')
check_range "guest errors in QEMU's log: at most 11 per minute for $minutes minutes" \
	"$logged" 1 $((11 * minutes))
check "the log says that messages were suppressed" \
	grep -q 'more messages suppressed' "$run_dir/$name/qemu.log"

note "a hot-plugged DIMM"
ram=$(host_get x-ram-frames)
check_eq "x-ram-frames: 2 GiB of boot RAM" "$ram" 524288
# movable, so that the guest can give it back on device_del
guest 'echo online_movable >/sys/devices/system/memory/auto_online_blocks' ||
	bail "make the guest online hot-plugged memory as movable"
classified=$(host_get x-ram-classified)
qmp object-add '{"qom-type": "memory-backend-ram", "id": "dimm0mem", "size": 268435456}' >/dev/null &&
	qmp device_add '{"driver": "pc-dimm", "id": "dimm0", "memdev": "dimm0mem"}' >/dev/null ||
	bail "hot-plug a 256 MiB pc-dimm"
ram=$(host_get x-ram-frames)
check_eq "x-ram-frames counts the DIMM" "$ram" $((524288 + 65536))
qmp balloon "{\"value\": $(((ram - 1000) * 4096))}" >/dev/null
check_eq "QMP balloon: x-target-frames = (RAM + DIMM - value) / 4096" "$(host_get x-target-frames)" 1000
check_eq "query-balloon: actual = RAM + DIMM with nothing locked" \
	"$(qmp query-balloon | json_get 'j["actual"]')" $((ram * 4096))
host_set x-target-frames $((1 << 40))
raw 0 0x3e 0 >/dev/null
check_eq "GET_TARGET(no limit) clamps to RAM + DIMM" "$(raw_rbx 1 0 0)" "$ram"
raw 0 0 0 >/dev/null
host_set x-target-frames 1000
check_eq "the DIMM's RAM block was classified once, when plugged" \
	"$(host_get x-ram-classified)" $((classified + 1))

# Locks in a DIMM the guest then gives back: they go with it, and
# "actual" stays the guest's RAM less what is really handed over.
dimm_pfn=$(($(qmp query-memory-devices | json_get "[d['data']['addr'] for d in j if d['type'] == 'dimm'][0]") >> 12))
raw 0 0x02 0 >/dev/null
for k in 65533 65534 65535; do
	raw 2 $((dimm_pfn + k)) 0 >/dev/null
done
check_eq "unplug: 3 frames at the end of the DIMM locked" "$(host_get x-locked-frames)" 3
check_eq "unplug: query-balloon actual = RAM + DIMM - 3 frames" \
	"$(qmp query-balloon | json_get 'j["actual"]')" $(((ram - 3) * 4096))
qmp device_del '{"id": "dimm0"}' >/dev/null || fail "QMP device_del dimm0"
check "unplug: the guest gave the DIMM back (x-ram-frames: 2 GiB)" \
	wait_for 300 eval '[[ $(host_get x-ram-frames) == 524288 ]]'
check_eq "unplug: the DIMM's locks went with it" "$(host_get x-locked-frames)" 0
check_eq "unplug: query-balloon actual = RAM" \
	"$(qmp query-balloon | json_get 'j["actual"]')" $((524288 * 4096))
raw 0 0 0 >/dev/null
"$vm" stop "$name" >&2

# ------------------------------------------------------------------------
# RAM that is a private mapping of a file, and memory that is not the
# guest's own: shared memory (ivshmem), NVDIMM and virtio-pmem (host files)
# and virtio-mem (a RAM discard manager decides what is backed).
note "guest $name: private file RAM; ivshmem, NVDIMM, virtio-pmem, virtio-mem"
mem_dir=$run_dir/$name-mem
rm -rf "$mem_dir" && mkdir -p "$mem_dir" || bail "create $mem_dir"
# The RAM file is not all zeros, so that a hole punched into it would show.
yes 'vmw-balloon private RAM' | head -c 1G >"$mem_dir/ram.img"
for f in ivshmem:4 nvdimm:64 pmem:64; do
	head -c "${f#*:}M" /dev/urandom >"$mem_dir/${f%%:*}.img"
done
sync -- "$mem_dir"/*.img  # blocks on disk settle once written back
declare -A before=()
for f in ram ivshmem nvdimm pmem; do
	before[$f]=$(file_state "$mem_dir/$f.img")
done
mem_args=(--mem 1G,slots=4,maxmem=4G)
for a in \
	-object "memory-backend-file,id=ram0,share=off,mem-path=$mem_dir/ram.img,size=1G" \
	-machine memory-backend=ram0,nvdimm=on \
	-object "memory-backend-file,id=shm0,share=on,mem-path=$mem_dir/ivshmem.img,size=4M" \
	-device ivshmem-plain,id=ivs0,memdev=shm0 \
	-object "memory-backend-file,id=nv0,share=on,mem-path=$mem_dir/nvdimm.img,size=64M" \
	-device nvdimm,id=nvd0,memdev=nv0 \
	-object "memory-backend-file,id=pm0,share=on,mem-path=$mem_dir/pmem.img,size=64M" \
	-device virtio-pmem-pci,id=vpm0,memdev=pm0 \
	-object memory-backend-ram,id=vmem0,size=128M \
	-device virtio-mem-pci,id=vmemd0,memdev=vmem0,requested-size=0; do
	mem_args+=("--qemu-arg=$a")
done
boot "" "${mem_args[@]}"
check_eq "x-ram-frames: 1 GiB (NVDIMM, virtio-pmem, virtio-mem do not count)" \
	"$(host_get x-ram-frames)" 262144

# The ivshmem BAR as the guest sees it, and proof that it is the file.
bar=$(guest 'for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor):$(cat $d/device)" = 0x1af4:0x1110 ] || continue
	echo 1 >$d/enable; echo $d $(sed -n 3p $d/resource); done')
read -r bar_dev bar_start bar_end _ <<<"$bar"
check "the guest has the ivshmem BAR (${bar_start:-none})" test -n "${bar_start:-}"
shm_sha=$(head -c 4096 "$mem_dir/ivshmem.img" | sha256sum | cut -c1-64)
peek_bar() {
	guest "python3 -c 'import hashlib, mmap; f = open(\"$bar_dev/resource2\", \"rb\");
print(hashlib.sha256(mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ)[:4096]).hexdigest())'"
}
check_eq "the guest reads the shared file through the BAR" "$(peek_bar)" "$shm_sha"

discarded=$(host_get x-discarded-frames)
classified=$(host_get x-ram-classified)
devices=$(qmp query-memory-devices)
nvdimm_pfn=
refuse_region() { # WHAT PFN FRAMES
	hostcheck_tap "$1 (PFN $2, $3 frames): refused" "" --refused "$2" "$3"
}
refuse_region "ivshmem" $((bar_start >> 12)) $(((bar_end - bar_start + 1) >> 12))
# (virtio-mem's "size" is what the guest plugged; its region is max-size)
for t in nvdimm:addr:size virtio-pmem:memaddr:size virtio-mem:memaddr:max-size; do
	IFS=: read -r type addr_key size_key <<<"$t"
	read -r addr size < <(json_get "' '.join(str(d['data'][k]) for d in j
		for k in ('$addr_key', '$size_key') if d['type'] == '$type')" <<<"$devices")
	if [[ -z ${size:-} ]]; then
		fail "QEMU reports a $type device"
		continue
	fi
	refuse_region "$type" $((addr >> 12)) $((size >> 12))
	[[ $type != nvdimm ]] || nvdimm_pfn=$((addr >> 12))
done
check_eq "refusing them classified no RAM block again (decided when mapped)" \
	"$(host_get x-ram-classified)" "$classified"
# each --refused run locked one own page of ordinary RAM, and unlocked it
# again so soon that the device may not have released it yet (it releases
# what is still locked when it gets to it)
check_range "nothing else was discarded" "$(host_get x-discarded-frames)" "$discarded" $((discarded + 4))
check_eq "nothing is locked" "$(host_get x-locked-frames)" 0
# The device's time for a 512-entry batch of memory it refuses, against
# one of ordinary RAM (a note, not a verdict: no timed test).  Its RAM
# batches release memory, so it comes after the count above.
time_batch() { # WHAT PFN
	note "$1: $(guest /root/hostcheck --time-batch "$2" 51)"
}
time_batch "ivshmem" $((bar_start >> 12))
[[ -z $nvdimm_pfn ]] || time_batch "nvdimm" "$nvdimm_pfn"
check_eq "timing batches: nothing is left locked" "$(host_get x-locked-frames)" 0
check_eq "timing batches: the refused frames' batches classified no RAM block" \
	"$(host_get x-ram-classified)" "$classified"
check_eq "the guest still reads the same shared memory" "$(peek_bar)" "$shm_sha"

# Ordinary RAM, a private mapping of ram.img: it is released, the file is
# not touched.
guest 'nohup /root/hostcheck --hold 64 --seconds 3600 >/tmp/hold.log 2>&1 & echo $! >/tmp/hold.pid'
check "private file RAM: 64 MiB locked" wait_for 300 host_locked_is 16384
check "... and released (x-discarded-frames)" \
	wait_for 10 eval '(( $(host_get x-discarded-frames) - discarded >= 16384 ))'
guest 'kill -USR1 $(cat /tmp/hold.pid)'
check "... and given back" wait_for 300 host_locked_is 0
check "hostcheck unlocked all 16384 pages" \
	eval 'guest cat /tmp/hold.log | grep -q "unlocked 16384 of 16384"'
hostcheck_tap "hostcheck on private file RAM" "$no_target|$no_display"
"$vm" stop "$name" >&2
for f in ram ivshmem nvdimm pmem; do
	check_eq "$f.img: contents and blocks on disk unchanged" \
		"$(file_state "$mem_dir/$f.img")" "${before[$f]}"
done
rm -rf "$mem_dir"

review_checks

if ((all)); then
	note "guest $name: x-legacy=on"
	boot "x-legacy=on"
	hostcheck_tap "hostcheck, legacy host" "" --legacy
	for caps in 0x3e 0x02 0x0e; do
		note "guest $name: capabilities=$caps"
		boot "capabilities=$caps"
		hostcheck_tap "hostcheck, capabilities $caps" "$no_target|$no_display" --caps "$caps"
	done
fi

finish
exit
