// SPDX-License-Identifier: GPL-2.0
/*
 * VMware memory balloon driver: the Linux side.
 *
 * This file and linux_pages.c are the only ones that touch the kernel.
 * This one implements the OS hooks of os.h (the `inl` to the host, page
 * allocation, the page lists, the VMCI doorbell), leaving to linux_pages.c
 * how ballooned pages are marked and counted and the list of 4 KiB pages
 * that compaction may migrate. It runs the OS-independent core of
 * balloon.c on one delayed work of a freezable workqueue, when the core
 * says (vmb_next_wakeup()), and shows the core's
 * statistics in debugfs. How much to balloon is decided in balloon.c; the
 * wire protocol is spoken in protocol.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/nodemask.h>
#include <linux/notifier.h>
#include <linux/oom.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/suspend.h>
#include <linux/swap.h>
#include <linux/timekeeping.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>

#include "balloon.h"
#include "compat.h"
#include "linux_pages.h"
#include "os.h"

#if VMB_HAVE_DOORBELL
#include <linux/vmw_vmci_api.h>
#include <linux/vmw_vmci_defs.h>
#endif

/*
 * 2 MiB pages are taken only if free: no direct reclaim. But kswapd is
 * woken, as by any other allocation, when one takes a zone below its low
 * watermark (they may go down to min): without that, 2 MiB inflation left
 * zones between min and low with kswapd asleep (tests/guest/reclaim.sh).
 */
#define VMW_BALLOON_2M_GFP	(__GFP_HIGHMEM | __GFP_NOMEMALLOC | __GFP_NOWARN | \
				 __GFP_KSWAPD_RECLAIM)

/* Upstream's name, but on by default here. */
static bool vmwballoon_shrinker_enable = true;
module_param(vmwballoon_shrinker_enable, bool, 0444);
MODULE_PARM_DESC(vmwballoon_shrinker_enable,
		 "Give ballooned memory back when the guest runs short (default: on)");

/* The last resort, before the OOM killer picks a victim. */
static bool vmwballoon_oom_enable = true;
module_param(vmwballoon_oom_enable, bool, 0444);
MODULE_PARM_DESC(vmwballoon_oom_enable,
		 "Give ballooned memory back before the OOM killer runs (default: on)");

/**
 * struct vmw_balloon - the driver's state
 * @core: the OS-independent balloon
 * @lists: the page lists of &enum vmb_list, linked through page->lru,
 *	but for VMB_LIST_BALLOON_4K
 * @balloon_4k: VMB_LIST_BALLOON_4K, whose pages compaction may migrate
 * @batch_page: the page the batched commands carry
 * @lock: serialises the core: the worker, migration and unload (debugfs
 *	reads the statistics without it)
 * @dwork: the worker that runs the cycles, the driver's one timer: when it
 *	fires is the core's decision (vmb_next_wakeup())
 * @debugfs: the vmmemctl statistics file
 * @stopping: unload has begun; the worker must not run or requeue
 * @cycle_task: the worker's task while it runs a cycle, else NULL
 * @shrinker: gives the balloon back under memory pressure
 * @shrinker_registered: @shrinker is registered
 * @oom_nb: gives the balloon back before the OOM killer runs
 * @oom_registered: @oom_nb is registered
 * @pm_nb: tells the core when hibernation prepares its image
 * @pm_registered: @pm_nb is registered
 * @hibernating: hibernation is under way, from PM_HIBERNATION_PREPARE to
 *	PM_POST_HIBERNATION
 * @doorbell: the VMCI doorbell handle
 */
struct vmw_balloon {
	struct vmb_balloon core;
	struct list_head lists[VMB_NR_LISTS];
	struct vmb_pages_4k balloon_4k;
	struct page *batch_page;
	struct mutex lock;		/* serialises the core */
	struct delayed_work dwork;
	struct dentry *debugfs;
	bool stopping;
	struct task_struct *cycle_task;
	struct vmb_compat_shrinker shrinker;
	bool shrinker_registered;
	struct notifier_block oom_nb;
	bool oom_registered;
	struct notifier_block pm_nb;
	bool pm_registered;
	bool hibernating;
#if VMB_HAVE_DOORBELL
	struct vmci_handle doorbell;
#endif
};

static struct vmw_balloon *vmw_balloon;

static struct vmw_balloon *to_vmw(struct vmb_balloon *b)
{
	return container_of(b, struct vmw_balloon, core);
}

static struct page *to_page(struct vmb_page *page)
{
	return (struct page *)page;
}

static struct vmb_page *to_vmb_page(struct page *page)
{
	return (struct vmb_page *)page;
}

/*
 * The hypercall: one `inl` on the balloon port. The host reads and writes
 * the batch page, hence the memory clobber.
 */
u32 vmb_os_backdoor(struct vmb_balloon *b, u32 cmd, u64 arg1, u64 arg2,
		    u64 *rbx, u64 *rcx)
{
	unsigned long status;
	unsigned long bx = arg1, cx = cmd, dx = VMB_PORT, si = arg2;

	asm volatile ("inl %%dx"
		      : "=a" (status), "+b" (bx), "+c" (cx), "+d" (dx),
			"+S" (si)
		      : "0" ((unsigned long)VMB_MAGIC)
		      : "memory");

	*rbx = bx;
	*rcx = cx;
	return (u32)status;
}

struct vmb_page *vmb_os_page_alloc(struct vmb_balloon *b,
				   enum vmb_page_size size)
{
	if (size == VMB_PAGE_2M)
		return to_vmb_page(alloc_pages(VMW_BALLOON_2M_GFP,
					       vmb_page_sizes[size].order));
	return to_vmb_page(vmb_pages_4k_alloc());
}

void vmb_os_page_free(struct vmb_balloon *b, struct vmb_page *page,
		      enum vmb_page_size size)
{
	__free_pages(to_page(page), vmb_page_sizes[size].order);
}

u64 vmb_os_page_pfn(struct vmb_balloon *b, struct vmb_page *page)
{
	return page_to_pfn(to_page(page));
}

void vmb_os_page_split(struct vmb_balloon *b, struct vmb_page *page,
		       enum vmb_list to)
{
	struct vmw_balloon *vb = to_vmw(b);
	struct page *head = to_page(page);
	unsigned long i;

	split_page(head, vmb_page_sizes[VMB_PAGE_2M].order);
	for (i = 0; i < VMB_2M_FRAMES; i++)
		list_add(&head[i].lru, &vb->lists[to]);
}

/* The frames of a page on @list. */
static unsigned long vmw_balloon_list_frames(enum vmb_list list)
{
	return list == VMB_LIST_BALLOON_2M || list == VMB_LIST_REFUSED_2M ||
	       list == VMB_LIST_HELD_2M ? VMB_2M_FRAMES : 1;
}

/*
 * linux_pages.c keeps the 4 KiB balloon list; the others are plain lists
 * here. A page on a ballooned one (vmb_list_ballooned(): a held page
 * too, which the host still holds) is marked PG_offline and counted, from
 * the moment it joins the list until it leaves it.
 */
void vmb_os_list_add(struct vmb_balloon *b, enum vmb_list list,
		     struct vmb_page *page)
{
	struct vmw_balloon *vb = to_vmw(b);
	struct page *p = to_page(page);

	if (list == VMB_LIST_BALLOON_4K) {
		vmb_pages_4k_add(&vb->balloon_4k, p);
		return;
	}
	if (vmb_list_ballooned(list))
		vmb_pages_account(p, vmw_balloon_list_frames(list), true);
	/* the held queues give their pages back oldest first */
	if (list == VMB_LIST_HELD_4K || list == VMB_LIST_HELD_2M)
		list_add_tail(&p->lru, &vb->lists[list]);
	else
		list_add(&p->lru, &vb->lists[list]);
}

struct vmb_page *vmb_os_list_pop(struct vmb_balloon *b, enum vmb_list list)
{
	struct vmw_balloon *vb = to_vmw(b);
	struct page *p;

	if (list == VMB_LIST_BALLOON_4K)
		return to_vmb_page(vmb_pages_4k_take(&vb->balloon_4k));

	p = list_first_entry_or_null(&vb->lists[list], struct page, lru);
	if (!p)
		return NULL;
	list_del(&p->lru);
	if (vmb_list_ballooned(list))
		vmb_pages_account(p, vmw_balloon_list_frames(list), false);
	return to_vmb_page(p);
}

/*
 * Compaction moves a ballooned 4 KiB page: the host gives the old page
 * back and takes the new one. While the worker runs a cycle (it owns the
 * batch page) the page stays where it is for now: the kernel is told to
 * try again, so memory offlining and alloc_contig_range() do not give up
 * on a page they could move a moment later. Once unload has begun the
 * answer is no for good (VMB_MIGRATE_BUSY), so that the kernel puts the
 * page back at once, for unload to free (linux_pages.c's fence says no
 * before this is called; this covers a call already past it). Otherwise
 * the core decides, try-again included (a reset pending, a busy host).
 * linux_pages.c calls this from the kernel's migratepage callback.
 */
static enum vmb_migrate_result vmw_balloon_migrate(struct vmb_pages_4k *list,
						   struct page *page,
						   struct page *newpage)
{
	struct vmw_balloon *vb = container_of(list, struct vmw_balloon,
					      balloon_4k);
	enum vmb_migrate_result result = VMB_MIGRATE_BUSY;

	if (!mutex_trylock(&vb->lock))
		return VMB_MIGRATE_AGAIN;
	if (!vb->stopping)
		result = vmb_migrate(&vb->core, to_vmb_page(page),
				     to_vmb_page(newpage));
	mutex_unlock(&vb->lock);
	return result;
}

u64 vmb_os_total_ram_frames(struct vmb_balloon *b)
{
	return vmb_compat_totalram_frames();
}

u64 vmb_os_now_ms(struct vmb_balloon *b)
{
	return ktime_to_ms(ktime_get());
}

static struct vmw_balloon *shrinker_to_vmw(struct shrinker *shrinker)
{
	return container_of(vmb_compat_shrinker_of(shrinker),
			    struct vmw_balloon, shrinker);
}

/* The watermark state of one node's populated zones. */
static void vmw_balloon_node_state(int nid, bool *below_low, bool *below_min)
{
	struct pglist_data *pgdat = NODE_DATA(nid);
	int i;

	*below_low = false;
	*below_min = false;
	for (i = 0; i < MAX_NR_ZONES; i++) {
		struct zone *zone = &pgdat->node_zones[i];
		unsigned long free;

		if (!populated_zone(zone))
			continue;
		free = zone_page_state(zone, NR_FREE_PAGES);
		if (free < low_wmark_pages(zone))
			*below_low = true;
		if (free < min_wmark_pages(zone))
			*below_min = true;
	}
}

/* Is the node's kswapd at work, not asleep on its queue? */
static bool vmw_balloon_kswapd_awake(int nid)
{
	return !waitqueue_active(&NODE_DATA(nid)->kswapd_wait); /* a hint */
}

/*
 * The facts of a request for memory, for the core's vmb_reclaim_decide():
 * the glue reports, the core decides. The node reclaiming is taken to be
 * the CPU's: node reclaim runs there, and direct reclaim mostly does.
 * What a shrinker cannot see is left false: memory.reclaim is not told
 * apart (it runs with memory to spare, which the watermarks show).
 */
static void vmw_balloon_facts(struct vmw_balloon *vb, struct vmb_reclaim *r)
{
	int here = numa_node_id(), nid;
	bool other_free = false;

	for_each_online_node(nid) {
		bool low, min;

		vmw_balloon_node_state(nid, &low, &min);
		if (nid == here) {
			r->below_low = low;
			r->below_min = min;
			r->kswapd_awake = vmw_balloon_kswapd_awake(nid);
		} else if (!low) {
			other_free = true;
		}
	}
	r->node_reclaim = other_free && r->below_low;
	r->kswapd = current_is_kswapd();
	r->hibernation = READ_ONCE(vb->hibernating);
	/* drop_caches asks every shrinker for all, with no reclaim running */
	r->own = !(current->flags & PF_MEMALLOC) ||
		 current == READ_ONCE(vb->cycle_task);
}

static unsigned long vmw_balloon_shrink_count(struct shrinker *shrinker,
					      struct shrink_control *sc)
{
	struct vmw_balloon *vb = shrinker_to_vmw(shrinker);
	struct vmb_reclaim r = {
		.caller = VMB_RECLAIM_SHRINKER,
		/* compound pages are never of order 0 */
		.compound = !!(sc->gfp_mask & __GFP_COMP),
	};

	vmw_balloon_facts(vb, &r);
	if (vmb_reclaim_decide(&r) == VMB_RECLAIM_NOTHING)
		return 0;
	return VMB_READ_ONCE(vb->core.size);
}

/*
 * Never waits for the worker: if it is in a cycle, the core only takes
 * note (the inflation stops, and the hold-off begins), and the next call
 * finds the lock free. Every answer counts the request as scanned, none
 * is SHRINK_STOP: the kernel would keep that request for the next call,
 * and 5.10 would then ask for up to half of the balloon at once.
 */
static unsigned long vmw_balloon_shrink_scan(struct shrinker *shrinker,
					     struct shrink_control *sc)
{
	struct vmw_balloon *vb = shrinker_to_vmw(shrinker);
	struct vmb_reclaim r = {
		.caller = VMB_RECLAIM_SHRINKER,
		.frames = sc->nr_to_scan,
		.compound = !!(sc->gfp_mask & __GFP_COMP),
	};
	unsigned long freed;

	vmw_balloon_facts(vb, &r);
	if (vmb_reclaim_decide(&r) == VMB_RECLAIM_NOTHING) {
		sc->nr_scanned = r.frames;
		return 0;
	}
	r.busy = !mutex_trylock(&vb->lock);
	if (!r.busy && vb->stopping) {
		mutex_unlock(&vb->lock);
		return 0;
	}
	freed = vmb_reclaim(&vb->core, &r);
	if (!r.busy)
		mutex_unlock(&vb->lock);
	sc->nr_scanned = r.scanned;
	vmb_compat_account_reclaimed(freed);
	return freed;
}

void vmb_os_yield(struct vmb_balloon *b)
{
	cond_resched();
}

#if VMB_HAVE_DOORBELL
/*
 * VMCI runs this in process context when the host rings: the core takes
 * note (it needs no lock for that), then the worker is kicked.
 */
static void vmw_balloon_doorbell(void *data)
{
	struct vmw_balloon *vb = data;

	vmb_doorbell(&vb->core);
	mod_delayed_work(system_freezable_wq, &vb->dwork, 0);
}

int vmb_os_doorbell_create(struct vmb_balloon *b, u64 *context,
			   u64 *resource)
{
	struct vmw_balloon *vb = to_vmw(b);
	int err;

	err = vmci_doorbell_create(&vb->doorbell, VMCI_FLAG_DELAYED_CB,
				   VMCI_PRIVILEGE_FLAG_RESTRICTED,
				   vmw_balloon_doorbell, vb);
	if (err != VMCI_SUCCESS)
		return -EIO;
	*context = vb->doorbell.context;
	*resource = vb->doorbell.resource;
	return 0;
}

void vmb_os_doorbell_destroy(struct vmb_balloon *b)
{
	struct vmw_balloon *vb = to_vmw(b);

	vmci_doorbell_destroy(vb->doorbell);
	vb->doorbell = VMCI_INVALID_HANDLE;
}
#else
int vmb_os_doorbell_create(struct vmb_balloon *b, u64 *context,
			   u64 *resource)
{
	return -EOPNOTSUPP;
}

void vmb_os_doorbell_destroy(struct vmb_balloon *b)
{
}
#endif

void vmb_os_log(struct vmb_balloon *b, enum vmb_log_level level,
		const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	switch (level) {
	case VMB_LOG_ERR:
		pr_err("%pV\n", &vaf);
		break;
	case VMB_LOG_WARN:
		pr_warn("%pV\n", &vaf);
		break;
	default:
		pr_info("%pV\n", &vaf);
		break;
	}
	va_end(args);
}

/*
 * The kernel is about to kill a task for memory: reclaim, the shrinker
 * included, found none. This runs under the kernel's oom_lock: the core
 * bounds the wait for its lock and the work (vmb_oom_wait_ms()). If the
 * wait gives up, the OOM killer goes ahead, and the next reclaim finds
 * the balloon free.
 */
static int vmw_balloon_oom_notify(struct notifier_block *nb,
				  unsigned long unused, void *freed_pages)
{
	struct vmw_balloon *vb = container_of(nb, struct vmw_balloon, oom_nb);
	struct vmb_reclaim r = {
		.caller = VMB_RECLAIM_OOM,
		.frames = VMB_PRESSURE_MIN_FRAMES,
	};
	unsigned long *freed = freed_pages;
	unsigned int tries, ms;
	u64 given = 0;

	for (tries = 0; !mutex_trylock(&vb->lock); tries++) {
		ms = vmb_oom_wait_ms(&vb->core, tries);
		if (!ms) {
			pr_warn_ratelimited("the guest ran short of memory while the balloon was busy: nothing given back\n");
			return NOTIFY_OK;
		}
		msleep(ms);
	}
	r.hibernation = READ_ONCE(vb->hibernating);
	if (!vb->stopping)
		given = vmb_reclaim(&vb->core, &r);
	mutex_unlock(&vb->lock);
	if (given)
		pr_info_ratelimited("the guest ran short of memory: %llu frames given back\n",
				    given);
	*freed += given;
	return NOTIFY_OK;
}

/*
 * Hibernation's preallocation reclaims with no shortage: the core is told
 * (vmb_reclaim_decide()) from the moment the image is prepared until the
 * system is back.
 */
static int vmw_balloon_pm_notify(struct notifier_block *nb,
				 unsigned long event, void *unused)
{
	struct vmw_balloon *vb = container_of(nb, struct vmw_balloon, pm_nb);

	if (event == PM_HIBERNATION_PREPARE)
		WRITE_ONCE(vb->hibernating, true);
	else if (event == PM_POST_HIBERNATION)
		WRITE_ONCE(vb->hibernating, false);
	return NOTIFY_DONE;
}

/*
 * Queue the next cycle when the core said. Under vb->lock, so that unload,
 * once it has set vb->stopping, can cancel it for good.
 */
static void vmw_balloon_schedule(struct vmw_balloon *vb,
				 struct vmb_wakeup next)
{
	unsigned long delay = msecs_to_jiffies(next.ms);

	/* on a whole second, with the rest of the system's timers */
	if (next.deferrable)
		delay = round_jiffies_relative(delay);
	/* freezable: the balloon sleeps while the system suspends */
	mod_delayed_work(system_freezable_wq, &vb->dwork, delay);
	/*
	 * A ring since the core answered kicked the worker, and the line
	 * above may have pushed that kick back. The ring is noted before its
	 * kick; asked after the queuing, the core knows of it.
	 */
	smp_mb();
	if (delay && !vmb_next_wakeup(&vb->core).ms)
		mod_delayed_work(system_freezable_wq, &vb->dwork, 0);
}

/* One cycle of the core, then the next one when the core says. */
static void vmw_balloon_work(struct work_struct *work)
{
	struct vmw_balloon *vb = container_of(to_delayed_work(work),
					      struct vmw_balloon, dwork);

	mutex_lock(&vb->lock);
	if (!vb->stopping) {
		struct vmb_wakeup next;

		WRITE_ONCE(vb->cycle_task, current);
		next = vmb_work(&vb->core);
		WRITE_ONCE(vb->cycle_task, NULL);
		vmw_balloon_schedule(vb, next);
	}
	mutex_unlock(&vb->lock);
}

static void vmw_balloon_emit_line(void *ctx, const char *line)
{
	seq_printf(ctx, "%s\n", line);
}

/* Without vb->lock: reading the statistics never waits for a cycle. */
static int vmw_balloon_stats_show(struct seq_file *f, void *unused)
{
	struct vmw_balloon *vb = f->private;

	vmb_stats_show(&vb->core, vmw_balloon_emit_line, f);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vmw_balloon_stats);

static u32 vmw_balloon_requested_caps(void)
{
	u32 caps = VMB_CAPS_ALL;

	if (!VMB_HAVE_DOORBELL)
		caps &= ~VMB_CAP_DOORBELL;
	if (!IS_ENABLED(CONFIG_64BIT))
		caps &= ~VMB_CAP_64BIT_TARGET;
	return caps;
}

static int __init vmw_balloon_init(void)
{
	struct vmw_balloon *vb;
	int err, i;

	/* No port I/O unless the kernel found VMware's hypervisor. */
	if (!vmb_compat_on_vmware()) {
		pr_info("not running on a VMware hypervisor\n");
		return -ENODEV;
	}

	vb = kzalloc(sizeof(*vb), GFP_KERNEL);
	if (!vb)
		return -ENOMEM;
	vb->batch_page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!vb->batch_page) {
		kfree(vb);
		return -ENOMEM;
	}

	for (i = 0; i < VMB_NR_LISTS; i++)
		INIT_LIST_HEAD(&vb->lists[i]);
	err = vmb_pages_4k_init(&vb->balloon_4k, vmw_balloon_migrate);
	if (err) {
		pr_err("cannot set up balloon page migration: %d\n", err);
		__free_page(vb->batch_page);
		kfree(vb);
		return err;
	}
	mutex_init(&vb->lock);
	INIT_DELAYED_WORK(&vb->dwork, vmw_balloon_work);
#if VMB_HAVE_DOORBELL
	vb->doorbell = VMCI_INVALID_HANDLE;
#endif
	vmb_init(&vb->core, vmw_balloon_requested_caps(),
		 page_address(vb->batch_page), page_to_pfn(vb->batch_page));

	vmw_balloon = vb;
	if (vmwballoon_shrinker_enable) {
		err = vmb_compat_shrinker_register(&vb->shrinker, "vmw-balloon",
						   vmw_balloon_shrink_count,
						   vmw_balloon_shrink_scan);
		if (err)
			pr_warn("no shrinker (%d): the balloon will not give memory back under pressure\n",
				err);
		vb->shrinker_registered = !err;
	}
	if (vmwballoon_oom_enable) {
		vb->oom_nb.notifier_call = vmw_balloon_oom_notify;
		err = register_oom_notifier(&vb->oom_nb);
		if (err)
			pr_warn("no OOM notifier (%d)\n", err);
		vb->oom_registered = !err;
	}
	vb->pm_nb.notifier_call = vmw_balloon_pm_notify;
	vb->pm_registered = !register_pm_notifier(&vb->pm_nb);
	vb->debugfs = debugfs_create_file("vmmemctl", 0400, NULL, vb,
					  &vmw_balloon_stats_fops);
	queue_delayed_work(system_freezable_wq, &vb->dwork, 0);
	pr_info("version " VMB_VERSION " loaded%s%s%s\n",
		VMB_BALLOON_MIGRATION ? "; 4 KiB pages migrate" : "",
		vb->shrinker_registered ? "; gives memory back under pressure" : "",
		vb->oom_registered ? "; gives memory back before an OOM kill" : "");
	return 0;
}
module_init(vmw_balloon_init);

/*
 * Unload's part in emptying the balloon, for vmb_pages_4k_quiesce(): the
 * first time START(0), which frees every listed page; then, as often as
 * linux_pages.c asks, what came back since (no command: the host forgot
 * every page at START(0)).
 */
static void __exit vmw_balloon_drain(struct vmb_pages_4k *list, bool first)
{
	struct vmw_balloon *vb = container_of(list, struct vmw_balloon,
					      balloon_4k);

	mutex_lock(&vb->lock);
	if (first)
		vmb_shutdown(&vb->core);
	else
		vmb_shutdown_rest(&vb->core);
	mutex_unlock(&vb->lock);
}

static void __exit vmw_balloon_exit(void)
{
	struct vmw_balloon *vb = vmw_balloon;

	debugfs_remove(vb->debugfs);
	/* each waits for any callback under way */
	if (vb->oom_registered)
		unregister_oom_notifier(&vb->oom_nb);
	if (vb->shrinker_registered)
		vmb_compat_shrinker_unregister(&vb->shrinker);
	if (vb->pm_registered)
		unregister_pm_notifier(&vb->pm_nb);

	/* After this, neither the doorbell nor the worker starts a cycle. */
	mutex_lock(&vb->lock);
	vb->stopping = true;
	vmb_stop_doorbell(&vb->core);
	mutex_unlock(&vb->lock);
	cancel_delayed_work_sync(&vb->dwork);

	/* returns once the kernel holds no page of the balloon, and never will */
	vmb_pages_4k_quiesce(&vb->balloon_4k, vmw_balloon_drain);
	vmb_pages_4k_exit(&vb->balloon_4k);
	__free_page(vb->batch_page);
	kfree(vb);
}
module_exit(vmw_balloon_exit);

MODULE_AUTHOR("vmw-balloon-dkms developers");
MODULE_DESCRIPTION("VMware memory balloon driver");
MODULE_VERSION(VMB_VERSION);
MODULE_ALIAS("dmi:*:svnVMware*:*");
MODULE_ALIAS("vmware_vmmemctl");
MODULE_LICENSE("GPL");
