/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A simulated guest (RAM of frame descriptors, an allocator, the page
 * lists, and migration of balloon pages as Linux does it) and a simulated
 * host (the balloon protocol, with fault injection) for driving the
 * OS-independent balloon core in userspace.
 */
#ifndef VMB_SIM_H
#define VMB_SIM_H

#include "balloon.h"

#define SIM_NO_LIST	(-1)
#define SIM_MAX_LOG	64

enum sim_frame_state { SIM_FREE, SIM_ALLOCATED };

struct sim_frame {
	struct sim_frame *next;	/* link on one of the balloon's lists */
	int list;		/* enum vmb_list, or SIM_NO_LIST */
	unsigned char state;	/* enum sim_frame_state */
	unsigned char order;	/* order of the allocation this frame heads */
	bool head;		/* first frame of an allocation */
	bool locked;		/* the host holds it */
	bool locked_2m_head;	/* locked as the head of a 2 MiB entry */
	bool isolated;		/* taken off the balloon list for migration */
	bool pinned;		/* the host will not unlock it (PPN_PINNED) */
	bool marked;		/* marked ballooned by the OS (PG_offline) */
};

/* The host's side: what a hypervisor would keep, plus fault injection. */
struct sim_host {
	u32 caps;		/* what the host can grant */
	bool legacy;		/* answers START like a protocol-v2 host */
	u64 target;		/* frames the host wants ballooned */
	bool wide_target;	/* all of the target in RBX, even without
				 * 64-bit and above the guest's limit */

	u32 granted;
	bool needs_start;	/* after a RESET, until the next START */
	u64 locked_frames;
	u64 guest_id;
	u64 doorbell_context, doorbell_resource;
	u32 doorbell_status;	/* what DOORBELL_SET answers */

	/* fault injection */
	int reset_on_cmd;	/* answer RESET to this command once; -1 off */
	int busy_on_cmd;	/* answer BUSY to this command once; -1 off */
	int fail_on_cmd;	/* answer FAILURE to this command once; -1 off */
	int fail_always_cmd;	/* answer FAILURE to this command every time */
	int status_on_cmd;	/* answer status_once to this command once */
	u32 status_once;
	unsigned int fail_start;	/* next N STARTs fail */
	unsigned int refuse_every;	/* refuse every Nth PFN to lock */
	u32 refuse_status;
	bool refuse_2m_only;	/* refuse_every applies to 2 MiB entries only */
	u32 refuse_unlock;	/* status for every unlock; 0 off */
	unsigned int refuse_count;
	bool entry_garbage;	/* scribble on the PFN bits of entries */
	int ring_on_cmd;	/* ring the doorbell (vmb_doorbell(), as if from
				 * another thread) when this command comes,
				 * once; -1 off */

	/* what the guest did */
	u64 calls[VMB_CMD_NUM + 1];	/* last slot: unknown commands */
	u64 start_args[16];
	unsigned int n_starts;
	u64 last_limit;
	unsigned int resets_sent;
	u64 unlocks_refused;	/* pages (entries) whose unlock was refused */
	u64 unmarked_held;	/* frames the host held, seen unmarked by
				 * the OS at a command that was not about
				 * them */
	unsigned int protocol_errors;	/* guest broke the protocol */
};

struct sim {
	struct vmb_balloon b;	/* the core under test */

	/* guest RAM: frames[i] is PFN pfn_base + i */
	struct sim_frame *frames;
	u64 nframes;
	u64 pfn_base;
	u64 reported_ram;	/* what total_ram_frames says */
	u64 alloc_limit;	/* frames that may be allocated at once */
	u64 allocated;
	u64 last_freed;		/* index handed out first by the next 4k alloc */
	bool no_2m;		/* every 2 MiB allocation fails */
	unsigned int fail_4k_after;	/* 4 KiB allocations fail after N; 0 off */
	unsigned int n_4k_allocs;
	u64 now_ms;		/* what vmb_os_now_ms() says */
	/* reclaim finds the core busy at the Nth allocation (vmb_pressure) */
	unsigned int pressure_at_alloc;
	unsigned int n_allocs;
	u64 locks_at_pressure;	/* LOCK commands sent by then, all kinds */

	struct sim_frame *lists[VMB_NR_LISTS];
	u64 batch[VMB_BATCH_MAX_ENTRIES];
	u64 batch_pfn;

	bool doorbell_fails;
	bool doorbell_exists;
	unsigned int doorbells_created;

	char log[SIM_MAX_LOG][128];
	unsigned int n_log;

	unsigned int migrations[VMB_MIGRATE_BUSY + 1];	/* by result */

	unsigned int errors;	/* misuse of the OS hooks */
	unsigned int freed_while_locked;

	struct sim_host host;
};

struct sim_config {
	u64 nframes;
	u64 pfn_base;
	u32 host_caps;
	bool legacy;
	u32 requested_caps;	/* 0 means VMB_CAPS_ALL */
};

void sim_init(struct sim *s, const struct sim_config *cfg);
void sim_destroy(struct sim *s);
unsigned int sim_cycle(struct sim *s);
void sim_host_restart(struct sim *s);
void sim_cycles(struct sim *s, unsigned int n);
u64 sim_list_frames(const struct sim *s);
u64 sim_isolated_frames(const struct sim *s);
struct sim_frame *sim_isolate(struct sim *s, unsigned int nth);
void sim_putback(struct sim *s, struct sim_frame *f);
enum vmb_migrate_result sim_migrate(struct sim *s, struct sim_frame *old);
unsigned int sim_log_count(const struct sim *s, const char *needle);
bool sim_consistent(const struct sim *s, char *why, size_t len);

#endif /* VMB_SIM_H */
