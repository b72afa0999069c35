/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The OS-independent balloon core: its state, and the calls the OS glue
 * makes into it. The policy (how much to inflate or deflate, in which page
 * size, what a refusal or a reset means, when to poll, when to give memory
 * back) lives in balloon.c; its head comment says where each decision is.
 */
#ifndef VMB_BALLOON_H
#define VMB_BALLOON_H

#include "platform.h"
#include "protocol.h"
#include "os.h"

/*
 * Refused batch entries that end an inflation step (the cycle at 4 KiB),
 * and pages the host would not unlock that end a deflation: the bound on
 * the work of every request, the OOM notifier's included.
 */
#define VMB_MAX_REFUSED		16

/*
 * The floor: the balloon never holds the last 1/2^VMB_FLOOR_SHIFT of the
 * guest's RAM (an eighth: 256 MiB of 2 GiB), whatever target the host
 * sends. Allocations that give up early are no defence on their own: a
 * balloon that took every free page leaves the next user-space allocation
 * to the OOM killer. VMware hosts balloon at most 65% of a guest by default.
 */
#define VMB_FLOOR_SHIFT		3

/* No deflation while the balloon is less than 2 MiB above its target. */
#define VMB_DEFLATE_SLACK	512

/*
 * After the guest needed memory back, no inflation for this long: the
 * balloon would only grow into the same shortage again (upstream waits
 * 5 s too). Every new request for memory starts it over.
 */
#define VMB_PRESSURE_HOLDOFF_MS	5000

/*
 * Memory pressure gets at least this many frames back per request: one
 * batch, 2 MiB. A command costs the same for 1 entry or 512, and pressure
 * rarely ends at the first request.
 */
#define VMB_PRESSURE_MIN_FRAMES	512

/*
 * The OOM path never waits for the core's lock without a bound: up to
 * VMB_OOM_TRIES waits of VMB_OOM_WAIT_MS while the worker, told of the
 * pressure (vmb_pressure()), ends its cycle after the page it is
 * allocating and the command it is sending. vmb_oom_wait_ms() decides,
 * and its kernel-doc gives the whole bound.
 */
#define VMB_OOM_TRIES		10
#define VMB_OOM_WAIT_MS		10

/*
 * 2 MiB pages per lock command. The kernel zeroes every page it hands out
 * (init_on_alloc), so the host backs a batch before the LOCK lets it go:
 * 32 entries keep that extra host memory under 64 MiB.
 */
#define VMB_BATCH_MAX_2M	32

/*
 * When to poll: see vmb_next_wakeup(), the one place that decides it.
 * Every 100 ms for 30 cycles after the target moved (a host that moved it
 * is likely to move it again), then glancing: waits of 100, 200 and
 * 400 ms, each twice the last, then settled: once a second, as the
 * in-tree driver polls. With a doorbell the host says when the target
 * moves: once a second then too, and never faster.
 */
#define VMB_POLL_SLOW_MS	1000
#define VMB_POLL_FAST_MS	100
#define VMB_POLL_FAST_CYCLES	30
#define VMB_POLL_GLANCE_MS	100

/**
 * enum vmb_poll_state - why the next cycle comes when it does
 * @VMB_POLL_SETTLED: the target stays put: a cycle a second
 * @VMB_POLL_FAST: the target moved in the last %VMB_POLL_FAST_CYCLES
 *	cycles: a cycle every %VMB_POLL_FAST_MS
 * @VMB_POLL_GLANCING: the fast polling is over: each wait twice the last,
 *	from %VMB_POLL_GLANCE_MS, until it would reach half a second; then
 *	settled
 * @VMB_POLL_FAILING: the last cycle got no target (GET_TARGET or the
 *	reset's START failed): a cycle a second, never faster, until the
 *	host answers
 * @VMB_POLL_DOORBELL: the host has a doorbell to ring when the target
 *	moves: a cycle a second as a safety net, never faster
 */
enum vmb_poll_state {
	VMB_POLL_SETTLED,
	VMB_POLL_FAST,
	VMB_POLL_GLANCING,
	VMB_POLL_FAILING,
	VMB_POLL_DOORBELL,
};

/**
 * struct vmb_wakeup - when the OS runs the next cycle
 * @ms: milliseconds from now; 0 means at once
 * @deferrable: the moment does not matter to within a second: the OS may
 *	move it to share a wakeup with others (Linux rounds it to a whole
 *	second, as the in-tree driver does)
 */
struct vmb_wakeup {
	unsigned int ms;
	bool deferrable;
};

/*
 * Unload's wait for pages the OS holds away from its lists: see
 * vmb_drain_wait_ms(), vmb_drain_say() and vmb_drain_overdue().
 */
#define VMB_DRAIN_FIRST_MS	20
#define VMB_DRAIN_MAX_MS	1000
#define VMB_DRAIN_SAY_FIRST_MS	10000
#define VMB_DRAIN_SAY_EVERY_MS	60000
#define VMB_DRAIN_OVERDUE_MS	600000

enum vmb_stat {
	VMB_STAT_TIMER,		/* cycles run */
	VMB_STAT_DOORBELL,	/* cycles the host's doorbell started */
	VMB_STAT_RESET,		/* resets completed */
	VMB_STAT_SHRINK,	/* times the guest asked for memory back */
	VMB_STAT_SHRINK_FREE,	/* frames given back on those requests */
	VMB_NR_SHOWN_STATS,	/* the ones above are upstream's debugfs lines */
	/* pages migrated: not shown, the kernel counts balloon_migrate */
	VMB_STAT_MIGRATE = VMB_NR_SHOWN_STATS,
	VMB_NR_STATS
};

enum vmb_page_stat {
	VMB_PAGE_STAT_ALLOC,		/* pages allocated */
	VMB_PAGE_STAT_ALLOC_FAIL,	/* allocations that failed */
	VMB_PAGE_STAT_REFUSED_ALLOC,	/* pages the host refused to lock */
	VMB_PAGE_STAT_REFUSED_FREE,	/* refused pages freed */
	VMB_PAGE_STAT_FREE,		/* pages freed out of the balloon */
	VMB_NR_PAGE_STATS
};

/**
 * struct vmb_balloon - one balloon and its connection to the host
 * @requested_caps: capabilities asked for at START
 * @caps: capabilities the host granted at the last START
 * @target: last target the host sent, in 4 KiB frames
 * @reset_required: the host asked for a reset (or none was done yet)
 * @size: frames the host holds locked for us: the pages on the OS's balloon
 *	lists, plus any the OS has taken off them for migration
 * @max_size: the largest page size the protocol allows
 * @batch_max: pages per lock command: 512 batched, 1 single-page, 0 none
 * @batch: the batch page (also the per-page scratch in single-page mode)
 * @batch_pfn: its PFN, the argument of the batched commands
 * @pages: the pages of the chunk being locked or unlocked
 * @doorbell_set: the host was given a doorbell to ring
 * @warned: log-once flags, VMB_WARNED_*
 * @inflate_after_ms: no inflation before this time of vmb_os_now_ms(): the
 *	hold-off after memory pressure
 * @pressure_pending: the guest asked for memory back while the core was
 *	busy (see vmb_pressure()); written without the lock
 * @doorbell_rung: the host rang the doorbell since the last cycle began
 *	(see vmb_doorbell()); written without the lock
 * @poll_state: when the next cycle comes, &enum vmb_poll_state; read
 *	without the lock by vmb_next_wakeup()
 * @fast_left: in %VMB_POLL_FAST, the fast cycles left
 * @glance_wait_ms: in %VMB_POLL_GLANCING, the wait before the next cycle
 * @held: per page size, the pages on the held queue: ballooned pages the
 *	host would not unlock, set aside until the fresh ones run out (see
 *	vmb_deflate())
 * @cmd_calls: commands sent, per command
 * @cmd_fails: commands that did not succeed, per command
 * @stats: general counters, &enum vmb_stat
 * @page_stats: per page size counters, &enum vmb_page_stat
 *
 * Only the holder of the lock that serialises the core writes any field
 * but @pressure_pending and @doorbell_rung; @poll_state and
 * @glance_wait_ms are written with VMB_WRITE_ONCE(), for
 * vmb_next_wakeup().
 * Those vmb_stats_show() shows (the capabilities, @reset_required,
 * @target, @size and the counters) are also read without that lock, so
 * they are written with VMB_WRITE_ONCE() or vmb_stat_inc() only, and sized
 * so that no read tears (see platform.h).
 */
struct vmb_balloon {
	u32 requested_caps;
	u32 caps;
	u64 target;
	bool reset_required;

	u64 size;
	enum vmb_page_size max_size;
	unsigned int batch_max;
	u64 *batch;
	u64 batch_pfn;
	struct vmb_page *pages[VMB_BATCH_MAX_ENTRIES];
	bool doorbell_set;
	unsigned int warned;
	u64 inflate_after_ms;
	bool pressure_pending;
	bool doorbell_rung;
	enum vmb_poll_state poll_state;
	unsigned int fast_left;
	unsigned int glance_wait_ms;
	unsigned long held[VMB_NR_PAGE_SIZES];

	unsigned long cmd_calls[VMB_CMD_NUM];
	unsigned long cmd_fails[VMB_CMD_NUM];
	unsigned long stats[VMB_NR_STATS];
	unsigned long page_stats[VMB_NR_PAGE_STATS][VMB_NR_PAGE_SIZES];
};

#define VMB_WARNED_NO_LOCKING	0x1U
#define VMB_WARNED_GUEST_ID	0x2U
#define VMB_WARNED_DOORBELL	0x4U

void vmb_init(struct vmb_balloon *b, u32 requested_caps, u64 *batch,
	      u64 batch_pfn);
struct vmb_wakeup vmb_work(struct vmb_balloon *b);
struct vmb_wakeup vmb_next_wakeup(const struct vmb_balloon *b);
void vmb_doorbell(struct vmb_balloon *b);
void vmb_stop_doorbell(struct vmb_balloon *b);
void vmb_shutdown(struct vmb_balloon *b);
void vmb_shutdown_rest(struct vmb_balloon *b);
unsigned int vmb_drain_wait_ms(u64 waited_ms);
bool vmb_drain_say(u64 waited_ms, unsigned int slept_ms);
bool vmb_drain_overdue(u64 waited_ms, unsigned int slept_ms);
u64 vmb_effective_target(struct vmb_balloon *b);
u64 vmb_shrink(struct vmb_balloon *b, u64 frames);
void vmb_pressure(struct vmb_balloon *b);

/*
 * Memory pressure gets at most this many frames back per request (8 MiB),
 * whatever it asks for: the kernel asks again if it needs more, and a
 * request that came deferred from many earlier ones (5.10 keeps such a
 * backlog) does not empty the balloon at once.
 */
#define VMB_PRESSURE_MAX_FRAMES	2048

/**
 * enum vmb_reclaim_caller - who asks the balloon for memory back
 * @VMB_RECLAIM_SHRINKER: the kernel's reclaim, through the shrinker
 * @VMB_RECLAIM_OOM: the OOM killer is about to pick a victim: reclaim,
 *	the shrinker included, found nothing
 */
enum vmb_reclaim_caller {
	VMB_RECLAIM_SHRINKER,
	VMB_RECLAIM_OOM,
};

/**
 * enum vmb_reclaim_action - what vmb_reclaim_decide() makes of a request
 * @VMB_RECLAIM_NOTHING: give nothing, and hold nothing off
 * @VMB_RECLAIM_NOTE: give nothing now (the core is busy), but stop the
 *	worker's inflation and start the hold-off (vmb_pressure())
 * @VMB_RECLAIM_GIVE_4K: give back, 4 KiB pages first, and hold off
 * @VMB_RECLAIM_GIVE_2M: give back, 2 MiB pages first, and hold off
 */
enum vmb_reclaim_action {
	VMB_RECLAIM_NOTHING,
	VMB_RECLAIM_NOTE,
	VMB_RECLAIM_GIVE_4K,
	VMB_RECLAIM_GIVE_2M,
};

/**
 * struct vmb_reclaim - one request for memory back, as facts the OS saw
 * @caller: who asks
 * @frames: the frames it asks for (the kernel's nr_to_scan)
 * @compound: the allocation that reclaims wants a compound page, more
 *	than one 4 KiB page (the kernel's shrinker learns no more of the
 *	order than that): a 2 MiB page back serves it, 4 KiB ones may not
 * @below_min: a zone of the node reclaiming is below its min watermark
 * @below_low: a zone of the node reclaiming is below its low watermark
 * @kswapd_awake: that node's kswapd is at work (not asleep)
 * @kswapd: the request comes from kswapd itself
 * @node_reclaim: reclaim for one node while another has memory to spare
 *	(zone_reclaim_mode, or an allocation bound to the node): the
 *	guest as a whole is not short
 * @hibernation: the system is preparing a hibernation image, whose
 *	preallocation reclaims with no shortage
 * @proactive: reclaim asked for by user space (memory.reclaim)
 * @own: no allocation of anyone else's is short: the balloon's own worker
 *	allocating, or a caller that runs no reclaim (drop_caches asks
 *	every shrinker for everything)
 * @busy: the OS could not take the lock that serialises the core (the
 *	worker is in a cycle)
 * @scanned: set by vmb_reclaim(): the frames to count as scanned
 */
struct vmb_reclaim {
	enum vmb_reclaim_caller caller;
	u64 frames;
	bool compound;
	bool below_min;
	bool below_low;
	bool kswapd_awake;
	bool kswapd;
	bool node_reclaim;
	bool hibernation;
	bool proactive;
	bool own;
	bool busy;
	u64 scanned;
};

enum vmb_reclaim_action vmb_reclaim_decide(const struct vmb_reclaim *r);
u64 vmb_reclaim(struct vmb_balloon *b, struct vmb_reclaim *r);
unsigned int vmb_oom_wait_ms(struct vmb_balloon *b, unsigned int tries);

/**
 * enum vmb_migrate_result - what vmb_migrate() did
 * @VMB_MIGRATE_DONE: the old page is unlocked and the new one locked: the
 *	new page takes the old one's place in the balloon
 * @VMB_MIGRATE_OLD_ONLY: the old page is unlocked but the host refused the
 *	new one: both leave the balloon, which is one frame smaller
 * @VMB_MIGRATE_AGAIN: nothing changed, for a moment only: worth another
 *	try soon (a reset pending, a busy host, or, from the OS glue, a
 *	balloon busy with a cycle)
 * @VMB_MIGRATE_BUSY: nothing changed, and trying again would not help:
 *	the old page is still ballooned
 */
enum vmb_migrate_result {
	VMB_MIGRATE_DONE,
	VMB_MIGRATE_OLD_ONLY,
	VMB_MIGRATE_AGAIN,
	VMB_MIGRATE_BUSY,
};

enum vmb_migrate_result vmb_migrate(struct vmb_balloon *b,
				    struct vmb_page *old_page,
				    struct vmb_page *new_page);

typedef void (*vmb_emit_fn)(void *ctx, const char *line);
void vmb_stats_show(const struct vmb_balloon *b, vmb_emit_fn emit, void *ctx);

#endif /* VMB_BALLOON_H */
