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

static u64 unlock_cmds(const struct sim *s)
{
	return s->host.calls[VMB_CMD_UNLOCK] +
	       s->host.calls[VMB_CMD_BATCHED_UNLOCK] +
	       s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK];
}

/* One request, the lock taken (or found busy) as the glue does. */
static u64 reclaim(struct sim *s, struct vmb_reclaim *r, bool busy)
{
	r->busy = busy;
	return vmb_reclaim(&s->b, r);
}

/*
 * The guest's reclaim, when the guest is not short of memory (memory.reclaim,
 * node reclaim, hibernation, compaction): nothing given back, no hold-off.
 */
static void test_reclaim_not_short(void)
{
	struct sim *s = setup(0x26);
	struct vmb_reclaim r = { .frames = 1000 };
	u64 unlocks;

	s->host.target = 3000;
	sim_cycle(s);
	unlocks = s->host.calls[VMB_CMD_BATCHED_UNLOCK] +
		  s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK];
	tap_eq(reclaim(s, &r, false), 0, "not short: nothing given");
	tap_eq(r.scanned, 1000, "not short: the request counts as scanned");
	r.compound = true;
	tap_eq(reclaim(s, &r, false), 0,
	       "not short: nothing given for a large page either");
	r.compound = false;
	tap_eq(reclaim(s, &r, true), 0, "not short, busy: nothing");
	tap_ok(!s->b.pressure_pending, "not short, busy: no pressure noted");
	check_size(s, 3000, "not short");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_UNLOCK] +
	       s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK], unlocks,
	       "not short: no UNLOCK");
	tap_eq(stat(s, VMB_STAT_SHRINK), 0, "not short: no shrink counted");
	s->host.target = 4000;
	sim_cycle(s);
	check_size(s, 4000, "not short: no hold-off, inflates at once");

	/* short: as vmb_shrink(), 4 KiB pages first, and the hold-off */
	r.below_min = true;
	r.frames = 100;
	tap_eq(reclaim(s, &r, false), 512, "short: a batch given");
	tap_eq(r.scanned, 512, "short: what was given counts as scanned");
	s->host.target = 5000;
	sim_cycle(s);
	check_size(s, 4000 - 512, "short: the hold-off began");
	check_consistent(s, "not short");
	shutdown_and_check(s, "not short");
}

static u64 locked_2m(const struct sim *s)
{
	return s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK];
}

/*
 * For an allocation of a compound page, 2 MiB pages go first, and the
 * hold-off starts over, as for any other: the balloon does not grow back
 * into a shortage that is still asking. A busy core is left alone.
 */
static void test_reclaim_large(void)
{
	struct sim *s = setup(0x2e);
	struct vmb_reclaim r = { .frames = 32, .below_min = true,
				 .compound = true };
	u64 unlocks_4k;

	s->no_2m = true;	/* 1000 frames of 4 KiB, then 2 MiB pages */
	s->host.target = 1000;
	sim_cycle(s);
	s->no_2m = false;
	s->host.target = 3048;
	sim_cycle(s);
	check_size(s, 3048, "large: inflated");
	unlocks_4k = s->host.calls[VMB_CMD_BATCHED_UNLOCK];
	tap_eq(reclaim(s, &r, false), 512, "large: one 2 MiB page given");
	tap_eq(locked_2m(s), 1, "large: one 2 MiB UNLOCK");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_UNLOCK], unlocks_4k,
	       "large: no 4 KiB page touched");
	tap_eq(stat(s, VMB_STAT_SHRINK), 1, "large: counted as a shrink");
	tap_eq(stat(s, VMB_STAT_SHRINK_FREE), 512, "large: shrinkFree");
	tap_eq(reclaim(s, &r, true), 0, "large, busy: nothing");
	tap_ok(!s->b.pressure_pending,
	       "large, busy: the worker's inflation goes on");
	sim_cycle(s);
	check_size(s, 3048 - 512, "large: the hold-off began");

	/* each large request starts it over, as an order-0 one does */
	s->now_ms += VMB_PRESSURE_HOLDOFF_MS - 1;
	tap_eq(reclaim(s, &r, false), 512, "large: another 2 MiB page given");
	s->now_ms += 1;
	sim_cycle(s);
	check_size(s, 3048 - 1024, "large: the hold-off started over");
	s->now_ms += VMB_PRESSURE_HOLDOFF_MS;
	sim_cycle(s);
	check_size(s, 3048, "large: back at target once it ends");
	check_consistent(s, "large");
	shutdown_and_check(s, "large");
}

/*
 * 2 MiB pages against a workload of 2 MiB allocations (khugepaged): the
 * guest is short whenever the balloon is back at its target, and asks
 * every second. Over 60 s the balloon must not inflate and deflate once
 * a second: the hold-off keeps it down while the requests keep coming.
 */
static void test_reclaim_no_ping_pong(void)
{
	struct sim *s = setup(0x2e);
	u64 locks, unlocks;
	unsigned int sec;

	s->host.target = 4096;
	sim_cycle(s);
	check_size(s, 4096, "ping-pong: inflated");
	locks = s->host.calls[VMB_CMD_BATCHED_2M_LOCK];
	unlocks = s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK];
	for (sec = 0; sec < 60; sec++) {
		struct vmb_reclaim r = {
			.frames = 512, .compound = true,
			.below_low = true, .kswapd_awake = true,
		};

		if (s->b.size == s->host.target)
			reclaim(s, &r, false);
		s->now_ms += VMB_POLL_SLOW_MS;
		sim_cycle(s);
	}
	tap_ok(s->host.calls[VMB_CMD_BATCHED_2M_LOCK] - locks <= 12,
	       "ping-pong: at most one inflation per hold-off (%llu 2 MiB LOCKs in 60 s)",
	       (unsigned long long)(s->host.calls[VMB_CMD_BATCHED_2M_LOCK] -
				    locks));
	tap_ok(s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK] - unlocks <= 12,
	       "ping-pong: and one deflation (%llu 2 MiB UNLOCKs in 60 s)",
	       (unsigned long long)(s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK] -
				    unlocks));
	check_consistent(s, "ping-pong");
	shutdown_and_check(s, "ping-pong");
}

/* The decision table of vmb_reclaim_decide(), one row per rule. */
static void test_reclaim_decide(void)
{
	enum { N = VMB_RECLAIM_NOTHING, T = VMB_RECLAIM_NOTE,
	       G4 = VMB_RECLAIM_GIVE_4K, G2 = VMB_RECLAIM_GIVE_2M };
	static const struct {
		struct vmb_reclaim r;
		int want;
		const char *what;
	} rows[] = {
		{ { .below_min = 1 }, G4, "direct, below min" },
		{ { .below_min = 1, .compound = 1 }, G2, "compound, below min" },
		{ { .below_low = 1, .kswapd_awake = 1 }, G4,
		  "below low, kswapd at work" },
		{ { .below_low = 1 }, N, "below low, kswapd asleep: the 2 MiB gap" },
		{ { 0 }, N, "above low: reclaim with memory to spare" },
		{ { .below_min = 1, .busy = 1 }, T, "short, busy: noted" },
		{ { .below_min = 1, .busy = 1, .compound = 1 }, N,
		  "short, busy, compound: nothing" },
		{ { .busy = 1 }, N, "not short, busy: nothing" },
		{ { .below_min = 1, .own = 1 }, N, "the balloon's own allocation" },
		{ { .below_min = 1, .hibernation = 1 }, N, "hibernation" },
		{ { .below_low = 1, .kswapd_awake = 1, .node_reclaim = 1 }, N,
		  "node reclaim" },
		{ { .below_min = 1, .node_reclaim = 1 }, N,
		  "node reclaim, below min on its node" },
		{ { .below_min = 1, .proactive = 1 }, N, "memory.reclaim" },
		{ { .below_low = 1, .kswapd_awake = 1, .kswapd = 1 }, N,
		  "kswapd, below low" },
		{ { .below_min = 1, .kswapd = 1, .kswapd_awake = 1 }, G4,
		  "kswapd, below min" },
		{ { .caller = VMB_RECLAIM_OOM }, G4, "OOM" },
		{ { .caller = VMB_RECLAIM_OOM, .busy = 1 }, T, "OOM, busy" },
		{ { .caller = VMB_RECLAIM_OOM, .hibernation = 1 }, N,
		  "OOM while hibernating" },
		{ { .caller = VMB_RECLAIM_OOM, .node_reclaim = 1 }, G4,
		  "OOM beats node facts" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		tap_eq(vmb_reclaim_decide(&rows[i].r), rows[i].want,
		       "decide: %s", rows[i].what);
}

/*
 * What the table means for the balloon: node reclaim and hibernation
 * leave it whole however often they ask, with no hold-off; a request
 * for more than VMB_PRESSURE_MAX_FRAMES gets that much.
 */
static void test_reclaim_not_drained(void)
{
	struct sim *s = setup(0x26);
	struct vmb_reclaim node = { .frames = 128, .below_min = 1,
				    .below_low = 1, .kswapd_awake = 1,
				    .node_reclaim = 1 };
	struct vmb_reclaim hib = { .frames = 128, .below_min = 1,
				   .below_low = 1, .hibernation = 1 };
	struct vmb_reclaim big = { .frames = 100000, .below_min = 1 };
	unsigned int i;

	s->host.target = 8192;
	sim_cycle(s);
	for (i = 0; i < 1000; i++) {
		reclaim(s, &node, false);
		reclaim(s, &hib, false);
	}
	check_size(s, 8192, "node reclaim and hibernation: nothing given");
	tap_eq(stat(s, VMB_STAT_SHRINK), 0,
	       "node reclaim and hibernation: no hold-off");
	tap_eq(reclaim(s, &big, false), VMB_PRESSURE_MAX_FRAMES,
	       "a request for 100000 frames gets %u", VMB_PRESSURE_MAX_FRAMES);
	tap_eq(big.scanned, 100000, "and counts as scanned whole");
	check_consistent(s, "not drained");
	shutdown_and_check(s, "not drained");
}

/*
 * The OOM notifier's bound (vmb_oom_wait_ms()): at most VMB_OOM_TRIES
 * waits, 100 ms in all, each telling the worker; then one request that
 * gives fewer than twice VMB_PRESSURE_MIN_FRAMES (at least that many if
 * the host refuses none), with at most VMB_MAX_REFUSED refusals (a
 * batch's in one command) and the documented number of commands, whatever
 * the host answers.
 */
static void test_oom_bound(void)
{
	static const struct {
		u32 caps;
		unsigned int refuse;	/* every Nth unlock refused; 1 all */
		bool no_2m;
	} cases[] = {
		{ 0x02, 0, true }, { 0x02, 1, true }, { 0x02, 2, true },
		{ 0x26, 0, true }, { 0x26, 1, true }, { 0x26, 2, true },
		{ 0x2e, 0, false }, { 0x2e, 1, false }, { 0x2e, 3, false },
	};
	unsigned int i, tries = 0, waited = 0, ms;
	struct sim *s = setup(0x26);

	while ((ms = vmb_oom_wait_ms(&s->b, tries))) {
		tap_ok(s->b.pressure_pending, "oom wait %u: the worker told",
		       tries);
		VMB_WRITE_ONCE(s->b.pressure_pending, false);
		waited += ms;
		tries++;
	}
	tap_eq(tries, VMB_OOM_TRIES, "oom: gives up after %u waits",
	       VMB_OOM_TRIES);
	tap_ok(waited <= 100, "oom: waits at most 100 ms in all (%u)", waited);
	shutdown_and_check(s, "oom wait");

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vmb_reclaim r = { .caller = VMB_RECLAIM_OOM,
					 .frames = VMB_PRESSURE_MIN_FRAMES };
		bool batched = cases[i].caps & VMB_CAP_BATCHED;
		u64 cmds, refused, given, most;
		char what[64];
		struct sim_frame *f;
		unsigned int n = 0;

		snprintf(what, sizeof(what), "oom, caps %#x, refuse 1/%u",
			 cases[i].caps, cases[i].refuse);
		s = setup(cases[i].caps);
		s->no_2m = cases[i].no_2m;
		s->host.target = cases[i].no_2m ? 4096 : 6000;
		sim_cycle(s);
		for (f = s->lists[VMB_LIST_BALLOON_4K]; f; f = f->next)
			f->pinned = cases[i].refuse && n++ % cases[i].refuse == 0;
		for (f = s->lists[VMB_LIST_BALLOON_2M]; f; f = f->next)
			f->pinned = cases[i].refuse && n++ % cases[i].refuse == 0;
		cmds = unlock_cmds(s);
		refused = s->host.unlocks_refused;
		given = reclaim(s, &r, false);
		cmds = unlock_cmds(s) - cmds;
		refused = s->host.unlocks_refused - refused;
		most = batched ? 2 * (VMB_MAX_REFUSED + 1) :
				 VMB_PRESSURE_MIN_FRAMES + VMB_MAX_REFUSED - 1;
		tap_ok(given < 2 * VMB_PRESSURE_MIN_FRAMES,
		       "%s: fewer than %u frames (%llu)", what,
		       2 * VMB_PRESSURE_MIN_FRAMES, (unsigned long long)given);
		tap_ok(cases[i].refuse || given >= VMB_PRESSURE_MIN_FRAMES,
		       "%s: at least %u frames if none refused (%llu)", what,
		       VMB_PRESSURE_MIN_FRAMES, (unsigned long long)given);
		tap_ok(cmds <= most, "%s: at most %llu commands (%llu)", what,
		       (unsigned long long)most, (unsigned long long)cmds);
		tap_ok(refused <= (batched ? VMB_BATCH_MAX_ENTRIES :
					     VMB_MAX_REFUSED),
		       "%s: refusals bounded (%llu)", what,
		       (unsigned long long)refused);
		check_consistent(s, what);
		for (f = s->lists[VMB_LIST_HELD_4K]; f; f = f->next)
			f->pinned = false;
		shutdown_and_check(s, what);
	}
}

/*
 * The kernel's do_shrink_slab() around the driver's shrinker, as 5.10 has
 * it (@v510) and as 5.11 and later do: the count, the scan batches of 128,
 * and the work carried over to the next call (nr_deferred). A scan that
 * scans nothing stands for SHRINK_STOP: the kernel stops and keeps the
 * rest of the request for the next call. DEFAULT_SEEKS is 2. The driver's
 * count is the balloon while the guest is short of memory, else 0.
 */
struct slab_model {
	bool v510;
	long deferred;
};

static u64 do_shrink_slab(struct sim *s, struct slab_model *m, int priority,
			  bool busy, bool short_of_memory)
{
	long freeable = short_of_memory ? (long)s->b.size : 0;
	long nr, delta, total_scan, next_deferred = 0, scanned = 0;
	u64 freed = 0;

	if (!freeable)
		return 0;
	nr = m->deferred;
	m->deferred = 0;
	delta = (freeable >> priority) * 4 / 2;
	if (m->v510) {
		total_scan = nr + delta;
		next_deferred = total_scan;
		if (delta < freeable / 4 && total_scan > freeable / 2)
			total_scan = freeable / 2;
	} else {
		total_scan = (nr >> priority) + delta;
	}
	if (total_scan > 2 * freeable)
		total_scan = 2 * freeable;

	while (total_scan >= 128 || total_scan >= freeable) {
		struct vmb_reclaim r = {
			.frames = total_scan < 128 ? total_scan : 128,
			.below_min = short_of_memory,
		};

		freed += reclaim(s, &r, busy);
		if (!r.scanned)
			break;	/* SHRINK_STOP */
		total_scan -= r.scanned;
		scanned += r.scanned;
	}

	if (m->v510) {
		next_deferred = next_deferred > scanned ?
				next_deferred - scanned : 0;
	} else {
		next_deferred = nr + delta - scanned;
		if (next_deferred < 0)
			next_deferred = 0;
		if (next_deferred > 2 * freeable)
			next_deferred = 2 * freeable;
	}
	m->deferred += next_deferred;
	return freed;
}

/*
 * Reclaim that finds the worker busy must not build a backlog: on 5.10 a
 * SHRINK_STOP defers the whole request, and the next call that finds the
 * lock free may ask for half of the balloon. 1 GiB ballooned in a 2 GiB
 * guest, 50 reclaim passes while the worker is busy, at every priority,
 * then one at the lowest priority with the lock free: it gives one batch.
 */
static void test_reclaim_busy_no_backlog(void)
{
	static const char * const names[] = { "5.11+", "5.10" };
	unsigned int v;

	for (v = 0; v < 2; v++) {
		struct sim_config cfg = { .nframes = 524288, .host_caps = 0x2e };
		struct slab_model m = { .v510 = v };
		unsigned int i;
		u64 freed;

		sim_init(&sim, &cfg);
		sim.host.target = 262144;
		sim_cycle(&sim);
		check_size(&sim, 262144, names[v]);
		for (i = 0; i < 50; i++)
			do_shrink_slab(&sim, &m, 12 - (int)(i % 13), true, true);
		tap_eq(m.deferred, 0, "%s: no work deferred while busy", names[v]);
		tap_ok(sim.b.pressure_pending, "%s: the worker was told", names[v]);
		check_size(&sim, 262144, names[v]);
		freed = do_shrink_slab(&sim, &m, 12, false, true);
		tap_eq(freed, 512, "%s: the next pass gives one batch (%llu frames)",
		       names[v], (unsigned long long)freed);
		tap_eq(m.deferred, 0, "%s: and defers nothing", names[v]);
		tap_eq(do_shrink_slab(&sim, &m, 12, false, false), 0,
		       "%s: not short: nothing", names[v]);
		check_consistent(&sim, names[v]);
		shutdown_and_check(&sim, names[v]);
	}
}

static u64 lock_cmds(const struct sim *s)
{
	return s->host.calls[VMB_CMD_LOCK] + s->host.calls[VMB_CMD_BATCHED_LOCK] +
	       s->host.calls[VMB_CMD_BATCHED_2M_LOCK];
}

/*
 * What bounds the OOM notifier's wait for the lock: told of the pressure
 * while it allocates, the worker's cycle allocates nothing more, sends at
 * most the one LOCK for what it holds, and ends; so does the next cycle,
 * at once, during the hold-off. For 2 MiB pages, batched 4 KiB pages and
 * single 4 KiB pages, told at the first allocation and in mid-chunk.
 */
static void test_pressure_bounds_the_cycle(void)
{
	static const struct {
		u32 caps;
		unsigned int at;
		const char *name;
	} cases[] = {
		{ 0x2e, 1, "oom bound, 2 MiB, first page" },
		{ 0x2e, 5, "oom bound, 2 MiB, mid-chunk" },
		{ 0x26, 1, "oom bound, 4 KiB batched, first page" },
		{ 0x26, 300, "oom bound, 4 KiB batched, mid-chunk" },
		{ 0x02, 1, "oom bound, single pages, first page" },
		{ 0x02, 7, "oom bound, single pages, later" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim *s = setup(cases[i].caps);
		u64 locks;

		sim_cycle(s);	/* connect */
		s->host.target = 8192;
		s->n_allocs = 0;
		s->pressure_at_alloc = cases[i].at;
		sim_cycle(s);
		tap_eq(s->n_allocs, cases[i].at,
		       "%s: no allocation after the pressure", cases[i].name);
		tap_ok(lock_cmds(s) - s->locks_at_pressure <= 1,
		       "%s: at most one LOCK after it (%llu)", cases[i].name,
		       (unsigned long long)(lock_cmds(s) - s->locks_at_pressure));
		tap_ok(s->b.size > 0, "%s: what was allocated is locked",
		       cases[i].name);
		tap_ok(!s->b.pressure_pending, "%s: the pressure was taken",
		       cases[i].name);
		locks = lock_cmds(s);
		s->now_ms += VMB_POLL_SLOW_MS;
		sim_cycle(s);
		tap_eq(s->n_allocs, cases[i].at,
		       "%s: the next cycle allocates nothing", cases[i].name);
		tap_eq(lock_cmds(s), locks, "%s: and locks nothing",
		       cases[i].name);
		check_consistent(s, cases[i].name);
		shutdown_and_check(s, cases[i].name);
	}
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
	test_reclaim_not_short();
	test_reclaim_large();
	test_reclaim_no_ping_pong();
	test_reclaim_decide();
	test_reclaim_not_drained();
	test_oom_bound();
	test_reclaim_busy_no_backlog();
	test_pressure_bounds_the_cycle();

	printf("1..%u\n", tap_passed + tap_failed);
	printf("%u passed, %u failed\n", tap_passed, tap_failed);
	return tap_failed ? 1 : 0;
}
