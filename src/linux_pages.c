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
 * Unload is this file's too (vmb_pages_4k_quiesce()): it fences
 * migration, has the driver free the listed pages and waits until the
 * kernel holds none.
 *
 * Everything here that differs between kernels is chosen by the feature
 * probes (VMB_HAVE_*, see compat.h), one #if per difference.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/errno.h>
#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/page-flags.h>
#include <linux/pagemap.h>
#include <linux/printk.h>
#include <linux/spinlock.h>
#include <linux/time64.h>
#include <linux/vmstat.h>

#include "compat.h"
#include "linux_pages.h"

/**
 * struct vmb_pages_wait - what unload waits for, one moment's count
 * @listed: pages on the list (locked ones included)
 * @locked: of those, pages compaction holds locked on its way to isolating
 *	them, which the kernel's dequeue skips (where it trylocks)
 * @isolated: pages compaction took off the list, each of which comes back
 *	through putback or leaves with the end of its migration
 */
struct vmb_pages_wait {
	unsigned long listed;
	unsigned long locked;
	unsigned long isolated;
};

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

/* The kernel shares @info's lock: vmb_pages_4k_check() needs no count. */
static void vmb_pages_owned_add(struct vmb_pages_4k *list, long delta)
{
}

/*
 * One moment's count, read under the lock that every isolation, putback,
 * dequeue and migration of these kernels takes to change the list or the
 * isolated count: the answer is exact, and once it says empty after the
 * fence it stays so. A page compaction has locked, which
 * balloon_page_list_dequeue() skips, is still on the list: counted, and
 * waited for until compaction isolates it (then it is counted isolated)
 * or lets it go (then the next drain frees it). Whoever held the lock
 * before has released it: freeing @list after this cannot pull it from
 * under a CPU.
 */
static bool vmb_pages_4k_check(struct vmb_pages_4k *list,
			       struct vmb_pages_wait *w)
{
	struct balloon_dev_info *info = &list->info;
	struct page *page;
	unsigned long flags;

	memset(w, 0, sizeof(*w));
	spin_lock_irqsave(&info->pages_lock, flags);
	list_for_each_entry(page, &info->pages, lru) {
		w->listed++;
		if (PageLocked(page))
			w->locked++;
	}
	w->isolated = info->isolated_pages;
	spin_unlock_irqrestore(&info->pages_lock, flags);
	return !w->listed && !w->isolated;
}

/* Under @info's lock, which the migrate callback's last touch takes too. */
static void vmb_pages_4k_fence(struct vmb_pages_4k *list)
{
	unsigned long flags;

	spin_lock_irqsave(&list->info.pages_lock, flags);
	WRITE_ONCE(list->closing, true);
	spin_unlock_irqrestore(&list->info.pages_lock, flags);
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
 * pages it owns, listed or isolated, for vmb_pages_4k_check(). A page
 * that migrates keeps its place in the count (the new page takes it).
 * A page leaves the count while it is isolated (see vmb_pages_migrated()),
 * ordered after the kernel's count of it as isolated.
 */
static void vmb_pages_owned_add(struct vmb_pages_4k *list, long delta)
{
	smp_mb__before_atomic();	/* pairs with vmb_pages_4k_check() */
	atomic_long_add(delta, &list->owned);
}

/*
 * The kernel's lock (balloon_pages_lock) is its own, global, not in
 * @list: no CPU can hold a lock inside @list. Where the driver's count
 * says no page is left, a page still isolated was counted isolated before
 * it left the driver's count; the kernel's last touch of @list is the
 * decrement of that count, under its lock (balloon_page_migrate() and
 * balloon_page_putback() touch @list no more after it; the migrate
 * callback has returned by then), so both read as 0, in this order,
 * means the kernel is done with @list. Nothing trylocks a listed page on
 * these kernels: isolation takes the page off the list under the
 * kernel's lock, and a page the driver dequeued cannot be isolated
 * (page->private is cleared), so no page is locked-but-skipped.
 */
static bool vmb_pages_4k_check(struct vmb_pages_4k *list,
			       struct vmb_pages_wait *w)
{
	unsigned long owned = atomic_long_read(&list->owned);

	smp_rmb();	/* the driver's count before the kernel's */
	w->isolated = READ_ONCE(list->info.isolated_pages);
	w->listed = owned > w->isolated ? owned - w->isolated : 0;
	w->locked = 0;
	return !owned && !w->isolated;
}

static void vmb_pages_4k_fence(struct vmb_pages_4k *list)
{
	WRITE_ONCE(list->closing, true);
	smp_mb();	/* closing before the drain's first look */
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

#if VMB_TEST_HOOKS
/**
 * enum vmb_pages_park - the parked migration of the test hook
 * @VMB_PARK_NONE: none parked yet
 * @VMB_PARK_PARKED: a migration waits in the callback, its page isolated
 * @VMB_PARK_DONE: it went on: the hook parks no other
 */
enum vmb_pages_park {
	VMB_PARK_NONE,
	VMB_PARK_PARKED,
	VMB_PARK_DONE,
};

/*
 * Fault point for the unload race, test builds only: 1 parks the first
 * migration at the callback's start (unload's fence then refuses it), 2
 * parks the first one the driver finished, after its lock was dropped and
 * before the list learns of it (the new page joins the list after unload
 * drained it). The parked migration waits, its page isolated, until
 * unload has said it waits for it (or VMB_PARK_MAX_S pass).
 */
static int vmb_test_park_migration;
module_param_named(test_park_migration, vmb_test_park_migration, int, 0644);
MODULE_PARM_DESC(test_park_migration,
		 "Test builds: park one migration across unload (1: before the driver's part, 2: after it)");

#define VMB_PARK_MAX_S	300

/* Park here if the hook asks for @where and none was parked yet. */
static void vmb_pages_test_park(struct vmb_pages_4k *list, int where)
{
	if (READ_ONCE(vmb_test_park_migration) != where ||
	    atomic_cmpxchg(&list->park, VMB_PARK_NONE, VMB_PARK_PARKED) !=
	    VMB_PARK_NONE)
		return;
	pr_info("test: migration parked (%s the driver's part), its page isolated, until unload waits for it\n",
		where == 1 ? "before" : "after");
	if (!wait_for_completion_timeout(&list->park_release,
					 VMB_PARK_MAX_S * HZ))
		pr_info("test: the parked migration goes on: no unload came\n");
	atomic_set(&list->park, VMB_PARK_DONE);
}

/* Unload has said what it waits for: the parked migration may go on. */
static void vmb_pages_test_unpark(struct vmb_pages_4k *list)
{
	if (atomic_read(&list->park) == VMB_PARK_PARKED)
		complete(&list->park_release);
}

static void vmb_pages_test_init(struct vmb_pages_4k *list)
{
	atomic_set(&list->park, VMB_PARK_NONE);
	init_completion(&list->park_release);
}
#else
static void vmb_pages_test_park(struct vmb_pages_4k *list, int where)
{
}

static void vmb_pages_test_unpark(struct vmb_pages_4k *list)
{
}

static void vmb_pages_test_init(struct vmb_pages_4k *list)
{
}
#endif /* VMB_TEST_HOOKS */

/**
 * vmb_pages_migratepage() - the kernel's balloon_dev_info.migratepage
 * @info: the list's balloon_dev_info
 * @newpage: the page to balloon instead
 * @page: the ballooned page compaction wants, isolated
 * @mode: how the kernel migrates (unused: the host is asked either way)
 *
 * Once unload has fenced migration (vmb_pages_4k_quiesce()) every page is
 * refused, for good: the kernel puts it back, and unload frees it. A
 * migration that got past the fence before it was raised finishes under
 * the driver's lock, which unload's drain waits for; its page stays
 * counted isolated until the list has the new page (or the old one is
 * gone), and unload waits for that.
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
	enum vmb_migrate_result result;

	vmb_pages_test_park(list, 1);
	if (READ_ONCE(list->closing))
		return -EBUSY;	/* unload: the kernel puts @page back */
	result = list->migrate(list, page, newpage);

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
	vmb_pages_test_park(list, 2);
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
	vmb_pages_test_init(list);
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

/*
 * Nothing but the driver touches a plain list, and the drain empties it
 * under the driver's lock, with the worker stopped: no page comes back.
 */
static bool vmb_pages_4k_check(struct vmb_pages_4k *list,
			       struct vmb_pages_wait *w)
{
	struct list_head *pos;

	memset(w, 0, sizeof(*w));
	list_for_each(pos, &list->pages)
		w->listed++;
	return !w->listed;
}

static void vmb_pages_4k_fence(struct vmb_pages_4k *list)
{
}

static void vmb_pages_test_unpark(struct vmb_pages_4k *list)
{
}

#endif /* VMB_BALLOON_MIGRATION */

void vmb_pages_4k_quiesce(struct vmb_pages_4k *list, vmb_4k_drain_fn drain)
{
	struct vmb_pages_wait w;
	u64 waited = 0, before = 0;
	unsigned int ms = 0;

	vmb_pages_4k_fence(list);
	drain(list, true);
	while (!vmb_pages_4k_check(list, &w)) {
		if (!waited)
			pr_info("unload waits for %lu ballooned pages compaction isolated and %lu listed (%lu of them locked by compaction)\n",
				w.isolated, w.listed, w.locked);
		else if (vmb_drain_say(before, ms))
			pr_warn("unload has waited %llu s for %lu ballooned pages compaction isolated and %lu listed (%lu of them locked by compaction); it cannot free them before they come back\n",
				waited / MSEC_PER_SEC, w.isolated, w.listed,
				w.locked);
		if (waited && vmb_drain_overdue(before, ms))
			pr_err("unload cannot finish: after %llu s the kernel still holds %lu isolated and %lu listed ballooned pages; freeing the balloon would let the kernel write into freed memory and call unloaded code, so unload keeps waiting (a reboot ends it)\n",
			       waited / MSEC_PER_SEC, w.isolated, w.listed);
		/* the wait was said: a parked test migration may go on */
		vmb_pages_test_unpark(list);
		before = waited;
		ms = vmb_drain_wait_ms(waited);
		msleep(ms);
		waited += ms;
		drain(list, false);
	}
	if (waited)
		pr_info("unload waited %llu ms for the pages compaction held; every page is freed\n",
			waited);
}
