// SPDX-License-Identifier: GPL-2.0
/* A pseudo file system is set up with init_pseudo() (5.5 and later). */
#include <linux/fs_context.h>
#include <linux/pseudo_fs.h>

static bool __maybe_unused vmb_probe(struct fs_context *fc)
{
	return init_pseudo(fc, 0);
}
