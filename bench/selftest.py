#!/usr/bin/python3
"""bench/selftest.py - bench.py's arithmetic and host-side readings, without guests.

1. The RAM mapping, its Rss and the pagemap, read from a stand-in process
   that maps 2 GiB (the guest's RAM size) and touches a known part of it.
2. The report from a synthetic raw.json (bench.py --report): the headline,
   the line of targets not reached, bootstrap intervals, the accounting.
Prints TAP.  usage: bench/selftest.py [DIR: keep the synthetic report there]"""

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("bench", HERE / "bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

sys.path.insert(0, str(HERE))
from tap import Checks  # noqa: E402  (beside this file)

check = Checks()


# ---------------------------------------------------------------- 1. host side
TOUCH_MIB = 96


def stand_in():
    """A process that maps the guest's RAM size and touches TOUCH_MIB of it,
    as QEMU would; it waits until its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", f"""
import mmap, sys
m = mmap.mmap(-1, {bench.GUEST_MIB} << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for off in range(0, {TOUCH_MIB} << 20, 4096):
    m[off] = 1
print("ready", flush=True)
sys.stdin.read()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


child = stand_in()
try:
    start, end = bench.find_ram_mapping(child.pid, bench.GUEST_MIB * 1024)
    check(end - start == bench.GUEST_MIB << 20, "the RAM mapping is found by its size")
    run = bench.Run.__new__(bench.Run)
    run.pid, run.ram_start, run.ram_end = child.pid, start, end
    run.ram_head = f"{start:08x}-"
    run.rss_cost, run.rss_at, run.rss_reads = 0.0, 0.0, []
    rss = run.ram_rss_kib()
    check(rss == TOUCH_MIB * 1024, f"its Rss is what was touched ({rss} KiB, want {TOUCH_MIB * 1024})")
    present = run.host_present()
    check(len(present) == bench.RAM_FRAMES and sum(present) == TOUCH_MIB * 256
          and all(present[:TOUCH_MIB * 256]),
          f"pagemap: the first {TOUCH_MIB} MiB present, nothing else ({sum(present)} frames)")
    cpu = run.host_cpu_ms()
    check(cpu > 0, f"the process's CPU time is read ({cpu:.0f} ms)")
    # the offline bitmap's bit order: bit n of the hex is frame n
    bits = bytes.fromhex("0380")
    expanded = b"".join(bench.BIT_BYTES[b] for b in bits)
    check([i for i, x in enumerate(expanded) if x] == [0, 1, 15], "frame bitmap: lowest bit first")
finally:
    child.stdin.close()
    child.wait()

# ---------------------------------------------------------------- 3. the scenarios
class FakeRun(bench.Run):
    """A Run whose guest and device are simulated; the "QEMU" is the stand-in
    process (its smaps, pagemap and CPU time are read for real)."""

    def __init__(self, virtio, pid, start, end):
        self.name, self.virtio, self.pid = "fake", virtio, pid
        self.ram_start, self.ram_end, self.ram_head = start, end, f"{start:08x}-"
        self.rss_cost, self.rss_at, self.rss_reads = 0.0, 0.0, []
        self.last_target_at = time.monotonic()
        self.size = self.target = self.locks = 0
        self.moved_at, self.from_size = time.monotonic(), 0
        self.cpu = 0

    def current(self):
        # the balloon moves to its target in 50 ms, one lock per 64 MiB
        frac = min(1.0, (time.monotonic() - self.moved_at) / 0.05)
        size = int(self.from_size + (self.target - self.from_size) * frac)
        self.locks += abs(size - self.size) // 16384 + (size != self.size)
        self.size = size
        return size

    def qmp(self, command, **arguments):
        if command == "balloon":
            self.from_size, self.moved_at = self.current(), time.monotonic()
            self.target = (bench.GUEST_MIB * bench.MIB - arguments["value"]) // bench.FRAME
            return {}
        if command == "query-balloon":
            return {"actual": bench.GUEST_MIB * bench.MIB - self.current() * bench.FRAME}
        if command == "qom-get":
            prop = arguments["property"]
            if prop == "x-locked-frames":
                return self.current()
            if prop == "x-discarded-frames":
                return self.size
            if prop == "x-lock-resident-peak":
                return 8192
            if prop == "x-backed-locked-frames":
                return 256
            self.current()
            return self.locks if prop == "x-calls-2m-lock" else 0
        return {}

    def sh(self, command):
        self.cpu += 7
        if "offline" in command:
            bits = bytearray(bench.RAM_FRAMES // 8)
            for i in range(self.current() // 8):
                bits[bench.RAM_FRAMES // 8 - 1 - i] = 0xff
            return f"{bench.RAM_FRAMES} {self.size} {bits.hex()}"
        if command.startswith("insmod") and "vmb_bench_floor" in command:
            return "200000000 512"
        if "floor" in command:
            return "250.0 1048576 60.0"
        if "/proc/stat" in command:
            return f"cpu {self.cpu} 0 {self.cpu} 100 0 0 0 0 0 0"
        if "meminfo" in command:
            return "300000 200000 1000"
        if "LOC:" in command:
            return str(self.cpu)
        if command.startswith("test -e"):
            return "y"
        raise AssertionError(f"unexpected guest command {command!r}")

    def ssh(self, command, timeout=900):
        return ""


bench.SETTLED_S, bench.IDLE_S, bench.MOVING_STEP_S, bench.MOVING_STEPS = 0.3, 0.3, 0.1, 4
child = stand_in()
sim = {}
try:
    start, end = bench.find_ram_mapping(child.pid, bench.GUEST_MIB * 1024)
    for v, virtio in (("A", False), ("C", True)):
        run = FakeRun(virtio, child.pid, start, end)
        sim[v] = {}
        for sc in bench.SCENARIOS:
            r = getattr(run, "scenario_" + sc.replace("-", "_"))([])
            r["repeat"] = 0
            sim[v][sc] = [r]
    a = sim["A"]
    check(all(a[sc][0].get("time_ms") is not None for sc in bench.SCENARIOS if sc != "idle"),
          "simulated: every scenario reaches its target")
    check(all(a[sc][0]["quiet_s"] >= bench.SETTLED_S for sc in bench.SETTLED),
          "simulated: settled scenarios wait for the driver to be idle")
    check(all(a[sc][0]["quiet_s"] is None and a[sc][0]["since_target_s"] < 2
              for sc in ("deflate", "reinflate", "moving")),
          "simulated: fresh deflate, reinflate and moving start within 2 s of the last change")
    check(a["moving-settled"][0]["steps_timed"] == 1
          and a["moving"][0]["steps_timed"] == a["moving"][0]["steps"] == bench.MOVING_STEPS,
          "simulated: moving-settled times only its first step, moving every step")
    r = a["inflate-settled"][0]
    check(r["floor_ms"] == 200.0 and abs(r["time_over_floor"] - r["time_ms"] / 200.0) < 1e-9,
          "simulated: the floor and the time over it")
    check(r["end"]["balloon_mib"] == 1024 and r["end"]["offline_mib"] == 1024
          and r["end"]["backed_balloon_mib"] == 0
          and r["residue_mib"] == TOUCH_MIB - 1024,
          f"simulated: residue {r['residue_mib']} and accounting {r['end']}")
    check(all(a[sc][0].get("residue_mib") is not None and a[sc][0].get("rss_peak_mib") is not None
              for sc in bench.SCENARIOS), "simulated: residue and peak in every scenario")
    check(all(a[sc][0].get("lock_peak_mib") == 32 and a[sc][0].get("backed_locked_mib") == 1
              and sim["C"][sc][0].get("lock_peak_mib") is None for sc in bench.SCENARIOS),
          "simulated: the device's lock peak and backed balloon, in MiB, in every scenario (none for C)")
    check(a["inflate"][0]["calls_per_gib"] > 0 and sim["C"]["inflate"][0]["calls_per_gib"] is None
          and a["idle"][0]["idle_host_cpu_ms_per_s"] is not None,
          "simulated: hypercalls for A, none for C; host CPU")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw.json"
        path.write_text(json.dumps({
            "meta": {"date": "simulated", "version": "0", "qemu": "none", "host_cpus": 2,
                     "suite": "bookworm", "repeats": 1, "scenarios": bench.SCENARIOS,
                     "variants": ["A", "C"], "poll_ms": {"A": 1.0, "C": 1.0}, "seconds": 1},
            "results": sim, "traces": {}}))
        r = subprocess.run([sys.executable, str(HERE / "bench.py"), "--report", str(path),
                            "--out", tmp], capture_output=True, text=True)
        last = r.stdout.rstrip("\n").split("\n")[-1]
        check(r.returncode == 0 and re.fullmatch(r"A/B time-to-target: n/a, A/C: [0-9.]+, A residue: "
                                                 r"-?[0-9]+ MiB, A lock peak: -?[0-9]+ MiB", last),
              f"simulated: the report of a real-shaped raw.json ({r.stderr.strip()[-300:]}{last!r})")
finally:
    child.stdin.close()
    child.wait()

# ---------------------------------------------------------------- 2. the report
TIMES = {  # ms per repeat: A, B, C per settled scenario
    "inflate-settled": ([400, 420, 390, 410, 405, 395, 415], [900] * 7, [9000] * 7),
    "deflate-settled": ([40, 45, 38, 50, 41, 44, 43], [600] * 7, [700] * 7),
    "moving-settled": ([300, 310, 290, 305, 295, 300, 320], [1500] * 7, [2000] * 7),
}


def result(v, sc, rep):
    r = {"repeat": rep, "calls_per_gib": 20, "cpu_ms_per_gib": 500, "host_cpu_ms_per_gib": 800,
         "residue_mib": {"A": 2.0, "B": 3.0, "C": 1.0}[v] + (10 if sc == "cache" else 0),
         "rss_peak_mib": 60.0 if v == "A" else 1000.0, "rss_fall_pct": 90.0,
         "backed_locked_mib": {"A": 2.0, "B": 3.0}.get(v) if sc != "cache" or v == "C"
         else {"A": 12.0, "B": 13.0}[v],
         "lock_peak_mib": {"A": 64.0, "B": 1024.0}.get(v),
         "start": {"backed_mib": 2000.0, "unbacked_guest_mib": 40.0, "backed_balloon_mib": 0.0},
         "end": {"backed_mib": 1030.0, "balloon_mib": 1024.0, "offline_mib": 1024.0,
                 "unbacked_guest_mib": 20.0, "backed_balloon_mib": 2.0}}
    if sc in TIMES:
        r["time_ms"] = TIMES[sc]["ABC".index(v)][rep]
    else:
        r["time_ms"] = 1000.0
    if sc == "inflate-settled":
        r.update(floor_ms=200.0, time_over_floor=r["time_ms"] / 200.0)
    if sc.startswith("moving"):
        r.update(steps=30, steps_reached=30, last_target_reached=True, mean_gap_mib=50.0)
    if v == "B" and sc == "cache" and rep == 3:
        r["time_ms"] = None  # B missed once
    return r


scenarios = ["inflate-settled", "deflate-settled", "reinflate", "cache", "moving-settled"]
variants = ["A", "B", "C"]
raw = {"meta": {"date": "synthetic", "version": "0", "qemu": "none", "host_cpus": 2,
                "suite": "bookworm", "repeats": 7, "scenarios": scenarios, "variants": variants,
                "poll_ms": {v: 3.0 for v in variants}, "seconds": 60, "commit": "selftest",
                "command": "bench/selftest.py",
                "repeat_load": [{"repeat": i, "before": [1, 1, 1], "after": [2, 1, 1]} for i in range(7)]},
       "results": {v: {sc: [result(v, sc, i) for i in range(7)] for sc in scenarios} for v in variants},
       "traces": {v: {"inflate-settled": [[0, 0], [TIMES["inflate-settled"]["ABC".index(v)][0] / 1000, 1024]]}
                  for v in variants}}
keep = sys.argv[1] if len(sys.argv) > 1 else None  # a folder to keep the report in
with tempfile.TemporaryDirectory() as tmp:
    tmp = keep or tmp
    path = Path(tmp) / "in.json"
    path.write_text(json.dumps(raw))
    out = Path(tmp) / "out"
    r = subprocess.run([sys.executable, str(HERE / "bench.py"), "--report", str(path), "--out", str(out)],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--report runs ({r.stderr.strip()[-300:]})")
    lines = r.stdout.rstrip("\n").split("\n")
    # settled ratios A/B: 405/900, 43/600, 300/1500 -> median 0.45 (inflate)... the
    # median of 0.45, 0.0717, 0.2 is 0.2; A/C: 0.045, 0.061, 0.15 -> 0.061
    want = "A/B time-to-target: 0.20, A/C: 0.06, A residue: 12 MiB, A lock peak: 64 MiB"
    check(lines[-1] == want, f"the headline is the last line: {lines[-1]!r}")
    check(re.match(r"^A/B time-to-target: [0-9.]+, A/C: [0-9.]+, A residue: -?[0-9]+ MiB, "
                   r"A lock peak: -?[0-9]+ MiB$", lines[-1]), "the headline has its format")
    check(lines[-2].startswith("Repeats that did not reach the target")
          and "A 0 of 7" in lines[-2] and "B 1 of 7 (1 of 35" in lines[-2],
          f"the line above counts targets not reached: {lines[-2]!r}")
    m = re.search(r"A/B 0\.20 \[([0-9.]+)–([0-9.]+)\]", lines[-3])
    check(m and float(m.group(1)) <= 0.20 <= float(m.group(2)), f"a bootstrap interval: {lines[-3]!r}")
    r2 = subprocess.run([sys.executable, str(HERE / "bench.py"), "--report", str(path), "--out", str(out)],
                        capture_output=True, text=True)
    check(r2.stdout == r.stdout, "the same raw.json gives the same tables (fixed seed)")
    md = (out / "results.md").read_text()
    check("| inflate-settled | time to target over the floor | 2.02" in md, "the floor ratio row")
    check("| cache | balloon frames backed, after | 2.0 | 2.0 | 2.0 |" in md, "the accounting table")
    check((out / "raw.json").exists() and (out / "commit.txt").read_text().strip() == "selftest"
          and "bench/selftest.py" in (out / "command.txt").read_text(),
          "raw.json, commit.txt and command.txt beside results.md")
    check((out / "balloon.png").exists(), "the plot")

check.finish()
