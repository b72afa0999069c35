#!/bin/bash
# The benchmark's short form (one repeat, inflate only, A, B and C), so that
# it cannot rot. Not pass/fail on the numbers: it passes when the run
# produced its table, its plot and its summary line.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=build/bench-short
rm -rf "$out"
bench/run --short | tee build/bench-short.out || exit 1
last=$(tail -n 1 build/bench-short.out)
ok=1
grep -Eq '^A/B time-to-target: [0-9.]+, A/C: [0-9.]+, A reclaimed: -?[0-9.]+%, A RSS peak: -?[0-9]+ MiB$' <<<"$last" ||
	{ echo "the last line is not the summary: $last"; ok=0; }
grep -q "^| inflate | time to target (ms) | " "$out/results.md" ||
	{ echo "$out/results.md has no inflate row"; ok=0; }
test -s "$out/balloon.png" || { echo "no plot $out/balloon.png"; ok=0; }
if ((ok)); then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi
