// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the balloon core (src/protocol.c, src/balloon.c) against
 * the simulated host and guest of sim.c. Prints TAP.
 */
#include <string.h>

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

static struct sim *setup_cfg(const struct sim_config *cfg)
{
	sim_init(&sim, cfg);
	return &sim;
}

static void check_consistent(struct sim *s, const char *what)
{
	char why[160] = "";

	if (!tap_ok(sim_consistent(s, why, sizeof(why)), "%s: consistent", what))
		printf("#   %s\n", why);
}

static void shutdown_and_check(struct sim *s, const char *what)
{
	vmb_shutdown(&s->b);
	tap_eq(s->allocated, 0, "%s: nothing left allocated after shutdown",
	       what);
	tap_eq(s->b.size, 0, "%s: balloon empty after shutdown", what);
	sim_destroy(s);
}

static u64 lock_calls(const struct sim *s)
{
	return s->host.calls[VMB_CMD_LOCK] + s->host.calls[VMB_CMD_BATCHED_LOCK] +
	       s->host.calls[VMB_CMD_BATCHED_2M_LOCK];
}

static u64 unlock_calls(const struct sim *s)
{
	return s->host.calls[VMB_CMD_UNLOCK] +
	       s->host.calls[VMB_CMD_BATCHED_UNLOCK] +
	       s->host.calls[VMB_CMD_BATCHED_2M_UNLOCK];
}

/*
 * A ring while a cycle runs: the next cycle runs at once, whatever that
 * cycle's own rescheduling says, and counts the ring. A ring between two
 * cycles makes the next one due at once too.
 */
static void test_doorbell_during_cycle(void)
{
	static const enum vmb_cmd rings_at[] = {
		VMB_CMD_GET_TARGET, VMB_CMD_BATCHED_2M_LOCK,
		VMB_CMD_BATCHED_LOCK, VMB_CMD_START,
	};
	struct sim *s = setup(0x3e);
	unsigned int i;

	tap_eq(sim_cycle(s), VMB_POLL_SLOW_MS, "ring: idle, next cycle in 1 s");
	s->host.target = 1000;	/* one 2 MiB page, 488 of 4 KiB */
	tap_eq(sim_cycle(s), VMB_POLL_SLOW_MS,
	       "ring: target moved, a doorbell: no fast polling");
	for (i = 0; i < sizeof(rings_at) / sizeof(rings_at[0]); i++) {
		unsigned long rings = s->b.stats[VMB_STAT_DOORBELL];
		u64 gets;

		if (rings_at[i] == VMB_CMD_START) {
			/* a cycle that only asks, and is told to reset */
			s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
			sim_cycle(s);
			rings = s->b.stats[VMB_STAT_DOORBELL];
		}
		s->host.target += 1500;	/* 2 MiB and 4 KiB pages to lock */
		s->host.ring_on_cmd = rings_at[i];
		tap_eq(sim_cycle(s), 0,
		       "ring during %s: the next cycle at once",
		       vmb_cmd_names[rings_at[i]]);
		tap_eq(s->host.ring_on_cmd, -1, "ring during %s: rung",
		       vmb_cmd_names[rings_at[i]]);
		tap_eq(vmb_next_wakeup(&s->b).ms, 0,
		       "ring during %s: still due at once when asked again",
		       vmb_cmd_names[rings_at[i]]);
		gets = s->host.calls[VMB_CMD_GET_TARGET];
		tap_eq(sim_cycle(s), VMB_POLL_SLOW_MS,
		       "ring during %s: after that cycle, polls as before",
		       vmb_cmd_names[rings_at[i]]);
		tap_eq(s->host.calls[VMB_CMD_GET_TARGET], gets + 1,
		       "ring during %s: that cycle asks for the target",
		       vmb_cmd_names[rings_at[i]]);
		tap_eq(s->b.stats[VMB_STAT_DOORBELL], rings + 1,
		       "ring during %s: counted once", vmb_cmd_names[rings_at[i]]);
		tap_eq(s->b.size, s->host.target, "ring during %s: at target",
		       vmb_cmd_names[rings_at[i]]);
	}
	tap_eq(vmb_next_wakeup(&s->b).ms, VMB_POLL_SLOW_MS,
	       "ring between cycles: slow before");
	vmb_doorbell(&s->b);
	tap_eq(vmb_next_wakeup(&s->b).ms, 0,
	       "ring between cycles: the next cycle due at once");
	tap_eq(sim_cycle(s), VMB_POLL_SLOW_MS,
	       "ring between cycles: slow again after it");
	check_consistent(s, "ring during a cycle");
	shutdown_and_check(s, "ring during a cycle");
}

/* Every capability subset a host may grant, and a protocol-v2 host. */
static void test_capability_subsets(void)
{
	static const struct {
		u32 caps;
		bool legacy;
		u32 granted;
		enum vmb_cmd lock, unlock;	/* VMB_CMD_NUM: none */
		bool uses_2m;
	} cases[] = {
		{ 0x00, false, 0x00, VMB_CMD_NUM, VMB_CMD_NUM, false },
		{ 0x02, false, 0x02, VMB_CMD_LOCK, VMB_CMD_UNLOCK, false },
		{ 0x06, false, 0x06, VMB_CMD_BATCHED_LOCK, VMB_CMD_BATCHED_UNLOCK, false },
		{ 0x0a, false, 0x0a, VMB_CMD_LOCK, VMB_CMD_UNLOCK, false },
		{ 0x0e, false, 0x0e, VMB_CMD_BATCHED_LOCK, VMB_CMD_BATCHED_UNLOCK, true },
		{ 0x2e, false, 0x2e, VMB_CMD_BATCHED_LOCK, VMB_CMD_BATCHED_UNLOCK, true },
		{ 0x3e, false, 0x3e, VMB_CMD_BATCHED_LOCK, VMB_CMD_BATCHED_UNLOCK, true },
		{ 0x3f, false, 0x3e, VMB_CMD_BATCHED_LOCK, VMB_CMD_BATCHED_UNLOCK, true },
		{ 0x3e, true, 0x02, VMB_CMD_LOCK, VMB_CMD_UNLOCK, false },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim_config cfg = {
			.host_caps = cases[i].caps, .legacy = cases[i].legacy,
		};
		struct sim *s = setup_cfg(&cfg);
		char what[64];
		u64 want = cases[i].granted ? 3000 : 0;

		snprintf(what, sizeof(what), "caps %#x%s", cases[i].caps,
			 cases[i].legacy ? " (legacy host)" : "");
		s->host.target = 3000;	/* 5 pages of 2 MiB and 440 of 4 KiB */
		sim_cycles(s, 3);

		tap_eq(s->host.start_args[0], 0x3e, "%s: START asks for 0x3e", what);
		tap_eq(s->b.caps, cases[i].granted, "%s: granted set taken", what);
		tap_eq(s->host.guest_id, 1, "%s: GUEST_ID says Linux", what);
		tap_eq(s->b.size, want, "%s: balloon at target", what);
		check_consistent(s, what);
		if (cases[i].lock != VMB_CMD_NUM)
			tap_eq(s->host.calls[cases[i].lock] > 0, 1,
			       "%s: locks with %s", what,
			       vmb_cmd_names[cases[i].lock]);
		else
			tap_eq(lock_calls(s), 0, "%s: never locks", what);
		tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_LOCK] > 0, cases[i].uses_2m,
		       "%s: 2 MiB pages %s", what,
		       cases[i].uses_2m ? "used" : "not used");
		if (!cases[i].granted)
			tap_eq(sim_log_count(s, "neither basic nor batched"), 1,
			       "%s: says once that it cannot balloon", what);

		s->host.target = 0;
		sim_cycle(s);
		tap_eq(s->b.size, 0, "%s: deflated to 0", what);
		if (cases[i].unlock != VMB_CMD_NUM)
			tap_eq(s->host.calls[cases[i].unlock] > 0, 1,
			       "%s: unlocks with %s", what,
			       vmb_cmd_names[cases[i].unlock]);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/*
 * Each refusal status: the page is set aside, freed at the end of the
 * cycle, never counted. In a batch every status is a per-entry refusal;
 * in single-page mode only the PPN_* ones are (the others fail the command).
 */
static void test_refusal_statuses(void)
{
	static const u32 statuses[] = {
		VMB_ERROR_PPN_INVALID, VMB_ERROR_PPN_LOCKED,
		VMB_ERROR_PPN_UNLOCKED, VMB_ERROR_PPN_PINNED,
		VMB_ERROR_PPN_NOTNEEDED, VMB_ERROR_RESET, VMB_ERROR_BUSY,
		VMB_ERROR_CMD_INVALID, 0x1f,
	};
	unsigned int i, cycles;
	u32 caps;

	for (caps = 0x02; caps <= 0x06; caps += 4) {
		for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
			struct sim *s;
			char what[64];
			unsigned long *err, *freed;

			if (caps == 0x02 &&
			    (statuses[i] < VMB_ERROR_PPN_INVALID ||
			     statuses[i] > VMB_ERROR_PPN_NOTNEEDED))
				continue;
			s = setup(caps);
			err = s->b.page_stats[VMB_PAGE_STAT_REFUSED_ALLOC];
			freed = s->b.page_stats[VMB_PAGE_STAT_REFUSED_FREE];
			snprintf(what, sizeof(what), "caps %#x, refusal status %u",
				 caps, statuses[i]);
			s->host.refuse_every = 3;
			s->host.refuse_status = statuses[i];
			s->host.target = 1000;
			sim_cycle(s);
			check_consistent(s, what);
			tap_ok(err[VMB_PAGE_4K] > 0 &&
			       err[VMB_PAGE_4K] == freed[VMB_PAGE_4K],
			       "%s: refused pages all freed at the end of the cycle",
			       what);
			/* single-page: a cycle ends at its first refusal */
			for (cycles = 1; cycles < 1000 && s->b.size < 1000; cycles++)
				sim_cycle(s);
			tap_eq(s->b.size, 1000, "%s: target reached over cycles",
			       what);
			check_consistent(s, what);
			shutdown_and_check(s, what);
		}
	}
}

/* Too many refusals end the cycle; they are not retried at once. */
static void test_too_many_refusals(void)
{
	struct sim *s = setup(0x06);

	s->host.refuse_every = 1;
	s->host.target = 4000;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_BATCHED_LOCK], 1,
	       "all refused: one batch, then the cycle ends");
	tap_eq(s->b.size, 0, "all refused: nothing counted");
	check_consistent(s, "all refused");

	s->host.refuse_every = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 4000, "host accepts again: target reached");
	shutdown_and_check(s, "all refused");

	s = setup(0x02);
	s->host.refuse_every = 1;
	s->host.target = 4000;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_LOCK], 1,
	       "single-page, all refused: one LOCK, then the cycle ends");
	check_consistent(s, "single-page, all refused");
	shutdown_and_check(s, "single-page, all refused");
}

/* In single-page mode, like upstream, any refused LOCK ends the cycle. */
static void test_single_page_refusal_ends_cycle(void)
{
	static const u32 statuses[] = {
		VMB_ERROR_PPN_INVALID, VMB_ERROR_PPN_PINNED,
		VMB_ERROR_PPN_NOTNEEDED, VMB_ERROR_PPN_LOCKED,
	};
	unsigned int i;

	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		struct sim *s = setup(0x02);
		char what[64];

		snprintf(what, sizeof(what), "single-page, LOCK refused with %u",
			 statuses[i]);
		s->host.refuse_every = 5;
		s->host.refuse_status = statuses[i];
		s->host.target = 1000;
		sim_cycle(s);
		tap_eq(s->host.calls[VMB_CMD_LOCK], 5,
		       "%s: the cycle ends at the first refusal", what);
		tap_eq(s->b.size, 4, "%s: the pages before it ballooned", what);
		tap_eq(s->b.page_stats[VMB_PAGE_STAT_REFUSED_FREE][VMB_PAGE_4K],
		       1, "%s: the refused page freed at the end", what);
		check_consistent(s, what);
		sim_cycle(s);
		tap_eq(s->b.size, 8, "%s: the next cycle carries on", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/*
 * RESET answered by each command: the next cycle frees every page without
 * UNLOCK, sends START and GUEST_ID again, and only then balloons. A host
 * answers START or GUEST_ID with RESET only during a reset, so those two
 * cases restart the host first.
 */
static void test_reset_from_each_command(void)
{
	static const struct {
		enum vmb_cmd cmd;
		u32 caps;
		bool while_deflating;
	} cases[] = {
		{ VMB_CMD_START, 0x2e, false },
		{ VMB_CMD_GET_TARGET, 0x2e, false },
		{ VMB_CMD_GUEST_ID, 0x2e, false },
		{ VMB_CMD_LOCK, 0x02, false },
		{ VMB_CMD_UNLOCK, 0x02, true },
		{ VMB_CMD_BATCHED_LOCK, 0x06, false },
		{ VMB_CMD_BATCHED_UNLOCK, 0x06, true },
		{ VMB_CMD_BATCHED_2M_LOCK, 0x0e, false },
		{ VMB_CMD_BATCHED_2M_UNLOCK, 0x0e, true },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim *s = setup(cases[i].caps);
		const char *name = vmb_cmd_names[cases[i].cmd];
		u64 starts, unlocks, resets;
		char what[64];

		snprintf(what, sizeof(what), "RESET from %s", name);
		s->host.target = 2048;
		sim_cycles(s, 2);
		starts = s->host.calls[VMB_CMD_START];
		resets = s->b.stats[VMB_STAT_RESET];

		if (cases[i].cmd == VMB_CMD_START ||
		    cases[i].cmd == VMB_CMD_GUEST_ID)
			sim_host_restart(s);
		s->host.reset_on_cmd = cases[i].cmd;
		s->host.target = cases[i].while_deflating ? 0 :
				 (cases[i].caps == 0x0e ? 4096 : 3000);
		sim_cycle(s);
		tap_ok(s->b.reset_required, "%s: reset pending", what);

		unlocks = unlock_calls(s);
		s->host.target = 1024;
		sim_cycles(s, 3);
		tap_eq(s->host.reset_on_cmd, -1, "%s: RESET answered", what);
		tap_eq(unlock_calls(s), unlocks, "%s: pages freed without UNLOCK",
		       what);
		tap_ok(s->host.calls[VMB_CMD_START] > starts + 1 ||
		       (s->host.calls[VMB_CMD_START] == starts + 1 &&
			cases[i].cmd != VMB_CMD_START),
		       "%s: START sent again", what);
		tap_ok(s->b.stats[VMB_STAT_RESET] > resets, "%s: reset counted",
		       what);
		tap_eq(s->host.guest_id, 1, "%s: GUEST_ID sent again", what);
		tap_eq(s->b.size, 1024, "%s: balloon back at target", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/* While START keeps failing: retried every cycle, nothing else happens. */
static void test_failing_start(void)
{
	struct sim *s = setup(0x2e);
	unsigned int i;

	s->host.target = 1000;
	s->host.fail_start = 3;
	for (i = 0; i < 3; i++) {
		sim_cycle(s);
		tap_eq(s->host.calls[VMB_CMD_START], i + 1,
		       "failing START: tried again in cycle %u", i + 1);
	}
	tap_eq(s->host.calls[VMB_CMD_GET_TARGET], 0,
	       "failing START: no GET_TARGET meanwhile");
	tap_eq(lock_calls(s), 0, "failing START: no LOCK meanwhile");
	tap_ok(s->b.reset_required, "failing START: reset still pending");
	sim_cycle(s);
	tap_eq(s->b.size, 1000, "START succeeds: balloon inflates");
	check_consistent(s, "failing START");

	/* a reset with a full balloon, then START fails twice */
	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	s->host.fail_start = 2;
	sim_cycles(s, 3);
	tap_eq(s->b.size, 0, "reset pending: balloon emptied");
	tap_eq(s->allocated, 0, "reset pending: every page freed");
	tap_eq(s->host.calls[VMB_CMD_GET_TARGET], 2,
	       "reset pending: no GET_TARGET while START fails");
	sim_cycle(s);
	tap_eq(s->b.size, 1000, "after the reset: back at target");
	check_consistent(s, "failing START");
	shutdown_and_check(s, "failing START");
}

/* BUSY ends the cycle; the next one carries on. */
static void test_busy(void)
{
	struct sim *s = setup(0x06);

	s->host.target = 2000;
	s->host.busy_on_cmd = VMB_CMD_BATCHED_LOCK;
	sim_cycle(s);
	tap_eq(s->b.size, 0, "BUSY on batchLock: nothing counted");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_REFUSED_FREE][VMB_PAGE_4K], 512,
	       "BUSY on batchLock: the batch's pages freed");
	check_consistent(s, "BUSY on batchLock");
	sim_cycle(s);
	tap_eq(s->b.size, 2000, "after BUSY: target reached");

	s->host.busy_on_cmd = VMB_CMD_GET_TARGET;
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 2000, "BUSY on GET_TARGET: no change this cycle");
	sim_cycle(s);
	tap_eq(s->b.size, 0, "after BUSY: deflated");

	s->host.target = 1000;
	sim_cycle(s);
	s->host.busy_on_cmd = VMB_CMD_BATCHED_UNLOCK;
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 1000, "BUSY on batchUnlock: pages stay ballooned");
	check_consistent(s, "BUSY on batchUnlock");
	sim_cycle(s);
	tap_eq(s->b.size, 0, "after BUSY: deflated");
	shutdown_and_check(s, "BUSY");
}

/* A target above RAM is clamped; allocation failure ends the cycle. */
static void test_target_above_ram(void)
{
	struct sim *s = setup(0x2e);

	s->host.target = 10 * s->nframes;
	s->alloc_limit = s->nframes * 3 / 4;
	sim_cycle(s);
	tap_ok(vmb_effective_target(&s->b) <= s->nframes,
	       "target above RAM: clamped to RAM");
	tap_ok(s->b.size <= s->alloc_limit && s->b.size > s->nframes / 2,
	       "target above RAM: stops where allocation fails");
	tap_ok(s->b.page_stats[VMB_PAGE_STAT_ALLOC_FAIL][VMB_PAGE_4K] == 1,
	       "target above RAM: one failed allocation ends the cycle");
	check_consistent(s, "target above RAM");
	sim_cycles(s, 3);
	tap_ok(s->b.size <= s->alloc_limit, "target above RAM: never beyond");
	check_consistent(s, "target above RAM");
	shutdown_and_check(s, "target above RAM");
}

/*
 * A host that asks for all the guest's RAM, or more, or every bit set,
 * gets at most RAM minus the floor (VMB_FLOOR_SHIFT): the guest keeps
 * memory to run in even when every allocation would succeed.
 */
static void test_floor(void)
{
	const u64 ram = 16384;	/* sim_init()'s default */
	const u64 targets[] = { ram - 1, ram, ram + 4096, ~0ULL };
	unsigned int i;

	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		struct sim *s = setup(0x2e);
		u64 most = s->nframes - (s->nframes >> VMB_FLOOR_SHIFT);

		s->host.target = targets[i];
		sim_cycles(s, 3);
		tap_eq(vmb_effective_target(&s->b), most,
		       "floor: target %#llx is cut to RAM minus the floor",
		       (unsigned long long)targets[i]);
		tap_ok(s->b.size <= most && s->b.size + 512 > most,
		       "floor: target %#llx: balloon %llu of at most %llu frames",
		       (unsigned long long)targets[i],
		       (unsigned long long)s->b.size, (unsigned long long)most);
		check_consistent(s, "floor");
		shutdown_and_check(s, "floor");
	}
	/* below the floor the host's target stands */
	{
		struct sim *s = setup(0x2e);

		s->host.target = s->nframes / 2;
		sim_cycle(s);
		tap_eq(s->b.size, s->nframes / 2, "floor: a target below it is reached");
		shutdown_and_check(s, "floor");
	}
}

/* Targets and limits beyond 32 bits, with and without 64_BIT_TARGET. */
static void test_64bit_target(void)
{
	u64 big_ram = 1ULL << 33, big_target = (1ULL << 32) + 100;
	struct sim *s;

	s = setup(0x0e);
	s->reported_ram = big_ram;
	s->host.target = big_target;
	sim_cycle(s);
	tap_eq(s->host.last_limit, VMB_U32_MAX,
	       "no 64-bit cap: limit clamped to 32 bits");
	tap_eq(s->b.target, VMB_U32_MAX,
	       "no 64-bit cap: the host's clamped target taken");
	check_consistent(s, "no 64-bit cap, huge target");
	sim_destroy(s);

	/*
	 * A host that sends more than 32 bits anyway: the target saturates.
	 * Its low 32 bits (100) would deflate a balloon the host wants full.
	 */
	s = setup(0x06);
	s->alloc_limit = 2000;
	s->host.target = 1000;
	sim_cycle(s);
	s->host.wide_target = true;
	s->host.target = big_target;
	sim_cycle(s);
	tap_eq(s->b.target, VMB_U32_MAX,
	       "no 64-bit cap, wider target: saturates at 32 bits");
	tap_eq(unlock_calls(s), 0, "no 64-bit cap, wider target: no deflation");
	tap_eq(s->b.size, 2000,
	       "no 64-bit cap, wider target: inflates as far as it can");
	check_consistent(s, "no 64-bit cap, wider target");
	s->host.target = 1000;
	sim_cycle(s);
	tap_eq(s->b.target, 1000, "no 64-bit cap: a 32-bit target taken as is");
	tap_eq(s->b.size, 1000, "no 64-bit cap: balloon back at target");
	shutdown_and_check(s, "no 64-bit cap");

	s = setup(0x2e);
	s->reported_ram = big_ram;
	s->host.target = big_target;
	sim_cycle(s);
	tap_eq(s->host.last_limit, big_ram, "64-bit cap: full limit sent");
	tap_eq(s->b.target, big_target, "64-bit cap: full 64-bit target");
	tap_eq(vmb_effective_target(&s->b), big_target,
	       "64-bit cap: target below RAM kept");
	check_consistent(s, "64-bit cap");
	shutdown_and_check(s, "64-bit cap");
}

/* A PFN above 32 bits in single-page mode is refused without a hypercall. */
static void test_high_pfn(void)
{
	struct sim_config cfg = { .host_caps = 0x02, .pfn_base = 1ULL << 32 };
	struct sim *s = setup_cfg(&cfg);

	s->host.target = 100;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_LOCK], 0,
	       "high PFN, single-page: no LOCK hypercall");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_REFUSED_ALLOC][VMB_PAGE_4K],
	       1, "high PFN, single-page: refused locally, the cycle ends");
	tap_eq(s->b.size, 0, "high PFN, single-page: nothing ballooned");
	check_consistent(s, "high PFN, single-page");
	shutdown_and_check(s, "high PFN, single-page");

	/* like upstream, even when 64-bit targets were granted */
	cfg.host_caps = 0x22;
	s = setup_cfg(&cfg);
	s->host.target = 100;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_LOCK], 0,
	       "high PFN, single-page with 64-bit cap: no LOCK hypercall");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_REFUSED_ALLOC][VMB_PAGE_4K],
	       1, "high PFN, single-page with 64-bit cap: refused, the cycle ends");
	tap_eq(s->b.size, 0, "high PFN, single-page with 64-bit cap: nothing ballooned");
	sim_cycle(s);
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_REFUSED_ALLOC][VMB_PAGE_4K],
	       2, "high PFN, single-page with 64-bit cap: one refusal a cycle");
	tap_eq(s->host.protocol_errors, 0,
	       "high PFN, single-page with 64-bit cap: no protocol error");
	check_consistent(s, "high PFN, 64-bit cap");
	shutdown_and_check(s, "high PFN, 64-bit cap");

	cfg.host_caps = 0x0e;
	s = setup_cfg(&cfg);
	s->host.target = 1100;
	sim_cycle(s);
	tap_eq(s->b.size, 1100, "high PFN, batched: the entries carry it");
	check_consistent(s, "high PFN, batched");
	shutdown_and_check(s, "high PFN, batched");
}

/* No deflation while less than 2 MiB above the target, unless it is 0. */
static void test_deflate_slack(void)
{
	struct sim *s = setup(0x06);

	s->host.target = 5000;
	sim_cycle(s);
	s->host.target = 5000 - (VMB_DEFLATE_SLACK - 1);
	sim_cycle(s);
	tap_eq(s->b.size, 5000, "slack: 511 frames above target, no deflate");
	tap_eq(unlock_calls(s), 0, "slack: no UNLOCK sent");
	s->host.target = 5000 - VMB_DEFLATE_SLACK;
	sim_cycle(s);
	tap_eq(s->b.size, 5000 - VMB_DEFLATE_SLACK,
	       "slack: 512 frames above target, deflated to target");
	s->host.target = 3000;
	sim_cycle(s);
	tap_eq(s->b.size, 3000, "slack: deflated to a lower target");
	s->host.target = 3000 - 300;
	sim_cycle(s);
	tap_eq(s->b.size, 3000, "slack: 300 above a non-zero target kept");
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 0, "slack: target 0 empties the balloon");
	s->host.target = 300;
	sim_cycle(s);
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 0, "slack: target 0 empties even a small balloon");
	check_consistent(s, "slack");
	shutdown_and_check(s, "slack");

	s = setup(0x0e);
	s->host.target = 2048;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_LOCK], 1,
	       "2 MiB: 2048 frames in one batch of four pages");
	s->host.target = 1024 + 100;
	sim_cycle(s);
	tap_eq(s->b.size, 1536, "2 MiB: deflates whole pages, within slack");
	check_consistent(s, "2 MiB slack");
	shutdown_and_check(s, "2 MiB slack");
}

/* Unload: START(0) first, then every page freed without UNLOCK. */
static void test_unload(void)
{
	struct sim *s = setup(0x2e);
	u64 unlocks;

	s->host.target = 3000;
	sim_cycle(s);
	unlocks = unlock_calls(s);
	vmb_shutdown(&s->b);
	tap_eq(s->host.start_args[s->host.n_starts - 1], 0,
	       "unload: START(0) sent");
	tap_eq(unlock_calls(s), unlocks, "unload: no UNLOCK");
	tap_eq(s->freed_while_locked, 0, "unload: no page freed while locked");
	tap_eq(s->allocated, 0, "unload: every page freed");
	sim_destroy(s);
}

/* 2 MiB allocations that fail fall back to 4 KiB pages. */
static void test_2m_fallback(void)
{
	struct sim *s = setup(0x0e);

	s->no_2m = true;
	s->host.target = 3000;
	sim_cycle(s);
	tap_eq(s->b.size, 3000, "no 2 MiB pages: target reached with 4 KiB");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_LOCK], 0,
	       "no 2 MiB pages: no 2m-lock");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_ALLOC_FAIL][VMB_PAGE_2M], 1,
	       "no 2 MiB pages: one failed 2 MiB allocation");
	check_consistent(s, "no 2 MiB pages");
	shutdown_and_check(s, "no 2 MiB pages");
}

/* Refused 2 MiB pages are split and tried again as 4 KiB pages. */
static void test_2m_refused_split(void)
{
	struct sim *s = setup(0x0e);

	s->host.refuse_every = 1;
	s->host.refuse_2m_only = true;
	s->host.target = 2048;
	sim_cycle(s);
	tap_eq(s->b.size, 2048, "2 MiB refused: target reached in 4 KiB pages");
	tap_ok(!s->lists[VMB_LIST_BALLOON_2M],
	       "2 MiB refused: no 2 MiB page in the balloon");
	tap_ok(s->b.page_stats[VMB_PAGE_STAT_REFUSED_ALLOC][VMB_PAGE_2M] > 0,
	       "2 MiB refused: refusals counted");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_ALLOC][VMB_PAGE_4K], 0,
	       "2 MiB refused: the split pieces were used, not new pages");
	check_consistent(s, "2 MiB refused");
	shutdown_and_check(s, "2 MiB refused");
}

/*
 * 2 MiB pages are locked VMB_BATCH_MAX_2M at a time, so the host backs no
 * more than that before a LOCK; 4 KiB pages still fill whole batches.
 */
static void test_2m_batch_size(void)
{
	struct sim_config cfg = { .host_caps = 0x0e, .nframes = 131072 };
	struct sim *s = setup_cfg(&cfg);
	u64 chunks = 3;

	s->host.target = chunks * VMB_BATCH_MAX_2M * 512;
	sim_cycle(s);
	tap_eq(s->b.size, s->host.target, "2 MiB batches: target reached in one cycle");
	tap_eq(s->host.calls[VMB_CMD_BATCHED_2M_LOCK], chunks,
	       "2 MiB batches: %u entries per 2m-lock", VMB_BATCH_MAX_2M);
	check_consistent(s, "2 MiB batches");
	shutdown_and_check(s, "2 MiB batches");

	s = setup(0x06);
	s->host.target = 2 * VMB_BATCH_MAX_ENTRIES;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_BATCHED_LOCK], 2,
	       "4 KiB batches: %u entries per batch-lock", VMB_BATCH_MAX_ENTRIES);
	shutdown_and_check(s, "4 KiB batches");
}

/* The state of the scheduler, and the wait vmb_next_wakeup() makes of it. */
static void expect_wakeup(struct sim *s, enum vmb_poll_state state,
			  unsigned int ms, bool deferrable, const char *what)
{
	struct vmb_wakeup next = vmb_next_wakeup(&s->b);

	tap_eq(s->b.poll_state, state, "%s: state", what);
	tap_eq(next.ms, ms, "%s: next cycle in %u ms", what, ms);
	tap_eq(next.deferrable, deferrable, "%s: %sdeferrable", what,
	       deferrable ? "" : "not ");
}

/*
 * Settled, fast, glancing: fast polling for VMB_POLL_FAST_CYCLES cycles
 * after the target moved, then waits of 100, 200 and 400 ms, then once a
 * second, deferrable. A move while glancing or settled polls fast again.
 */
static void test_poll_states(void)
{
	struct sim *s = setup(0x0e);
	unsigned int i;

	tap_eq(sim_cycle(s), VMB_POLL_SLOW_MS, "poll: first cycle, target 0");
	expect_wakeup(s, VMB_POLL_SETTLED, VMB_POLL_SLOW_MS, true,
		      "poll, settled");
	s->host.target = 4096;
	tap_eq(sim_cycle(s), VMB_POLL_FAST_MS, "poll: the target moved");
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false, "poll, fast");
	for (i = 1; i < VMB_POLL_FAST_CYCLES; i++)
		sim_cycle(s);
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false,
		      "poll, fast 29 cycles later");
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_GLANCING, VMB_POLL_GLANCE_MS, false,
		      "poll, 30 settled cycles later, glancing");
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_GLANCING, 2 * VMB_POLL_GLANCE_MS, false,
		      "poll, second glance");
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_GLANCING, 4 * VMB_POLL_GLANCE_MS, false,
		      "poll, third glance");
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_SETTLED, VMB_POLL_SLOW_MS, true,
		      "poll, settled after the glances");
	sim_cycles(s, 10);
	expect_wakeup(s, VMB_POLL_SETTLED, VMB_POLL_SLOW_MS, true,
		      "poll, stays settled");

	s->host.target = 0;
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false,
		      "poll, fast again when the target moves down");
	tap_eq(s->b.size, 0, "poll: deflated");

	/* a move while glancing */
	sim_cycles(s, VMB_POLL_FAST_CYCLES + 1);
	expect_wakeup(s, VMB_POLL_GLANCING, 2 * VMB_POLL_GLANCE_MS, false,
		      "poll, glancing before a move");
	s->host.target = 100;
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false,
		      "poll, a move while glancing polls fast");
	tap_eq(s->b.size, 100, "poll: followed the move");
	check_consistent(s, "poll");
	shutdown_and_check(s, "poll");

	/* a balloon that cannot follow a move does not poll fast for it */
	s = setup(0x00);
	sim_cycle(s);
	s->host.target = 4096;
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_SETTLED, VMB_POLL_SLOW_MS, true,
		      "poll, no locking: settled though the target moved");
	shutdown_and_check(s, "poll, no locking");
}

/*
 * Failing: a cycle that gets no target, because GET_TARGET fails or the
 * reset's START does, waits a second, whatever the state before. The
 * first answer again puts the balloon back where the target says.
 */
static void test_poll_failing(void)
{
	struct sim *s = setup(0x0e);

	s->host.target = 4096;
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false,
		      "failing: fast before");
	s->host.fail_on_cmd = VMB_CMD_GET_TARGET;
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_FAILING, VMB_POLL_SLOW_MS, true,
		      "failing: GET_TARGET failed while fast");
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_SETTLED, VMB_POLL_SLOW_MS, true,
		      "failing: answered again, unchanged: settled");

	s->host.target = 0;
	sim_cycle(s);
	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	s->host.fail_start = 1000;
	sim_cycle(s);
	tap_ok(s->b.reset_required, "failing: RESET, then START fails");
	expect_wakeup(s, VMB_POLL_FAILING, VMB_POLL_SLOW_MS, true,
		      "failing: the reset asked for");
	sim_cycles(s, 5);
	expect_wakeup(s, VMB_POLL_FAILING, VMB_POLL_SLOW_MS, true,
		      "failing: START keeps failing");

	s->host.fail_start = 0;
	s->host.target = 2000;
	sim_cycle(s);
	tap_eq(s->b.size, 2000, "failing: back at target after START");
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false,
		      "failing: a move seen after the failures polls fast");
	check_consistent(s, "failing");
	shutdown_and_check(s, "failing");
}

/*
 * Each outcome of a cycle while glancing backs the next one off: one that
 * found the target unchanged doubles the wait, one whose GET_TARGET
 * failed or that could not ask at all (a reset pending, its START
 * failing) waits a whole second. None is retried at the same wait.
 */
static void test_poll_glance_outcomes(void)
{
	static const char * const outcome[] = {
		"unchanged", "GET_TARGET failed", "skipped for a reset",
	};
	unsigned int i;

	for (i = 0; i < 3; i++) {
		struct sim *s = setup(0x0e);
		struct vmb_wakeup before, after;

		s->host.target = 1000;
		sim_cycles(s, 1 + VMB_POLL_FAST_CYCLES);
		before = vmb_next_wakeup(&s->b);
		tap_eq(s->b.poll_state, VMB_POLL_GLANCING,
		       "glance %s: glancing", outcome[i]);
		if (i == 1) {
			s->host.fail_on_cmd = VMB_CMD_GET_TARGET;
		} else if (i == 2) {
			/* a migration between cycles meets the RESET */
			s->host.reset_on_cmd = VMB_CMD_BATCHED_UNLOCK;
			sim_migrate(s, sim_isolate(s, 0));
			tap_ok(s->b.reset_required,
			       "glance %s: a reset pending", outcome[i]);
			s->host.fail_start = 1;
		}
		sim_cycle(s);
		after = vmb_next_wakeup(&s->b);
		tap_ok(after.ms > before.ms,
		       "glance %s: the next wait is longer (%u ms after %u ms)",
		       outcome[i], after.ms, before.ms);
		shutdown_and_check(s, "glance outcome");
	}
}

/*
 * With a doorbell the host says when the target moves: no fast polling
 * and no glancing, ever; a cycle a second, deferrable; a ring makes the
 * next cycle due at once. A doorbell lost to a reset whose START fails is
 * failing, and a doorbell the host will not take leaves the polling as
 * without one.
 */
static void test_poll_doorbell(void)
{
	struct sim *s = setup(0x3e);
	unsigned int i;

	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_DOORBELL, VMB_POLL_SLOW_MS, true,
		      "doorbell: after START");
	s->host.target = 1000;
	vmb_doorbell(&s->b);
	expect_wakeup(s, VMB_POLL_DOORBELL, 0, false, "doorbell: rung");
	sim_cycle(s);
	tap_eq(s->b.size, 1000, "doorbell: followed the ring");
	expect_wakeup(s, VMB_POLL_DOORBELL, VMB_POLL_SLOW_MS, true,
		      "doorbell: the target moved, still not fast");
	for (i = 0; i < VMB_POLL_FAST_CYCLES + 5; i++) {
		s->host.target += 100;
		sim_cycle(s);
		if (vmb_next_wakeup(&s->b).ms != VMB_POLL_SLOW_MS)
			break;
	}
	tap_eq(i, VMB_POLL_FAST_CYCLES + 5,
	       "doorbell: never fast nor glancing, whatever the moves");

	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	s->host.fail_start = 1;
	sim_cycles(s, 2);
	expect_wakeup(s, VMB_POLL_FAILING, VMB_POLL_SLOW_MS, true,
		      "doorbell: lost to a reset whose START failed");
	sim_cycle(s);
	tap_ok(s->doorbell_exists, "doorbell: set again after the reset");
	expect_wakeup(s, VMB_POLL_DOORBELL, VMB_POLL_SLOW_MS, true,
		      "doorbell: back after the reset");
	check_consistent(s, "doorbell polling");
	shutdown_and_check(s, "doorbell polling");

	s = setup(0x3e);
	s->host.doorbell_status = VMB_FAILURE;
	s->host.target = 1000;
	sim_cycle(s);
	expect_wakeup(s, VMB_POLL_FAST, VMB_POLL_FAST_MS, false,
		      "doorbell refused: polls fast after a move");
	shutdown_and_check(s, "doorbell refused polling");
}

/*
 * The OS's one timer over simulated time, as linux_glue.c runs it: the
 * next cycle when the last one said (deferrable or not: the simulated
 * guest never defers), or at once after a ring.
 */
static u64 run_cycles(struct sim *s, u64 *next_at, u64 ms)
{
	u64 end = s->now_ms + ms, cycles = 0;

	while (*next_at < end) {
		s->now_ms = *next_at;
		*next_at = s->now_ms + vmb_work(&s->b).ms;
		cycles++;
	}
	s->now_ms = end;
	return cycles;
}

static u64 hypercalls(const struct sim *s)
{
	u64 n = 0;
	unsigned int i;

	for (i = 0; i <= VMB_CMD_NUM; i++)
		n += s->host.calls[i];
	return n;
}

/*
 * The rates over simulated time. Settled, a cycle and a GET_TARGET a
 * second, like the in-tree driver. A move of the target costs the fast
 * polling and three glances, then once a second again. A host whose
 * GET_TARGET fails for 10 minutes, right after a move: after the first
 * 10 s at most 1.1 GET_TARGETs a second (in fact one). With a doorbell,
 * a move costs one cycle, at the ring.
 */
static void test_poll_rates(void)
{
	struct sim *s = setup(0x06);
	u64 next_at = s->now_ms, gets, calls, cycles;

	s->host.target = 1000;
	run_cycles(s, &next_at, 10000);
	tap_eq(s->b.size, 1000, "rates: inflated");
	calls = hypercalls(s);
	gets = s->host.calls[VMB_CMD_GET_TARGET];
	cycles = run_cycles(s, &next_at, 60000);
	tap_ok(cycles >= 59 && cycles <= 61,
	       "rates, settled: a cycle a second (%llu in 60 s)",
	       (unsigned long long)cycles);
	tap_eq(hypercalls(s) - calls, s->host.calls[VMB_CMD_GET_TARGET] - gets,
	       "rates, settled: only GET_TARGET");
	tap_eq(s->host.calls[VMB_CMD_GET_TARGET] - gets, cycles,
	       "rates, settled: one GET_TARGET a cycle");

	s->host.target = 2000;
	cycles = run_cycles(s, &next_at, 10000);
	tap_eq(s->b.size, 2000, "rates: a move followed");
	tap_ok(cycles <= 1 + VMB_POLL_FAST_CYCLES + 3 + 7,
	       "rates, a move: fast polling, three glances, then a second each (%llu cycles in 10 s)",
	       (unsigned long long)cycles);
	tap_eq(s->b.poll_state, VMB_POLL_SETTLED, "rates: settled again");

	s->host.target = 3000;
	run_cycles(s, &next_at, 1000);
	s->host.fail_always_cmd = VMB_CMD_GET_TARGET;
	run_cycles(s, &next_at, 10000);
	gets = s->host.calls[VMB_CMD_GET_TARGET];
	run_cycles(s, &next_at, 590000);
	gets = s->host.calls[VMB_CMD_GET_TARGET] - gets;
	tap_ok(gets * 10 <= 590 * 11,
	       "rates, failing GET_TARGET: at most 1.1 a second after the first 10 s (%llu in 590 s: %llu.%02llu a second)",
	       (unsigned long long)gets, (unsigned long long)(gets / 590),
	       (unsigned long long)(gets * 100 / 590 % 100));
	tap_ok(gets >= 589,
	       "rates, failing GET_TARGET: still asked once a second (%llu in 590 s)",
	       (unsigned long long)gets);
	s->host.fail_always_cmd = -1;
	s->host.target = 1000;
	run_cycles(s, &next_at, VMB_POLL_SLOW_MS + 1);
	tap_eq(s->b.size, 1000, "rates: followed once the host answers");
	tap_eq(s->b.poll_state, VMB_POLL_FAST,
	       "rates: and polls fast after that move");
	check_consistent(s, "rates");
	shutdown_and_check(s, "rates");

	s = setup(0x16);
	next_at = s->now_ms;
	run_cycles(s, &next_at, 5000);
	cycles = s->b.stats[VMB_STAT_TIMER];
	s->host.target = 1000;
	vmb_doorbell(&s->b);
	next_at = s->now_ms;
	run_cycles(s, &next_at, 10000);
	tap_eq(s->b.size, 1000, "rates, doorbell: the ring followed");
	tap_ok(s->b.stats[VMB_STAT_TIMER] - cycles <= 11,
	       "rates, doorbell: a move costs one cycle (%lu cycles in 10 s)",
	       s->b.stats[VMB_STAT_TIMER] - cycles);
	shutdown_and_check(s, "rates, doorbell");
}

/* The first failed allocation ends the cycle. */
static void test_alloc_failure(void)
{
	struct sim *s = setup(0x06);

	s->fail_4k_after = 100;
	s->host.target = 1000;
	sim_cycle(s);
	tap_eq(s->b.size, 100, "allocation failure: what was allocated is locked");
	tap_eq(s->b.page_stats[VMB_PAGE_STAT_ALLOC_FAIL][VMB_PAGE_4K], 1,
	       "allocation failure: no retry in the same cycle");
	check_consistent(s, "allocation failure");
	shutdown_and_check(s, "allocation failure");
}

/* Pages the host will not unlock stay; pages it does not hold may go. */
static void test_unlock_refusals(void)
{
	struct sim *s = setup(0x06);
	struct sim_frame *f;
	unsigned int forgotten = 0;

	s->host.target = 1000;
	sim_cycle(s);
	s->host.refuse_unlock = VMB_ERROR_PPN_PINNED;
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 1000, "unlock refused: pages stay ballooned");
	check_consistent(s, "unlock refused");

	s->host.refuse_unlock = 0;
	/* the host lost track of ten pages */
	for (f = s->lists[VMB_LIST_BALLOON_4K]; f && forgotten < 10; f = f->next) {
		f->locked = false;
		s->host.locked_frames--;
		forgotten++;
	}
	sim_cycle(s);
	tap_eq(s->b.size, 0, "pages the host does not hold are freed too");
	check_consistent(s, "unlock of unlocked pages");
	shutdown_and_check(s, "unlock refusals");
}

/*
 * One page the host will not unlock, the first a deflation takes: it stays
 * in the balloon, and every other page still goes, in single-page mode
 * (one page per command) as in batches, and the 2 MiB pages after the
 * 4 KiB ones. The page goes back on the balloon list, and leaves once the
 * host lets it go. A command that fails as a whole still ends the
 * deflation.
 */
static void test_unlock_one_pinned(void)
{
	static const struct {
		u32 caps;
		u64 target;
	} cases[] = {
		{ 0x02, 100 },		/* single-page */
		{ 0x06, 1000 },		/* two batches */
		{ 0x0e, 3000 },		/* 440 pages of 4 KiB, then 2 MiB ones */
	};
	unsigned int i;
	struct sim *s;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim_frame *pinned;
		char what[64];

		snprintf(what, sizeof(what), "caps %#x, one page pinned",
			 cases[i].caps);
		s = setup(cases[i].caps);
		s->host.target = cases[i].target;
		sim_cycle(s);
		tap_eq(s->b.size, cases[i].target, "%s: inflated", what);
		pinned = s->lists[VMB_LIST_BALLOON_4K];
		pinned->pinned = true;
		s->host.target = 0;
		sim_cycle(s);
		tap_eq(s->b.size, 1, "%s: every other page deflated", what);
		tap_ok(s->lists[VMB_LIST_HELD_4K] == pinned && !pinned->next &&
		       !s->lists[VMB_LIST_BALLOON_4K],
		       "%s: the pinned page on the held queue", what);
		tap_eq(s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K] +
		       s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_2M] *
		       VMB_2M_FRAMES, cases[i].target - 1,
		       "%s: frees counted", what);
		check_consistent(s, what);
		sim_cycle(s);
		tap_eq(s->b.size, 1, "%s: still refused next cycle", what);
		pinned->pinned = false;
		sim_cycle(s);
		tap_eq(s->b.size, 0, "%s: gone once the host unlocks it", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}

	/* single-page: a command failing as a whole ends the deflation */
	s = setup(0x02);
	s->host.target = 10;
	sim_cycle(s);
	s->host.busy_on_cmd = VMB_CMD_UNLOCK;
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->host.calls[VMB_CMD_UNLOCK], 1,
	       "single-page, UNLOCK answers BUSY: no other page tried");
	tap_eq(s->b.size, 10, "single-page, UNLOCK answers BUSY: all kept");
	check_consistent(s, "single-page, BUSY");
	sim_cycle(s);
	tap_eq(s->b.size, 0, "single-page, BUSY: deflated next cycle");
	shutdown_and_check(s, "single-page, BUSY");
}

/*
 * A host that refuses every unlock: one deflation, or one shrink, stops
 * after VMB_MAX_REFUSED refused pages, as inflation does, rather than
 * walking the whole balloon (one UNLOCK per page in single-page mode, in
 * batches every page on and off the held list). In batches the command
 * that brings the count to VMB_MAX_REFUSED is the last: a batch of 4 KiB
 * or 2 MiB pages is refused whole, one command. Nothing is lost, and the
 * balloon deflates once the host unlocks again.
 */
static void test_unlock_refused_bounded(void)
{
	static const struct {
		u32 caps;
		u64 nframes;
		u64 target;
		u64 max_refused;	/* pages refused in one deflation */
	} cases[] = {
		{ 0x02, 0, 4096, VMB_MAX_REFUSED },		/* single-page */
		{ 0x06, 0, 4096, VMB_BATCH_MAX_ENTRIES },	/* 4 KiB batches */
		{ 0x0e, 1 << 20, 600 * VMB_2M_FRAMES,		/* 2 MiB batches */
		  VMB_BATCH_MAX_ENTRIES },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim_config cfg = {
			.host_caps = cases[i].caps,
			.nframes = cases[i].nframes,
		};
		struct sim *s = setup_cfg(&cfg);
		u64 unlocks, refused;
		char what[64];

		snprintf(what, sizeof(what), "caps %#x, every unlock refused",
			 cases[i].caps);
		s->host.target = cases[i].target;
		sim_cycle(s);
		tap_eq(s->b.size, cases[i].target, "%s: inflated", what);
		s->host.refuse_unlock = VMB_ERROR_PPN_PINNED;

		s->host.target = 0;
		unlocks = unlock_calls(s);
		sim_cycle(s);
		unlocks = unlock_calls(s) - unlocks;
		refused = s->host.unlocks_refused;
		tap_ok(unlocks <= VMB_MAX_REFUSED && (cases[i].caps & 0x04 ?
		       unlocks == 1 : unlocks == VMB_MAX_REFUSED),
		       "%s: a deflation sends %s (%llu)", what,
		       cases[i].caps & 0x04 ? "one UNLOCK command" :
					      "16 UNLOCK commands",
		       (unsigned long long)unlocks);
		tap_ok(refused <= cases[i].max_refused,
		       "%s: a deflation tries at most %llu refused pages (%llu)",
		       what, (unsigned long long)cases[i].max_refused,
		       (unsigned long long)refused);
		tap_eq(s->b.size, cases[i].target, "%s: nothing deflated", what);
		check_consistent(s, what);

		unlocks = unlock_calls(s);
		tap_eq(vmb_shrink(&s->b, VMB_PRESSURE_MIN_FRAMES), 0,
		       "%s: a shrink gives nothing", what);
		unlocks = unlock_calls(s) - unlocks;
		refused = s->host.unlocks_refused - refused;
		tap_ok(unlocks <= VMB_MAX_REFUSED,
		       "%s: a shrink sends at most %u UNLOCK commands (%llu)",
		       what, VMB_MAX_REFUSED, (unsigned long long)unlocks);
		tap_ok(refused <= cases[i].max_refused,
		       "%s: a shrink tries at most %llu refused pages (%llu)",
		       what, (unsigned long long)cases[i].max_refused,
		       (unsigned long long)refused);
		check_consistent(s, what);

		s->host.refuse_unlock = 0;
		s->now_ms += VMB_PRESSURE_HOLDOFF_MS;
		sim_cycles(s, 20);
		tap_eq(s->b.size, 0, "%s: deflated once the host unlocks", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/*
 * A host that keeps every 7th page: the pages it refused go back first on
 * the list, where the next deflation starts. The bound of
 * test_unlock_refused_bounded must not stop the balloon from shrinking
 * once VMB_MAX_REFUSED of them gathered there: cycle after cycle, it
 * deflates down to the pages the host keeps.
 */
static void test_unlock_some_pinned(void)
{
	static const u32 caps[] = { 0x02, 0x06 };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		struct sim *s = setup(caps[i]);
		struct sim_frame *f;
		unsigned int n = 0, pinned = 0;
		u64 most_refused = 0;
		char what[64];

		snprintf(what, sizeof(what), "caps %#x, every 7th page pinned",
			 caps[i]);
		s->host.target = 4096;
		sim_cycle(s);
		for (f = s->lists[VMB_LIST_BALLOON_4K]; f; f = f->next) {
			if (n++ % 7 == 0) {
				f->pinned = true;
				pinned++;
			}
		}
		s->host.target = 0;
		for (n = 0; n < 60; n++) {
			u64 refused = s->host.unlocks_refused;

			sim_cycle(s);
			refused = s->host.unlocks_refused - refused;
			if (refused > most_refused)
				most_refused = refused;
		}
		tap_eq(s->b.size, pinned,
		       "%s: deflated to the pinned pages in 60 cycles", what);
		tap_ok(most_refused <= (caps[i] & VMB_CAP_BATCHED ?
					VMB_BATCH_MAX_ENTRIES : VMB_MAX_REFUSED),
		       "%s: at most %u refusals a deflation, one command's in batches (%llu)",
		       what, VMB_MAX_REFUSED, (unsigned long long)most_refused);
		tap_eq(s->b.held[VMB_PAGE_4K], pinned,
		       "%s: the pinned pages held", what);
		check_consistent(s, what);

		/* the host lets them go: the held pages are tried again */
		for (f = s->lists[VMB_LIST_HELD_4K]; f; f = f->next)
			f->pinned = false;
		sim_cycle(s);
		tap_eq(s->b.size, 0, "%s: unpinned, deflated in one cycle",
		       what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/*
 * Pages of one size the host keeps do not stop the other size from
 * deflating: the held pages are tried only once the fresh pages of both
 * sizes have run out. A balloon of 4 KiB and 2 MiB pages whose 4 KiB
 * pages the host all keeps deflates its 2 MiB pages, cycle after cycle
 * down to the kept pages, and memory pressure gets them too.
 */
static void test_unlock_held_other_size(void)
{
	static const char * const how[] = { "cycles", "shrinks" };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		struct sim *s = setup(0x0e);
		struct sim_frame *f;
		u64 given = 0;
		unsigned int n;
		char what[64];

		snprintf(what, sizeof(what),
			 "every 4 KiB page pinned, 2 MiB ones not, %s", how[i]);
		s->no_2m = true;
		s->host.target = 1024;
		sim_cycle(s);
		s->no_2m = false;
		s->host.target = 1024 + 8 * VMB_2M_FRAMES;
		sim_cycle(s);
		tap_eq(s->b.size, s->host.target, "%s: inflated", what);
		for (f = s->lists[VMB_LIST_BALLOON_4K]; f; f = f->next)
			f->pinned = true;
		if (i == 0) {
			s->host.target = 0;
			sim_cycles(s, 20);
		} else {
			for (n = 0; n < 20; n++)
				given += vmb_shrink(&s->b,
						    VMB_PRESSURE_MIN_FRAMES);
			tap_eq(given, 8 * VMB_2M_FRAMES,
			       "%s: every 2 MiB page given back", what);
		}
		tap_eq(s->b.size, 1024, "%s: deflated to the pinned pages",
		       what);
		tap_eq(s->b.held[VMB_PAGE_4K], 1024,
		       "%s: the pinned pages held", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/*
 * Only a page's own status frees it: a batch failing as a whole with
 * PPN_UNLOCKED has unlocked nothing. In single-page mode the status is
 * the page's own, and PPN_UNLOCKED frees it.
 */
static void test_unlock_batch_status(void)
{
	static const struct {
		u32 caps;
		enum vmb_cmd cmd;
	} cases[] = {
		{ 0x06, VMB_CMD_BATCHED_UNLOCK },
		{ 0x0e, VMB_CMD_BATCHED_2M_UNLOCK },
	};
	unsigned int i;
	struct sim *s;

	for (i = 0; i < 2; i++) {
		char what[64];

		snprintf(what, sizeof(what), "%s answers PPN_UNLOCKED as a whole",
			 vmb_cmd_names[cases[i].cmd]);
		s = setup(cases[i].caps);
		s->host.target = 2048;
		sim_cycle(s);
		s->host.status_on_cmd = cases[i].cmd;
		s->host.status_once = VMB_ERROR_PPN_UNLOCKED;
		s->host.target = 0;
		sim_cycle(s);
		tap_eq(s->host.status_on_cmd, -1, "%s: answered", what);
		tap_eq(s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K] +
		       s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_2M], 0,
		       "%s: no page freed", what);
		check_consistent(s, what);
		sim_cycle(s);
		tap_eq(s->b.size, 0, "%s: deflated next cycle", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}

	s = setup(0x02);
	s->host.target = 10;
	sim_cycle(s);
	s->lists[VMB_LIST_BALLOON_4K]->locked = false;
	s->host.locked_frames--;
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 0, "single-page, UNLOCK answers PPN_UNLOCKED: freed");
	check_consistent(s, "single-page, PPN_UNLOCKED");
	shutdown_and_check(s, "single-page, PPN_UNLOCKED");
}

/* The doorbell: set after START, unset on reset and on unload. */
static void test_doorbell(void)
{
	struct sim_config cfg = { .host_caps = 0x3e };
	struct sim *s = setup_cfg(&cfg);

	s->host.target = 100;
	sim_cycle(s);
	tap_ok(s->doorbell_exists, "doorbell: created");
	tap_ok(s->host.doorbell_context == 42 && s->host.doorbell_resource == 7,
	       "doorbell: given to the host");
	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	sim_cycles(s, 2);
	tap_eq(s->doorbells_created, 2, "doorbell: made again after a reset");
	tap_eq(s->b.size, 100, "doorbell: balloon back at target");
	vmb_doorbell(&s->b);
	sim_cycle(s);
	tap_eq(s->b.stats[VMB_STAT_DOORBELL], 1, "doorbell: rings counted");
	vmb_shutdown(&s->b);
	tap_ok(!s->doorbell_exists, "doorbell: destroyed on unload");
	tap_eq(s->host.doorbell_context, VMB_VMCI_INVALID_ID,
	       "doorbell: unset on unload");
	tap_eq(s->errors, 0, "doorbell: hooks used correctly");
	sim_destroy(s);

	s = setup_cfg(&cfg);
	s->doorbell_fails = true;
	s->host.target = 100;
	sim_cycles(s, 3);
	tap_eq(s->b.size, 100, "no doorbell: balloon still works by polling");
	tap_eq(sim_log_count(s, "doorbell"), 1, "no doorbell: said once");
	shutdown_and_check(s, "no doorbell");

	s = setup_cfg(&cfg);
	s->host.doorbell_status = VMB_FAILURE;
	s->host.target = 100;
	sim_cycle(s);
	tap_ok(!s->doorbell_exists, "doorbell refused by the host: destroyed");
	tap_eq(s->b.size, 100, "doorbell refused: balloon still works");
	shutdown_and_check(s, "doorbell refused");

	cfg.requested_caps = VMB_CAPS_ALL & ~VMB_CAP_DOORBELL;
	s = setup_cfg(&cfg);
	sim_cycle(s);
	tap_eq(s->host.start_args[0], 0x2e, "without VMCI: START asks for 0x2e");
	tap_eq(s->doorbells_created, 0, "without VMCI: no doorbell");
	shutdown_and_check(s, "without VMCI");
}

/* A host scribbling over the entries' PFNs does not confuse the guest. */
static void test_scribbled_entries(void)
{
	struct sim *s = setup(0x0e);

	s->host.entry_garbage = true;
	s->host.target = 3000;
	sim_cycle(s);
	tap_eq(s->b.size, 3000, "scribbled entries: target reached");
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 0, "scribbled entries: deflated");
	check_consistent(s, "scribbled entries");
	shutdown_and_check(s, "scribbled entries");
}

static u64 host_calls(const struct sim *s)
{
	u64 n = 0;
	unsigned int i;

	for (i = 0; i <= VMB_CMD_NUM; i++)
		n += s->host.calls[i];
	return n;
}

/* Isolate a 4 KiB balloon page and migrate it; checks the common ground. */
static enum vmb_migrate_result migrate_one(struct sim *s, const char *what)
{
	struct sim_frame *old = sim_isolate(s, 3);
	u64 size = s->b.size;
	enum vmb_migrate_result r;

	if (!tap_ok(old != NULL, "%s: a page to migrate", what))
		return VMB_MIGRATE_BUSY;
	r = sim_migrate(s, old);
	tap_eq(s->b.size, size - (r == VMB_MIGRATE_OLD_ONLY),
	       "%s: size follows the result", what);
	tap_eq(s->errors, 0, "%s: neither page listed nor freed by the core",
	       what);
	return r;
}

/* Each outcome of a migration, batched and single-page. */
static void test_migrate_outcomes(void)
{
	static const u32 modes[] = { 0x0e, 0x02 };
	unsigned int m;

	for (m = 0; m < 2; m++) {
		u32 caps = modes[m];
		bool batched = caps & VMB_CAP_BATCHED;
		enum vmb_cmd unlock = batched ? VMB_CMD_BATCHED_UNLOCK : VMB_CMD_UNLOCK;
		enum vmb_cmd lock = batched ? VMB_CMD_BATCHED_LOCK : VMB_CMD_LOCK;
		struct sim *s = setup(caps);
		u64 frees, unlocks, locks;
		struct sim_frame *f;
		char what[80];

		snprintf(what, sizeof(what), "migrate, caps %#x", caps);
		s->host.target = 1000;
		sim_cycle(s);
		check_consistent(s, what);

		unlocks = s->host.calls[unlock];
		locks = s->host.calls[lock];
		tap_eq(migrate_one(s, what), VMB_MIGRATE_DONE, "%s: DONE", what);
		tap_eq(s->host.calls[unlock], unlocks + 1, "%s: one %s", what,
		       vmb_cmd_names[unlock]);
		tap_eq(s->host.calls[lock], locks + 1, "%s: one %s", what,
		       vmb_cmd_names[lock]);
		tap_eq(s->b.stats[VMB_STAT_MIGRATE], 1, "%s: counted", what);
		check_consistent(s, what);

		/* the host will not unlock the old page */
		snprintf(what, sizeof(what), "migrate, caps %#x, unlock refused",
			 caps);
		s->host.refuse_unlock = VMB_ERROR_PPN_PINNED;
		locks = s->host.calls[lock];
		tap_eq(migrate_one(s, what), VMB_MIGRATE_BUSY, "%s: BUSY", what);
		tap_eq(s->host.calls[lock], locks, "%s: no LOCK", what);
		s->host.refuse_unlock = 0;
		check_consistent(s, what);

		/* the host refuses the new page */
		snprintf(what, sizeof(what), "migrate, caps %#x, lock refused",
			 caps);
		s->host.refuse_every = 1;
		frees = s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K];
		tap_eq(migrate_one(s, what), VMB_MIGRATE_OLD_ONLY, "%s: OLD_ONLY",
		       what);
		tap_eq(s->b.page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K],
		       frees + 1, "%s: counted as a 4k free", what);
		tap_eq(s->b.stats[VMB_STAT_MIGRATE], 1, "%s: not a migration",
		       what);
		s->host.refuse_every = 0;
		check_consistent(s, what);

		/* the host does not hold the old page: free to go */
		snprintf(what, sizeof(what), "migrate, caps %#x, old not held",
			 caps);
		f = s->lists[VMB_LIST_BALLOON_4K];
		f = f->next->next->next;	/* the one migrate_one takes */
		f->locked = false;
		s->host.locked_frames--;
		tap_eq(migrate_one(s, what), VMB_MIGRATE_DONE, "%s: DONE", what);
		check_consistent(s, what);

		/* the host is busy for a moment: worth another try */
		snprintf(what, sizeof(what), "migrate, caps %#x, unlock BUSY",
			 caps);
		s->host.busy_on_cmd = unlock;
		tap_eq(migrate_one(s, what), VMB_MIGRATE_AGAIN, "%s: AGAIN",
		       what);
		check_consistent(s, what);

		/*
		 * RESET on the unlock: nothing changed, the next cycle resets,
		 * then the page may move: worth another try
		 */
		snprintf(what, sizeof(what), "migrate, caps %#x, RESET on unlock",
			 caps);
		s->host.reset_on_cmd = unlock;
		tap_eq(migrate_one(s, what), VMB_MIGRATE_AGAIN, "%s: AGAIN",
		       what);
		tap_ok(s->b.reset_required, "%s: reset pending", what);
		unlocks = host_calls(s);
		tap_eq(migrate_one(s, what), VMB_MIGRATE_AGAIN,
		       "%s: AGAIN while the reset is pending", what);
		tap_eq(host_calls(s), unlocks, "%s: no hypercall meanwhile", what);
		sim_cycles(s, 2);
		tap_eq(s->b.size, 1000, "%s: back at target", what);
		check_consistent(s, what);

		/* RESET on the lock: the old page is gone, the reset follows */
		snprintf(what, sizeof(what), "migrate, caps %#x, RESET on lock",
			 caps);
		s->host.reset_on_cmd = lock;
		tap_eq(migrate_one(s, what), VMB_MIGRATE_OLD_ONLY, "%s: OLD_ONLY",
		       what);
		tap_ok(s->b.reset_required, "%s: reset pending", what);
		sim_cycles(s, 2);
		tap_eq(s->b.size, 1000, "%s: back at target", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

/* Before the first START, and with a host that grants nothing: BUSY. */
static void test_migrate_no_connection(void)
{
	struct sim *s = setup(0x0e);
	struct sim_frame *f;

	/* a page of the OS's own, as if ballooned: never reaches the host */
	f = (struct sim_frame *)vmb_os_page_alloc(&s->b, VMB_PAGE_4K);
	f->isolated = true;
	tap_eq(vmb_migrate(&s->b, (struct vmb_page *)f,
			   (struct vmb_page *)(f + 1)), VMB_MIGRATE_AGAIN,
	       "migrate before the first START: AGAIN, the first cycle is near");
	tap_eq(host_calls(s), 0, "migrate before the first START: no hypercall");
	f->isolated = false;
	vmb_os_page_free(&s->b, (struct vmb_page *)f, VMB_PAGE_4K);
	sim_destroy(s);

	s = setup(0x00);
	sim_cycle(s);
	f = (struct sim_frame *)vmb_os_page_alloc(&s->b, VMB_PAGE_4K);
	tap_eq(vmb_migrate(&s->b, (struct vmb_page *)f,
			   (struct vmb_page *)(f + 1)), VMB_MIGRATE_BUSY,
	       "migrate, nothing granted: BUSY");
	tap_eq(lock_calls(s) + unlock_calls(s), 0,
	       "migrate, nothing granted: no lock or unlock");
	vmb_os_page_free(&s->b, (struct vmb_page *)f, VMB_PAGE_4K);
	shutdown_and_check(s, "migrate, nothing granted");
}

/*
 * What stands in the way of a migration for a moment only is worth
 * another try (AGAIN, which the kernel retries): a reset pending, a host
 * answering BUSY to the unlock, as a whole or for the page, or a RESET.
 * A host refusing to unlock the page is not (BUSY: the kernel gives up).
 * Either way the page stays ballooned.
 */
static void test_migrate_temporary(void)
{
	static const struct {
		u32 caps;
		enum vmb_cmd cmd;
		u32 status;
		bool entry;
		enum vmb_migrate_result want;
		const char *what;
	} cases[] = {
		{ 0x06, VMB_CMD_BATCHED_UNLOCK, VMB_ERROR_BUSY, false,
		  VMB_MIGRATE_AGAIN, "batch BUSY" },
		{ 0x06, VMB_CMD_BATCHED_UNLOCK, VMB_ERROR_BUSY, true,
		  VMB_MIGRATE_AGAIN, "entry BUSY" },
		{ 0x02, VMB_CMD_UNLOCK, VMB_ERROR_BUSY, false,
		  VMB_MIGRATE_AGAIN, "single-page BUSY" },
		{ 0x06, VMB_CMD_BATCHED_UNLOCK, VMB_ERROR_RESET, false,
		  VMB_MIGRATE_AGAIN, "RESET" },
		{ 0x06, VMB_CMD_BATCHED_UNLOCK, VMB_ERROR_PPN_PINNED, true,
		  VMB_MIGRATE_BUSY, "entry PINNED" },
		{ 0x02, VMB_CMD_UNLOCK, VMB_ERROR_PPN_PINNED, false,
		  VMB_MIGRATE_BUSY, "single-page PINNED" },
		{ 0x06, VMB_CMD_BATCHED_UNLOCK, VMB_FAILURE, false,
		  VMB_MIGRATE_BUSY, "batch FAILURE" },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim *s = setup(cases[i].caps);
		struct sim_frame *f;

		s->host.target = 100;
		sim_cycle(s);
		f = sim_isolate(s, 0);
		if (cases[i].status == VMB_ERROR_RESET) {
			s->host.reset_on_cmd = cases[i].cmd;
		} else if (cases[i].entry) {
			s->host.refuse_unlock = cases[i].status;
		} else {
			s->host.status_on_cmd = cases[i].cmd;
			s->host.status_once = cases[i].status;
		}
		tap_eq(sim_migrate(s, f), cases[i].want, "migrate, %s: %s",
		       cases[i].what,
		       cases[i].want == VMB_MIGRATE_AGAIN ? "AGAIN" : "BUSY");
		tap_eq(s->b.size, 100, "migrate, %s: still ballooned",
		       cases[i].what);
		s->host.refuse_unlock = 0;
		if (cases[i].status == VMB_ERROR_RESET) {
			f = sim_isolate(s, 0);
			tap_eq(sim_migrate(s, f), VMB_MIGRATE_AGAIN,
			       "migrate, reset pending: AGAIN");
			sim_cycle(s);
			f = sim_isolate(s, 0);
			tap_eq(sim_migrate(s, f), VMB_MIGRATE_DONE,
			       "migrate, after the reset: done");
		}
		check_consistent(s, cases[i].what);
		shutdown_and_check(s, cases[i].what);
	}
}

/*
 * Unload's wait for a page compaction holds (vmb_drain_wait_ms()): looks
 * at 20 ms, then ever further apart (seven in the first 1.28 s), then one
 * a second; over 10 minutes of a page that never comes back, about 600
 * looks (a look every 20 ms would be 30000) and a line a minute from the
 * tenth second on. Each look sends nothing (test_migrate_after_shutdown).
 */
static void test_drain_wait(void)
{
	u64 waited = 0, looks = 0, said = 0, first_said = 0, longest = 0;
	unsigned int ms;

	tap_eq(vmb_drain_wait_ms(0), VMB_DRAIN_FIRST_MS,
	       "drain: the first look after %u ms", VMB_DRAIN_FIRST_MS);
	while (waited < 600000) {
		ms = vmb_drain_wait_ms(waited);
		if (vmb_drain_say(waited, ms)) {
			said++;
			if (!first_said)
				first_said = waited + ms;
		}
		if (ms > longest)
			longest = ms;
		waited += ms;
		if (++looks == 7)
			tap_eq(waited, 1280, "drain: seven looks in 1.28 s");
	}
	tap_ok(looks <= 610, "drain: at most one look a second (%llu in 10 min)",
	       (unsigned long long)looks);
	tap_eq(longest, VMB_DRAIN_MAX_MS, "drain: waits grow to %u ms",
	       VMB_DRAIN_MAX_MS);
	tap_ok(first_said >= VMB_DRAIN_SAY_FIRST_MS &&
	       first_said < VMB_DRAIN_SAY_FIRST_MS + VMB_DRAIN_MAX_MS,
	       "drain: says what it waits for after 10 s (%llu ms)",
	       (unsigned long long)first_said);
	tap_eq(said, 10, "drain: then once a minute (10 lines in 10 min)");
}

/*
 * Unload's bound (vmb_drain_overdue()): over 20 minutes of a page that
 * never comes back, paced as unload paces it, the bound is crossed once,
 * by the look that ends the tenth minute, and never again.
 */
static void test_drain_overdue(void)
{
	u64 waited = 0, crossed_at = 0, crossings = 0;
	unsigned int ms;

	while (waited < 2 * VMB_DRAIN_OVERDUE_MS) {
		ms = vmb_drain_wait_ms(waited);
		if (vmb_drain_overdue(waited, ms)) {
			crossings++;
			crossed_at = waited + ms;
		}
		waited += ms;
	}
	tap_eq(crossings, 1, "drain: the bound is crossed once in 20 minutes");
	tap_ok(crossed_at >= VMB_DRAIN_OVERDUE_MS &&
	       crossed_at < VMB_DRAIN_OVERDUE_MS + VMB_DRAIN_MAX_MS,
	       "drain: at 10 minutes (%llu ms)",
	       (unsigned long long)crossed_at);
	tap_ok(!vmb_drain_overdue(0, VMB_DRAIN_FIRST_MS),
	       "drain: not at the first look");
}

/* A page isolated while the balloon resets stays counted until it returns. */
static void test_migrate_across_reset(void)
{
	struct sim *s = setup(0x06);
	struct sim_frame *f;

	s->host.target = 1000;
	sim_cycle(s);
	f = sim_isolate(s, 0);
	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	s->host.target = 600;
	sim_cycles(s, 2);
	tap_eq(s->b.size, 600, "isolated across a reset: balloon at target");
	tap_eq(s->host.locked_frames, 599,
	       "isolated across a reset: the host no longer holds it");
	tap_eq(sim_migrate(s, f), VMB_MIGRATE_DONE,
	       "isolated across a reset: migrated afterwards");
	check_consistent(s, "isolated across a reset, then migrated");

	f = sim_isolate(s, 0);
	s->host.reset_on_cmd = VMB_CMD_GET_TARGET;
	sim_cycles(s, 2);
	sim_putback(s, f);
	s->host.target = 0;
	sim_cycle(s);
	tap_eq(s->b.size, 0, "isolated across a reset, put back: freed by deflation");
	check_consistent(s, "isolated across a reset, put back");
	shutdown_and_check(s, "isolated across a reset");
}

static u64 rnd_state = 12345;

static unsigned int rnd(unsigned int n)
{
	rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned int)(rnd_state >> 33) % n;
}

/*
 * Unload while compaction holds two ballooned pages: START(0), and every
 * listed page freed. No command goes out after START(0): a migration of
 * one of them is refused without asking the host (which no longer holds
 * it), and the page comes back; so does the other, put back. The OS then
 * frees what came back, without a second START(0).
 */
static void test_migrate_after_shutdown(void)
{
	struct sim *s = setup(0x0e);
	struct sim_frame *migrating, *put_back;
	unsigned int starts;
	u64 calls;

	s->host.target = 3000;
	sim_cycle(s);
	migrating = sim_isolate(s, 5);
	put_back = sim_isolate(s, 7);
	tap_ok(migrating && put_back, "after shutdown: two pages isolated");
	vmb_shutdown(&s->b);
	tap_eq(s->host.start_args[s->host.n_starts - 1], 0,
	       "after shutdown: START(0) sent");
	tap_eq(s->allocated, 2, "after shutdown: the isolated pages left");
	tap_eq(s->b.size, 2, "after shutdown: ... and counted");

	starts = s->host.n_starts;
	calls = hypercalls(s);
	tap_eq(sim_migrate(s, migrating), VMB_MIGRATE_BUSY,
	       "after shutdown: a migration is refused");
	tap_eq(vmb_shrink(&s->b, VMB_PRESSURE_MIN_FRAMES), 0,
	       "after shutdown: a shrink gives nothing");
	tap_eq(hypercalls(s), calls, "after shutdown: no command sent");
	sim_putback(s, put_back);
	tap_eq(sim_list_frames(s), 2, "after shutdown: both pages came back");

	vmb_shutdown_rest(&s->b);
	tap_eq(s->allocated, 0, "after shutdown: what came back is freed");
	tap_eq(s->b.size, 0, "after shutdown: the balloon is empty");
	tap_eq(hypercalls(s), calls, "after shutdown: still no command");
	tap_eq(s->host.n_starts, starts, "after shutdown: one START(0)");
	tap_eq(s->freed_while_locked, 0,
	       "after shutdown: no page freed while locked");
	tap_eq(s->errors, 0, "after shutdown: the OS hooks used as they should");
	sim_destroy(s);
}

/*
 * Migrations interleaved with cycles, as compaction runs beside the
 * worker: pages isolated, migrated or put back while the balloon inflates
 * and deflates, with the host now and then refusing. After every step the
 * size is what the lists and the isolated pages hold, and what the host
 * holds.
 */
static void test_migrate_interleaved(void)
{
	static const u32 modes[] = { 0x0e, 0x06, 0x02 };
	unsigned int m;

	for (m = 0; m < 3; m++) {
		struct sim *s = setup(modes[m]);
		struct sim_frame *isolated[8];
		unsigned int n_isolated = 0, step, bad_step = 0, migrated = 0;
		char what[64], why[160] = "";

		snprintf(what, sizeof(what), "interleaved migration, caps %#x",
			 modes[m]);
		s->host.target = 3000;
		sim_cycle(s);
		for (step = 1; step <= 600 && !bad_step; step++) {
			unsigned int i;

			switch (rnd(7)) {
			case 0:
				s->host.target = rnd(5000);
				sim_cycle(s);
				break;
			case 1:
				sim_cycle(s);
				break;
			case 2:
			case 3:
				if (n_isolated < 8) {
					isolated[n_isolated] =
						sim_isolate(s, rnd(50));
					if (isolated[n_isolated])
						n_isolated++;
				}
				break;
			case 4:
				if (!n_isolated)
					break;
				i = rnd(n_isolated);
				if (sim_migrate(s, isolated[i]) ==
				    VMB_MIGRATE_DONE)
					migrated++;
				isolated[i] = isolated[--n_isolated];
				break;
			case 5:
				if (!n_isolated)
					break;
				i = rnd(n_isolated);
				sim_putback(s, isolated[i]);
				isolated[i] = isolated[--n_isolated];
				break;
			default:
				s->host.refuse_every = rnd(3) ? 0 : 5;
				s->host.refuse_unlock = rnd(4) ? 0 :
							VMB_ERROR_PPN_PINNED;
				break;
			}
			if (!sim_consistent(s, why, sizeof(why)))
				bad_step = step;
		}
		if (!tap_ok(!bad_step, "%s: consistent at every step", what))
			printf("#   step %u: %s\n", bad_step, why);
		tap_ok(migrated > 10, "%s: pages migrated (%u)", what, migrated);
		tap_ok(s->migrations[VMB_MIGRATE_BUSY] > 0 &&
		       s->migrations[VMB_MIGRATE_OLD_ONLY] > 0,
		       "%s: every outcome seen (done %u, old only %u, busy %u)",
		       what, s->migrations[VMB_MIGRATE_DONE],
		       s->migrations[VMB_MIGRATE_OLD_ONLY],
		       s->migrations[VMB_MIGRATE_BUSY]);
		tap_eq(s->b.stats[VMB_STAT_MIGRATE], migrated,
		       "%s: migrations counted", what);
		while (n_isolated)
			sim_putback(s, isolated[--n_isolated]);
		s->host.refuse_every = 0;
		s->host.refuse_unlock = 0;
		s->host.target = 0;
		sim_cycle(s);
		tap_eq(s->b.size, 0, "%s: deflated to 0", what);
		check_consistent(s, what);
		shutdown_and_check(s, what);
	}
}

static u64 core_cmd_calls(const struct sim *s)
{
	u64 n = 0;
	unsigned int i;

	for (i = 0; i < VMB_CMD_NUM; i++)
		n += s->b.cmd_calls[i] + s->b.cmd_fails[i];
	return n;
}

/*
 * No command number out of range reaches the host or an array: not one
 * past the table, not a single-page command for a 2 MiB page (there is
 * none, and 2 MiB pages need batching anyway).
 */
static void test_cmd_out_of_range(void)
{
	struct sim *s = setup(0x02);
	struct vmb_page *page;
	u64 calls, counted;
	u32 status;

	sim_cycle(s);
	calls = host_calls(s);
	counted = core_cmd_calls(s);
	tap_eq(vmb_cmd(&s->b, VMB_CMD_NUM, 0, 0, NULL), VMB_ERROR_CMD_INVALID,
	       "command VMB_CMD_NUM: CMD_INVALID");
	tap_eq(vmb_cmd(&s->b, (enum vmb_cmd)0x7fffffff, 0, 0, NULL),
	       VMB_ERROR_CMD_INVALID, "command 0x7fffffff: CMD_INVALID");
	tap_eq(host_calls(s), calls, "commands out of range: no hypercall");
	tap_eq(core_cmd_calls(s), counted, "commands out of range: not counted");

	page = vmb_os_page_alloc(&s->b, VMB_PAGE_2M);
	s->b.pages[0] = page;
	status = vmb_send_lock_op(&s->b, VMB_PAGE_2M, 1, true);
	tap_ok(status != VMB_SUCCESS, "single-page lock of a 2 MiB page: refused");
	status = vmb_send_lock_op(&s->b, VMB_PAGE_2M, 1, false);
	tap_ok(status != VMB_SUCCESS,
	       "single-page unlock of a 2 MiB page: refused");
	tap_eq(host_calls(s), calls, "2 MiB page, single-page: no hypercall");
	vmb_os_page_free(&s->b, page, VMB_PAGE_2M);
	shutdown_and_check(s, "commands out of range");
}

struct lines {
	char text[40][96];
	unsigned int n;
};

static void collect(void *ctx, const char *line)
{
	struct lines *l = ctx;

	if (l->n < 40)
		snprintf(l->text[l->n], sizeof(l->text[0]), "%s", line);
	l->n++;
}

/* The debugfs text keeps upstream's names and layout. */
static void test_stats_format(void)
{
	struct sim *s = setup(0x2e);
	struct lines l = { .n = 0 };

	s->host.target = 1000;
	sim_cycle(s);
	vmb_stats_show(&s->b, collect, &l);
	tap_eq(l.n, 30, "stats: 30 lines");
	tap_ok(!strcmp(l.text[0], "balloon capabilities  :             0x3e"),
	       "stats: requested capabilities line");
	tap_ok(!strcmp(l.text[1], "used capabilities     :             0x2e"),
	       "stats: used capabilities line");
	tap_ok(!strcmp(l.text[2], "is resetting          :                n"),
	       "stats: resetting line");
	tap_ok(!strcmp(l.text[4], "current               :             1000"),
	       "stats: current line");
	tap_ok(!strcmp(l.text[5], "start                 :                1 (0 failed)"),
	       "stats: start line");
	tap_ok(!strcmp(l.text[20], "alloc             (4k):              488"),
	       "stats: 4k alloc line");
	tap_ok(!strcmp(l.text[21], "alloc             (2M):                1"),
	       "stats: 2M alloc line");
	tap_ok(!strcmp(l.text[15], "timer                 :                1"),
	       "stats: timer line");
	shutdown_and_check(s, "stats");
}

int main(void)
{
	test_capability_subsets();
	test_refusal_statuses();
	test_too_many_refusals();
	test_single_page_refusal_ends_cycle();
	test_reset_from_each_command();
	test_failing_start();
	test_busy();
	test_target_above_ram();
	test_floor();
	test_64bit_target();
	test_high_pfn();
	test_deflate_slack();
	test_unload();
	test_2m_fallback();
	test_2m_refused_split();
	test_alloc_failure();
	test_2m_batch_size();
	test_poll_states();
	test_poll_failing();
	test_poll_glance_outcomes();
	test_poll_doorbell();
	test_poll_rates();
	test_unlock_refusals();
	test_unlock_batch_status();
	test_unlock_one_pinned();
	test_unlock_refused_bounded();
	test_unlock_some_pinned();
	test_unlock_held_other_size();
	test_doorbell();
	test_doorbell_during_cycle();
	test_scribbled_entries();
	test_stats_format();
	test_cmd_out_of_range();
	test_migrate_outcomes();
	test_migrate_no_connection();
	test_migrate_across_reset();
	test_migrate_temporary();
	test_migrate_interleaved();
	test_migrate_after_shutdown();
	test_drain_wait();
	test_drain_overdue();

	printf("1..%u\n", tap_passed + tap_failed);
	printf("%u passed, %u failed\n", tap_passed, tap_failed);
	return tap_failed ? 1 : 0;
}
