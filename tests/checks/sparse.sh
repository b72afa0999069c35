#!/bin/bash
# Run sparse over every source file of the module (C=2 checks them all,
# built or not); any report fails the step.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages make gcc sparse linux-headers-amd64
kdir=${KDIR:-$(tests/lib/find-kdir)}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make -C "$kdir" M="$PWD/src" C=2 modules 2>&1 | tee "$log"
checked=$(grep -c '  CHECK ' "$log" || true)
echo "sparse checked $checked files"
((checked >= 4))
# PROBE and its result lines: the feature probes (src/conftest.sh)
if grep -v -E '^make|^  (CC|LD|CHECK|MODPOST|BTF|PROBE)|^Skipping BTF|^vmw_balloon: probe [a-z0-9_]+: (yes|no)$' "$log"; then
	echo "sparse reported the lines above" >&2
	exit 1
fi
