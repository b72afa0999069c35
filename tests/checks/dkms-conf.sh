#!/bin/bash
# dkms.conf's bounds, read as dkms reads them (tests/lib/dkms-conf-accepts):
# the kernels tests/matrix/run builds are in, the series after its newest
# and before its oldest are out, a kernel without CONFIG_HYPERVISOR_GUEST
# is out, and a kernel the package's kernel hook marked as not built is
# left out of autoinstall. Prints TAP.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0
verdict() {	# want (yes/no), description, kernel, [build dir], [dkms.conf]
	local want=$1 what=$2 kver=$3 dir=${4:-/nonexistent} conf=${5:-dkms.conf} got
	got=$(tests/lib/dkms-conf-accepts --conf "$conf" "$kver" "$dir")
	n=$((n + 1))
	if [[ ${got%%:*} == "$want" ]]; then
		echo "ok $n - $what ($kver: $got)"
	else
		echo "not ok $n - $what ($kver: $got)"
		failed=$((failed + 1))
	fi
}
for kver in 5.10.0-46-amd64 6.1.0-57-cloud-amd64 6.12.118+deb13-cloud-amd64 \
	7.2.13+deb14-amd64 7.3.4+deb13-cloud-amd64; do
	verdict yes "a kernel of a series the matrix builds" "$kver"
done
for kver in 7.4.0-1-amd64 7.10.2+deb14-amd64 8.0.1-amd64 5.4.0-1-amd64 4.19.0-27-amd64; do
	verdict no "a kernel of a series the matrix does not build" "$kver"
done
mkdir -p "$tmp/guest" "$tmp/other"
printf 'CONFIG_X86_64=y\nCONFIG_HYPERVISOR_GUEST=y\n' >"$tmp/guest/.config"
printf 'CONFIG_X86_64=y\n# CONFIG_HYPERVISOR_GUEST is not set\n' >"$tmp/other/.config"
verdict yes "a kernel built with CONFIG_HYPERVISOR_GUEST" 6.12.118+deb13-amd64 "$tmp/guest"
verdict no "a kernel built without CONFIG_HYPERVISOR_GUEST" 6.12.118+deb13-amd64 "$tmp/other"
# the kernel hook's mark, in a copy of dkms.conf that looks for it here
grep -q '/var/lib/vmw-balloon-dkms/not-built/' dkms.conf || echo "not ok - dkms.conf looks for no mark"
sed "s|/var/lib/vmw-balloon-dkms/not-built/|$tmp/not-built/|" dkms.conf >"$tmp/dkms.conf"
mkdir -p "$tmp/not-built"
echo "its build failed" >"$tmp/not-built/6.12.118+deb13-cloud-amd64"
verdict no "a kernel the kernel hook marked as not built" 6.12.118+deb13-cloud-amd64 /nonexistent "$tmp/dkms.conf"
verdict yes "... and only that kernel" 6.12.119+deb13-cloud-amd64 /nonexistent "$tmp/dkms.conf"
echo "1..$n"
echo "$((n - failed)) passed, $failed failed"
((failed == 0))
