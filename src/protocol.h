/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The VMware balloon wire protocol, guest side: the page-size table and
 * the calls that send commands (the numbers themselves are in wire.h).
 * Every command the guest sends goes through vmb_cmd() in protocol.c.
 */
#ifndef VMB_PROTOCOL_H
#define VMB_PROTOCOL_H

#include "platform.h"
#include "wire.h"

struct vmb_balloon;

/* Balloon size is counted in 4 KiB frames; a 2 MiB page is 512 of them. */
enum vmb_page_size {
	VMB_PAGE_4K,
	VMB_PAGE_2M,
	VMB_NR_PAGE_SIZES
};

/**
 * struct vmb_page_size_ops - what differs between 4 KiB and 2 MiB pages
 * @name: the name debugfs uses for the size ("4k", "2M")
 * @order: log2 of the number of 4 KiB frames in one page
 * @batched_lock: the batched command that locks pages of this size
 * @batched_unlock: the batched command that unlocks them
 *
 * The single-page commands, LOCK and UNLOCK, exist for 4 KiB pages only.
 */
struct vmb_page_size_ops {
	const char *name;
	unsigned int order;
	enum vmb_cmd batched_lock;
	enum vmb_cmd batched_unlock;
};

extern const struct vmb_page_size_ops vmb_page_sizes[VMB_NR_PAGE_SIZES];

/**
 * vmb_frames_per_page() - 4 KiB frames in one page of a size
 * @size: the page size
 *
 * Return: 1 for 4 KiB pages, 512 for 2 MiB pages.
 */
static inline u64 vmb_frames_per_page(enum vmb_page_size size)
{
	return 1ULL << vmb_page_sizes[size].order;
}

extern const char * const vmb_cmd_names[VMB_CMD_NUM];

u32 vmb_cmd(struct vmb_balloon *b, enum vmb_cmd cmd, u64 arg1, u64 arg2,
	    u64 *result);
u32 vmb_send_start(struct vmb_balloon *b, u32 requested);
u32 vmb_send_get_target(struct vmb_balloon *b);
u32 vmb_send_guest_id(struct vmb_balloon *b);
u32 vmb_send_doorbell_set(struct vmb_balloon *b, u64 context, u64 resource);
u32 vmb_send_lock_op(struct vmb_balloon *b, enum vmb_page_size size,
		     unsigned int n, bool lock);
u32 vmb_page_status(const struct vmb_balloon *b, unsigned int i,
		    u32 overall);
bool vmb_chunk_failed(const struct vmb_balloon *b, u32 overall);
bool vmb_page_unlocked(const struct vmb_balloon *b, unsigned int i,
		       u32 overall);

#endif /* VMB_PROTOCOL_H */
