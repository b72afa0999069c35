// SPDX-License-Identifier: GPL-2.0
/* The NR_BALLOON_PAGES node statistic ("Balloon:" in /proc/meminfo, 6.15). */
#include <linux/mm.h>
#include <linux/vmstat.h>

static void __maybe_unused vmb_probe(struct page *page)
{
	mod_node_page_state(page_pgdat(page), NR_BALLOON_PAGES, 1);
}
