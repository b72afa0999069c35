/* SPDX-License-Identifier: GPL-2.0 */
/* The kernel types and helpers the balloon core uses, for userspace. */
#ifndef VMB_USERSPACE_TYPES_H
#define VMB_USERSPACE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;

#define __printf(fmt, args) __attribute__((format(printf, fmt, args)))

#endif /* VMB_USERSPACE_TYPES_H */
