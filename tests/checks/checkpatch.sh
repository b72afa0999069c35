#!/bin/bash
# checkpatch.pl --strict on every source file of the module (and of the
# benchmark's floor module, bench/floor/).
#
# Run outside a kernel tree, checkpatch cannot know the kernel's own names,
# so it reports CHECK:CAMELCASE for kernel APIs such as __SetPageOffline.
# Such a report is accepted only for a name that src/ does not define: then
# the kernel does (else the module would not build). Anything else fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
checkpatch=$("$root/tests/lib/checkpatch-fetch")

files=("$root"/src/Kbuild)
for f in "$root"/src/*.[ch] "$root"/src/probes/*.c; do
	# not build products: the kernel's and the probes' (conftest.sh)
	[[ $f == *.mod.c || $f == */vmb_features.h ]] || files+=("$f")
done
files+=("$root"/bench/floor/Kbuild "$root"/bench/floor/vmb_bench_floor.c)

# checkpatch writes a cache file into its working directory
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# --root lets it learn names from the target's headers (no tree checks)
kdir=${KDIR:-$("$root/tests/lib/find-kdir")}
common=$(sed -n 's|^include \(/usr/src/[^ ]*\)/Makefile$|\1|p' "$kdir/Makefile" 2>/dev/null || true)
[[ -d $common/include ]] || common=$kdir
out=$("$checkpatch" --strict --no-tree --root="$common" --show-types --terse \
	-f "${files[@]}" || true)
echo "$out"

bad=0
while IFS= read -r line; do
	[[ -z $line ]] && continue
	if [[ $line =~ CHECK:CAMELCASE:\ Avoid\ CamelCase:\ \<([A-Za-z0-9_]+)\> ]]; then
		name=${BASH_REMATCH[1]}
		# a definition or prototype starts at column 0; calls are indented
		if grep -q -E "(#define|struct|enum|union)[[:space:]]+$name\b|^[a-z].*[[:space:]*]$name\(" \
			"$root"/src/*.[ch]; then
			echo "not accepted, src/ defines it: $line"
			bad=1
		else
			echo "accepted, a kernel name: $name"
		fi
		continue
	fi
	if [[ $line == *": ERROR:"* || $line == *": WARNING:"* || $line == *": CHECK:"* ]]; then
		echo "not accepted: $line"
		bad=1
	fi
done <<<"$out"
echo "checked ${#files[@]} files"
exit $bad
