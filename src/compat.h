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
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/swap.h>
#include <linux/vmstat.h>
#include <asm/hypervisor.h>

#include "balloon.h"
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
 * vmb_compat_account() - mark frames ballooned, or no longer ballooned
 * @page: the first frame
 * @nr: how many frames
 * @ballooned: joining the balloon if true, leaving it if false
 *
 * PG_offline tells kdump and hibernation to skip the frames; the kernel
 * counts them in /proc/vmstat (balloon_inflate, balloon_deflate) and, where
 * it has that line, as "Balloon:" in /proc/meminfo. For pages that are not
 * on the kernel's balloon list, which does all this itself.
 */
static inline void vmb_compat_account(struct page *page, unsigned long nr,
				      bool ballooned)
{
	unsigned long i;

	for (i = 0; i < nr; i++) {
		if (ballooned)
			__SetPageOffline(page + i);
		else
			__ClearPageOffline(page + i);
	}
#if VMB_HAVE_BALLOON_VM_EVENTS
	count_vm_events(ballooned ? BALLOON_INFLATE : BALLOON_DEFLATE, nr);
#endif
#if VMB_HAVE_NR_BALLOON_PAGES
	mod_node_page_state(page_pgdat(page), NR_BALLOON_PAGES,
			    ballooned ? (long)nr : -(long)nr);
#endif
}

/*
 * The list of ballooned 4 KiB pages, struct vmb_compat_4k_list.
 *
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
 *   one not inflated");
 * - kernels with the movable_ops rework (VMB_HAVE_PAGE_HAS_MOVABLE_OPS)
 *   want 0, not -EBUSY, when the old page was deflated but the new one was
 *   not inflated: -EBUSY makes them put back a page that is no longer a
 *   balloon page.
 *
 * Every one of them retries a page whose callback answers -EAGAIN (a
 * balloon busy with a cycle) and gives up at once on -EBUSY.
 *
 * Elsewhere it is a plain list that this file marks and counts.
 */
#if VMB_HAVE_BALLOON_MIGRATE_EVENT && \
	(!VMB_HAVE_BALLOON_DEV_INFO_INODE || VMB_HAVE_INIT_PSEUDO)
#define VMB_BALLOON_MIGRATION	1
#else
#define VMB_BALLOON_MIGRATION	0
#endif

struct vmb_compat_4k_list;

/**
 * vmw_balloon_migrate() - the driver's part of moving one page
 * @list: the list @page was taken from
 * @page: the ballooned page compaction wants
 * @newpage: the page to balloon instead
 *
 * Defined in linux_glue.c, called from here when the kernel migrates.
 *
 * Return: what the host did, as vmb_migrate() reports it.
 */
enum vmb_migrate_result vmw_balloon_migrate(struct vmb_compat_4k_list *list,
					    struct page *page,
					    struct page *newpage);

#if VMB_BALLOON_MIGRATION

#if VMB_HAVE_LINUX_BALLOON_H
#include <linux/balloon.h>
#else
#include <linux/balloon_compaction.h>
#endif

#if VMB_HAVE_BALLOON_PAGE_INSERT && \
	!(VMB_HAVE_BALLOON_PAGE_FINALIZE || VMB_HAVE_BALLOON_PAGE_DELETE)
#error "no balloon_page_finalize() or balloon_page_delete(): see vmb_probes.log"
#endif

struct vmb_compat_4k_list {
	struct balloon_dev_info info;
};

/* Finish a migration the way this kernel expects, see above. */
static int vmb_compat_migratepage(struct balloon_dev_info *info,
				  struct page *newpage, struct page *page,
				  enum migrate_mode mode)
{
	struct vmb_compat_4k_list *list =
		container_of(info, struct vmb_compat_4k_list, info);
	enum vmb_migrate_result result = vmw_balloon_migrate(list, page,
							     newpage);
#if VMB_HAVE_BALLOON_PAGE_INSERT
	unsigned long flags;
#endif

#if VMB_HAVE_NR_BALLOON_PAGES
	/*
	 * A move that deflated the old page shrinks the balloon by one page,
	 * but the kernel's balloon code (7.2 and 7.3 read) only counts the
	 * deflate event: "Balloon:" in /proc/meminfo would keep the page.
	 */
	if (result == VMB_MIGRATE_OLD_ONLY)
		mod_node_page_state(page_pgdat(page), NR_BALLOON_PAGES, -1);
#endif
#if VMB_HAVE_BALLOON_PAGE_INSERT
	if (result == VMB_MIGRATE_AGAIN)
		return -EAGAIN;	/* the kernel retries, then puts @page back */
	if (result == VMB_MIGRATE_BUSY)
		return -EBUSY;	/* the kernel puts @page back on the list */

	/* @page is isolated, on no list: it is dropped without the lock */
#if VMB_HAVE_BALLOON_PAGE_FINALIZE
	balloon_page_finalize(page);
#else
	balloon_page_delete(page);
#endif
	put_page(page);

	if (result == VMB_MIGRATE_DONE)
		get_page(newpage);	/* the balloon's reference */
	spin_lock_irqsave(&info->pages_lock, flags);
	if (result == VMB_MIGRATE_DONE) {
		balloon_page_insert(info, newpage);
		__count_vm_event(BALLOON_MIGRATE);
	} else if (VMB_HAVE_PAGE_HAS_MOVABLE_OPS) {
		__count_vm_event(BALLOON_DEFLATE);
	}
	info->isolated_pages--;
	spin_unlock_irqrestore(&info->pages_lock, flags);

	if (result == VMB_MIGRATE_DONE || VMB_HAVE_PAGE_HAS_MOVABLE_OPS)
		return 0;
	return -EBUSY;
#else
	switch (result) {
	case VMB_MIGRATE_DONE:
		return 0;
	case VMB_MIGRATE_OLD_ONLY:
		return -ENOENT;
	case VMB_MIGRATE_AGAIN:
		return -EAGAIN;
	default:
		return -EBUSY;
	}
#endif
}

#if VMB_HAVE_BALLOON_DEV_INFO_INODE
#include <linux/mount.h>
#include <linux/pseudo_fs.h>

/* The pseudo file system whose inode carries the movable operations. */
#define VMB_BALLOON_FS_MAGIC	0x0ba11007

static struct vfsmount *vmb_compat_balloon_mnt;

static int vmb_compat_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, VMB_BALLOON_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type vmb_compat_balloon_fs = {
	.name		 = "balloon-vmware",
	.init_fs_context = vmb_compat_init_fs_context,
	.kill_sb	 = kill_anon_super,
};

static inline int vmb_compat_balloon_inode(struct balloon_dev_info *info)
{
	vmb_compat_balloon_mnt = kern_mount(&vmb_compat_balloon_fs);
	if (IS_ERR(vmb_compat_balloon_mnt))
		return PTR_ERR(vmb_compat_balloon_mnt);
	info->inode = alloc_anon_inode(vmb_compat_balloon_mnt->mnt_sb);
	if (IS_ERR(info->inode)) {
		int err = PTR_ERR(info->inode);

		info->inode = NULL;
		kern_unmount(vmb_compat_balloon_mnt);
		return err;
	}
	info->inode->i_mapping->a_ops = &balloon_aops;
	return 0;
}

static inline void vmb_compat_balloon_inode_put(struct balloon_dev_info *info)
{
	iput(info->inode);
	info->inode = NULL;
	kern_unmount(vmb_compat_balloon_mnt);
}
#else
static inline int vmb_compat_balloon_inode(struct balloon_dev_info *info)
{
	return 0;
}

static inline void vmb_compat_balloon_inode_put(struct balloon_dev_info *info)
{
}
#endif

/**
 * vmb_compat_4k_init() - prepare the list of ballooned 4 KiB pages
 * @list: the list
 *
 * Return: 0, or a negative error.
 */
static inline int vmb_compat_4k_init(struct vmb_compat_4k_list *list)
{
	int err;

	balloon_devinfo_init(&list->info);
	err = vmb_compat_balloon_inode(&list->info);
	if (err)
		return err;
	list->info.migratepage = vmb_compat_migratepage;
	return 0;
}

/**
 * vmb_compat_4k_exit() - undo vmb_compat_4k_init()
 * @list: the list, empty and with no page isolated
 */
static inline void vmb_compat_4k_exit(struct vmb_compat_4k_list *list)
{
	vmb_compat_balloon_inode_put(&list->info);
}

/**
 * vmb_compat_4k_alloc() - allocate a 4 KiB page for the balloon
 *
 * Movable where pages migrate. Never waits long, never uses reserves and
 * never wakes the OOM killer.
 *
 * Return: the page, or NULL.
 */
static inline struct page *vmb_compat_4k_alloc(void)
{
	return balloon_page_alloc();
}

/**
 * vmb_compat_4k_add() - put a locked 4 KiB page on the list
 * @list: the list
 * @page: the page: a new one, or one the balloon took off the list a
 *	moment ago and puts back (the host would not unlock it)
 *
 * Where the driver inserts pages itself (VMB_HAVE_BALLOON_PAGE_INSERT),
 * the kernel's balloon_page_enqueue() takes the page lock with a trylock
 * and BUG()s if it fails. A page just taken off the list can still be
 * locked for a moment by compaction, which found it movable before it
 * left the list and trylocks it after: so this waits for that lock, and
 * inserts and counts the page as balloon_page_enqueue() would. Newer
 * kernels take no page lock there.
 *
 * Context: may sleep.
 */
static inline void vmb_compat_4k_add(struct vmb_compat_4k_list *list,
				     struct page *page)
{
#if VMB_HAVE_BALLOON_PAGE_INSERT
	unsigned long flags;

	lock_page(page);
	spin_lock_irqsave(&list->info.pages_lock, flags);
	balloon_page_insert(&list->info, page);
#if VMB_HAVE_BALLOON_VM_EVENTS
	__count_vm_event(BALLOON_INFLATE);
#endif
#if VMB_HAVE_NR_BALLOON_PAGES
	inc_node_page_state(page, NR_BALLOON_PAGES);
#endif
	spin_unlock_irqrestore(&list->info.pages_lock, flags);
	unlock_page(page);
#else
	balloon_page_enqueue(&list->info, page);
#endif
}

/**
 * vmb_compat_4k_take() - take a 4 KiB page off the list
 * @list: the list
 *
 * Return: a page, or NULL when none is left or compaction holds them all.
 */
static inline struct page *vmb_compat_4k_take(struct vmb_compat_4k_list *list)
{
	LIST_HEAD(taken);
	struct page *page;

	if (balloon_page_list_dequeue(&list->info, &taken, 1) != 1)
		return NULL;
	page = list_first_entry(&taken, struct page, lru);
	list_del(&page->lru);
	return page;
}

/**
 * vmb_compat_4k_isolated() - pages compaction holds at the moment
 * @list: the list
 *
 * Return: how many; each comes back through migration or putback.
 */
static inline unsigned long
vmb_compat_4k_isolated(struct vmb_compat_4k_list *list)
{
	return READ_ONCE(list->info.isolated_pages);
}

#else /* !VMB_BALLOON_MIGRATION */

struct vmb_compat_4k_list {
	struct list_head pages;
};

static inline int vmb_compat_4k_init(struct vmb_compat_4k_list *list)
{
	INIT_LIST_HEAD(&list->pages);
	return 0;
}

static inline void vmb_compat_4k_exit(struct vmb_compat_4k_list *list)
{
}

static inline struct page *vmb_compat_4k_alloc(void)
{
	return alloc_page(GFP_HIGHUSER | __GFP_NORETRY | __GFP_NOMEMALLOC |
			  __GFP_NOWARN);
}

static inline void vmb_compat_4k_add(struct vmb_compat_4k_list *list,
				     struct page *page)
{
	vmb_compat_account(page, 1, true);
	list_add(&page->lru, &list->pages);
}

static inline struct page *vmb_compat_4k_take(struct vmb_compat_4k_list *list)
{
	struct page *page;

	page = list_first_entry_or_null(&list->pages, struct page, lru);
	if (!page)
		return NULL;
	list_del(&page->lru);
	vmb_compat_account(page, 1, false);
	return page;
}

static inline unsigned long
vmb_compat_4k_isolated(struct vmb_compat_4k_list *list)
{
	return 0;
}

#endif /* VMB_BALLOON_MIGRATION */

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
