#!/bin/bash
# Build the module with W=1 against the target headers; any compiler
# warning fails the step.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages make gcc kmod linux-headers-amd64
kdir=${KDIR:-$(tests/lib/find-kdir)}
make -C "$kdir" M="$PWD/src" clean >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make -C "$kdir" M="$PWD/src" W=1 modules 2>&1 | tee "$log"
test -f src/vmw_balloon.ko
if grep -E -i 'warning:|error:' "$log"; then
	echo "the W=1 build printed warnings" >&2
	exit 1
fi
modinfo src/vmw_balloon.ko
