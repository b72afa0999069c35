/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels this module builds for sits here,
 * behind a vmb_compat_* helper, so linux_glue.c reads the same on all of
 * them. Configuration options are tested with IS_ENABLED(); everything the
 * kernel's API offers or not is decided by a feature probe compiled against
 * the target kernel, never by its version number, since stable and vendor
 * kernels backport.
 *
 * Adding a probe: write probes/<name>.c, a file that compiles (without a
 * warning, since W=1 may be on) only if the feature is there; put the test
 * in a static __maybe_unused function and include what it needs. The build
 * then defines VMB_HAVE_<NAME> to 1 or 0 in vmb_features.h and logs
 * "vmw_balloon: probe <name>: yes/no"; test it with #if, never #ifdef.
 * Where an API has two forms, write a probe for each, both with the line
 * "vmb-probe-one-of: <api>": the build stops unless exactly one compiles.
 * probes/control.c must always compile. conftest.sh has the details.
 */
#ifndef VMB_COMPAT_H
#define VMB_COMPAT_H

#include <linux/mm.h>
#include <linux/page-flags.h>
#include <linux/vmstat.h>
#include <asm/hypervisor.h>

#include "vmb_features.h"

/* The VMCI doorbell needs the vmw_vmci driver. */
#if IS_ENABLED(CONFIG_VMWARE_VMCI)
#define VMB_HAVE_DOORBELL 1
#else
#define VMB_HAVE_DOORBELL 0
#endif

/**
 * vmb_compat_on_vmware() - did the kernel detect a VMware hypervisor?
 *
 * Return: true only on VMware, checked before any port I/O.
 */
static inline bool vmb_compat_on_vmware(void)
{
#ifdef CONFIG_HYPERVISOR_GUEST
	return x86_hyper_type == X86_HYPER_VMWARE;
#else
	return false;
#endif
}

/**
 * vmb_compat_totalram_frames() - RAM managed by the kernel, in 4 KiB frames
 *
 * Return: the number of frames.
 */
static inline u64 vmb_compat_totalram_frames(void)
{
	return totalram_pages();
}

/**
 * vmb_compat_mark_offline() - mark ballooned frames, or unmark them
 * @page: the first frame
 * @nr: how many frames
 * @offline: mark if true, unmark if false
 *
 * PG_offline tells kdump and hibernation to skip the frames.
 */
static inline void vmb_compat_mark_offline(struct page *page, unsigned long nr,
					   bool offline)
{
	unsigned long i;

	for (i = 0; i < nr; i++) {
		if (offline)
			__SetPageOffline(page + i);
		else
			__ClearPageOffline(page + i);
	}
}

/**
 * vmb_compat_count_balloon_event() - count frames in /proc/vmstat
 * @inflate: balloon_inflate if true, balloon_deflate if false
 * @nr: how many 4 KiB frames
 */
static inline void vmb_compat_count_balloon_event(bool inflate,
						  unsigned long nr)
{
#if VMB_HAVE_BALLOON_VM_EVENTS
	count_vm_events(inflate ? BALLOON_INFLATE : BALLOON_DEFLATE, nr);
#endif
}

#endif /* VMB_COMPAT_H */
