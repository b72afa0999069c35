// SPDX-License-Identifier: GPL-2.0
/*
 * The movable_ops rework (page_has_movable_ops(), 6.17): its migration
 * wants 0 back when the old balloon page was deflated and the new one could
 * not be inflated, where older kernels want -EBUSY.
 */
#include <linux/mm.h>
#include <linux/page-flags.h>

static bool __maybe_unused vmb_probe(const struct page *page)
{
	return page_has_movable_ops(page);
}
