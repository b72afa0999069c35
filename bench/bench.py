#!/usr/bin/python3
"""bench/bench.py - how fast and how cheaply three balloons do the same work.

One run, one machine, one QEMU build, the same bookworm guest image:
  A  this project's vmw_balloon (the package) with the vmware-balloon device
  B  the guest kernel's own vmw_balloon with the same device
  C  the guest kernel's virtio_balloon with QEMU's virtio-balloon-pci
All three are driven by QMP `balloon` and watched from the host through one
QMP connection held open for the whole run (polled every few ms).

A and B run in one VMware-like guest that has the package installed: the
driver is swapped between the DKMS copy and the kernel's own module (DKMS
3.0 on bookworm leaves that one in place), so both see the same guest. C
needs a guest of its own (QEMU has one balloon handler). Both guests stay
up, but only the one being measured runs: the other is paused (QMP
`stop`), so it takes no CPU. Each repeat runs every scenario with each
variant, in an order that rotates from one repeat to the next.

Scenarios, in a 2 GiB guest. "Fresh" ones send their `balloon` 1 s after
the last one (inside A's 3 s of fast polling after a target change);
"-settled" ones only once the driver has had nothing to do for at least
10 s (no target change, no lock or unlock seen by the host):
  inflate           balloon 0 -> 1 GiB, the guest's free memory backed by
                    the host first (filled and freed), 1 s after the fill
  inflate-settled   the same from a settled balloon; right after the fill
                    the guest also measures the physical floor: the time
                    its kernel takes to allocate 1 GiB in 2 MiB pages with
                    the driver's GFP flags and no hypercall
                    (bench/floor/vmb_bench_floor.c), and, for context, a
                    userspace populate of 1 GiB (guest-helper.c floor)
  deflate           1 GiB -> 0 (and deflate-settled)
  reinflate         0 -> 1 GiB again at once, into the memory the host has
                    just released: the guest zeroes each page it allocates,
                    so the host backs it again until the LOCK (the RSS peak)
  cache             0 -> 1 GiB while a guest workload keeps rewriting a
                    1 GiB file whose pages stay dirty in the page cache
  moving            the target moves every 2 s for a minute (the same
                    sequence for all): the median time over the steps;
                    moving-settled times only its first step, the one
                    that starts from an idle driver (the others come 2 s
                    apart, inside the fast polling the first one began)
  idle              what a settled balloon costs over 10 s, 5 s after the
                    last change: hypercalls, guest and host CPU and the
                    guest's timer interrupts (how often its CPUs woke) per
                    second

Per scenario:
- time to target: from sending `balloon` until the host holds the target
  (x-locked-frames for A and B, query-balloon's actual for C), and of that
  the time until the host's count first changes;
- host memory, one metric for all: the guest-RAM part of QEMU's RSS (the
  Rss of the RAM mapping in /proc/PID/smaps, found by its size, not the
  whole process), sampled with the size: its peak above the start, and
  the residue, what the host still backs above what the guest may use
  (RAM minus balloon) 0.5 s after the target was reached. Beside it the
  exact accounting, at the start and at the end: the guest lists the
  frames its kernel holds offline (the balloon's pages, /proc/kpageflags)
  and the host reads which frames it backs (/proc/PID/pagemap of the RAM
  mapping): balloon frames the host still backs, and guest frames (not in
  the balloon) it does not back. RSS = RAM - unbacked guest frames -
  balloon + backed balloon frames, so an RSS that falls by less than the
  balloon grew is either balloon memory the host still backs (the driver's
  or the host's fault) or guest memory the host had never backed;
- host memory as the device counts it (A and B, exact, not sampled): the
  most frames one LOCK command found resident in the host when it locked
  them (mincore: host memory in use until that LOCK; in reinflate, pages
  the guest zeroed to allocate them), and the locked frames the host
  still backs 0.5 s after the target (x-lock-resident-peak,
  x-backed-locked-frames);
- hypercalls per GiB (the device's x-calls-* counters; n/a for C);
- guest CPU per GiB (all CPUs' busy time in the guest's /proc/stat, read
  through one ssh session held open) and host CPU per GiB (QEMU's utime +
  stime from /proc/PID/stat, until the target is reached; it includes
  answering the bench's QMP polls).

usage: bench/bench.py [--repeats N] [--scenarios inflate,deflate,...]
                      [--variants A,B,C] [--out DIR] [--deb-before DEB]
                      [--report RAW_JSON]
--deb-before adds a variant A0: another build of the package (e.g. before a
change), installed first; its module is kept aside and loaded in turn with
A and B, so one run compares before and after.
Writes DIR/results.md, DIR/balloon.png, DIR/raw.json (every figure, the
load average before and after each repeat), DIR/commit.txt (git describe
--dirty of what was measured) and DIR/command.txt (the command line).
--report redoes the tables and the plot from a raw.json, without guests.
The last line of output is the headline:
  A/B time-to-target: <r>, A/C: <r>, A residue: <MiB> MiB, A lock peak: <MiB> MiB
(time to target: the median over the settled scenarios of A's median over
B's; residue: the balloon frames the host still backs after the target,
the device's x-backed-locked-frames, the worst scenario's median; lock
peak: the most frames one LOCK found resident in the host, the device's
x-lock-resident-peak, `reinflate`'s median),
and the line above it says how many repeats did not reach the target.
"""

import argparse
import array
import importlib.machinery
import importlib.util
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VM = ROOT / "qemu-cloud" / "vm"


def load_vm():
    """qemu-cloud/vm as a module: its Guest and its QMP session."""
    loader = importlib.machinery.SourceFileLoader("vmcli", str(VM))
    spec = importlib.util.spec_from_loader("vmcli", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


vmcli = load_vm()

MIB = 1 << 20
GIB = 1 << 30
FRAME = 4096
GUEST_MIB = 2048
RAM_FRAMES = GUEST_MIB * MIB // FRAME
POLL_S = 0.001  # between samples; a sample itself takes a few ms
RSS_DUTY = 2  # an RSS read waits at least this many times the last one's cost
REACH_TIMEOUT_S = 240
DEVICE = "/machine/peripheral/vmb0"
CMDS = ["start", "target", "lock", "unlock", "guest-id", "batch-lock",
        "batch-unlock", "2m-lock", "2m-unlock", "doorbell-set"]
WORK_CMDS = ["lock", "unlock", "batch-lock", "batch-unlock", "2m-lock", "2m-unlock"]
MOVING_STEP_S = 2.0
MOVING_STEPS = 30
SCENARIOS = ["inflate", "inflate-settled", "deflate", "deflate-settled", "reinflate",
             "cache", "moving", "moving-settled", "idle"]
SETTLED = ["inflate-settled", "deflate-settled", "moving-settled"]
SETTLED_S = 10  # A polls fast for 3 s after the target moved
IDLE_S = 10
REPEATS = 7
HELPER = "/var/tmp/vmb-bench-helper"
FLOOR_DIR = "/var/tmp/vmb-bench-floor"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def moving_targets():
    """The moving target: the same sequence of balloon sizes (MiB) every time."""
    rng = random.Random(8)
    sizes, last = [], 0
    for _ in range(MOVING_STEPS):
        size = last
        while abs(size - last) < 128:
            size = rng.randrange(0, 1024 + 1, 32)
        sizes.append(size)
        last = size
    return sizes


def find_ram_mapping(pid, ram_kib):
    """The mapping of guest RAM in QEMU's address space: (start, end) addresses.

    QEMU maps the machine's RAM block (pc.ram, 2 GiB, all below 4 GiB on
    this PC, so frame n is n pages into it) as one anonymous mapping of
    exactly that size, with a PROT_NONE guard page after it, and asks for
    huge pages there (MADV_HUGEPAGE: "hg" in its VmFlags), which tells it
    from any other mapping of the same size."""
    found, head, match = [], None, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if not first.endswith(":"):
                head, match = line.split(), False
            elif first == "Size:" and head is not None:
                match = int(line.split()[1]) == ram_kib and head[1].startswith("rw")
            elif first == "VmFlags:" and match:
                found.append((head, line.split()[1:]))
    if len(found) > 1:
        found = [m for m in found if "hg" in m[1]] or found
    found = [head for head, _ in found]
    if len(found) != 1:
        raise RuntimeError(f"QEMU {pid}: {len(found)} read-write mappings of {ram_kib} KiB "
                           f"(guest RAM), want exactly one: {found}")
    start, end = (int(x, 16) for x in found[0][0].split("-"))
    return start, end


class Run:
    """One booted guest and the host's view of its balloon."""

    def __init__(self, name, virtio):
        self.name = name
        self.virtio = virtio
        self.guest = vmcli.Guest(name)
        self.sock, self.call = vmcli.qmp_session(self.guest)
        self.pid = self.guest.pid
        self.ram_start, self.ram_end = find_ram_mapping(self.pid, GUEST_MIB * 1024)
        self.ram_head = f"{self.ram_start:08x}-"  # as smaps prints it
        self.rss_cost, self.rss_at, self.rss_reads = 0.0, 0.0, []
        self.last_target_at = time.monotonic()
        self.open_shell()
        self.build_helper()

    def build_helper(self):
        """guest-helper.c, built with the guest's own gcc."""
        src = (ROOT / "bench" / "guest-helper.c").read_text()
        r = subprocess.run(self.guest.ssh_argv([f"cat > {HELPER}.c && gcc -O2 -o {HELPER} {HELPER}.c"]),
                           input=src, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"guest {self.name}: building the helper failed: {r.stderr.strip()}")
        # the floor module, built against the guest's running kernel
        tar = subprocess.run(["tar", "-C", str(ROOT / "bench" / "floor"), "-c", "Kbuild",
                              "vmb_bench_floor.c"], capture_output=True, check=True).stdout
        r = subprocess.run(self.guest.ssh_argv([
            f"rm -rf {FLOOR_DIR} && mkdir -p {FLOOR_DIR} && tar -x -C {FLOOR_DIR} && "
            f"make -s -C /lib/modules/$(uname -r)/build M={FLOOR_DIR} modules"]),
            input=tar, capture_output=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"guest {self.name}: building the floor module failed: "
                               f"{r.stderr.decode(errors='replace').strip()}")

    def kernel_floor_ms(self):
        """The floor module's time to allocate 1 GiB in 2 MiB pages (ms)."""
        params = "/sys/module/vmb_bench_floor/parameters"
        line = self.sh(f"insmod {FLOOR_DIR}/vmb_bench_floor.ko && "
                       f"echo $(cat {params}/elapsed_ns {params}/allocated) && "
                       "rmmod vmb_bench_floor || echo failed")
        try:
            elapsed_ns, allocated = (int(x) for x in line.split())
        except ValueError:
            raise RuntimeError(f"guest {self.name}: the floor module printed {line!r}")
        if allocated != GIB // (2 * MIB):
            raise RuntimeError(f"guest {self.name}: the floor module got {allocated} of "
                               f"{GIB // (2 * MIB)} pages of 2 MiB")
        return elapsed_ns / 1e6

    def guest_facts(self):
        """What decides the floor: 2 MiB pages for anonymous memory, zeroing on allocation."""
        return {"thp": self.ssh("cat /sys/kernel/mm/transparent_hugepage/enabled"),
                "thp_defrag": self.ssh("cat /sys/kernel/mm/transparent_hugepage/defrag"),
                "mem_auto_init": self.ssh("dmesg | grep -m 1 -o 'mem auto-init:.*' || echo '?'")}

    def open_shell(self):
        self.shell = subprocess.Popen(self.guest.ssh_argv(["sh"]), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, bufsize=1)

    def close_shell(self):
        try:
            self.shell.stdin.close()
            self.shell.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.shell.kill()

    def close(self):
        self.close_shell()
        self.call.stream.close()  # the socket stays open while its file is
        self.sock.close()

    def pause(self):
        """Stop the guest's CPUs while another variant is measured."""
        # ssh's keepalive would give up on a guest paused for minutes
        self.close_shell()
        self.qmp("stop")

    def resume(self):
        self.qmp("cont")
        self.open_shell()

    def qmp(self, command, **arguments):
        reply = self.call({"execute": command, "arguments": arguments})
        if "error" in reply:
            raise RuntimeError(f"QMP {command}: {reply['error']}")
        return reply["return"]

    def host_get(self, prop):
        return self.qmp("qom-get", path=DEVICE, property=prop)

    def size_frames(self):
        """The balloon as the host holds it, in 4 KiB frames."""
        if self.virtio:
            return (GUEST_MIB * MIB - self.qmp("query-balloon")["actual"]) // FRAME
        return self.host_get("x-locked-frames")

    def hypercalls(self):
        if self.virtio:
            return None
        return sum(self.host_get(f"x-calls-{c}") for c in CMDS)

    def host_figure(self, prop):
        """One of the device's counters (None for C, or a device without it)."""
        if self.virtio:
            return None
        try:
            return self.host_get(prop)
        except RuntimeError:
            return None

    def discarded(self):
        """4 KiB frames whose host memory the device released (None for C)."""
        return self.host_figure("x-discarded-frames")

    def start_lock_peak(self):
        """The device's x-lock-resident-peak starts again at 0 (A, B)."""
        if not self.virtio:
            try:
                self.qmp("qom-set", path=DEVICE, property="x-lock-resident-peak", value=0)
            except RuntimeError:
                pass

    def host_backing(self):
        """The device's exact figures after a target, in MiB: the most frames one
        LOCK found resident in the host, and the locked frames the host backs now."""
        peak, backed = self.host_figure("x-lock-resident-peak"), self.host_figure("x-backed-locked-frames")
        return {"lock_peak_mib": None if peak is None else peak * FRAME / MIB,
                "backed_locked_mib": None if backed is None else backed * FRAME / MIB}

    def work(self):
        """What changes only when the driver does something: its locks and unlocks."""
        if self.virtio:
            return self.size_frames()
        return sum(self.host_get(f"x-calls-{c}") for c in WORK_CMDS)

    def ram_rss_kib(self):
        """Rss of the guest-RAM mapping (smaps is read only as far as that mapping)."""
        t = time.monotonic()
        with open(f"/proc/{self.pid}/smaps") as f:
            found = False
            for line in f:
                if not found:
                    found = line.startswith(self.ram_head)
                elif line.startswith("Rss:"):
                    kib = int(line.split()[1])
                    break
            else:
                raise RuntimeError(f"QEMU {self.pid}: the RAM mapping at {self.ram_head} is gone")
        self.rss_at = time.monotonic()
        self.rss_cost = self.rss_at - t
        self.rss_reads.append(self.rss_cost * 1000)
        return kib

    def sample_rss(self):
        """The RAM RSS, unless the last read was so recent that another would eat the CPU."""
        if time.monotonic() - self.rss_at < RSS_DUTY * self.rss_cost:
            return None
        return self.ram_rss_kib()

    def host_cpu_ms(self):
        """QEMU's CPU time, all threads, user and system."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / CLK_TCK

    def host_present(self):
        """One byte per guest frame, 1 where the host backs it (pagemap: present or swapped)."""
        with open(f"/proc/{self.pid}/pagemap", "rb") as f:
            f.seek(self.ram_start // FRAME * 8)
            data = f.read(RAM_FRAMES * 8)
        entries = array.array("Q")
        entries.frombytes(data)
        return bytes(1 if e >> 62 else 0 for e in entries)

    def memory_probe(self):
        """Which frames the balloon holds (the guest's kernel) and which the host backs."""
        line = self.sh(f"{HELPER} offline || echo failed")
        try:
            frames, count, bits = line.split()
            offline = b"".join(BIT_BYTES[b] for b in bytes.fromhex(bits))[:RAM_FRAMES]
        except ValueError:
            raise RuntimeError(f"guest {self.name}: the helper's offline list: {line[:200]!r}")
        present = self.host_present()
        balloon = self.size_frames()
        n = min(len(offline), len(present))
        off, pres = int.from_bytes(offline[:n], "little"), int.from_bytes(present[:n], "little")
        return {"offline_mib": int(count) * FRAME / MIB,
                "backed_mib": pres.bit_count() * FRAME / MIB,
                "balloon_mib": balloon * FRAME / MIB,
                "backed_balloon_mib": (off & pres).bit_count() * FRAME / MIB,
                "unbacked_guest_mib": (n - (off | pres).bit_count()) * FRAME / MIB}

    def meminfo(self):
        """The guest's free, cached and dirty memory (MiB)."""
        fields = self.sh("awk '$1 == \"MemFree:\" {f = $2} $1 == \"Cached:\" {c = $2} "
                         "$1 == \"Dirty:\" {d = $2} END {print f, c, d}' /proc/meminfo").split()
        return dict(zip(("free_mib", "cached_mib", "dirty_mib"), (int(x) / 1024 for x in fields)))

    def sh(self, command):
        """One line of output from the guest's shell held open (cheap: no login)."""
        self.shell.stdin.write(command + "\n")
        self.shell.stdin.flush()
        return self.shell.stdout.readline().strip()

    def guest_cpu_ms(self):
        """Busy time of all the guest's CPUs (user, nice, system, irq, softirq)."""
        fields = self.sh("head -n 1 /proc/stat").split()
        ticks = sum(int(x) for x in fields[1:4] + fields[6:8])
        return ticks * 10  # USER_HZ is 100

    def ssh(self, command, timeout=900):
        r = self.guest.ssh(command, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"guest {self.name}: {command!r} failed: {r.stderr.strip()}")
        return r.stdout.strip()

    def set_balloon_mib(self, mib):
        self.qmp("balloon", value=(GUEST_MIB - mib) * MIB)
        self.last_target_at = time.monotonic()

    def watch(self, want_frames, timeout=REACH_TIMEOUT_S, trace=None, t0=None):
        """Sample until the host holds want_frames; return (reached_s, samples).

        A sample is (s since t0, frames, RAM RSS in KiB or None if not read)."""
        t0 = t0 if t0 is not None else time.monotonic()
        samples = trace if trace is not None else []
        while True:
            now = time.monotonic()
            size = self.size_frames()
            samples.append((now - t0, size, self.sample_rss()))
            if size == want_frames:
                return now - t0, samples
            if now - t0 > timeout:
                return None, samples
            time.sleep(POLL_S)

    def settle(self, mib):
        self.set_balloon_mib(mib)
        reached, _ = self.watch(mib * MIB // FRAME)
        if reached is None:
            raise RuntimeError(f"guest {self.name}: the balloon did not reach {mib} MiB")

    def wait_settled(self, quiet_s=None):
        """Wait until the driver has had nothing to do for quiet_s: the target
        unchanged and no lock or unlock counted by the host. Returns how long
        the host saw it idle before this returned."""
        quiet_s = SETTLED_S if quiet_s is None else quiet_s
        deadline = time.monotonic() + 20 * quiet_s
        while True:
            t0, w0 = time.monotonic(), self.work()
            time.sleep(max(quiet_s, self.last_target_at + quiet_s - t0))
            if self.work() == w0:
                return time.monotonic() - t0
            if time.monotonic() > deadline:
                raise RuntimeError(f"guest {self.name}: the driver never stayed idle for {quiet_s} s")

    def back_free_memory(self):
        """Fill the guest's free memory and free it: the host now backs it all.

        tmpfs takes all but 64 MiB (it cannot be reclaimed, so it stops
        short of an OOM); reading the root device then puts clean page
        cache, which the kernel reclaims instead, into the rest. The kernel
        keeps its free-page watermarks (about 60 MiB in this guest, raised
        for THP) free all the while, and a 2 MiB allocation handed those
        never-backed blocks gives the host nothing back, so the fill runs
        with the watermarks lowered.
        """
        self.ssh('sync; echo 3 > /proc/sys/vm/drop_caches; '
                 'min=$(cat /proc/sys/vm/min_free_kbytes); '
                 'scale=$(cat /proc/sys/vm/watermark_scale_factor); '
                 'sysctl -q vm.min_free_kbytes=1024 vm.watermark_scale_factor=1; '
                 'mib=$(( $(awk "\\$1 == \\"MemAvailable:\\" {print \\$2}" /proc/meminfo) / 1024 - 64 )); '
                 'mkdir -p /mnt/fill && mount -t tmpfs -o size=${mib}M none /mnt/fill && '
                 'dd if=/dev/zero of=/mnt/fill/f bs=1M count=$mib status=none; '
                 'dd if=$(findmnt -no SOURCE /) of=/dev/null bs=1M count=256 status=none; '
                 'umount /mnt/fill; echo 3 > /proc/sys/vm/drop_caches; '
                 'sysctl -q vm.min_free_kbytes=$min vm.watermark_scale_factor=$scale')

    # ------------------------------------------------------------ scenarios

    def measure(self, to_mib, trace_out=None, settled=False, probe_start=True):
        """Send one `balloon` and measure until the host holds to_mib.

        Fresh: the command goes 1 s after the caller's last step; settled:
        once the driver has been idle SETTLED_S. The accounting probe at
        the start (about a second under TCG) runs before that wait; fresh
        deflate and reinflate go without it, or they would start late."""
        want = to_mib * MIB // FRAME
        probe0, mem0 = (self.memory_probe(), self.meminfo()) if probe_start else ({}, {})
        quiet = self.wait_settled() if settled else (time.sleep(1) or None)
        from_frames = self.size_frames()
        calls0, cpu0, hcpu0 = self.hypercalls(), self.guest_cpu_ms(), self.host_cpu_ms()
        discarded0 = self.discarded()
        rss0 = self.ram_rss_kib()
        since_target = time.monotonic() - self.last_target_at
        self.rss_reads = []
        self.start_lock_peak()
        t0 = time.monotonic()
        self.set_balloon_mib(to_mib)
        reached, samples = self.watch(want, t0=t0)
        hcpu1 = self.host_cpu_ms()
        time.sleep(0.5)  # what the host gives back at LOCK is gone by now
        rss1, balloon1 = self.ram_rss_kib(), self.size_frames()
        backing = self.host_backing()
        cpu1, calls1 = self.guest_cpu_ms(), self.hypercalls()
        discarded1 = self.discarded()
        probe1, mem1 = self.memory_probe(), self.meminfo()
        moved_gib = abs(want - from_frames) * FRAME / GIB
        moved_at = next((t for t, size, _ in samples if size != from_frames), None)
        rss_seen = [s[2] for s in samples if s[2] is not None] + [rss0]
        result = {
            "time_ms": None if reached is None else reached * 1000,
            "reaction_ms": None if moved_at is None else moved_at * 1000,
            "since_target_s": since_target, "quiet_s": quiet,
            "calls_per_gib": None if calls0 is None else (calls1 - calls0) / moved_gib,
            "cpu_ms_per_gib": (cpu1 - cpu0) / moved_gib,
            "host_cpu_ms_per_gib": (hcpu1 - hcpu0) / moved_gib,
            "discarded_mib": None if None in (discarded0, discarded1)
            else (discarded1 - discarded0) * FRAME / MIB,
            "ram_rss_start_mib": rss0 / 1024, "ram_rss_end_mib": rss1 / 1024,
            "balloon_end_mib": balloon1 * FRAME / MIB,
            "residue_mib": rss1 / 1024 - (GUEST_MIB - balloon1 * FRAME / MIB),
            "rss_peak_mib": (max(rss_seen) - rss0) / 1024, **backing,
            "rss_fall_pct": (rss0 - rss1) * 1024 / (moved_gib * GIB) * 100,
            "rss_samples": len(rss_seen),
            "rss_read_ms": statistics.median(self.rss_reads) if self.rss_reads else None,
            "start": {**probe0, **mem0}, "end": {**probe1, **mem1},
            "samples": len(samples),
            "poll_ms": statistics.median(b[0] - a[0] for a, b in zip(samples, samples[1:])) * 1000
            if len(samples) > 1 else None,
            "load1": os.getloadavg()[0],
        }
        if trace_out is not None:
            trace_out.extend((t, s * FRAME / MIB) for t, s, _ in samples)
        return result

    def scenario_inflate(self, trace):
        self.settle(0)
        self.back_free_memory()
        return self.measure(1024, trace)

    def scenario_inflate_settled(self, trace):
        self.settle(0)
        self.back_free_memory()
        # the floors, in the state the inflation finds: free memory all backed
        floor_ms = self.kernel_floor_ms()
        line = self.sh(f"{HELPER} floor || echo failed")
        try:
            populate_ms, huge_kib, zero_ms = line.split()
        except ValueError:
            raise RuntimeError(f"guest {self.name}: the floor helper printed {line!r}")
        r = self.measure(1024, trace, settled=True)
        r.update(floor_ms=floor_ms, populate_ms=float(populate_ms),
                 populate_huge_pct=int(huge_kib) * 1024 / GIB * 100,
                 floor_zero_pass_ms=float(zero_ms))
        if r["time_ms"] is not None:
            r["time_over_floor"] = r["time_ms"] / r["floor_ms"]
            r["time_over_zero_pass"] = r["time_ms"] / r["floor_zero_pass_ms"]
        return r

    def scenario_deflate(self, trace, settled=False):
        self.settle(1024)
        return self.measure(0, trace, settled=settled, probe_start=settled)

    def scenario_deflate_settled(self, trace):
        return self.scenario_deflate(trace, settled=True)

    def scenario_reinflate(self, trace):
        if self.size_frames() != 0:
            self.settle(1024)
            self.settle(0)
        return self.measure(1024, trace, probe_start=False)

    def scenario_cache(self, trace):
        self.settle(0)
        # 1 GiB of dirty page cache that stays dirty: writeback only when
        # memory runs short, and rewritten while the balloon inflates
        self.ssh("sysctl -q vm.dirty_bytes=1717986918 vm.dirty_background_bytes=1503238553 "
                 "vm.dirty_expire_centisecs=360000 vm.dirty_writeback_centisecs=0; "
                 "rm -f /var/tmp/bench-cache /var/tmp/bench-cache.pass; "
                 "nohup sh -c 'while :; do dd if=/dev/zero of=/var/tmp/bench-cache bs=1M count=1024 "
                 "conv=notrunc status=none; touch /var/tmp/bench-cache.pass; done' "
                 ">/dev/null 2>&1 & echo $! > /var/tmp/bench-cache.pid")
        deadline = time.monotonic() + 300
        while self.sh("test -e /var/tmp/bench-cache.pass && echo y || echo n") != "y":
            if time.monotonic() > deadline:
                raise RuntimeError("the cache workload did not write its first GiB in 300 s")
            time.sleep(1)
        try:
            r = self.measure(1024, trace)
            r["dirty_kib_at_start"] = int(r["start"]["dirty_mib"] * 1024)
        finally:
            self.ssh("kill $(cat /var/tmp/bench-cache.pid); sleep 0.5; "
                     "rm -f /var/tmp/bench-cache /var/tmp/bench-cache.pass; "
                     "sysctl -q vm.dirty_ratio=20 vm.dirty_background_ratio=10 "
                     "vm.dirty_expire_centisecs=3000 vm.dirty_writeback_centisecs=500; "
                     "sync; echo 3 > /proc/sys/vm/drop_caches")
        return r

    def timer_interrupts(self):
        """Local timer interrupts of all the guest's CPUs: how often they woke."""
        return int(self.sh("awk '$1 == \"LOC:\" {n = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) "
                           "n += $i; print n}' /proc/interrupts"))

    def scenario_idle(self, trace):
        self.settle(512)
        time.sleep(5)
        calls0, cpu0, loc0 = self.hypercalls(), self.guest_cpu_ms(), self.timer_interrupts()
        gets0 = None if self.virtio else self.host_get("x-calls-target")
        hcpu0, rss0 = self.host_cpu_ms(), self.ram_rss_kib()
        self.start_lock_peak()
        t0 = time.monotonic()
        peak = rss0
        while time.monotonic() < t0 + IDLE_S:
            time.sleep(0.2)
            peak = max(peak, self.ram_rss_kib())
        calls1, cpu1, loc1 = self.hypercalls(), self.guest_cpu_ms(), self.timer_interrupts()
        gets1 = None if self.virtio else self.host_get("x-calls-target")
        hcpu1, rss1, balloon1 = self.host_cpu_ms(), self.ram_rss_kib(), self.size_frames()
        t1 = time.monotonic()
        return {"idle_calls_per_s": None if calls0 is None else (calls1 - calls0) / (t1 - t0),
                "idle_get_target_per_s": None if gets0 is None else (gets1 - gets0) / (t1 - t0),
                "idle_cpu_ms_per_s": (cpu1 - cpu0) / (t1 - t0),
                "idle_host_cpu_ms_per_s": (hcpu1 - hcpu0) / (t1 - t0),
                "idle_wakeups_per_s": (loc1 - loc0) / (t1 - t0),
                "ram_rss_start_mib": rss0 / 1024, "ram_rss_end_mib": rss1 / 1024,
                "balloon_end_mib": balloon1 * FRAME / MIB,
                "residue_mib": rss1 / 1024 - (GUEST_MIB - balloon1 * FRAME / MIB),
                "rss_peak_mib": (peak - rss0) / 1024, **self.host_backing(),
                "end": self.memory_probe(), "load1": os.getloadavg()[0]}

    def scenario_moving(self, trace, settled=False):
        self.settle(0)
        quiet = self.wait_settled() if settled else (time.sleep(1) or None)
        since_target = time.monotonic() - self.last_target_at
        calls0, cpu0, hcpu0 = self.hypercalls(), self.guest_cpu_ms(), self.host_cpu_ms()
        rss0 = self.ram_rss_kib()
        self.rss_reads = []
        self.start_lock_peak()
        t0 = time.monotonic()
        step_times, gaps, moved, last = [], [], 0, 0
        samples, rss_seen = [], [rss0]
        for i, mib in enumerate(moving_targets()):
            want = mib * MIB // FRAME
            step_start = t0 + i * MOVING_STEP_S
            while time.monotonic() < step_start:
                time.sleep(0.001)
            self.set_balloon_mib(mib)
            sent = time.monotonic()
            reached = None
            while time.monotonic() < step_start + MOVING_STEP_S:
                now = time.monotonic()
                size = self.size_frames()
                rss = self.sample_rss()
                if rss is not None:
                    rss_seen.append(rss)
                samples.append((now - t0, size, mib))
                gaps.append(abs(size - want) * FRAME / MIB)
                if reached is None and size == want:
                    reached = now - sent
                time.sleep(POLL_S)
            step_times.append(reached)
            moved += abs(mib - last)
            last = mib
        cpu1, calls1, hcpu1 = self.guest_cpu_ms(), self.hypercalls(), self.host_cpu_ms()
        # the residue once the last target is held (or the wait gave up)
        final, _ = self.watch(last * MIB // FRAME, timeout=60)
        time.sleep(0.5)
        rss1, balloon1 = self.ram_rss_kib(), self.size_frames()
        backing = self.host_backing()
        moved_gib = moved / 1024
        done = [s for s in step_times if s is not None]
        # a step whose target was not reached in its 2 s counts as 2 s
        capped = [s * 1000 if s is not None else MOVING_STEP_S * 1000 for s in step_times]
        # settled: only the first step starts from an idle driver
        timed = capped[:1] if settled else capped
        trace.extend((t, s * FRAME / MIB, m) for t, s, m in samples)
        return {
            "time_ms": statistics.median(timed), "steps_timed": len(timed),
            "since_target_s": since_target, "quiet_s": quiet,
            "steps_reached": len(done), "steps": len(step_times),
            "last_target_reached": final is not None,
            "mean_gap_mib": statistics.mean(gaps),
            "calls_per_gib": None if calls0 is None else (calls1 - calls0) / moved_gib,
            "cpu_ms_per_gib": (cpu1 - cpu0) / moved_gib,
            "host_cpu_ms_per_gib": (hcpu1 - hcpu0) / moved_gib,
            "ram_rss_start_mib": rss0 / 1024, "ram_rss_end_mib": rss1 / 1024,
            "balloon_end_mib": balloon1 * FRAME / MIB,
            "residue_mib": rss1 / 1024 - (GUEST_MIB - balloon1 * FRAME / MIB),
            "rss_peak_mib": (max(rss_seen) - rss0) / 1024, **backing,
            "rss_samples": len(rss_seen),
            "end": self.memory_probe(), "load1": os.getloadavg()[0],
        }

    def scenario_moving_settled(self, trace):
        return self.scenario_moving(trace, settled=True)


# one byte per bit of a byte, lowest bit first: expands a frame bitmap
BIT_BYTES = [bytes((b >> k) & 1 for k in range(8)) for b in range(256)]


# ------------------------------------------------------------ the guests

def vm(*args, check=True):
    return subprocess.run([str(VM), *args], check=check)


def boot_vmware(name, deb, deb_before=None):
    files = [str(deb)]
    if deb_before:
        # the guest gets both files in one folder: two builds of one
        # version share a file name
        copy = Path(tempfile.mkdtemp(prefix="bench-before-")) / f"before-{deb_before.name}"
        shutil.copyfile(deb_before, copy)
        deb_before = copy
        files.append(str(deb_before))
    vm("stop", name, "--kill", check=False)
    try:
        vm("start", name, "--mem", f"{GUEST_MIB}M", *[a for f in files for a in ("--file", f)])
    finally:
        if deb_before:
            shutil.rmtree(deb_before.parent)
    guest = vmcli.Guest(name)
    if deb_before:
        # DKMS builds it; its module is kept, then replaced by the one under test
        r = guest.ssh(f"DEBIAN_FRONTEND=noninteractive apt-get install -y /opt/vmb/{deb_before.name} "
                      "&& cp $(modinfo -n vmw_balloon) /opt/vmb/before.ko "
                      "&& DEBIAN_FRONTEND=noninteractive apt-get purge -y vmw-balloon-dkms",
                      timeout=1800)
        if r.returncode != 0:
            raise RuntimeError(f"installing the before package failed: {r.stdout[-2000:]} {r.stderr[-2000:]}")
        log(f"{name}: before package built, module kept as /opt/vmb/before.ko")
    r = guest.ssh(f"DEBIAN_FRONTEND=noninteractive apt-get install -y /opt/vmb/{deb.name} "
                  "&& modinfo -n vmw_balloon && ls /lib/modules/$(uname -r)/kernel/drivers/misc/vmw_balloon.ko",
                  timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"installing the package failed: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    log(f"{name}: package installed; modules: {' '.join(r.stdout.split()[-2:])}")


def load_driver(run, variant, version):
    """Put the driver of A (DKMS) or B (the kernel's own) in the VMware-like guest."""
    run.settle(0)
    starts = run.host_get("x-calls-start")
    if variant == "A":
        run.ssh("rmmod vmw_balloon 2>/dev/null; modprobe vmw_balloon")
    elif variant == "A0":
        run.ssh("rmmod vmw_balloon 2>/dev/null; insmod /opt/vmb/before.ko")
    else:
        run.ssh("rmmod vmw_balloon 2>/dev/null; modprobe vmw_vmci 2>/dev/null; "
                "insmod /lib/modules/$(uname -r)/kernel/drivers/misc/vmw_balloon.ko")
    have = run.ssh("cat /sys/module/vmw_balloon/version 2>/dev/null || echo in-tree")
    want = "in-tree" if variant == "B" else version
    if variant in ("A", "A0"):
        # the two builds share a version: tell them apart by srcversion
        loaded = run.ssh("cat /sys/module/vmw_balloon/srcversion")
        before = run.ssh("modinfo -F srcversion /opt/vmb/before.ko 2>/dev/null || echo none")
        if (loaded == before) != (variant == "A0"):
            raise RuntimeError(f"{variant}: the loaded module (srcversion {loaded}) is the wrong build")
    if have != want:
        raise RuntimeError(f"{variant}: loaded vmw_balloon is {have!r}, want {want!r}")
    deadline = time.monotonic() + 60
    while run.host_get("x-calls-start") <= starts or run.host_get("x-granted-capabilities") == 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{variant}: the driver did not START with the host")
        time.sleep(0.2)


# ------------------------------------------------------------ the report

METRICS = [
    ("time_ms", "time to target (ms)", "{:.0f}"),
    ("reaction_ms", "of which until the host's count first changes (ms)", "{:.0f}"),
    ("since_target_s", "the target last moved before the command (s)", "{:.1f}"),
    ("floor_ms", "floor: the kernel allocates 1 GiB in 2 MiB pages, no hypercall (ms)", "{:.0f}"),
    ("populate_ms", "userspace: populate 1 GiB, MADV_HUGEPAGE (ms)", "{:.0f}"),
    ("populate_huge_pct", "userspace: of it in 2 MiB pages (%)", "{:.0f}"),
    ("floor_zero_pass_ms", "userspace: one more pass writing zeros over it (ms)", "{:.0f}"),
    ("time_over_floor", "time to target over the floor", "{:.2f}"),
    ("time_over_zero_pass", "time to target over one zeroing pass", "{:.2f}"),
    ("calls_per_gib", "hypercalls per GiB", "{:.0f}"),
    ("residue_mib", "residue: RAM RSS above RAM minus balloon, after (MiB)", "{:.1f}"),
    ("rss_peak_mib", "RAM RSS peak above start (MiB)", "{:.1f}"),
    ("backed_locked_mib", "balloon the host backs, after (device, MiB)", "{:.1f}"),
    ("lock_peak_mib", "most one LOCK found backed (device, MiB)", "{:.1f}"),
    ("rss_fall_pct", "RAM RSS fall (% of the GiB moved)", "{:.1f}"),
    ("host_cpu_ms_per_gib", "host CPU per GiB, QEMU (ms)", "{:.0f}"),
    ("cpu_ms_per_gib", "guest CPU per GiB (ms)", "{:.0f}"),
    ("mean_gap_mib", "mean distance from target (MiB)", "{:.0f}"),
    ("idle_calls_per_s", "hypercalls per second", "{:.2f}"),
    ("idle_get_target_per_s", "of which GET_TARGET", "{:.2f}"),
    ("idle_cpu_ms_per_s", "guest CPU per second (ms)", "{:.0f}"),
    ("idle_host_cpu_ms_per_s", "host CPU per second, QEMU (ms)", "{:.0f}"),
    ("idle_wakeups_per_s", "guest timer interrupts per second", "{:.1f}"),
]
# the exact accounting: (where, key, name)
ACCOUNTING = [
    ("start", "backed_mib", "RAM RSS at start (pagemap)"),
    ("start", "unbacked_guest_mib", "guest frames not backed, start"),
    ("start", "backed_balloon_mib", "balloon frames backed, start"),
    ("end", "backed_mib", "RAM RSS after (pagemap)"),
    ("end", "balloon_mib", "balloon after (host)"),
    ("end", "offline_mib", "balloon after (guest: offline frames)"),
    ("end", "unbacked_guest_mib", "guest frames not backed, after"),
    ("end", "backed_balloon_mib", "balloon frames backed, after"),
    ("start", "cached_mib", "guest page cache, start"),
    ("end", "cached_mib", "guest page cache, after"),
    ("start", "free_mib", "guest MemFree, start"),
    ("end", "free_mib", "guest MemFree, after"),
]
# rows whose A/B quotient means nothing (signed, or a share)
NO_RATIO = {"since_target_s", "residue_mib", "rss_fall_pct", "populate_huge_pct",
            "backed_locked_mib", "lock_peak_mib"}
BOOTSTRAP_N = 2000
BOOTSTRAP_SEED = 15
ONE_TARGET = [sc for sc in SCENARIOS if not sc.startswith("moving") and sc != "idle"]


def get(r, key):
    """A figure of one result: "key" or "where.key" (the accounting)."""
    if "." in key:
        where, key = key.split(".")
        return (r.get(where) or {}).get(key)
    return r.get(key)


def by_repeat(results, variant, scenario, key):
    """{repeat: value} of one row; results without the figure left out."""
    return {r.get("repeat", i): get(r, key)
            for i, r in enumerate(results.get(variant, {}).get(scenario, []))
            if get(r, key) is not None}


def values(results, variant, scenario, key):
    return list(by_repeat(results, variant, scenario, key).values())


def median(results, variant, scenario, key):
    v = values(results, variant, scenario, key)
    return statistics.median(v) if v else None


def med_of(rows, ids):
    """The median of one row's values over the repeats ids (with repetition)."""
    v = [rows[i] for i in ids if i in rows]
    return statistics.median(v) if v else None


def div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def bootstrap(stat, ids):
    """95% percentile interval of stat(ids) over ids resampled with replacement."""
    if len(ids) < 2:
        return None
    rng = random.Random(BOOTSTRAP_SEED)
    draws = sorted(x for x in (stat([rng.choice(ids) for _ in ids]) for _ in range(BOOTSTRAP_N))
                   if x is not None)
    if len(draws) < BOOTSTRAP_N // 2:
        return None
    return draws[int(0.025 * (len(draws) - 1))], draws[int(0.975 * (len(draws) - 1))]


def repeat_ids(results):
    return sorted({r.get("repeat", i) for v in results.values() for rs in v.values()
                   for i, r in enumerate(rs)})


def ratio_cell(results, a, b, sc, key):
    """A/B of the medians, with its 95% bootstrap interval over repeats."""
    ra, rb = by_repeat(results, a, sc, key), by_repeat(results, b, sc, key)
    point = div(med_of(ra, ra), med_of(rb, rb))
    if point is None or key in NO_RATIO:
        return "n/a"
    ci = bootstrap(lambda ids: div(med_of(ra, ids), med_of(rb, ids)), sorted(set(ra) | set(rb)))
    return f"{point:.2f}" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")


def cell(results, variant, scenario, key, fmt):
    v = values(results, variant, scenario, key)
    if not v:
        return "n/a"
    n = len(results[variant][scenario])
    text = f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"
    if key == "time_ms" and len(v) < n:
        text += f", {n - len(v)} of {n} not reached"
    return text


def settled_ratio(results, a, b, ids=None):
    """The headline's time to target: over the settled scenarios, the
    median of (a's median / b's median)."""
    ratios = []
    for sc in SETTLED:
        ra, rb = by_repeat(results, a, sc, "time_ms"), by_repeat(results, b, sc, "time_ms")
        r = div(med_of(ra, ra if ids is None else ids), med_of(rb, rb if ids is None else ids))
        if r is not None:
            ratios.append(r)
    return statistics.median(ratios) if ratios else None


def worst_residue(results, a):
    """The worst scenario's median of what the host still backs of the balloon."""
    meds = [median(results, a, sc, "backed_locked_mib") for sc in results.get(a, {})]
    meds = [m for m in meds if m is not None]
    return max(meds) if meds else None


def missed(results, v):
    """(repeats with a scenario whose target was not reached, repeats, runs missed, runs)."""
    runs = [(r.get("repeat", i), r) for sc in ONE_TARGET
            for i, r in enumerate(results.get(v, {}).get(sc, []))]
    runs += [(r.get("repeat", i), r) for sc in ("moving", "moving-settled")
             for i, r in enumerate(results.get(v, {}).get(sc, []))]

    def miss(r):
        return r.get("time_ms") is None or r.get("last_target_reached") is False
    bad = [rep for rep, r in runs if miss(r)]
    return len(set(bad)), len({rep for rep, _ in runs}), len(bad), len(runs)


def missed_line(results, variants):
    parts = []
    for v in variants:
        reps_bad, reps, runs_bad, runs = missed(results, v)
        if runs:
            parts.append(f"{v} {reps_bad} of {reps} ({runs_bad} of {runs} scenario runs)")
    return ("Repeats that did not reach the target (a scenario's target, or a moving "
            "sequence's last one, not held within its time): " + ("; ".join(parts) or "none run"))


def interval_line(results, a="A"):
    ids = repeat_ids(results)
    parts = []
    for b in ("B", "C"):
        point = settled_ratio(results, a, b)
        if point is None:
            continue
        ci = bootstrap(lambda s: settled_ratio(results, a, b, s), ids)
        parts.append(f"{a}/{b} {point:.2f}" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else
                                                " (one repeat: no interval)"))
    return ("Settled time to target, 95% bootstrap interval over repeats: " +
            (", ".join(parts) if parts else "n/a (no settled scenario)"))


def accounting_table(results, variants, scenarios):
    """Where the host's memory went, per scenario: medians in MiB."""
    rows = []
    for sc in scenarios:
        keys = [(f"{w}.{k}", name) for w, k, name in ACCOUNTING
                if any(values(results, v, sc, f"{w}.{k}") for v in variants)]
        for key, name in keys:
            rows.append(f"| {sc} | {name} | " + " | ".join(
                "n/a" if median(results, v, sc, key) is None else f"{median(results, v, sc, key):.1f}"
                for v in variants) + " |")
    if not rows:
        return []
    return ["", "Where the host's memory went (MiB, medians): the guest lists the frames its kernel "
            "holds offline (the balloon), the host which frames of the RAM mapping it backs "
            "(/proc/PID/pagemap). RAM RSS = RAM − guest frames not backed − balloon + balloon "
            "frames backed; so the RSS falls by the balloon's growth, less what the guest began "
            "to use that the host had never backed (not backed, start − after), less balloon "
            "frames the host still backs. The latter is memory the guest can no longer use.", "",
            "| scenario | MiB | " + " | ".join(variants) + " |",
            "|---|---|" + "---|" * len(variants)] + rows


def report(results, meta, variants, scenarios):
    shown = [v for v in ("A0", "A", "B", "C") if v in variants]
    before = "A0" in shown
    lines = [f"# Balloon benchmark, {meta['date']}", "",
             f"QEMU {meta['qemu']}, TCG, {meta['host_cpus']} host CPUs; guest {meta['suite']}, "
             f"kernel {meta.get('kernel', '?')}, {GUEST_MIB} MiB, 2 vCPUs; "
             f"package {meta['version']}; {meta['repeats']} repeat(s). "
             "Medians, (min–max); ratios of medians with their 95% bootstrap interval over "
             "repeats [low–high]; only ratios measured in one run mean anything.", "",
             f"Measured: commit {meta.get('commit', '?')}; command: `{meta.get('command', '?')}`"
             + (f" (run as `{meta['invoked_as']}`)" if meta.get("invoked_as") else "") + "; "
             f"{meta.get('seconds', 0) // 60} minutes.", "",
             "A: the package's vmw_balloon + vmware-balloon device; "
             "B: the guest kernel's own vmw_balloon + the same device; "
             "C: the guest kernel's virtio_balloon + virtio-balloon-pci." +
             (f" A0: the package as it was before ({meta.get('deb_before', '?')}), "
              "the same way as A." if before else ""), "",
             "| scenario | metric | " + " | ".join(shown) + " | A/B | A/C |" +
             (" A0/B | A0/C |" if before else ""),
             "|---|---|" + "---|" * (len(shown) + 2 + (2 if before else 0))]
    for sc in scenarios:
        for key, name, fmt in METRICS:
            if all(not values(results, v, sc, key) for v in variants):
                continue
            lines.append(f"| {sc} | {name} | " +
                         " | ".join(cell(results, v, sc, key, fmt) for v in shown) +
                         f" | {ratio_cell(results, 'A', 'B', sc, key)} | "
                         f"{ratio_cell(results, 'A', 'C', sc, key)} |" +
                         (f" {ratio_cell(results, 'A0', 'B', sc, key)} | "
                          f"{ratio_cell(results, 'A0', 'C', sc, key)} |" if before else ""))
    lines += accounting_table(results, shown, scenarios)
    extra = []
    for v in variants:
        for sc in ("moving", "moving-settled"):
            mv = results.get(v, {}).get(sc, [])
            if mv:
                extra.append(f"{v} reached {sum(r['steps_reached'] for r in mv)} of "
                             f"{sum(r['steps'] for r in mv)} targets of `{sc}` within their 2 s")
    if extra:
        lines += ["", "Moving target: " + "; ".join(extra) + " (a step not reached counts as 2000 ms)."]
    floor = median(results, "A", "inflate-settled", "time_over_floor")
    if floor is not None:
        lines += ["", f"The physical floor: A's settled inflation took {floor:.2f} times what the "
                  "same guest, in the same run and state (free memory backed by the host), takes to "
                  "allocate 1 GiB in 2 MiB pages in its kernel with the driver's own GFP flags and "
                  "no hypercall (bench/floor/vmb_bench_floor.c; zeroing on allocation included "
                  "when the kernel does it; the guest: "
                  f"{meta.get('guest_facts', {}).get('A', meta.get('guest_facts', {}).get('B', '?'))}). "
                  "The userspace rows beside it (mmap, MADV_HUGEPAGE, MADV_POPULATE_WRITE) pay "
                  "page faults and, with init_on_alloc, a second zeroing: context, not a floor."]
    loads = meta.get("repeat_load", [])
    if loads:
        lines += ["", "Load average (1 min) before → after each repeat: " + ", ".join(
            f"{x['before'][0]:.2f} → {x['after'][0]:.2f}" for x in loads) + "."]
    lines += ["", "Each repeat runs A, B and C in turn (the order rotates); the guest not being "
              "measured is paused (QMP `stop`). Fresh scenarios send `balloon` 1 s after the "
              f"last step; -settled ones once the driver has been idle at least {SETTLED_S} s "
              "(no target change, no lock or unlock counted by the host).",
              "", "Time to target: from sending QMP `balloon` until the host holds the target "
              "(A, B: the device's x-locked-frames; C: query-balloon's actual), polled over one QMP "
              "connection, 1 ms between samples (median sample interval: " +
              ", ".join(f"{v} {meta['poll_ms'].get(v, 0):.1f} ms" for v in variants) + "). "
              "Hypercalls: every command the device counted (x-calls-*), over the GiB moved; "
              "C has no such counter. RAM RSS: the Rss of QEMU's guest-RAM mapping "
              "(/proc/PID/smaps), sampled with the size (a read waits at least twice the last "
              "read's cost); the residue is read 0.5 s after the target is reached (for "
              "`moving`, once the last target is held; `idle`, at its end). Host CPU: QEMU's "
              "utime + stime until the target is reached, answering the bench's polls included. "
              "Guest CPU: busy jiffies of all CPUs in the guest's /proc/stat (for `cache` it "
              "includes the workload)."]
    return "\n".join(lines) + "\n"


def summary_line(results, a="A"):
    fmt = lambda x, f: "n/a" if x is None else f.format(x)
    res, peak = worst_residue(results, a), median(results, a, "reinflate", "lock_peak_mib")
    return (f"{a}/B time-to-target: {fmt(settled_ratio(results, a, 'B'), '{:.2f}')}, "
            f"{a}/C: {fmt(settled_ratio(results, a, 'C'), '{:.2f}')}, "
            f"{a} residue: {fmt(res, '{:.0f}')} MiB, {a} lock peak: {fmt(peak, '{:.0f}')} MiB")


def plot(traces, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = [sc for sc in SCENARIOS if sc != "idle"
             if any(traces.get(v, {}).get(sc) for v in traces)]
    if not shown:
        return
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 3.2 * len(shown)), squeeze=False)
    colours = {"A0": "tab:purple", "A": "tab:blue", "B": "tab:orange", "C": "tab:green"}
    labels = {"A0": "A0: package before", "A": "A: package vmw_balloon",
              "B": "B: in-tree vmw_balloon", "C": "C: virtio_balloon"}
    for ax, sc in zip(axes[:, 0], shown):
        for v in ("A0", "A", "B", "C"):
            tr = traces.get(v, {}).get(sc)
            if tr:
                ax.plot([p[0] for p in tr], [p[1] for p in tr], color=colours[v], label=labels[v])
        if sc.startswith("moving"):
            tr = next(traces[v][sc] for v in traces if traces.get(v, {}).get(sc))
            ax.step([p[0] for p in tr], [p[2] for p in tr], where="post", color="grey",
                    linestyle=":", label="target")
        ax.set_title(f"{sc} (first repeat)")
        ax.set_xlabel("s after the first `balloon` command")
        ax.set_ylabel("balloon held by host (MiB)")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# ------------------------------------------------------------ main

def git_describe():
    r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown (not a git checkout)"


def main():
    # a run stopped with SIGTERM still stops its guests (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--variants", default="A,B,C")
    p.add_argument("--out", default=str(ROOT / "build" / "bench"))
    p.add_argument("--deb", help="the package to test as A (default: make deb's)")
    p.add_argument("--deb-before", help="another build of the package, variant A0")
    p.add_argument("--report", metavar="RAW_JSON",
                   help="no guests: write the tables and plot again from a run's raw.json")
    p.add_argument("--prefix", default=os.environ.get("VMB_BENCH_PREFIX", "bench"))
    args = p.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    variants = [v for v in args.variants.split(",") if v]
    if args.deb_before and "A0" not in variants:
        variants.insert(0, "A0")
    if set(scenarios) - set(SCENARIOS) or set(variants) - {"A0", "A", "B", "C"}:
        p.error(f"scenarios: {','.join(SCENARIOS)}; variants: A,B,C (A0 with --deb-before)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report:
        raw_path = Path(args.report)
        raw = json.loads(raw_path.read_text())
        if not (out / "raw.json").exists() or not (out / "raw.json").samefile(raw_path):
            shutil.copyfile(raw_path, out / "raw.json")
        raw["meta"]["report"] = shlex.join(["bench/bench.py", *sys.argv[1:]])
        return write_report(raw["meta"], raw["results"], raw["traces"], out)

    version = subprocess.run(["sed", "-n", 's/^PACKAGE_VERSION="\\([^"]*\\)"$/\\1/p',
                              str(ROOT / "dkms.conf")], capture_output=True, text=True).stdout.strip()
    deb = ROOT / "build" / "deb" / f"vmw-balloon-dkms_{version}_all.deb"
    if args.deb:
        deb = Path(args.deb).resolve()
    elif any(v in variants for v in "AB"):
        subprocess.run(["make", "-C", str(ROOT), "-s", "deb"], check=True, stdout=sys.stderr)
    qemu = vmcli.qemu_binary()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "version": version,
            "commit": git_describe(),
            "command": shlex.join(["bench/bench.py", *sys.argv[1:]]),
            "invoked_as": os.environ.get("VMB_BENCH_INVOKED"),
            "env": {k: os.environ[k] for k in ("VMB_QEMU", "VMB_SUITE", "VMB_IMAGE", "VMB_RUN_DIR")
                    if k in os.environ},
            "qemu": subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.split("\n")[0],
            "host_cpus": os.cpu_count(), "suite": "bookworm", "repeats": args.repeats,
            "scenarios": scenarios, "variants": variants, "poll_ms": {}, "repeat_load": [],
            "guest_facts": {}, "ram_mapping": {},
            "deb_before": Path(args.deb_before).name if args.deb_before else None}
    results = {v: {sc: [] for sc in scenarios} for v in variants}
    traces = {v: {} for v in variants}
    started = time.monotonic()

    def save_raw():
        for v in variants:
            polls = [r["poll_ms"] for sc in scenarios for r in results[v][sc] if r.get("poll_ms")]
            meta["poll_ms"][v] = statistics.median(polls) if polls else 0
        meta["seconds"] = round(time.monotonic() - started)
        (out / "raw.json").write_text(json.dumps({"meta": meta, "results": results,
                                                  "traces": traces}) + "\n")

    def run_scenarios(run, variant, rep):
        for sc in scenarios:
            trace = []
            r = getattr(run, "scenario_" + sc.replace("-", "_"))(trace)
            r["repeat"] = rep
            results[variant][sc].append(r)
            if rep == 0:
                traces[variant][sc] = trace
            log(f"{variant} {sc} #{rep + 1}: " + ", ".join(
                f"{k} {v:.1f}" if isinstance(v, float) else
                f"{k} ({' '.join(f'{kk} {vv:.1f}' for kk, vv in v.items())})" if isinstance(v, dict)
                else f"{k} {v}" for k, v in r.items()))
            save_raw()  # a run cut short still leaves what it measured

    def describe(run, variants_here):
        facts = run.guest_facts()
        for v in variants_here:
            meta["guest_facts"][v] = facts
            meta["ram_mapping"][v] = f"{run.ram_start:x}-{run.ram_end:x}"

    guests, runs = [], {}
    try:
        if "C" in variants:
            name = f"{args.prefix}-virtio"
            guests.append(name)
            vm("stop", name, "--kill", check=False)
            vm("start", name, "--plain", "--virtio-balloon", "--mem", f"{GUEST_MIB}M")
            runs["C"] = Run(name, virtio=True)
            meta["kernel"] = runs["C"].ssh("uname -r")
            if runs["C"].ssh("test -d /sys/module/virtio_balloon && echo y || echo n") != "y":
                raise RuntimeError("the plain guest has no virtio_balloon loaded")
            describe(runs["C"], ["C"])
        ab = [v for v in variants if v in ("A0", "A", "B")]
        if ab:
            if "C" in runs:
                runs["C"].pause()
            name = f"{args.prefix}-vmw"
            guests.append(name)
            boot_vmware(name, deb, Path(args.deb_before).resolve() if args.deb_before else None)
            vmw = Run(name, virtio=False)
            meta["kernel"] = vmw.ssh("uname -r")
            describe(vmw, ab)
            for v in ab:
                runs[v] = vmw
        running = runs[ab[0]] if ab else runs["C"]
        for rep in range(args.repeats):
            load = {"repeat": rep, "before": list(os.getloadavg()), "at": round(time.monotonic() - started)}
            # rotate the order, so that no variant always comes first
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for v in order:
                run = runs[v]
                if run is not running:
                    running.pause()
                    run.resume()
                    running = run
                if v != "C":
                    load_driver(run, v, version)
                run_scenarios(run, v, rep)
            load.update(after=list(os.getloadavg()), seconds=round(time.monotonic() - started) - load["at"])
            meta["repeat_load"].append(load)
            save_raw()
        for run in set(runs.values()):
            if run is not running:
                run.resume()
            run.settle(0)
            run.close()
        for name in guests:
            vm("stop", name)
    finally:
        for name in guests:
            if vmcli.Guest(name).running():
                vm("stop", name, "--kill", check=False)

    save_raw()
    return write_report(meta, results, traces, out)


def write_report(meta, results, traces, out):
    variants, scenarios = meta["variants"], meta["scenarios"]
    table = report(results, meta, variants, scenarios)
    line = summary_line(results)
    before = summary_line(results, "A0") + "\n" if "A0" in variants else ""
    tail = interval_line(results) + "\n" + missed_line(results, variants) + "\n"
    (out / "results.md").write_text(table + "\n" + before + tail + line +
                                    "\n\n![balloon size over time](balloon.png)\n")
    (out / "commit.txt").write_text(meta.get("commit", "unknown") + "\n")
    (out / "command.txt").write_text(meta.get("command", "unknown") + "\n" +
                                     (f"# run as: {meta['invoked_as']}\n" if meta.get("invoked_as") else "") +
                                     (f"# tables redone: {meta['report']}\n" if meta.get("report") else ""))
    plot(traces, out / "balloon.png")
    print(table)
    if before:
        print("before: " + before, end="")
    print(f"results: {out / 'results.md'}, plot: {out / 'balloon.png'}, raw: {out / 'raw.json'} "
          f"({meta.get('seconds', 0)} s)")
    print(tail, end="")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
