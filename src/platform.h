/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one place where the OS-independent balloon core (protocol.c,
 * balloon.c) learns whether it is built into the kernel module or into the
 * userspace unit tests. Everything else in the core is plain C.
 */
#ifndef VMB_PLATFORM_H
#define VMB_PLATFORM_H

#ifdef __KERNEL__

#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/stddef.h>
#include <linux/types.h>

#else

/* The unit tests supply the same names for userspace. */
#include "userspace_types.h"

#endif /* __KERNEL__ */

#define VMB_U32_MAX ((u32)~0U)

#endif /* VMB_PLATFORM_H */
