#!/bin/bash
# The QEMU patch series (`make qemu-series`, qemu-cloud/qemu/series.sh):
# written afresh, every patch applies in order to the QEMU source it is
# written against, and every one passes that tree's own
# scripts/checkpatch.pl with no error and no warning.  Needs the cached
# Debian source (qemu-cloud/qemu/source.sh fetches it once per version),
# no QEMU build; building each patch in turn is the long step
# qemu-series-build (tests/checks/qemu-series-build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/tests/lib/need-packages" git perl patch

work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
src=$("$root/qemu-cloud/qemu/source.sh")
base=$(<"$src/base")
echo "qemu source: $(<"$src/debian-version") ($src)"
"$root/qemu-cloud/qemu/series.sh" "$work/series" >/dev/null

passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
not_ok() { echo "FAIL: $*"; failed=$((failed + 1)); }

patches=()
for p in "$work"/series/[0-9]*.patch; do
	[[ ${p##*/} == 0000-cover-letter.patch ]] || patches+=("$p")
done
if [[ -r $work/series/0000-cover-letter.patch ]] && ((${#patches[@]} > 0)); then
	ok "a cover letter and ${#patches[@]} patches"
else
	not_ok "the series has no cover letter or no patch"
fi

# Apply them in order to the source's tree, in an index of a scratch
# repository that borrows the cache's objects (no checkout needed).
git init -q --bare "$work/repo"
echo "$src/git/objects" >"$work/repo/objects/info/alternates"
export GIT_DIR=$work/repo GIT_INDEX_FILE=$work/index
git read-tree "$base"
git cat-file blob "$base:scripts/checkpatch.pl" >"$work/checkpatch.pl"
applies=1
for p in "${patches[@]}"; do
	name=${p##*/}
	if git apply --cached --check -- "$p" 2>"$work/apply.log" &&
		git apply --cached -- "$p" 2>>"$work/apply.log"; then
		ok "$name applies"
	else
		cat "$work/apply.log"
		not_ok "$name does not apply after the patches before it"
		applies=0
		break
	fi
done
unset GIT_DIR GIT_INDEX_FILE

# checkpatch.pl of that tree, on each patch.  It looks for the tree it
# checks in its working directory; --no-tree, since there is none here.
for p in "${patches[@]}"; do
	name=${p##*/}
	out=$(cd "$work" && perl "$work/checkpatch.pl" --no-tree "$p" 2>&1) && rc=0 || rc=$?
	echo "$out" | sed "s|^|  $name: |"
	if ((rc == 0)) && grep -q '^total: 0 errors, 0 warnings' <<<"$out"; then
		ok "$name passes checkpatch.pl"
	else
		not_ok "$name: checkpatch.pl reports problems (exit status $rc)"
	fi
done
((applies)) || not_ok "not every patch applied"

echo "$passed passed, $failed failed"
((failed == 0))
