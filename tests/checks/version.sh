#!/bin/bash
# The version is PACKAGE_VERSION in dkms.conf. The module (MODULE_VERSION,
# from Kbuild), debian/changelog and the RPM spec must all say the same.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages dpkg-dev rpm make gcc kmod linux-headers-amd64

fail=0
check() {	# what, got, want
	if [[ $2 == "$3" ]]; then
		echo "ok: $1 is $2"
	else
		echo "MISMATCH: $1 is '$2', dkms.conf says '$3'"
		fail=1
	fi
}

version=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$/\1/p' dkms.conf)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
	{ echo "dkms.conf: PACKAGE_VERSION '$version' is not x.y.z"; exit 1; }
echo "dkms.conf: $version"

check "debian/changelog" "$(dpkg-parsechangelog -l debian/changelog -S Version)" "$version"
check "the RPM spec's Version" \
	"$(rpmspec -q --srpm --qf '%{VERSION}\n' rpm/vmw-balloon-dkms.spec)" "$version"
check "the RPM spec's newest %changelog entry" \
	"$(sed -n '/^%changelog/,$p' rpm/vmw-balloon-dkms.spec | sed -n 's/^\* .* - \([^ -]*\)-[^ -]*$/\1/p' | head -n 1)" \
	"$version"

kdir=${KDIR:-$(tests/lib/find-kdir)}
make -C "$kdir" M="$PWD/src" modules >/dev/null
check "the module's MODULE_VERSION" "$(/sbin/modinfo -F version src/vmw_balloon.ko)" "$version"
exit $fail
