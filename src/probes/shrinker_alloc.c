// SPDX-License-Identifier: GPL-2.0
/*
 * Shrinkers are allocated by the kernel: shrinker_alloc(), then
 * shrinker_register() and shrinker_free() (6.7).
 * vmb-probe-one-of: shrinker_api
 */
#include <linux/mm.h>
#include <linux/shrinker.h>

static void __maybe_unused vmb_probe(void)
{
	struct shrinker *s = shrinker_alloc(0, "%s", "vmb-probe");

	if (s)
		shrinker_register(s);
	shrinker_free(s);
}
