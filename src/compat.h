/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shims for the differences between the kernels this module builds for:
 * each vmb_compat_* helper hides one difference, keeps no state and knows
 * nothing of the driver, which includes this file (never the other way
 * round). Where a difference changes what the driver does, not just how
 * it calls the kernel (the list of ballooned 4 KiB pages and how one
 * migrates), the driver's code chooses on the same VMB_HAVE_* macros, in
 * one place: linux_pages.c. Configuration options are tested with
 * IS_ENABLED(); everything the kernel's API offers or not is decided by a
 * feature probe compiled against the target kernel, never by its version
 * number, since stable and vendor kernels backport.
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
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/swap.h>
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
 * vmb_compat_balloon_events() - count frames joining or leaving the balloon
 * @ballooned: joining the balloon if true, leaving it if false
 * @nr: how many frames
 *
 * In /proc/vmstat, balloon_inflate and balloon_deflate, where the kernel
 * has them (VMB_HAVE_BALLOON_VM_EVENTS).
 */
static inline void vmb_compat_balloon_events(bool ballooned, unsigned long nr)
{
#if VMB_HAVE_BALLOON_VM_EVENTS
	count_vm_events(ballooned ? BALLOON_INFLATE : BALLOON_DEFLATE, nr);
#endif
}

/**
 * vmb_compat_balloon_pages() - change the node's count of ballooned frames
 * @page: a frame of the node
 * @delta: frames joining (positive) or leaving (negative) the balloon
 *
 * The "Balloon:" line of /proc/meminfo, where the kernel has it
 * (VMB_HAVE_NR_BALLOON_PAGES, 6.15).
 */
static inline void vmb_compat_balloon_pages(struct page *page, long delta)
{
#if VMB_HAVE_NR_BALLOON_PAGES
	mod_node_page_state(page_pgdat(page), NR_BALLOON_PAGES, delta);
#endif
}

/*
 * The kernel's balloon page list, struct balloon_dev_info, and its
 * helpers: in <linux/balloon_compaction.h> until 7.x moved them to
 * <linux/balloon.h>. Virtio's balloon includes it whether or not the
 * kernel migrates balloon pages; linux_pages.c decides whether to use it.
 */
#if VMB_HAVE_LINUX_BALLOON_H
#include <linux/balloon.h>
#elif VMB_HAVE_LINUX_BALLOON_COMPACTION_H
#include <linux/balloon_compaction.h>
#endif

#if VMB_HAVE_BALLOON_PAGE_FINALIZE || VMB_HAVE_BALLOON_PAGE_DELETE
/**
 * vmb_compat_balloon_page_finalize() - make a balloon page a plain one
 * @page: a page off the balloon list: isolated, or never inserted
 *
 * balloon_page_delete() (VMB_HAVE_BALLOON_PAGE_DELETE), later
 * balloon_page_finalize() (VMB_HAVE_BALLOON_PAGE_FINALIZE: 6.17, and
 * stable kernels since). Where the kernel finishes migrations itself
 * (<linux/balloon.h>) neither is there, nor needed.
 */
static inline void vmb_compat_balloon_page_finalize(struct page *page)
{
#if VMB_HAVE_BALLOON_PAGE_FINALIZE
	balloon_page_finalize(page);
#else
	balloon_page_delete(page);
#endif
}
#endif

/*
 * The shrinker that gives the balloon back under memory pressure,
 * struct vmb_compat_shrinker. Three forms of the API, one probe each:
 * the driver embeds a struct shrinker and registers it
 * (VMB_HAVE_REGISTER_SHRINKER_PLAIN, until 5.19), the same with a name
 * (VMB_HAVE_REGISTER_SHRINKER_NAMED, 6.0 to 6.6), or the kernel allocates
 * it and hands the driver's pointer back in private_data
 * (VMB_HAVE_SHRINKER_ALLOC, 6.7).
 */
#if VMB_HAVE_SHRINKER_ALLOC
struct vmb_compat_shrinker {
	struct shrinker *shrinker;
};
#else
struct vmb_compat_shrinker {
	struct shrinker shrinker;
};
#endif

/* The count_objects and scan_objects callbacks. */
typedef unsigned long (*vmb_compat_shrinker_fn)(struct shrinker *shrinker,
					       struct shrink_control *sc);

/**
 * vmb_compat_shrinker_register() - register a shrinker
 * @sh: the driver's shrinker, zeroed
 * @name: its name (in debugfs, where the kernel shows shrinkers)
 * @count: the count_objects callback
 * @scan: the scan_objects callback
 *
 * Return: 0, or a negative error.
 */
static inline int vmb_compat_shrinker_register(struct vmb_compat_shrinker *sh,
					       const char *name,
					       vmb_compat_shrinker_fn count,
					       vmb_compat_shrinker_fn scan)
{
#if VMB_HAVE_SHRINKER_ALLOC
	sh->shrinker = shrinker_alloc(0, "%s", name);
	if (!sh->shrinker)
		return -ENOMEM;
	sh->shrinker->count_objects = count;
	sh->shrinker->scan_objects = scan;
	sh->shrinker->private_data = sh;
	shrinker_register(sh->shrinker);
	return 0;
#else
	sh->shrinker.count_objects = count;
	sh->shrinker.scan_objects = scan;
	sh->shrinker.seeks = DEFAULT_SEEKS;
#if VMB_HAVE_REGISTER_SHRINKER_NAMED
	return register_shrinker(&sh->shrinker, "%s", name);
#else
	return register_shrinker(&sh->shrinker);
#endif
#endif
}

/**
 * vmb_compat_shrinker_unregister() - undo vmb_compat_shrinker_register()
 * @sh: the driver's shrinker; when this returns, no callback runs
 */
static inline void
vmb_compat_shrinker_unregister(struct vmb_compat_shrinker *sh)
{
#if VMB_HAVE_SHRINKER_ALLOC
	shrinker_free(sh->shrinker);
	sh->shrinker = NULL;
#else
	unregister_shrinker(&sh->shrinker);
#endif
}

/**
 * vmb_compat_shrinker_of() - the driver's shrinker a callback runs for
 * @shrinker: what the kernel passes the callback
 *
 * Return: the driver's struct vmb_compat_shrinker.
 */
static inline struct vmb_compat_shrinker *
vmb_compat_shrinker_of(struct shrinker *shrinker)
{
#if VMB_HAVE_SHRINKER_ALLOC
	return shrinker->private_data;
#else
	return container_of(shrinker, struct vmb_compat_shrinker, shrinker);
#endif
}

/**
 * vmb_compat_account_reclaimed() - count pages a shrinker freed as reclaimed
 * @pages: the 4 KiB pages the balloon just gave back
 *
 * Direct reclaim stops once it has reclaimed what the allocation asked
 * for; pages that a shrinker frees count only if it says so. Unsaid, the
 * kernel sees no progress and asks again at a higher priority, until the
 * whole balloon is gone. No-op outside reclaim. The field was
 * reclaimed_slab until 6.3 (VMB_HAVE_RECLAIM_STATE_RECLAIMED_SLAB), then a
 * helper (VMB_HAVE_MM_ACCOUNT_RECLAIMED_PAGES, 6.4).
 */
static inline void vmb_compat_account_reclaimed(unsigned long pages)
{
#if VMB_HAVE_MM_ACCOUNT_RECLAIMED_PAGES
	mm_account_reclaimed_pages(pages);
#else
	if (current->reclaim_state)
		current->reclaim_state->reclaimed_slab += pages;
#endif
}

#endif /* VMB_COMPAT_H */
