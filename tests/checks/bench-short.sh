#!/bin/bash
# The benchmark's short form (bench/run --short: one repeat of
# inflate-settled and reinflate, A, B and C), and what in it does not
# depend on the machine's speed, for A (this package):
#   - it reaches every target;
#   - in `reinflate`, no LOCK found more than 64 MiB of its frames backed by
#     the host (one batch of 32 pages of 2 MiB: the guest zeroes a page it
#     allocates, so the host backs it again until the LOCK);
#   - after the target, the host backs at most 16 MiB of the balloon in
#     every scenario.
# Both figures are the device's own, exact (x-lock-resident-peak and
# x-backed-locked-frames, mincore of the locked frames), not QEMU's RSS
# sampled from outside: the guest's own use of memory does not enter them.
# Before the guests: bench/selftest.py (the report's arithmetic, the host's
# smaps and pagemap readings). Prints TAP.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tests/lib/need-packages python3 python3-matplotlib
out=build/bench-short
rm -rf "$out"
mkdir -p build
# its TAP as comments: the verdicts below are this script's TAP
/usr/bin/python3 bench/selftest.py 2>&1 | sed 's/^/# selftest: /'
selftest=${PIPESTATUS[0]}
bench/run --short | tee build/bench-short.out
ran=${PIPESTATUS[0]}

/usr/bin/python3 - "$out" "$ran" "$selftest" <<'PY'
import json, re, sys
from pathlib import Path
sys.path.insert(0, "bench")
from tap import Checks

out, ran, selftest = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
PEAK_MIB, BACKED_MIB = 64, 16
check = Checks()


check(selftest == 0, "bench/selftest.py passes")
check(ran == 0, f"bench/run --short exits 0 (exit {ran})")
last = (Path("build/bench-short.out").read_text().rstrip("\n").split("\n") or [""])[-1]
check(re.fullmatch(r"A/B time-to-target: [0-9.]+, A/C: [0-9.]+, A residue: -?[0-9]+ MiB, "
                   r"A lock peak: -?[0-9]+ MiB", last), f"the last line is the headline: {last!r}")
md = out / "results.md"
check(md.exists() and "| inflate-settled | time to target (ms) | " in md.read_text(),
      f"{md} has the inflate-settled row")
for f in ("balloon.png", "raw.json", "commit.txt", "command.txt"):
    check((out / f).exists() and (out / f).stat().st_size > 0, f"{out / f} written")
try:
    results = json.loads((out / "raw.json").read_text())["results"].get("A", {})
except (OSError, ValueError, KeyError):
    results = {}
runs = [(sc, r) for sc, rs in results.items() for r in rs]
for sc in ("inflate-settled", "reinflate"):
    check(results.get(sc), f"A ran {sc}")
missed = [sc for sc, r in runs if r.get("time_ms") is None]
check(runs and not missed, f"A reached every target (missed: {', '.join(missed) or 'none'})")
peaks = [r.get("lock_peak_mib") for r in results.get("reinflate", [])]
check(peaks and None not in peaks and max(peaks) <= PEAK_MIB,
      f"A in reinflate: no LOCK found more than {PEAK_MIB} MiB of its frames backed "
      f"(the device's x-lock-resident-peak: {peaks} MiB)")
backed = [(sc, r.get("backed_locked_mib")) for sc, r in runs]
check(runs and all(x is not None and x <= BACKED_MIB for _, x in backed),
      f"A: the host backs at most {BACKED_MIB} MiB of the balloon after every target "
      f"(x-backed-locked-frames: "
      f"{', '.join(f'{sc} {x:.1f}' if x is not None else f'{sc} n/a' for sc, x in backed)})")
# not verdicts: QEMU's RSS, sampled, beside the exact figures
for sc, r in runs:
    print(f"# {sc}: RAM RSS peak {r.get('rss_peak_mib')} MiB, residue {r.get('residue_mib')} MiB "
          f"(sampled from QEMU's smaps; the guest's own use of memory included)")
check.finish()
PY
