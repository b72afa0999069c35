// SPDX-License-Identifier: GPL-2.0
/*
 * vmb_bench_floor - the benchmark's physical floor, measured in the guest's
 * kernel: the time to allocate 1 GiB in 2 MiB pages with the GFP flags
 * this package's driver uses for its 2 MiB balloon pages, and nothing
 * else: no hypercall, no list, no accounting.  Whatever zeroing the kernel
 * does on allocation (init_on_alloc) is in it, as it is in the balloon's.
 *
 * Loading it measures once; the result stays readable until rmmod:
 *   /sys/module/vmb_bench_floor/parameters/elapsed_ns   the allocations
 *   /sys/module/vmb_bench_floor/parameters/allocated    pages obtained
 * Built and loaded only inside a benchmark guest (bench/bench.py).
 */
#include <linux/gfp.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

/* the same flags as VMW_BALLOON_2M_GFP in src/linux_glue.c */
#define FLOOR_GFP	(__GFP_HIGHMEM | __GFP_NOMEMALLOC | __GFP_NOWARN)
#define FLOOR_ORDER	9

static unsigned int pages = 512;
module_param(pages, uint, 0444);
MODULE_PARM_DESC(pages, "2 MiB pages to allocate (default 512: 1 GiB)");

static u64 elapsed_ns;
module_param(elapsed_ns, ullong, 0444);
MODULE_PARM_DESC(elapsed_ns, "time the allocations took (ns)");

static unsigned int allocated;
module_param(allocated, uint, 0444);
MODULE_PARM_DESC(allocated, "2 MiB pages obtained");

static int __init vmb_bench_floor_init(void)
{
	struct page **held;
	unsigned int i;
	u64 start;

	held = kvcalloc(pages, sizeof(*held), GFP_KERNEL);
	if (!held)
		return -ENOMEM;

	start = ktime_get_ns();
	for (i = 0; i < pages; i++) {
		held[i] = alloc_pages(FLOOR_GFP, FLOOR_ORDER);
		if (!held[i])
			break;
	}
	elapsed_ns = ktime_get_ns() - start;
	allocated = i;

	while (i--)
		__free_pages(held[i], FLOOR_ORDER);
	kvfree(held);
	return 0;
}

static void __exit vmb_bench_floor_exit(void)
{
}

module_init(vmb_bench_floor_init);
module_exit(vmb_bench_floor_exit);
MODULE_DESCRIPTION("vmw-balloon-dkms benchmark: the allocation floor");
MODULE_LICENSE("GPL");
