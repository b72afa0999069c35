// SPDX-License-Identifier: GPL-2.0
/*
 * bench/guest-helper.c - the benchmark's helper inside the guest (built
 * there with the guest's gcc when the bench first talks to a guest).
 *
 *   guest-helper floor
 *	Context beside the floor (bench/floor/ measures that in the kernel):
 *	map 1 GiB of anonymous memory, ask for 2 MiB pages (MADV_HUGEPAGE)
 *	and populate it for writing: page faults, allocation and zeroing, no
 *	hypercall.  Prints one line:
 *	"<ms to populate> <KiB of it in 2 MiB pages> <ms of one more pass
 *	writing zeros over it>" (the last: what one zeroing costs here).
 *
 *   guest-helper offline
 *	Which page frames the guest's kernel holds as offline (PG_offline,
 *	KPF_OFFLINE in /proc/kpageflags): the balloon drivers mark every page
 *	of their balloon so.  Prints "<frames> <count> <hex bitmap>", bit n
 *	(byte n / 8, bit n % 8) for frame n.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define KPF_OFFLINE 23
#define FLOOR_BYTES (1UL << 30)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long anon_huge_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int floor_run(void)
{
	char *p = mmap(NULL, FLOOR_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t0, t1, t2;
	long huge;

	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(p, FLOOR_BYTES, MADV_HUGEPAGE);
	t0 = now_ms();
	if (madvise(p, FLOOR_BYTES, MADV_POPULATE_WRITE)) {
		/* an older kernel: one write per 4 KiB page */
		for (size_t off = 0; off < FLOOR_BYTES; off += 4096)
			((volatile char *)p)[off] = 0;
	}
	t1 = now_ms();
	huge = anon_huge_kib();
	memset(p, 0, FLOOR_BYTES);
	t2 = now_ms();
	munmap(p, FLOOR_BYTES);
	printf("%.1f %ld %.1f\n", t1 - t0, huge, t2 - t1);
	return 0;
}

static int offline_run(void)
{
	static uint64_t flags[4096];
	unsigned char *bits = NULL;
	size_t frames = 0, count = 0, cap = 0;
	int fd = open("/proc/kpageflags", O_RDONLY);
	ssize_t n;

	if (fd < 0) {
		perror("/proc/kpageflags");
		return 1;
	}
	while ((n = read(fd, flags, sizeof(flags))) > 0) {
		size_t got = n / sizeof(flags[0]);

		if ((frames + got + 7) / 8 > cap) {
			size_t old = cap;

			cap = 2 * ((frames + got + 7) / 8) + 4096;
			bits = realloc(bits, cap);
			if (!bits)
				return 1;
			memset(bits + old, 0, cap - old);
		}
		for (size_t i = 0; i < got; i++, frames++) {
			if (flags[i] >> KPF_OFFLINE & 1) {
				bits[frames / 8] |= 1 << (frames % 8);
				count++;
			}
		}
	}
	if (n < 0) {
		perror("read /proc/kpageflags");
		return 1;
	}
	close(fd);
	printf("%zu %zu ", frames, count);
	for (size_t i = 0; i < (frames + 7) / 8; i++)
		printf("%02x", bits[i]);
	printf("\n");
	free(bits);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "floor"))
		return floor_run();
	if (argc == 2 && !strcmp(argv[1], "offline"))
		return offline_run();
	fprintf(stderr, "usage: guest-helper floor|offline\n");
	return 2;
}
