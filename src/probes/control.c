// SPDX-License-Identifier: GPL-2.0
/*
 * The control probe: it uses nothing that differs between kernels, so it
 * compiles wherever the probes are compiled correctly. If it fails, every
 * other probe's failure could have the same cause, and the build stops.
 */
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/vmstat.h>

static void __maybe_unused vmb_probe(void)
{
	count_vm_events(PGFAULT, 1);
}
