# SPDX-License-Identifier: GPL-2.0
# Feature probes: compile every probes/<name>.c against the target kernel,
# with the kernel's own flags, and write a header that says which compiled:
#	#define VMB_HAVE_<NAME> 1 (or 0)
# Kbuild runs this before the module's objects (see vmb_features.h there);
# compat.h includes the header.
#
#	sh conftest.sh MAKE OBJTREE PROBES_DIR OUTPUT_HEADER [VAR=VALUE...]
#
# The VAR=VALUE settings (the compiler, ...) are passed on to the one make
# that compiles all probes; W= reaches it through the environment
# (KBUILD_EXTRA_WARN). Its whole output goes to vmb_probes.log beside the
# header.
#
# probes/control.c must compile: if it does not, nothing the probes say can
# be trusted and the build stops. Probes that are two forms of one API carry
# a line "vmb-probe-one-of: <api>"; exactly one of each such group must
# compile, or the build stops.
set -eu

make=$1 objtree=$2 probes=$3 out=$4
shift 4
# absolute: the kernel's make runs elsewhere (Kbuild may give a relative path)
outdir=$(cd "$(dirname "$out")" && pwd)
log=$outdir/vmb_probes.log

fail() {
	echo "vmw_balloon: $*" >&2
	echo "vmw_balloon: the probes' log: $log" >&2
	exit 1
}

# shellcheck disable=SC2012 # probe names are C identifiers
names=$(cd "$probes" && LC_ALL=C ls -- *.c | sed 's/\.c$//')
echo "$names" | grep -qx control || fail "no probes/control.c in $probes"

# a fixed name, so that the log reads the same on every run
tmp=$outdir/.vmb_probes
rm -rf "$tmp"
mkdir "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
objs=
for name in $names; do
	cp "$probes/$name.c" "$tmp/"
	objs="$objs $name.o"
done
# part of a module, so compiled exactly like the module's own objects
echo "obj-m :=$objs" >"$tmp/Kbuild"

jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
# A fresh kernel make, not a part of the one running this script: it must
# parse M= again (sub_make_done), and must not inherit that make's goals
# and settings (MAKEFLAGS); what matters of those comes in as arguments.
# C=0: sparse has nothing to say about probes.
# shellcheck disable=SC2086 # objs: one word per probe
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES -u sub_make_done \
	-u KBUILD_EXTMOD -u KBUILD_SRC \
	"$make" -C "$objtree" M="$tmp" C=0 -k -j"$jobs" "$@" $objs \
	>"$log" 2>&1 || true

result() {	# name: yes if it compiled
	if [ -f "$tmp/$1.o" ]; then echo yes; else echo no; fi
}

header=$tmp/vmb_features.h
{
	echo "/* SPDX-License-Identifier: GPL-2.0 */"
	echo "/* Written by conftest.sh from the probes: do not edit. */"
	echo "#ifndef VMB_FEATURES_H"
	echo "#define VMB_FEATURES_H"
	echo
} >"$header"
for name in $names; do
	answer=$(result "$name")
	echo "vmw_balloon: probe $name: $answer" | tee -a "$log"
	[ "$name" = control ] && continue
	macro=VMB_HAVE_$(echo "$name" | tr '[:lower:]' '[:upper:]')
	if [ "$answer" = yes ]; then value=1; else value=0; fi
	echo "#define $macro $value" >>"$header"
done
{
	echo
	echo "#endif /* VMB_FEATURES_H */"
} >>"$header"

[ "$(result control)" = yes ] ||
	fail "probe control did not compile, so no probe result can be trusted"
groups=$(sed -n 's/.*vmb-probe-one-of: *\([A-Za-z0-9_]*\).*/\1/p' \
	"$tmp"/*.c | LC_ALL=C sort -u)
for group in $groups; do
	forms=$(cd "$tmp" &&
		grep -lE "vmb-probe-one-of: *$group([^A-Za-z0-9_]|\$)" -- *.c |
		sed 's/\.c$//')
	found=
	for form in $forms; do
		[ "$(result "$form")" = no ] || found="$found $form"
	done
	# shellcheck disable=SC2086 # one word per form
	set -- $found
	# shellcheck disable=SC2086 # the forms, one word each
	[ $# -eq 1 ] || fail "probe group $group: exactly one of" $forms \
		"must compile, but${found:- none} did"
done
mv "$header" "$out"
