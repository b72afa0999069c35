# Sourced by build.sh and tests/checks/qemu-series-build.sh: how QEMU is
# configured, in the array configure_args (bash).
# The binary looks for firmware in Debian's folders (qemu-system-data,
# seabios, ipxe-qemu).
firmware_path=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
# --enable-fdt=system: x86_64-softmmu needs libfdt (microvm); Debian's
# tarball has no bundled copy.  --disable-install-blobs: the "+ds" tarball
# has no firmware blobs, which configure would otherwise ask for; the
# binary uses Debian's (firmwarepath).  --python: Debian's python3, whose
# meson configure finds, whatever python3 comes first in PATH.
# --enable-kvm: compiled in (a few files more); TCG is what the tests run.
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
	--enable-tcg
	--enable-kvm
	--enable-slirp
	--enable-fdt=system
)
