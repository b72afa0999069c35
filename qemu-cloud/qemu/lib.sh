# Sourced by source.sh, build.sh and tests/checks/qemu-series-build.sh
# (bash): how QEMU is configured (the array configure_args), which cached
# version to take (pick_cached), and the wrapper that runs a binary with
# Debian's firmware folders (write_firmware_wrapper).
# The binary looks for firmware in Debian's folders (qemu-system-data,
# seabios, ipxe-qemu).
firmware_path=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
# --enable-fdt=system: x86_64-softmmu needs libfdt (microvm); Debian's
# tarball has no bundled copy.  --disable-install-blobs: the "+ds" tarball
# has no firmware blobs, which configure would otherwise ask for; the
# binary uses Debian's (firmwarepath).  --python: Debian's python3, whose
# meson configure finds, whatever python3 comes first in PATH.
# --enable-kvm: compiled in (a few files more); TCG is what the tests run.
# --disable-debug-info: no -g, which cuts about a tenth of the compile
# time of a cold build; the sanitizer build puts it back for its reports.
# The prefix is never installed to.  It must not be /usr: QEMU rewrites
# configured paths under its prefix relative to wherever the binary runs
# from, and the firmware path must stay the absolute Debian folders.
configure_args=(
	--python=/usr/bin/python3
	--prefix=/opt/vmw-balloon-qemu
	--firmwarepath="$firmware_path"
	--target-list=x86_64-softmmu
	--without-default-features
	--disable-install-blobs
	--disable-debug-info
	--enable-tcg
	--enable-kvm
	--enable-slirp
	--enable-fdt=system
)

# pick_cached WANT DIR...: of the DIRs (each holds a debian-version file),
# the one whose version is WANT, or with WANT empty the newest; prints it,
# fails if there is none.
pick_cached() {
	local want=$1 best= best_ver= dir ver
	shift
	for dir in "$@"; do
		ver=$(<"$dir/debian-version")
		if [[ -n $want ]]; then
			[[ $ver == "$want" ]] && { printf '%s\n' "$dir"; return 0; }
		elif [[ -z $best ]] || dpkg --compare-versions "$ver" gt "$best_ver"; then
			best=$dir best_ver=$ver
		fi
	done
	[[ -n $best ]] && printf '%s\n' "$best"
}

# write_firmware_wrapper FILE BINARY: a script FILE that runs BINARY with
# Debian's firmware folders added (-L), for a binary run from outside its
# prefix, which does not search them by itself.  Name FILE as the target
# (qemu-system-x86_64): libqtest takes the target from the name.
write_firmware_wrapper() {
	local dirs d
	IFS=: read -ra dirs <<<"$firmware_path"
	{
		echo '#!/bin/sh'
		printf 'exec %q' "$2"
		for d in "${dirs[@]}"; do printf ' -L %q' "$d"; done
		echo ' "$@"'
	} >"$1"
	chmod +x "$1"
}
