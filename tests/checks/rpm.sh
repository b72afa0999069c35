#!/bin/bash
# Build the .rpm and the source RPM and run rpmlint on them: any error
# fails. The signature is checked against the key the build published,
# imported into a private RPM database.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages rpmlint
rm -rf build/rpm
make rpm

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
echo "%_dbpath $home/rpmdb" >"$home/.rpmmacros"
export HOME=$home
rpm --initdb
key=build/rpm/RPMS/noarch/RPM-GPG-KEY-vmw-balloon-local
[[ -f $key ]] && rpmkeys --import "$key"

echo "--- rpmlint"
set +e
rpmlint -c rpm/rpmlint.toml -r rpm/vmw-balloon-dkms.rpmlintrc \
	build/rpm/RPMS/noarch/*.rpm build/rpm/SRPMS/*.rpm 2>&1 | tee "$home/out"
set -e
grep -q -E ' 0 errors, [0-9]+ warnings' "$home/out" ||
	{ echo "--- rpmlint reported errors"; exit 1; }
echo "--- rpmlint: no error"
