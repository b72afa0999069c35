/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels this module builds for sits here,
 * behind a vmb_compat_* helper, so linux_glue.c reads the same on all of
 * them. Only configuration differences are handled so far; API differences
 * get feature probes against the target headers when older kernels are
 * supported.
 */
#ifndef VMB_COMPAT_H
#define VMB_COMPAT_H

#include <linux/mm.h>
#include <linux/page-flags.h>
#include <linux/vmstat.h>
#include <asm/hypervisor.h>

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
#if IS_ENABLED(CONFIG_MEMORY_BALLOON)
	count_vm_events(inflate ? BALLOON_INFLATE : BALLOON_DEFLATE, nr);
#endif
}

#endif /* VMB_COMPAT_H */
