#!/bin/bash
# The .deb and the .rpm ship exactly dkms.conf and the module's sources in
# /usr/src/vmw_balloon-<version>/ (src/ with its probes/ subdirectory): no
# build products, no VCS files. Apart from that, only documentation under
# /usr/share/doc (and the licence under /usr/share/licenses in the .rpm),
# and the program that loads vmw_balloon (debian/load-vmw-balloon) with the
# modprobe.d install rule that runs it; in the .deb also the kernel hook
# (debian/kernel-hook) and the two /etc/kernel hooks that run it, in the
# .rpm the hook and the kernel-install plugin that runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$/\1/p' dkms.conf)
deb=build/deb/vmw-balloon-dkms_${version}_all.deb
rpm=build/rpm/RPMS/noarch/vmw-balloon-dkms-$version-1.noarch.rpm
tests/lib/need-packages rpm2cpio	# rpm2archive
make deb rpm >/dev/null	# rebuilt only if a source is newer

srcdir=usr/src/vmw_balloon-$version
want=$( (echo dkms.conf; echo Kbuild; echo conftest.sh
	ls src/*.c src/*.h src/probes/*.c | grep -v -e '\.mod\.c$' -e '/vmb_features\.h$' |
		sed 's|^src/||') | sort)

fail=0
inspect() {	# name, list of files (no leading ./ or /), files allowed besides
	local name=$1 files=$2 allowed=${3:-} got extra
	got=$(sed -n "s|^$srcdir/||p" <<<"$files" | grep -v '^$' | sort)
	if [[ $got == "$want" ]]; then
		echo "ok: $name ships in /$srcdir: $(tr '\n' ' ' <<<"$got")"
	else
		echo "WRONG: $name ships in /$srcdir:"
		diff <(echo "$want") <(echo "$got") || true
		fail=1
	fi
	extra=$(grep -v -e "^$srcdir/" -e '^usr/share/doc/' -e '^usr/share/licenses/' <<<"$files" |
		grep -vxF -e "${allowed:-/}" || true)
	if [[ -n $extra ]]; then
		echo "WRONG: $name ships files elsewhere: $extra"
		fail=1
	fi
	if grep -E '\.(o|ko|cmd|mod|mod\.c|order|symvers)$|(^|/)\.git|(^|/)\.' <<<"$files"; then
		echo "WRONG: $name ships build products or VCS/hidden files"
		fail=1
	fi
}

inspect "$deb" "$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||')" \
	"usr/lib/vmw-balloon-dkms/load-vmw-balloon
lib/modprobe.d/vmw-balloon-dkms.conf
usr/lib/vmw-balloon-dkms/kernel-hook
etc/kernel/postinst.d/50-vmw-balloon-dkms
etc/kernel/header_postinst.d/50-vmw-balloon-dkms"
inspect "$rpm" "$(rpm -qpl "$rpm" 2>/dev/null | sed 's|^/||' |
	while read -r f; do	# its directories
		[[ $f == "$srcdir" || $f == "$srcdir/probes" || $f == usr/lib/vmw-balloon-dkms ||
			$f == usr/share/doc/vmw-balloon-dkms-$version ]] || echo "$f"
	done)" \
	"usr/lib/vmw-balloon-dkms/load-vmw-balloon
usr/lib/modprobe.d/vmw-balloon-dkms.conf
usr/lib/vmw-balloon-dkms/kernel-hook
usr/lib/kernel/install.d/39-vmw-balloon-dkms.install"

# the shipped dkms.conf is the repository's, version filled in
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
if cmp dkms.conf "$tmp/$srcdir/dkms.conf"; then
	echo "ok: the .deb's dkms.conf is the repository's"
else
	echo "WRONG: the .deb's dkms.conf differs"; fail=1
fi
dpkg-deb -e "$deb" "$tmp/DEBIAN"
if grep -q "DKMS_VERSION=$version" "$tmp/DEBIAN/postinst" && ! grep -q '#MODULE_VERSION#' "$tmp/DEBIAN/postinst"; then
	echo "ok: postinst builds vmw_balloon $version"
else
	echo "WRONG: postinst does not name version $version"; fail=1
fi
hook=$tmp/usr/lib/vmw-balloon-dkms/kernel-hook
if grep -qx "version=$version" "$hook" && [[ -x $hook ]] &&
	[[ -x $tmp/etc/kernel/postinst.d/50-vmw-balloon-dkms && -x $tmp/etc/kernel/header_postinst.d/50-vmw-balloon-dkms ]]; then
	echo "ok: the kernel hooks are executable and build $version"
else
	echo "WRONG: the kernel hooks are not executable, or do not build $version"; fail=1
fi
mkdir "$tmp/rpm"
(cd "$tmp/rpm" && rpm2archive - <"$OLDPWD/$rpm" | tar -xzf -)
hook=$tmp/rpm/usr/lib/vmw-balloon-dkms/kernel-hook plugin=$tmp/rpm/usr/lib/kernel/install.d/39-vmw-balloon-dkms.install
if grep -qx "version=$version" "$hook" && [[ -x $hook && -x $plugin ]] &&
	grep -q '^exec /usr/lib/vmw-balloon-dkms/kernel-hook "${2:-}"$' "$plugin"; then
	echo "ok: the .rpm's kernel-install plugin runs the kernel hook, which builds $version"
else
	echo "WRONG: the .rpm's kernel hook or its plugin is not executable, or does not build $version"; fail=1
fi
exit $fail
