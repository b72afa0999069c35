// SPDX-License-Identifier: GPL-2.0
/*
 * The balloon_inflate and balloon_deflate lines of /proc/vmstat can be
 * counted: the kernel has the balloon core (CONFIG_MEMORY_BALLOON, 5.3 to
 * 7.1; CONFIG_BALLOON from 7.2).
 */
#include <linux/mm.h>
#include <linux/vmstat.h>

static void __maybe_unused vmb_probe(void)
{
	count_vm_events(BALLOON_INFLATE, 1);
	count_vm_events(BALLOON_DEFLATE, 1);
}
