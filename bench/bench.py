#!/usr/bin/env python3
"""bench/bench.py - how fast and how cheaply three balloons do the same work.

One run, one machine, one QEMU build, the same bookworm guest image:
  A  this project's vmw_balloon (the package) with the vmware-balloon device
  B  the guest kernel's own vmw_balloon with the same device
  C  the guest kernel's virtio_balloon with QEMU's virtio-balloon-pci
All three are driven by QMP `balloon` and watched from the host through one
QMP connection held open for the whole run (10 ms polls or faster).

A and B run in one VMware-like guest that has the package installed: the
driver is swapped between the DKMS copy and the kernel's own module (DKMS
3.0 on bookworm leaves that one in place), so both see the same guest. C
needs a guest of its own (QEMU has one balloon handler). Both guests stay
up, but only the one being measured runs: the other is paused (QMP
`stop`), so it takes no CPU. Each repeat runs every scenario with each
variant, in an order that rotates from one repeat to the next.

Scenarios, in a 2 GiB guest:
  inflate   balloon 0 -> 1 GiB, the guest's free memory backed by the host
            first (filled and freed), so the host's RSS can fall
  deflate   1 GiB -> 0
  reinflate 0 -> 1 GiB again at once, into the memory the host has just
            released: the guest zeroes each page it allocates, so the host
            backs it again until the LOCK (the RSS peak shows it)
  cache     0 -> 1 GiB while a guest workload keeps rewriting a 1 GiB file
            whose pages stay dirty in the page cache
  moving    the target moves every 2 s for a minute (the same sequence
            for all)
  idle      what a settled balloon costs over 10 s, 5 s after the last
            change: hypercalls, guest CPU and the guest's timer interrupts
            (how often its CPUs woke) per second

Per scenario: time to target (from sending `balloon` until the host holds
the target: locked-frames for A and B, query-balloon's actual for C), and of
that the time until the host's count first changes (the driver's poll
interval shows here; for B also the allocation of the whole GiB, which
it locks at once),
hypercalls per GiB (the device's calls-* counters; n/a for C), the host RSS
given back over the target and the RSS peak above the start (QEMU's
/proc/PID/status), and guest CPU time (all CPUs' busy time in the guest's
/proc/stat, read through one ssh session held open, the same for all three).

usage: bench/bench.py [--repeats N] [--scenarios inflate,deflate,...]
                      [--variants A,B,C] [--out DIR] [--deb-before DEB]
--deb-before adds a variant A0: another build of the package (e.g. before a
change), installed first; its module is kept aside and loaded in turn with
A and B, so one run compares before and after.
Writes DIR/results.md, DIR/balloon.png and DIR/raw.json; the last line of
output is the one-line summary (inflate scenario, medians).
"""

import argparse
import importlib.machinery
import importlib.util
import json
import os
import random
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
POLL_S = 0.001  # between samples; a sample itself takes a few ms
REACH_TIMEOUT_S = 240
DEVICE = "/machine/peripheral/vmb0"
CMDS = ["start", "target", "lock", "unlock", "guest-id", "batch-lock",
        "batch-unlock", "2m-lock", "2m-unlock", "doorbell-set"]
MOVING_STEP_S = 2.0
MOVING_STEPS = 30
SCENARIOS = ["inflate", "deflate", "reinflate", "cache", "moving", "idle"]
IDLE_S = 10


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


class Run:
    """One booted guest and the host's view of its balloon."""

    def __init__(self, name, virtio):
        self.name = name
        self.virtio = virtio
        self.guest = vmcli.Guest(name)
        self.sock, self.call = vmcli.qmp_session(self.guest)
        self.pid = self.guest.pid
        self.open_shell()

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
        return self.host_get("locked-frames")

    def hypercalls(self):
        if self.virtio:
            return None
        return sum(self.host_get(f"calls-{c}") for c in CMDS)

    def rss_kib(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("QEMU has no VmRSS")

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

    def watch(self, want_frames, timeout=REACH_TIMEOUT_S, trace=None, t0=None):
        """Sample until the host holds want_frames; return (reached_s, samples)."""
        t0 = t0 if t0 is not None else time.monotonic()
        samples = trace if trace is not None else []
        while True:
            now = time.monotonic()
            size = self.size_frames()
            samples.append((now - t0, size, self.rss_kib()))
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

    def measure(self, to_mib, trace_out=None):
        """Send one `balloon` and measure until the host holds to_mib."""
        want = to_mib * MIB // FRAME
        from_frames = self.size_frames()
        calls0, cpu0, rss0 = self.hypercalls(), self.guest_cpu_ms(), self.rss_kib()
        t0 = time.monotonic()
        self.set_balloon_mib(to_mib)
        reached, samples = self.watch(want, t0=t0)
        time.sleep(0.5)  # what the host gives back at LOCK is gone by now
        rss1, cpu1, calls1 = self.rss_kib(), self.guest_cpu_ms(), self.hypercalls()
        moved_gib = abs(want - from_frames) * FRAME / GIB
        moved_at = next((t for t, size, _ in samples if size != from_frames), None)
        result = {
            "time_ms": None if reached is None else reached * 1000,
            "reaction_ms": None if moved_at is None else moved_at * 1000,
            "calls_per_gib": None if calls0 is None else (calls1 - calls0) / moved_gib,
            "cpu_ms_per_gib": (cpu1 - cpu0) / moved_gib,
            "rss_start_kib": rss0, "rss_end_kib": rss1,
            "rss_peak_mib": (max(s[2] for s in samples) - rss0) / 1024,
            "reclaimed_pct": (rss0 - rss1) * 1024 / (moved_gib * GIB) * 100,
            "samples": len(samples),
            "poll_ms": statistics.median(b[0] - a[0] for a, b in zip(samples, samples[1:])) * 1000
            if len(samples) > 1 else None,
        }
        if trace_out is not None:
            trace_out.extend((t, s * FRAME / MIB) for t, s, _ in samples)
        return result

    def scenario_inflate(self, trace):
        self.settle(0)
        self.back_free_memory()
        time.sleep(1)
        return self.measure(1024, trace)

    def scenario_deflate(self, trace):
        self.settle(1024)
        time.sleep(1)
        r = self.measure(0, trace)
        for k in ("rss_peak_mib", "reclaimed_pct"):
            r[k] = None  # deflation gives the host nothing back
        return r

    def scenario_reinflate(self, trace):
        if self.size_frames() != 0:
            self.settle(1024)
            self.settle(0)
        time.sleep(1)
        return self.measure(1024, trace)

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
        dirty = self.sh("awk '$1 == \"Dirty:\" {print $2}' /proc/meminfo")
        try:
            r = self.measure(1024, trace)
            r["dirty_kib_at_start"] = int(dirty)
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
        t0 = time.monotonic()
        time.sleep(IDLE_S)
        calls1, cpu1, loc1 = self.hypercalls(), self.guest_cpu_ms(), self.timer_interrupts()
        t1 = time.monotonic()
        return {"idle_calls_per_s": None if calls0 is None else (calls1 - calls0) / (t1 - t0),
                "idle_cpu_ms_per_s": (cpu1 - cpu0) / (t1 - t0),
                "idle_wakeups_per_s": (loc1 - loc0) / (t1 - t0)}

    def scenario_moving(self, trace):
        self.settle(0)
        time.sleep(1)
        calls0, cpu0 = self.hypercalls(), self.guest_cpu_ms()
        t0 = time.monotonic()
        step_times, gaps, moved, last = [], [], 0, 0
        samples = []
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
                samples.append((now - t0, size, mib))
                gaps.append(abs(size - want) * FRAME / MIB)
                if reached is None and size == want:
                    reached = now - sent
                time.sleep(POLL_S)
            step_times.append(reached)
            moved += abs(mib - last)
            last = mib
        cpu1, calls1 = self.guest_cpu_ms(), self.hypercalls()
        moved_gib = moved / 1024
        done = [s for s in step_times if s is not None]
        # a step whose target was not reached in its 2 s counts as 2 s
        capped = [s * 1000 if s is not None else MOVING_STEP_S * 1000 for s in step_times]
        trace.extend((t, s * FRAME / MIB, m) for t, s, m in samples)
        return {
            "time_ms": statistics.median(capped),
            "steps_reached": len(done), "steps": len(step_times),
            "mean_gap_mib": statistics.mean(gaps),
            "calls_per_gib": None if calls0 is None else (calls1 - calls0) / moved_gib,
            "cpu_ms_per_gib": (cpu1 - cpu0) / moved_gib,
            "rss_peak_mib": None, "reclaimed_pct": None,
        }


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
    starts = run.host_get("calls-start")
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
    while run.host_get("calls-start") <= starts or run.host_get("granted-capabilities") == 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{variant}: the driver did not START with the host")
        time.sleep(0.2)


# ------------------------------------------------------------ the report

METRICS = [
    ("time_ms", "time to target (ms)", "{:.0f}"),
    ("reaction_ms", "of which until the host's count first changes (ms)", "{:.0f}"),
    ("calls_per_gib", "hypercalls per GiB", "{:.0f}"),
    ("reclaimed_pct", "host RSS reclaimed (% of target)", "{:.1f}"),
    ("rss_peak_mib", "host RSS peak above start (MiB)", "{:.1f}"),
    ("cpu_ms_per_gib", "guest CPU per GiB (ms)", "{:.0f}"),
    ("mean_gap_mib", "mean distance from target (MiB)", "{:.0f}"),
    ("idle_calls_per_s", "hypercalls per second", "{:.2f}"),
    ("idle_cpu_ms_per_s", "guest CPU per second (ms)", "{:.0f}"),
    ("idle_wakeups_per_s", "guest timer interrupts per second", "{:.1f}"),
]


def values(results, variant, scenario, key):
    return [r[key] for r in results.get(variant, {}).get(scenario, [])
            if r.get(key) is not None]


def median(results, variant, scenario, key):
    v = values(results, variant, scenario, key)
    return statistics.median(v) if v else None


def cell(results, variant, scenario, key, fmt):
    v = values(results, variant, scenario, key)
    if not v:
        return "n/a"
    n = len(results[variant][scenario])
    text = f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"
    if key == "time_ms" and len(v) < n:
        text += f", {n - len(v)} of {n} not reached"
    return text


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def report(results, meta, variants, scenarios):
    shown = [v for v in ("A0", "A", "B", "C") if v in variants or v in "ABC"]
    before = "A0" in shown
    lines = [f"# Balloon benchmark, {meta['date']}", "",
             f"QEMU {meta['qemu']}, TCG, {meta['host_cpus']} host CPUs; guest {meta['suite']}, "
             f"kernel {meta.get('kernel', '?')}, {GUEST_MIB} MiB, 2 vCPUs; "
             f"package {meta['version']}; {meta['repeats']} repeat(s). "
             "Medians, (min–max); only ratios measured in one run mean anything.", "",
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
            a0, a, b, c = (median(results, v, sc, key) for v in ("A0", "A", "B", "C"))
            lines.append(f"| {sc} | {name} | " +
                         " | ".join(cell(results, v, sc, key, fmt) for v in shown) +
                         f" | {ratio(a, b)} | {ratio(a, c)} |" +
                         (f" {ratio(a0, b)} | {ratio(a0, c)} |" if before else ""))
    extra = []
    for v in variants:
        mv = results.get(v, {}).get("moving", [])
        if mv:
            extra.append(f"{v} reached {sum(r['steps_reached'] for r in mv)} of "
                         f"{sum(r['steps'] for r in mv)} moving targets within their 2 s")
    if extra:
        lines += ["", "Moving target: " + "; ".join(extra) + " (a step not reached counts as 2000 ms)."]
    lines += ["", "Each repeat runs A, B and C in turn (the order rotates); the guest not being "
              "measured is paused (QMP `stop`).",
              "", "Time to target: from sending QMP `balloon` until the host holds the target "
              "(A, B: the device's locked-frames; C: query-balloon's actual), polled over one QMP "
              "connection, 1 ms between samples (median sample interval: " +
              ", ".join(f"{v} {meta['poll_ms'].get(v, 0):.1f} ms" for v in variants) + "). "
              "Hypercalls: every command the device counted (calls-*), over the GiB moved; "
              "C has no such counter. RSS: QEMU's VmRSS, sampled with the size; `inflate` backs "
              "the guest's free memory first, `reinflate` inflates into memory the host "
              "has just released (RSS reclaimed is near 0 there by design: the peak is what counts). Guest CPU: busy jiffies of all CPUs in the guest's /proc/stat "
              "(for `cache` it includes the workload)."]
    return "\n".join(lines) + "\n"


def summary_line(results, a="A"):
    def m(v, key):
        return median(results, v, "inflate", key)
    a_t, b_t, c_t = m(a, "time_ms"), m("B", "time_ms"), m("C", "time_ms")
    rec, peak = m(a, "reclaimed_pct"), m(a, "rss_peak_mib")
    return (f"{a}/B time-to-target: {ratio(a_t, b_t)}, {a}/C: {ratio(a_t, c_t)}, "
            f"{a} reclaimed: {'n/a' if rec is None else f'{rec:.1f}'}%, "
            f"{a} RSS peak: {'n/a' if peak is None else f'{peak:.0f}'} MiB")


def plot(traces, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = [sc for sc in SCENARIOS if sc != "idle"
             if any(traces.get(v, {}).get(sc) for v in traces)]
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 3.2 * len(shown)), squeeze=False)
    colours = {"A0": "tab:purple", "A": "tab:blue", "B": "tab:orange", "C": "tab:green"}
    labels = {"A0": "A0: package before", "A": "A: package vmw_balloon",
              "B": "B: in-tree vmw_balloon", "C": "C: virtio_balloon"}
    for ax, sc in zip(axes[:, 0], shown):
        for v in ("A0", "A", "B", "C"):
            tr = traces.get(v, {}).get(sc)
            if tr:
                ax.plot([p[0] for p in tr], [p[1] for p in tr], color=colours[v], label=labels[v])
        if sc == "moving":
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

def main():
    # a run stopped with SIGTERM still stops its guests (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--variants", default="A,B,C")
    p.add_argument("--out", default=str(ROOT / "build" / "bench"))
    p.add_argument("--deb", help="the package to test as A (default: make deb's)")
    p.add_argument("--deb-before", help="another build of the package, variant A0")
    p.add_argument("--report", metavar="RAW_JSON",
                   help="no guests: write the table and plot again from a run's raw.json")
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
        raw = json.loads(Path(args.report).read_text())
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
            "qemu": subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.split("\n")[0],
            "host_cpus": os.cpu_count(), "suite": "bookworm", "repeats": args.repeats,
            "scenarios": scenarios, "variants": variants, "poll_ms": {},
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
            r = getattr(run, f"scenario_{sc}")(trace)
            r["repeat"] = rep
            results[variant][sc].append(r)
            if rep == 0:
                traces[variant][sc] = trace
            log(f"{variant} {sc} #{rep + 1}: " + ", ".join(
                f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in r.items() if k not in ("rss_start_kib", "rss_end_kib")))
            save_raw()  # a run cut short still leaves what it measured

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
        ab = [v for v in variants if v in ("A0", "A", "B")]
        if ab:
            if "C" in runs:
                runs["C"].pause()
            name = f"{args.prefix}-vmw"
            guests.append(name)
            boot_vmware(name, deb, Path(args.deb_before).resolve() if args.deb_before else None)
            vmw = Run(name, virtio=False)
            meta["kernel"] = vmw.ssh("uname -r")
            for v in ab:
                runs[v] = vmw
        running = runs[ab[0]] if ab else runs["C"]
        for rep in range(args.repeats):
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
    (out / "results.md").write_text(table + "\n" + before + line +
                                    "\n\n![balloon size over time](balloon.png)\n")
    plot(traces, out / "balloon.png")
    print(table)
    if before:
        print("before: " + before, end="")
    print(f"results: {out / 'results.md'}, plot: {out / 'balloon.png'} ({meta['seconds']} s)")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
