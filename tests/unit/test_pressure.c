// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the balloon core under memory pressure: vmb_shrink() (the
 * guest's reclaim takes memory back), vmb_pressure() (reclaim found the
 * core busy) and the hold-off after either. Prints TAP.
 */
#include "sim.h"
#include "tap.h"

unsigned int tap_passed, tap_failed;

static struct sim sim;

static struct sim *setup(u32 host_caps)
{
	struct sim_config cfg = { .host_caps = host_caps };

	sim_init(&sim, &cfg);
	return &sim;
}

static void check_consistent(struct sim *s, const char *what)
{
	char why[160] = "";

	if (!tap_ok(sim_consistent(s, why, sizeof(why)), "%s: consistent", what))
		printf("#   %s\n", why);
}

/* What the host and the driver both say the balloon holds. */
static void check_size(struct sim *s, u64 want, const char *what)
{
	tap_eq(s->b.size, want, "%s: balloon size", what);
	tap_eq(s->host.locked_frames, want, "%s: the host holds as much", what);
}

static void shutdown_and_check(struct sim *s, const char *what)
{
	vmb_shutdown(&s->b);
	tap_eq(s->allocated, 0, "%s: nothing left allocated after shutdown",
	       what);
	sim_destroy(s);
}

static unsigned long stat(struct sim *s, enum vmb_stat which)
{
	return s->b.stats[which];
}

/*
 * Reclaim takes 4 KiB pages first: what it asks for, at least a batch
 * (VMB_PRESSURE_MIN_FRAMES).
 */
static void test_shrink_4k(void)
{
	struct sim *s = setup(0x2e);
	u64 unlocks;

	s->no_2m = true;	/* 1000 frames of 4 KiB, then four 2 MiB pages */
	s->host.target = 1000;
	sim_cycle(s);
	s->no_2m = false;
	s->host.target = 3048;
	sim_cycle(s);
	check_size(s, 3048, "shrink 4k: inflated");
	unlocks = s->host.calls[VMB_CMD_BATCHED_UNLOCK];
	tap_eq(vmb_shrink(&s->b, 100), 512,
	       "shrink 4k: 100 frames asked, a batch of 512 given back");
	check_size(s, 3048 - 512, "shrink 4k: after");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_UNLOCK] - unlocks, 1,
	       "shrink 4k: one batched UNLOCK told the host");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK], 0,
	       "shrink 4k: no 2 MiB page touched");
	tap_eq(vmb_shrink(&s->b, 600), 488 + 512,
	       "shrink 4k: 600 asked: the last 4 KiB pages, then a 2 MiB one");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK], 1,
	       "shrink 4k: one 2 MiB UNLOCK for what 4 KiB pages lacked");
	tap_eq(stat(s, VMB_STAT_SHRINK), 2, "shrink 4k: two shrinks counted");
	tap_eq(stat(s, VMB_STAT_SHRINK_FREE), 512 + 1000,
	       "shrink 4k: shrinkFree counts every frame given");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K], 1000,
	       "shrink 4k: every 4 KiB page counted as freed");
	check_consistent(s, "shrink 4k");
	shutdown_and_check(s, "shrink 4k");
}

/* With only 2 MiB pages left, a small request takes a whole one. */
static void test_shrink_rounds_up_to_2m(void)
{
	struct sim *s = setup(0x2e);

	s->host.target = 4096;
	sim_cycle(s);
	check_size(s, 4096, "shrink 2M: eight 2 MiB pages");
	tap_eq(vmb_shrink(&s->b, 128), 512,
	       "shrink 2M: 128 frames asked, one 2 MiB page given");
	check_size(s, 4096 - 512, "shrink 2M: after");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK], 1,
	       "shrink 2M: one 2 MiB UNLOCK");
	tap_eq(vmb_shrink(&s->b, 513), 1024,
	       "shrink 2M: 513 frames asked, two pages given");
	tap_eq(stat(s, VMB_STAT_SHRINK_FREE), 1536,
	       "shrink 2M: shrinkFree counts every frame given");
	check_consistent(s, "shrink 2M");
	shutdown_and_check(s, "shrink 2M");
}

/* More than the balloon has: all of it, and no more. */
static void test_shrink_everything(void)
{
	struct sim *s = setup(0x2e);

	s->host.target = 3000;
	sim_cycle(s);
	tap_eq(vmb_shrink(&s->b, 1000000), 3000,
	       "shrink all: the whole balloon given back");
	check_size(s, 0, "shrink all: after");
	tap_eq(vmb_shrink(&s->b, 128), 0, "shrink all: nothing left to give");
	tap_eq(stat(s, VMB_STAT_SHRINK), 2, "shrink all: both requests counted");
	tap_eq(s->allocated, 0, "shrink all: every page back in the guest");
	check_consistent(s, "shrink all");
	shutdown_and_check(s, "shrink all");
}

/* After a shrink, no inflation for the hold-off; each request renews it. */
static void test_holdoff(void)
{
	struct sim *s = setup(0x26);
	u64 t0;

	s->host.target = 3000;
	sim_cycle(s);
	t0 = s->now_ms;
	vmb_shrink(&s->b, 1000);
	check_size(s, 2000, "hold-off: shrunk");
	s->now_ms = t0 + 1000;
	sim_cycle(s);
	check_size(s, 2000, "hold-off: no inflation 1 s later");
	s->now_ms = t0 + 4000;
	vmb_shrink(&s->b, 100);
	s->now_ms = t0 + 5000;
	sim_cycle(s);
	check_size(s, 1488, "hold-off: a second shrink at 4 s renews it");
	s->now_ms = t0 + 4000 + VMB_PRESSURE_HOLDOFF_MS - 1;
	sim_cycle(s);
	check_size(s, 1488, "hold-off: still holding 1 ms before its end");
	s->host.target = 800;
	sim_cycle(s);
	check_size(s, 800, "hold-off: deflation to a lower target goes on");
	s->host.target = 3000;
	s->now_ms = t0 + 4000 + VMB_PRESSURE_HOLDOFF_MS;
	sim_cycle(s);
	check_size(s, 3000, "hold-off: over, back at target");
	tap_eq(stat(s, VMB_STAT_SHRINK), 2, "hold-off: two shrinks counted");
	check_consistent(s, "hold-off");
	shutdown_and_check(s, "hold-off");
}

/*
 * Reclaim finds the core busy inflating: the inflation stops after the
 * chunk it is building, and the hold-off begins.
 */
static void test_pressure_during_inflation(void)
{
	struct sim *s = setup(0x26);
	u64 t0 = s->now_ms;

	s->host.target = 2000;
	s->pressure_at_alloc = 10;
	sim_cycle(s);
	check_size(s, 10, "busy: inflation stopped at the 10th page");
	tap_ok(!s->b.pressure_pending, "busy: the request was taken");
	tap_eq(stat(s, VMB_STAT_SHRINK), 1, "busy: counted as a shrink");
	tap_eq(stat(s, VMB_STAT_SHRINK_FREE), 0, "busy: nothing given back yet");
	s->now_ms = t0 + VMB_PRESSURE_HOLDOFF_MS - 1;
	sim_cycle(s);
	check_size(s, 10, "busy: no inflation during the hold-off");
	s->now_ms = t0 + VMB_PRESSURE_HOLDOFF_MS;
	sim_cycle(s);
	check_size(s, 2000, "busy: back at target after it");
	check_consistent(s, "busy");
	shutdown_and_check(s, "busy");
}

/* A request left between two cycles holds off the next inflation. */
static void test_pressure_between_cycles(void)
{
	struct sim *s = setup(0x26);
	u64 t0;

	s->host.target = 1000;
	sim_cycle(s);
	vmb_pressure(&s->b);
	t0 = s->now_ms;
	s->host.target = 2000;
	sim_cycle(s);
	check_size(s, 1000, "between: no inflation right after pressure");
	tap_eq(stat(s, VMB_STAT_SHRINK), 1, "between: counted once");
	s->now_ms = t0 + VMB_PRESSURE_HOLDOFF_MS;
	sim_cycle(s);
	check_size(s, 2000, "between: inflates after the hold-off");
	shutdown_and_check(s, "between");
}

/* A host that will not unlock: nothing freed, nothing lost. */
static void test_shrink_refused(void)
{
	struct sim *s = setup(0x26);

	s->host.target = 1000;
	sim_cycle(s);
	s->host.refuse_unlock = VMB_ERROR_PPN_PINNED;
	tap_eq(vmb_shrink(&s->b, 256), 0, "refused: nothing given back");
	check_size(s, 1000, "refused: the balloon keeps its pages");
	s->host.refuse_unlock = 0;
	tap_eq(vmb_shrink(&s->b, 256), 512, "refused: given once the host unlocks");
	check_consistent(s, "refused");
	shutdown_and_check(s, "refused");
}

/*
 * One page the host will not unlock, the first a deflation takes: the
 * shrinker (and the OOM notifier, which asks the same) still gets memory
 * back, one page per command as in batches.
 */
static void test_shrink_one_pinned(void)
{
	static const u32 caps[] = { 0x02, 0x26 };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		struct sim *s = setup(caps[i]);
		char what[64];

		snprintf(what, sizeof(what), "caps %#x, one page pinned", caps[i]);
		s->host.target = 1000;
		sim_cycle(s);
		s->lists[VMB_LIST_BALLOON_4K]->pinned = true;
		tap_eq(vmb_shrink(&s->b, 256), 512, "%s: a batch given back",
		       what);
		check_size(s, 488, what);
		tap_eq(vmb_shrink(&s->b, VMB_PRESSURE_MIN_FRAMES), 487,
		       "%s: all but that page given back next", what);
		check_size(s, 1, what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/* Without a connection the balloon is empty: a shrink frees nothing. */
static void test_shrink_no_connection(void)
{
	struct sim *s = setup(0x26);

	s->host.fail_start = 1;
	sim_cycle(s);
	tap_ok(s->b.reset_required, "no connection: START failed");
	tap_eq(vmb_shrink(&s->b, 128), 0, "no connection: nothing given back");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_UNLOCK], 0,
	       "no connection: no UNLOCK sent");
	shutdown_and_check(s, "no connection");
}

/*
 * A host reset in the middle of a shrink: the host has forgotten every
 * page, so the shrink frees what it asked for without another UNLOCK, and
 * the cycle does the rest.
 */
static void test_shrink_reset(void)
{
	struct sim *s = setup(0x26);

	s->host.target = 1000;
	sim_cycle(s);
	s->host.reset_on_cmd = VMB_CMD_BATCHED_UNLOCK;
	tap_eq(vmb_shrink(&s->b, 256), 512, "reset: a batch given back");
	tap_ok(s->b.reset_required, "reset: a reset is due");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_UNLOCK], 1,
	       "reset: no UNLOCK after the RESET");
	tap_eq(s->b.size, 488, "reset: the rest still counted");
	check_consistent(s, "reset, pending");
	s->now_ms += VMB_PRESSURE_HOLDOFF_MS;
	sim_cycle(s);
	check_size(s, 1000, "reset: back at target after the reset");
	check_consistent(s, "reset");
	shutdown_and_check(s, "reset");
}

/*
 * While a reset is pending the host holds no page: the shrinker and the
 * OOM notifier (vmb_shrink() both) still get memory back, 4 KiB pages
 * first, freed without UNLOCK, which the host would only answer RESET.
 */
static void test_shrink_reset_pending(void)
{
	struct sim *s = setup(0x2e);
	u64 unlocks;

	s->host.target = 3000;	/* five pages of 2 MiB, 440 of 4 KiB */
	sim_cycle(s);
	check_size(s, 3000, "reset pending: inflated");
	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	sim_cycle(s);
	tap_ok(s->b.reset_required, "reset pending: the host asked for it");
	tap_eq(s->host.locked_frames, 0, "reset pending: the host holds nothing");
	unlocks = s->host.calls[VMB_CMD_BATCHED_UNLOCK] +
		  s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK];

	tap_eq(vmb_shrink(&s->b, 256), 440 + 512,
	       "reset pending: shrinker given the 4 KiB pages and a 2 MiB one");
	tap_eq(s->b.size, 2048, "reset pending: the rest still counted");
	check_consistent(s, "reset pending, shrinker");
	tap_eq(vmb_shrink(&s->b, VMB_PRESSURE_MIN_FRAMES), 512,
	       "reset pending: OOM notifier given a 2 MiB page");
	tap_eq(vmb_shrink(&s->b, 100000), 1536,
	       "reset pending: everything when asked for more");
	tap_eq(vmb_shrink(&s->b, 100000), 0,
	       "reset pending: nothing left to give");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_UNLOCK] +
	       s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK], unlocks,
	       "reset pending: no UNLOCK sent");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K], 440,
	       "reset pending: 4 KiB frees counted");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_2M], 5,
	       "reset pending: 2 MiB frees counted");
	tap_eq(stat(s, VMB_STAT_SHRINK_FREE), 3000,
	       "reset pending: shrinkFree counts them");
	tap_eq(s->allocated, 0, "reset pending: every page back in the guest");
	check_consistent(s, "reset pending");

	s->now_ms += VMB_PRESSURE_HOLDOFF_MS;
	sim_cycle(s);
	check_size(s, 3000, "reset pending: back at target after the reset");
	check_consistent(s, "reset pending, after");
	shutdown_and_check(s, "reset pending");
}

int main(void)
{
	test_shrink_4k();
	test_shrink_rounds_up_to_2m();
	test_shrink_everything();
	test_holdoff();
	test_pressure_during_inflation();
	test_pressure_between_cycles();
	test_shrink_refused();
	test_shrink_one_pinned();
	test_shrink_no_connection();
	test_shrink_reset();
	test_shrink_reset_pending();

	printf("1..%u\n", tap_passed + tap_failed);
	printf("%u passed, %u failed\n", tap_passed, tap_failed);
	return tap_failed ? 1 : 0;
}
