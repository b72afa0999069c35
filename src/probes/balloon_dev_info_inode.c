// SPDX-License-Identifier: GPL-2.0
/*
 * Balloon pages are movable through an inode the driver provides, from a
 * pseudo file system of its own (until 5.19).
 */
#include <linux/mm.h>
#include <linux/balloon_compaction.h>

static void __maybe_unused vmb_probe(struct balloon_dev_info *info)
{
	info->inode = NULL;
}
