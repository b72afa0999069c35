// SPDX-License-Identifier: GPL-2.0
/*
 * A shrinker the driver embeds, registered with a name: register_shrinker()
 * takes a format (6.0 to 6.6).
 * vmb-probe-one-of: shrinker_api
 */
#include <linux/mm.h>
#include <linux/shrinker.h>

static int __maybe_unused vmb_probe(struct shrinker *s)
{
	return register_shrinker(s, "%s", "vmb-probe");
}
