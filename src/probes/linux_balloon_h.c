// SPDX-License-Identifier: GPL-2.0
/*
 * The balloon core's header is <linux/balloon.h> (7.2 and later).
 * vmb-probe-one-of: balloon_header
 */
#include <linux/mm.h>
#include <linux/balloon.h>

static size_t __maybe_unused vmb_probe(void)
{
	return sizeof(struct balloon_dev_info);
}
