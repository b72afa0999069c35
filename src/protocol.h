/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The VMware balloon wire protocol, guest side: command numbers,
 * capability bits, status codes, batch entries and the page-size table.
 * Every command the guest sends goes through vmb_cmd() in protocol.c.
 */
#ifndef VMB_PROTOCOL_H
#define VMB_PROTOCOL_H

#include "platform.h"

struct vmb_balloon;

/* Transport: one `inl` on this port with the magic in EAX. */
#define VMB_PORT		0x5670
#define VMB_MAGIC		0x456c6d6f

enum vmb_cmd {
	VMB_CMD_START			= 0,
	VMB_CMD_GET_TARGET		= 1,
	VMB_CMD_LOCK			= 2,
	VMB_CMD_UNLOCK			= 3,
	VMB_CMD_GUEST_ID		= 4,
	/* 5 was used only by short-lived internal host builds */
	VMB_CMD_BATCHED_LOCK		= 6,
	VMB_CMD_BATCHED_UNLOCK		= 7,
	VMB_CMD_BATCHED_2M_LOCK		= 8,
	VMB_CMD_BATCHED_2M_UNLOCK	= 9,
	VMB_CMD_VMCI_DOORBELL_SET	= 10,
	VMB_CMD_NUM
};

/* Capabilities: START's argument and the set granted back in ECX. */
#define VMB_CAP_BASIC		0x02U	/* LOCK/UNLOCK, one 4 KiB page */
#define VMB_CAP_BATCHED		0x04U	/* BATCHED_LOCK/UNLOCK */
#define VMB_CAP_BATCHED_2M	0x08U	/* BATCHED_2M_LOCK/UNLOCK */
#define VMB_CAP_DOORBELL	0x10U	/* VMCI_DOORBELL_SET */
#define VMB_CAP_64BIT_TARGET	0x20U	/* 64-bit limit, target and PFNs */
#define VMB_CAPS_ALL		(VMB_CAP_BASIC | VMB_CAP_BATCHED | \
				 VMB_CAP_BATCHED_2M | VMB_CAP_DOORBELL | \
				 VMB_CAP_64BIT_TARGET)

/* Status codes, as returned in EAX (a 32-bit register). */
#define VMB_SUCCESS			0U
#define VMB_FAILURE			0xffffffffU
#define VMB_ERROR_CMD_INVALID		1U
#define VMB_ERROR_PPN_INVALID		2U
#define VMB_ERROR_PPN_LOCKED		3U
#define VMB_ERROR_PPN_UNLOCKED		4U
#define VMB_ERROR_PPN_PINNED		5U
#define VMB_ERROR_PPN_NOTNEEDED		6U
#define VMB_ERROR_RESET			7U
#define VMB_ERROR_BUSY			8U
#define VMB_SUCCESS_WITH_CAPABILITIES	0x03000000U

#define VMB_GUEST_LINUX		1
#define VMB_VMCI_INVALID_ID	0xffffffffU

/*
 * A batch page holds up to 512 little-endian u64 entries: the page's
 * physical address (PFN << 12), with a per-entry status written back by the
 * host into bits 0-4. x86 is little-endian, so entries are stored natively.
 */
#define VMB_BATCH_MAX_ENTRIES	512
#define VMB_FRAME_SHIFT		12
#define VMB_ENTRY_STATUS_MASK	0x1fULL

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
 * @single_lock: the single-page lock command, or VMB_CMD_NUM if none
 * @single_unlock: the single-page unlock command, or VMB_CMD_NUM if none
 */
struct vmb_page_size_ops {
	const char *name;
	unsigned int order;
	enum vmb_cmd batched_lock;
	enum vmb_cmd batched_unlock;
	enum vmb_cmd single_lock;
	enum vmb_cmd single_unlock;
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
bool vmb_lock_op_failed(const struct vmb_balloon *b, u32 overall);

#endif /* VMB_PROTOCOL_H */
