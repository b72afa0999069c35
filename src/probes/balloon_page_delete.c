// SPDX-License-Identifier: GPL-2.0
/* A migrated balloon page is let go with balloon_page_delete() (until 6.16). */
#include <linux/mm.h>
#include <linux/balloon_compaction.h>

static void __maybe_unused vmb_probe(struct page *page)
{
	balloon_page_delete(page);
}
