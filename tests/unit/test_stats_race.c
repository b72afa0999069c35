// SPDX-License-Identifier: GPL-2.0
/*
 * The debugfs statistics are read without the lock that serialises the
 * core: one thread runs balloon cycles while another reads the statistics
 * over and over. Built with ThreadSanitizer, which fails the run on any
 * data race; the readings themselves must also make sense (counters never
 * go back, the size never exceeds the guest's RAM). The reading thread
 * also plays reclaim finding the core busy (vmb_pressure(), which takes no
 * lock) and the host ringing the doorbell (vmb_doorbell(), no lock either,
 * then asking vmb_next_wakeup() as the OS does after queuing), and
 * the cycling one reclaim that got the lock (vmb_shrink()).
 * Prints TAP.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "tap.h"

unsigned int tap_passed, tap_failed;

static struct sim sim;
static int writer_done;

static void *writer(void *unused)
{
	unsigned int i;

	for (i = 0; i < 300; i++) {
		sim.host.target = (i * 7919) % 6000;
		if (i % 50 == 25)
			sim.host.reset_on_cmd = VMB_CMD_BATCHED_LOCK;
		sim_cycle(&sim);
		if (i % 10 == 5)
			vmb_shrink(&sim.b, 100);
		sim.now_ms += 1000;
	}
	__atomic_store_n(&writer_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct reading {
	unsigned long long timer, current, batch_locks;
};

static void parse(void *ctx, const char *line)
{
	struct reading *r = ctx;
	char name[32];
	unsigned long long value;

	if (sscanf(line, "%31[^:]: %llu", name, &value) != 2)
		return;
	if (!strncmp(name, "timer ", 6))
		r->timer = value;
	else if (!strncmp(name, "current ", 8))
		r->current = value;
	else if (!strncmp(name, "batchLock ", 10))
		r->batch_locks = value;
}

int main(void)
{
	struct sim_config cfg = { .host_caps = 0x0e };
	struct reading last = { 0 }, now;
	unsigned int reads = 0, backwards = 0, too_big = 0;
	pthread_t thread;

	sim_init(&sim, &cfg);
	if (pthread_create(&thread, NULL, writer, NULL))
		abort();
	while (!__atomic_load_n(&writer_done, __ATOMIC_ACQUIRE)) {
		memset(&now, 0, sizeof(now));
		vmb_stats_show(&sim.b, parse, &now);
		reads++;
		if (reads % 64 == 0)
			vmb_pressure(&sim.b);
		if (reads % 64 == 32) {
			vmb_doorbell(&sim.b);
			vmb_next_wakeup(&sim.b);
		}
		if (now.timer < last.timer || now.batch_locks < last.batch_locks)
			backwards++;
		if (now.current > sim.nframes)
			too_big++;
		last = now;
	}
	pthread_join(thread, NULL);

	tap_ok(reads > 0, "statistics read while cycles ran (%u reads)", reads);
	tap_eq(backwards, 0, "counters never went back");
	tap_eq(too_big, 0, "the size never exceeded RAM");
	tap_eq(last.timer <= 300, 1, "timer within the cycles run");
	tap_ok(sim.b.stats[VMB_STAT_SHRINK] >= 30,
	       "every shrink counted, and requests left while busy too (%lu)",
	       sim.b.stats[VMB_STAT_SHRINK]);
	vmb_shutdown(&sim.b);
	sim_destroy(&sim);

	printf("1..%u\n", tap_passed + tap_failed);
	printf("%u passed, %u failed\n", tap_passed, tap_failed);
	return tap_failed ? 1 : 0;
}
