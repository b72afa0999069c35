/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The numbers of the VMware balloon protocol as they travel between guest
 * and host: port, magic, commands, capabilities, statuses, batch entries.
 *
 * One header for both sides of the wire: the vmw-balloon-dkms guest driver
 * (src/wire.h there, GPL-2.0) and QEMU's vmware-balloon device that plays
 * the host (include/hw/i386/vmware-balloon-wire.h, tabs expanded), and the
 * project's probe of that device.  GPL-2.0-or-later, which both accept.
 * Plain C: no types, no includes.
 */
#ifndef VMB_WIRE_H
#define VMB_WIRE_H

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
#define VMB_ENTRY_RESERVED_MASK	0xfe0ULL	/* bits 5-11: must be zero */

/* A 2 MiB page is an order-9 block of 4 KiB frames, 2 MiB aligned. */
#define VMB_2M_FRAMES		512

#endif /* VMB_WIRE_H */
