// SPDX-License-Identifier: GPL-2.0
/*
 * The balloon_migrate line of /proc/vmstat can be counted: the kernel
 * migrates balloon pages (CONFIG_BALLOON_COMPACTION, CONFIG_BALLOON_MIGRATION
 * from 7.2).
 */
#include <linux/mm.h>
#include <linux/vmstat.h>

static void __maybe_unused vmb_probe(void)
{
	count_vm_event(BALLOON_MIGRATE);
}
