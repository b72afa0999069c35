// SPDX-License-Identifier: GPL-2.0
/*
 * Pages freed outside the LRU during reclaim are counted with
 * mm_account_reclaimed_pages() (6.4).
 * vmb-probe-one-of: reclaim_accounting
 */
#include <linux/mm.h>
#include <linux/swap.h>

static void __maybe_unused vmb_probe(void)
{
	mm_account_reclaimed_pages(1);
}
