// SPDX-License-Identifier: GPL-2.0
/*
 * VMware memory balloon driver: the ballooned pages as the kernel sees
 * them.
 *
 * Ballooned frames are marked PG_offline and counted where the kernel
 * counts balloons. The 4 KiB pages are on a list, struct vmb_pages_4k.
 * Where the kernel has balloon page migration configured, it is the
 * kernel's balloon list (struct balloon_dev_info), which marks and counts
 * its pages itself and hands one to a migratepage callback when compaction
 * wants to move it. The kernel's side of that contract changed over time,
 * each step found by a probe:
 *
 * - until 5.19 the pages' movable operations hang off an anonymous inode of
 *   a pseudo file system the driver mounts (VMB_HAVE_BALLOON_DEV_INFO_INODE;
 *   only with init_pseudo(), 5.5 and later, else the pages do not migrate);
 * - until the balloon code became <linux/balloon.h>, the driver finishes a
 *   migration itself: it drops the old page and lists the new one
 *   (VMB_HAVE_BALLOON_PAGE_INSERT); since then the kernel does that, told
 *   by the callback's return value (-ENOENT: "old page deflated, the new
 *   one not inflated"), and keeps the list's lock to itself: unload then
 *   learns that no page is left from the driver's own count of them
 *   (vmb_pages_4k_empty());
 * - kernels with the movable_ops rework (VMB_HAVE_PAGE_HAS_MOVABLE_OPS)
 *   want 0, not -EBUSY, when the old page was deflated but the new one was
 *   not inflated: -EBUSY makes them put back a page that is no longer a
 *   balloon page.
 *
 * Every one of them retries a page whose callback answers -EAGAIN (a
 * balloon busy with a cycle, a reset pending, a busy host: the core's
 * VMB_MIGRATE_AGAIN) and gives up at once on -EBUSY.
 *
 * Elsewhere it is a plain list that this file marks and counts.
 *
 * Everything here that differs between kernels is chosen by the feature
 * probes (VMB_HAVE_*, see compat.h), one #if per difference.
 */
#include <linux/atomic.h>
#include <linux/errno.h>
#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/page-flags.h>
#include <linux/pagemap.h>
#include <linux/spinlock.h>
#include <linux/vmstat.h>

#include "compat.h"
#include "linux_pages.h"

void vmb_pages_account(struct page *page, unsigned long nr, bool ballooned)
{
	unsigned long i;

	for (i = 0; i < nr; i++) {
		if (ballooned)
			__SetPageOffline(page + i);
		else
			__ClearPageOffline(page + i);
	}
	vmb_compat_balloon_events(ballooned, nr);
	vmb_compat_balloon_pages(page, ballooned ? (long)nr : -(long)nr);
}

#if VMB_BALLOON_MIGRATION

#if VMB_HAVE_BALLOON_DEV_INFO_INODE
#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>

/* The pseudo file system whose inode carries the movable operations. */
#define VMB_BALLOON_FS_MAGIC	0x0ba11007

static int vmb_pages_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, VMB_BALLOON_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type vmb_pages_balloon_fs = {
	.name		 = "balloon-vmware",
	.init_fs_context = vmb_pages_init_fs_context,
	.kill_sb	 = kill_anon_super,
};

/**
 * vmb_pages_inode_get() - make the inode the pages' movable ops hang off
 * @list: the list, its balloon_dev_info initialised
 *
 * Mounts the pseudo file system (one mount per list) and makes an
 * anonymous inode on it.
 *
 * Return: 0, or a negative error.
 */
static int vmb_pages_inode_get(struct vmb_pages_4k *list)
{
	list->mnt = kern_mount(&vmb_pages_balloon_fs);
	if (IS_ERR(list->mnt))
		return PTR_ERR(list->mnt);
	list->info.inode = alloc_anon_inode(list->mnt->mnt_sb);
	if (IS_ERR(list->info.inode)) {
		int err = PTR_ERR(list->info.inode);

		list->info.inode = NULL;
		kern_unmount(list->mnt);
		return err;
	}
	list->info.inode->i_mapping->a_ops = &balloon_aops;
	return 0;
}

/**
 * vmb_pages_inode_put() - undo vmb_pages_inode_get()
 * @list: the list
 */
static void vmb_pages_inode_put(struct vmb_pages_4k *list)
{
	iput(list->info.inode);
	list->info.inode = NULL;
	kern_unmount(list->mnt);
}
#else
static int vmb_pages_inode_get(struct vmb_pages_4k *list)
{
	return 0;
}

static void vmb_pages_inode_put(struct vmb_pages_4k *list)
{
}
#endif /* VMB_HAVE_BALLOON_DEV_INFO_INODE */

#if VMB_HAVE_BALLOON_PAGE_INSERT

#if !(VMB_HAVE_BALLOON_PAGE_FINALIZE || VMB_HAVE_BALLOON_PAGE_DELETE)
#error "no balloon_page_finalize() or balloon_page_delete(): see vmb_probes.log"
#endif

/**
 * vmb_pages_migrated() - finish a migration the host agreed to
 * @list: the list
 * @page: the old page, isolated by compaction
 * @newpage: the new page
 * @result: VMB_MIGRATE_DONE, or VMB_MIGRATE_OLD_ONLY if only @page left
 *	the balloon
 *
 * These kernels leave it to the driver: it drops the old page, lists the
 * new one and ends the isolation.
 *
 * Return: what the migratepage callback answers.
 */
static int vmb_pages_migrated(struct vmb_pages_4k *list, struct page *page,
			      struct page *newpage,
			      enum vmb_migrate_result result)
{
	struct balloon_dev_info *info = &list->info;
	unsigned long flags;

	/* @page is isolated, on no list: it is dropped without the lock */
	vmb_compat_balloon_page_finalize(page);
	put_page(page);

	if (result == VMB_MIGRATE_DONE)
		get_page(newpage);	/* the balloon's reference */
	spin_lock_irqsave(&info->pages_lock, flags);
	/*
	 * The old page left the balloon either way: a refused move counts as
	 * a deflation, or vmstat's inflate - deflate would drift from the
	 * balloon's size by one page per refusal (these kernels count
	 * nothing of it themselves).
	 */
	if (result == VMB_MIGRATE_DONE) {
		balloon_page_insert(info, newpage);
		__count_vm_event(BALLOON_MIGRATE);
	} else {
		__count_vm_event(BALLOON_DEFLATE);
	}
	info->isolated_pages--;
	spin_unlock_irqrestore(&info->pages_lock, flags);

	if (result == VMB_MIGRATE_DONE || VMB_HAVE_PAGE_HAS_MOVABLE_OPS)
		return 0;
	return -EBUSY;
}

/* The kernel shares @info's lock: vmb_pages_4k_empty() needs no count. */
static void vmb_pages_owned_add(struct vmb_pages_4k *list, long delta)
{
}

bool vmb_pages_4k_empty(struct vmb_pages_4k *list, unsigned long *listed,
			unsigned long *isolated)
{
	struct balloon_dev_info *info = &list->info;
	struct list_head *pos;
	unsigned long flags;

	*listed = 0;
	/* the lock every isolation, putback and migration takes too */
	spin_lock_irqsave(&info->pages_lock, flags);
	list_for_each(pos, &info->pages)
		(*listed)++;
	*isolated = info->isolated_pages;
	spin_unlock_irqrestore(&info->pages_lock, flags);
	return !*listed && !*isolated;
}

/*
 * Where the driver inserts pages itself, the kernel's
 * balloon_page_enqueue() takes the page lock with a trylock and BUG()s if
 * it fails. A page just taken off the list can still be locked for a
 * moment by compaction, which found it movable before it left the list
 * and trylocks it after: so this waits for that lock, and inserts and
 * counts the page as balloon_page_enqueue() would. Newer kernels take no
 * page lock there.
 */
void vmb_pages_4k_add(struct vmb_pages_4k *list, struct page *page)
{
	unsigned long flags;

	lock_page(page);
	spin_lock_irqsave(&list->info.pages_lock, flags);
	balloon_page_insert(&list->info, page);
	vmb_compat_balloon_events(true, 1);
	vmb_compat_balloon_pages(page, 1);
	spin_unlock_irqrestore(&list->info.pages_lock, flags);
	unlock_page(page);
}
#else
/*
 * The kernel keeps the lock of the list to itself: the driver counts the
 * pages it owns, listed or isolated, for vmb_pages_4k_empty(). A page
 * that migrates keeps its place in the count (the new page takes it).
 */
static void vmb_pages_owned_add(struct vmb_pages_4k *list, long delta)
{
	atomic_long_add(delta, &list->owned);
}

bool vmb_pages_4k_empty(struct vmb_pages_4k *list, unsigned long *listed,
			unsigned long *isolated)
{
	unsigned long owned = atomic_long_read(&list->owned);

	/*
	 * A migration that drops its old page leaves the count first, and
	 * the kernel's isolated count after, with its last touch of @list:
	 * read in the same order, both 0 means the kernel is done with it.
	 */
	smp_rmb();
	*isolated = READ_ONCE(list->info.isolated_pages);
	*listed = owned > *isolated ? owned - *isolated : 0;
	return !owned && !*isolated;
}

/* The kernel drops the old page and lists the new one, as told. */
static int vmb_pages_migrated(struct vmb_pages_4k *list, struct page *page,
			      struct page *newpage,
			      enum vmb_migrate_result result)
{
	if (result == VMB_MIGRATE_DONE)
		return 0;
	vmb_pages_owned_add(list, -1);
	return -ENOENT;
}

void vmb_pages_4k_add(struct vmb_pages_4k *list, struct page *page)
{
	vmb_pages_owned_add(list, 1);
	balloon_page_enqueue(&list->info, page);
}
#endif /* VMB_HAVE_BALLOON_PAGE_INSERT */

/**
 * vmb_pages_migratepage() - the kernel's balloon_dev_info.migratepage
 * @info: the list's balloon_dev_info
 * @newpage: the page to balloon instead
 * @page: the ballooned page compaction wants, isolated
 * @mode: how the kernel migrates (unused: the host is asked either way)
 *
 * Return: 0 if the migration is finished, -EAGAIN to have the kernel
 * retry, another negative error to have it give up (on these kernels,
 * -ENOENT means the old page left the balloon and the new one did not
 * join it).
 */
static int vmb_pages_migratepage(struct balloon_dev_info *info,
				 struct page *newpage, struct page *page,
				 enum migrate_mode mode)
{
	struct vmb_pages_4k *list = container_of(info, struct vmb_pages_4k,
						 info);
	enum vmb_migrate_result result = list->migrate(list, page, newpage);

	switch (result) {
	case VMB_MIGRATE_DONE:
		/*
		 * The kernel's balloon code moves the page, not its count
		 * (7.2 and 7.3 read; where the driver inserts the new page
		 * itself, balloon_page_insert() counts nothing either): across
		 * nodes, "Balloon:" of the old page's node would keep it and
		 * the new one's never get it.
		 */
		if (page_pgdat(page) != page_pgdat(newpage)) {
			vmb_compat_balloon_pages(page, -1);
			vmb_compat_balloon_pages(newpage, 1);
		}
		break;
	case VMB_MIGRATE_OLD_ONLY:
		/*
		 * A move that deflated the old page shrinks the balloon by
		 * one page, but the kernel's balloon code (7.2 and 7.3 read)
		 * only counts the deflate event: "Balloon:" in /proc/meminfo
		 * would keep the page.
		 */
		vmb_compat_balloon_pages(page, -1);
		break;
	case VMB_MIGRATE_AGAIN:
		return -EAGAIN;	/* the kernel retries, then puts @page back */
	default:
		return -EBUSY;	/* the kernel puts @page back on the list */
	}
	return vmb_pages_migrated(list, page, newpage, result);
}

int vmb_pages_4k_init(struct vmb_pages_4k *list,
		      vmb_4k_migrate_fn migrate)
{
	int err;

	balloon_devinfo_init(&list->info);
	err = vmb_pages_inode_get(list);
	if (err)
		return err;
	list->migrate = migrate;
	list->info.migratepage = vmb_pages_migratepage;
	return 0;
}

void vmb_pages_4k_exit(struct vmb_pages_4k *list)
{
	vmb_pages_inode_put(list);
}

struct page *vmb_pages_4k_alloc(void)
{
	return balloon_page_alloc();
}

struct page *vmb_pages_4k_take(struct vmb_pages_4k *list)
{
	LIST_HEAD(taken);
	struct page *page;

	if (balloon_page_list_dequeue(&list->info, &taken, 1) != 1)
		return NULL;
	page = list_first_entry(&taken, struct page, lru);
	list_del(&page->lru);
	vmb_pages_owned_add(list, -1);
	return page;
}

#else /* !VMB_BALLOON_MIGRATION */

int vmb_pages_4k_init(struct vmb_pages_4k *list,
		      vmb_4k_migrate_fn migrate)
{
	INIT_LIST_HEAD(&list->pages);
	return 0;
}

void vmb_pages_4k_exit(struct vmb_pages_4k *list)
{
}

struct page *vmb_pages_4k_alloc(void)
{
	return alloc_page(GFP_HIGHUSER | __GFP_NORETRY | __GFP_NOMEMALLOC |
			  __GFP_NOWARN);
}

void vmb_pages_4k_add(struct vmb_pages_4k *list, struct page *page)
{
	vmb_pages_account(page, 1, true);
	list_add(&page->lru, &list->pages);
}

struct page *vmb_pages_4k_take(struct vmb_pages_4k *list)
{
	struct page *page;

	page = list_first_entry_or_null(&list->pages, struct page, lru);
	if (!page)
		return NULL;
	list_del(&page->lru);
	vmb_pages_account(page, 1, false);
	return page;
}

bool vmb_pages_4k_empty(struct vmb_pages_4k *list, unsigned long *listed,
			unsigned long *isolated)
{
	struct list_head *pos;

	*listed = 0;
	list_for_each(pos, &list->pages)
		(*listed)++;
	*isolated = 0;
	return !*listed;
}

#endif /* VMB_BALLOON_MIGRATION */
