/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ballooned pages as the kernel sees them (linux_pages.c): how they
 * are marked and counted, and the list of ballooned 4 KiB pages, whose
 * pages compaction may migrate. linux_glue.c calls this; it calls the
 * glue only through the migrate callback it is given.
 */
#ifndef VMB_LINUX_PAGES_H
#define VMB_LINUX_PAGES_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/types.h>

#include "balloon.h"
#include "compat.h"

/*
 * 4 KiB pages migrate where the kernel has balloon compaction (it counts
 * BALLOON_MIGRATE) and, on kernels that want the driver's own inode for
 * it (until 5.19), the driver can mount the pseudo file system that
 * inode lives on (init_pseudo(), 5.5 and later).
 */
#if VMB_HAVE_BALLOON_MIGRATE_EVENT && \
	(!VMB_HAVE_BALLOON_DEV_INFO_INODE || VMB_HAVE_INIT_PSEUDO)
#define VMB_BALLOON_MIGRATION	1
#else
#define VMB_BALLOON_MIGRATION	0
#endif

struct vmb_pages_4k;

/**
 * typedef vmb_4k_migrate_fn - the driver's part of moving one page
 * @list: the list @page was taken from
 * @page: the ballooned page compaction wants
 * @newpage: the page to balloon instead
 *
 * Called when the kernel migrates a page of @list; never with a lock of
 * the list held.
 *
 * Return: what the host did, as vmb_migrate() reports it, or
 * VMB_MIGRATE_AGAIN if the balloon is busy and the kernel should retry.
 */
typedef enum vmb_migrate_result (*vmb_4k_migrate_fn)(struct vmb_pages_4k *list,
						      struct page *page,
						      struct page *newpage);

/**
 * struct vmb_pages_4k - the list of ballooned 4 KiB pages
 * @info: where pages migrate, the kernel's balloon list
 * @mnt: the pseudo file system that @info's inode lives on, on kernels
 *	that want one
 * @migrate: the driver's part of a migration
 * @owned: where the kernel keeps the lock of @info to itself (it finishes
 *	migrations too), the pages on @info's list or isolated from it: it
 *	changes only when the driver adds or takes a page, or when a
 *	migration drops one from the balloon
 * @pages: where pages do not migrate, a plain list through page->lru
 */
struct vmb_pages_4k {
#if VMB_BALLOON_MIGRATION
	struct balloon_dev_info info;
#if VMB_HAVE_BALLOON_DEV_INFO_INODE
	struct vfsmount *mnt;
#endif
	vmb_4k_migrate_fn migrate;
#if !VMB_HAVE_BALLOON_PAGE_INSERT
	atomic_long_t owned;
#endif
#else
	struct list_head pages;
#endif
};

/**
 * vmb_pages_account() - mark frames ballooned, or no longer ballooned
 * @page: the first frame
 * @nr: how many frames
 * @ballooned: joining the balloon if true, leaving it if false
 *
 * PG_offline tells kdump and hibernation to skip the frames; the kernel
 * counts them in /proc/vmstat (balloon_inflate, balloon_deflate) and, where
 * it has that line, as "Balloon:" in /proc/meminfo. For pages that are not
 * on the kernel's balloon list, which does all this itself.
 */
void vmb_pages_account(struct page *page, unsigned long nr, bool ballooned);

/**
 * vmb_pages_4k_init() - prepare the list of ballooned 4 KiB pages
 * @list: the list, zeroed
 * @migrate: called when compaction moves one of its pages
 *
 * Return: 0, or a negative error.
 */
int vmb_pages_4k_init(struct vmb_pages_4k *list,
		      vmb_4k_migrate_fn migrate);

/**
 * vmb_pages_4k_exit() - undo vmb_pages_4k_init()
 * @list: the list, empty and with no page isolated
 */
void vmb_pages_4k_exit(struct vmb_pages_4k *list);

/**
 * vmb_pages_4k_alloc() - allocate a 4 KiB page for the balloon
 *
 * Movable where pages migrate. Never waits long, never uses reserves and
 * never wakes the OOM killer.
 *
 * Return: the page, or NULL.
 */
struct page *vmb_pages_4k_alloc(void);

/**
 * vmb_pages_4k_add() - put a 4 KiB page on the list
 * @list: the list
 * @page: the page: a new one, just locked by the host (a page the host
 *	would not unlock goes to the held queue, never back here)
 *
 * Context: may sleep.
 */
void vmb_pages_4k_add(struct vmb_pages_4k *list, struct page *page);

/**
 * vmb_pages_4k_take() - take a 4 KiB page off the list
 * @list: the list
 *
 * Return: a page, or NULL when none is left or compaction holds them all.
 */
struct page *vmb_pages_4k_take(struct vmb_pages_4k *list);

/**
 * vmb_pages_4k_empty() - is the list empty, with no page away from it?
 * @list: the list
 * @listed: set to the pages on the list
 * @isolated: set to the pages compaction holds, each of which comes back
 *	through migration or putback
 *
 * For unload: until this says true, a page may still come back to the
 * list, or the kernel still touch it, and the list must not go away. The
 * answer is one moment's, read under the lock that guards both the list
 * and the isolated count, where the kernel shares that lock; where it
 * keeps the lock to itself, from the driver's own count of its pages and
 * the kernel's isolated count, which drops to 0 only when the kernel is
 * done with @list. A page compaction has locked on the list but not yet
 * isolated is on the list. Once every page is gone and the migrate
 * callback refuses migrations, the answer stays true.
 *
 * Context: under the lock that serialises the balloon (the driver's
 * mutex), which is what guards a plain list.
 * Return: true if no page is on the list or away from it.
 */
bool vmb_pages_4k_empty(struct vmb_pages_4k *list, unsigned long *listed,
			unsigned long *isolated);

#endif /* VMB_LINUX_PAGES_H */
