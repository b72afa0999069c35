// SPDX-License-Identifier: GPL-2.0
/*
 * The balloon core's header is <linux/balloon_compaction.h> (3.8 to 7.1).
 * vmb-probe-one-of: balloon_header
 */
#include <linux/mm.h>
#include <linux/balloon_compaction.h>

static size_t __maybe_unused vmb_probe(void)
{
	return sizeof(struct balloon_dev_info);
}
