// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module for tests/guest/sabotage-boot-spin.sh, never shipped:
 * the CPU that loads it turns its interrupts off and spins for ever, as a
 * driver that hangs in its init would. The harness must not reset such a
 * boot away.
 */
#include <linux/init.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/printk.h>
#include <asm/processor.h>

static int __init vmb_sabotage_spin(void)
{
	pr_emerg("vmb_sabotage_spin: spinning with interrupts off, for ever\n");
	local_irq_disable();
	for (;;)
		cpu_relax();
	return 0;
}
module_init(vmb_sabotage_spin);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("test only: spins with interrupts off in its init");
