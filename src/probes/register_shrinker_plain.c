// SPDX-License-Identifier: GPL-2.0
/*
 * A shrinker the driver embeds, registered without a name:
 * register_shrinker() takes the shrinker only (until 5.19).
 * vmb-probe-one-of: shrinker_api
 */
#include <linux/mm.h>
#include <linux/shrinker.h>

static int __maybe_unused vmb_probe(struct shrinker *s)
{
	return register_shrinker(s);
}
