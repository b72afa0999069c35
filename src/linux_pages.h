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
#include <linux/completion.h>
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

/*
 * Test hooks (a test build only: make VMB_TEST_HOOKS=1, never a package's
 * build): fault points that make a race of the driver with the kernel
 * happen every time, for the guest tests.
 */
#ifndef VMB_TEST_HOOKS
#define VMB_TEST_HOOKS	0
#endif

/**
 * typedef vmb_4k_drain_fn - free every page of the balloon that is listed
 * @list: the list of 4 KiB pages, fenced (vmb_pages_4k_quiesce())
 * @first: the first call: the driver then says goodbye to the host
 *	before it frees; later calls free what came back since
 *
 * Called by vmb_pages_4k_quiesce() with no lock of the list held; it takes
 * the driver's own lock and empties the lists through vmb_pages_4k_take().
 */
typedef void (*vmb_4k_drain_fn)(struct vmb_pages_4k *list, bool first);

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
 * @closing: unload has begun (vmb_pages_4k_quiesce()): every migration is
 *	refused from then on, and the kernel puts its page back for unload
 *	to free. Set under @info's lock where the driver shares it.
 * @park: test hooks only: the state of the parked migration
 *	(&enum vmb_pages_park)
 * @park_release: test hooks only: unload lets the parked migration go
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
	bool closing;
#if VMB_TEST_HOOKS
	atomic_t park;
	struct completion park_release;
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
 * vmb_pages_4k_quiesce() - empty the list for good, for unload
 * @list: the list
 * @drain: frees the listed pages (the driver's part, under its own lock)
 *
 * Unload calls this once the worker is stopped; when it returns, nothing
 * of the kernel refers to @list any more (no page is on it, none is
 * isolated from it, none is locked by compaction on its way to isolation)
 * and none ever will, so @list may be freed after vmb_pages_4k_exit().
 *
 * (a) It fences migration: from now on the migrate callback refuses
 * every page, so that the kernel puts each isolated page back at once
 * (a migration the driver already let through finishes under the driver's
 * lock, which @drain waits for). New isolations need a listed page, and
 * @drain leaves none. (b) It calls @drain. (c) It checks, in one moment
 * read under the lock that guards both the list and the kernel's count of
 * isolated pages (where the kernel keeps that lock to itself, from the
 * driver's own count of its pages, see vmb_pages_4k_check()), that the
 * list is empty and nothing is isolated; a page compaction holds locked
 * but has not isolated yet, which the kernel's dequeue skips, is still on
 * the list, and counted. Until then it sleeps, as vmb_drain_wait_ms()
 * paces it, and calls @drain again for what came back.
 *
 * It says what it waits for (isolated, listed and locked pages) when it
 * first has to wait, again as vmb_drain_say() decides, and when it is
 * done. It never gives up: past VMB_DRAIN_GIVE_UP_MS it says loudly that
 * unload cannot finish, and keeps waiting. Returning would free memory
 * the kernel still writes (the list and its lock), and unload the code
 * its migration calls (the migrate callback): leaking the list alone
 * would still leave the kernel a pointer to unloaded code.
 *
 * Context: process context, no lock held; sleeps.
 */
void vmb_pages_4k_quiesce(struct vmb_pages_4k *list, vmb_4k_drain_fn drain);

/**
 * vmb_pages_4k_exit() - undo vmb_pages_4k_init()
 * @list: the list, quiesced (vmb_pages_4k_quiesce())
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

#endif /* VMB_LINUX_PAGES_H */
