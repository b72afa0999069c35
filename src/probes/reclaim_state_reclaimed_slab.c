// SPDX-License-Identifier: GPL-2.0
/*
 * Pages freed outside the LRU during reclaim are added to
 * current->reclaim_state->reclaimed_slab (until 6.3).
 * vmb-probe-one-of: reclaim_accounting
 */
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/swap.h>

static void __maybe_unused vmb_probe(void)
{
	if (current->reclaim_state)
		current->reclaim_state->reclaimed_slab += 1;
}
