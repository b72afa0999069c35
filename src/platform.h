/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one place where the OS-independent balloon core (protocol.c,
 * balloon.c) learns whether it is built into the kernel module or into the
 * userspace unit tests. Everything else in the core is plain C.
 */
#ifndef VMB_PLATFORM_H
#define VMB_PLATFORM_H

#ifdef __KERNEL__

#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/stddef.h>
#include <linux/types.h>

#else

/* The unit tests supply the same names for userspace. */
#include "userspace_types.h"

#endif /* __KERNEL__ */

#define VMB_U32_MAX ((u32)~0U)

/*
 * Statistics and lockless readers. Every field vmb_stats_show() shows has
 * one writer, whoever holds the lock that serialises the core, while
 * debugfs reads them without that lock, at any time. So each write of such
 * a field is VMB_WRITE_ONCE() and each lockless read VMB_READ_ONCE(): one
 * whole access each, never torn, merged or invented by the compiler. The
 * writer reads its own fields plainly, since nothing else writes them.
 *
 * Counters are unsigned long, a single machine word even on 32-bit
 * kernels. The size and the target stay u64: on a 32-bit kernel the
 * size cannot exceed RAM and the target cannot exceed 32 bits (64-bit
 * targets are never asked for there), so the upper half of each is
 * always zero and reading it apart from the lower half tears nothing.
 *
 * In the kernel these are READ_ONCE() and WRITE_ONCE(); in userspace,
 * relaxed atomic accesses, which is what those are and what lets
 * ThreadSanitizer check the tests.
 */
#ifdef __KERNEL__
#define VMB_READ_ONCE(x)	READ_ONCE(x)
#define VMB_WRITE_ONCE(x, val)	WRITE_ONCE(x, val)
#else
#define VMB_READ_ONCE(x)	__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define VMB_WRITE_ONCE(x, val)	__atomic_store_n(&(x), (val), __ATOMIC_RELAXED)
#endif

/*
 * VMB_XCHG() - store @val in @x and return what @x held, in one atomic
 * step ordered against every access before and after it: for a flag that
 * others raise without the lock and the lock holder takes down, so that
 * no raise is lost between the holder's read and its write.
 */
#ifdef __KERNEL__
#define VMB_XCHG(x, val)	xchg(&(x), val)
#else
#define VMB_XCHG(x, val)	__atomic_exchange_n(&(x), (val), __ATOMIC_SEQ_CST)
#endif

/**
 * vmb_stat_inc() - count one event; only the lock holder may
 * @counter: the statistic
 */
static inline void vmb_stat_inc(unsigned long *counter)
{
	VMB_WRITE_ONCE(*counter, *counter + 1);
}

/**
 * vmb_stat_add() - count several events at once; only the lock holder may
 * @counter: the statistic
 * @n: how many
 */
static inline void vmb_stat_add(unsigned long *counter, unsigned long n)
{
	VMB_WRITE_ONCE(*counter, *counter + n);
}

#endif /* VMB_PLATFORM_H */
