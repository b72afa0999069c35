// SPDX-License-Identifier: GPL-2.0
/*
 * The driver finishes a migration itself: balloon_page_insert() is its to
 * call (until 7.1: <linux/balloon.h> has no such function, the kernel does
 * that part).
 */
#include <linux/mm.h>
#include <linux/balloon_compaction.h>

static void __maybe_unused vmb_probe(struct balloon_dev_info *info,
				     struct page *page)
{
	balloon_page_insert(info, page);
}
