/* SPDX-License-Identifier: GPL-2.0 */
/* A few lines of TAP: one "ok"/"not ok" per check, a summary at the end. */
#ifndef VMB_TAP_H
#define VMB_TAP_H

#include <stdarg.h>
#include <stdio.h>

extern unsigned int tap_passed, tap_failed;

__attribute__((format(printf, 2, 3)))
static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list args;

	printf("%sok %u - ", cond ? "" : "not ", tap_passed + tap_failed + 1);
	va_start(args, fmt);
	vprintf(fmt, args);
	va_end(args);
	printf("\n");
	if (cond)
		tap_passed++;
	else
		tap_failed++;
	return cond;
}

/* Equality of two integers, printing both when they differ. */
#define tap_eq(got, want, ...) do {					\
	unsigned long long got_ = (got), want_ = (want);		\
	if (!tap_ok(got_ == want_, __VA_ARGS__))			\
		printf("#   got %llu (%#llx), want %llu (%#llx)\n",	\
		       got_, got_, want_, want_);			\
} while (0)

#endif /* VMB_TAP_H */
