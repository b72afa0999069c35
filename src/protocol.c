// SPDX-License-Identifier: GPL-2.0
/*
 * The VMware balloon wire protocol, guest side.
 *
 * This file speaks the protocol: it encodes commands and batch entries and
 * decodes statuses, capabilities and targets. It decides nothing about how
 * much to balloon; that is balloon.c. Every hypercall goes through vmb_cmd(),
 * so statistics, reset detection and target updates happen in one place.
 */
#include "protocol.h"
#include "balloon.h"
#include "os.h"

const struct vmb_page_size_ops vmb_page_sizes[VMB_NR_PAGE_SIZES] = {
	[VMB_PAGE_4K] = {
		.name = "4k",
		.order = 0,
		.batched_lock = VMB_CMD_BATCHED_LOCK,
		.batched_unlock = VMB_CMD_BATCHED_UNLOCK,
	},
	[VMB_PAGE_2M] = {
		.name = "2M",
		.order = 9,
		.batched_lock = VMB_CMD_BATCHED_2M_LOCK,
		.batched_unlock = VMB_CMD_BATCHED_2M_UNLOCK,
	},
};

/* The names upstream's debugfs file uses, so existing scripts keep working. */
const char * const vmb_cmd_names[VMB_CMD_NUM] = {
	[VMB_CMD_START]			= "start",
	[VMB_CMD_GET_TARGET]		= "target",
	[VMB_CMD_LOCK]			= "lock",
	[VMB_CMD_UNLOCK]		= "unlock",
	[VMB_CMD_GUEST_ID]		= "guestType",
	[VMB_CMD_BATCHED_LOCK]		= "batchLock",
	[VMB_CMD_BATCHED_UNLOCK]	= "batchUnlock",
	[VMB_CMD_BATCHED_2M_LOCK]	= "2m-lock",
	[VMB_CMD_BATCHED_2M_UNLOCK]	= "2m-unlock",
	[VMB_CMD_VMCI_DOORBELL_SET]	= "doorbellSet",
};

/* Commands whose RBX carries the host's current target on success. */
static bool vmb_cmd_returns_target(enum vmb_cmd cmd)
{
	switch (cmd) {
	case VMB_CMD_GET_TARGET:
	case VMB_CMD_LOCK:
	case VMB_CMD_UNLOCK:
	case VMB_CMD_BATCHED_LOCK:
	case VMB_CMD_BATCHED_UNLOCK:
	case VMB_CMD_BATCHED_2M_LOCK:
	case VMB_CMD_BATCHED_2M_UNLOCK:
		return true;
	default:
		return false;
	}
}

/**
 * vmb_cmd() - send one command to the host
 * @b: the balloon
 * @cmd: the command
 * @arg1: first argument (EBX)
 * @arg2: second argument (ESI)
 * @result: if not NULL, set to the command's result: RCX for START (the
 *	granted capabilities), RBX for every other command
 *
 * Counts the call and its failure, takes the target from a successful
 * command that carries one, and marks a reset as required when the host
 * answers RESET. A command number outside the protocol's table is
 * answered CMD_INVALID here, never sent nor counted. Without the
 * 64-bit-target capability a target cannot exceed 32 bits: a larger one
 * saturates there, since its low 32 bits could be any smaller number and
 * deflate a balloon the host wants full.
 *
 * Return: the status the host returned in EAX.
 */
u32 vmb_cmd(struct vmb_balloon *b, enum vmb_cmd cmd, u64 arg1, u64 arg2,
	    u64 *result)
{
	u64 rbx = 0, rcx = 0;
	u32 status;

	/* unsigned: a negative number is out of range too */
	if ((unsigned int)cmd >= VMB_CMD_NUM)
		return VMB_ERROR_CMD_INVALID;

	vmb_stat_inc(&b->cmd_calls[cmd]);
	status = vmb_os_backdoor(b, cmd, arg1, arg2, &rbx, &rcx);

	if (status != VMB_SUCCESS &&
	    !(cmd == VMB_CMD_START && status == VMB_SUCCESS_WITH_CAPABILITIES))
		vmb_stat_inc(&b->cmd_fails[cmd]);

	if (status == VMB_SUCCESS && vmb_cmd_returns_target(cmd)) {
		u64 target = rbx;

		if (!(b->caps & VMB_CAP_64BIT_TARGET) && target > VMB_U32_MAX)
			target = VMB_U32_MAX;
		VMB_WRITE_ONCE(b->target, target);
	}

	if (status == VMB_ERROR_RESET)
		VMB_WRITE_ONCE(b->reset_required, true);

	if (result)
		*result = cmd == VMB_CMD_START ? rcx : rbx;
	return status;
}

/**
 * vmb_send_start() - open (or, with no capabilities, close) the connection
 * @b: the balloon
 * @requested: the capabilities to ask for; 0 tells the host goodbye
 *
 * A current host answers SUCCESS_WITH_CAPABILITIES and the granted set in
 * RCX; only what was asked for is taken from it. A protocol-v2 host answers
 * plain SUCCESS and offers the basic commands only.
 *
 * Return: the status; on any failure no capability is kept.
 */
u32 vmb_send_start(struct vmb_balloon *b, u32 requested)
{
	u64 granted = 0;
	u32 status;

	status = vmb_cmd(b, VMB_CMD_START, requested, 0, &granted);
	switch (status) {
	case VMB_SUCCESS_WITH_CAPABILITIES:
		VMB_WRITE_ONCE(b->caps, (u32)granted & requested);
		break;
	case VMB_SUCCESS:
		VMB_WRITE_ONCE(b->caps, VMB_CAP_BASIC & requested);
		break;
	default:
		VMB_WRITE_ONCE(b->caps, 0);
		break;
	}
	return status;
}

/**
 * vmb_send_get_target() - ask the host how many frames to balloon
 * @b: the balloon
 *
 * The argument is the guest's RAM, which the host uses as a limit. Without
 * the 64-bit-target capability it is clamped to 32 bits rather than not
 * asked at all, so a very large guest still balloons up to that limit.
 *
 * Return: the status; on success b->target holds the new target.
 */
u32 vmb_send_get_target(struct vmb_balloon *b)
{
	u64 limit = vmb_os_total_ram_frames(b);

	if (!(b->caps & VMB_CAP_64BIT_TARGET) && limit > VMB_U32_MAX)
		limit = VMB_U32_MAX;
	return vmb_cmd(b, VMB_CMD_GET_TARGET, limit, 0, NULL);
}

/**
 * vmb_send_guest_id() - tell the host the guest is Linux
 * @b: the balloon
 *
 * Return: the status.
 */
u32 vmb_send_guest_id(struct vmb_balloon *b)
{
	return vmb_cmd(b, VMB_CMD_GUEST_ID, VMB_GUEST_LINUX, 0, NULL);
}

/**
 * vmb_send_doorbell_set() - give the host a doorbell to ring, or take it away
 * @b: the balloon
 * @context: the doorbell's context id, or VMB_VMCI_INVALID_ID to unset
 * @resource: the doorbell's resource id, or VMB_VMCI_INVALID_ID to unset
 *
 * Return: the status, which this command returns in EAX like any other.
 */
u32 vmb_send_doorbell_set(struct vmb_balloon *b, u64 context, u64 resource)
{
	return vmb_cmd(b, VMB_CMD_VMCI_DOORBELL_SET, context, resource, NULL);
}

/**
 * vmb_send_lock_op() - lock or unlock the pages of the current chunk
 * @b: the balloon
 * @size: the size of every page in b->pages
 * @n: how many pages: at most b->batch_max
 * @lock: lock (inflate) if true, unlock (deflate) if false
 *
 * With batching, the pages' addresses go into the batch page and one
 * command carries them all; the host writes a status back into each entry.
 * Without it, the single page goes in EBX, and a PFN that does not fit in
 * 32 bits is refused here, without a hypercall, as upstream does, even when
 * the host granted 64-bit targets (that capability is about the target).
 * So is a 2 MiB page: there is no single-page command for one (the core
 * uses them only with batching).
 *
 * Return: the overall status; vmb_page_status() gives each page's.
 */
u32 vmb_send_lock_op(struct vmb_balloon *b, enum vmb_page_size size,
		     unsigned int n, bool lock)
{
	const struct vmb_page_size_ops *ops = &vmb_page_sizes[size];
	unsigned int i;
	u64 pfn;

	for (i = 0; i < n; i++)
		b->batch[i] = vmb_os_page_pfn(b, b->pages[i]) << VMB_FRAME_SHIFT;

	if (b->caps & VMB_CAP_BATCHED)
		return vmb_cmd(b, lock ? ops->batched_lock : ops->batched_unlock,
			       b->batch_pfn, n, NULL);

	if (size != VMB_PAGE_4K)
		return VMB_ERROR_CMD_INVALID;
	pfn = b->batch[0] >> VMB_FRAME_SHIFT;
	if (pfn > VMB_U32_MAX)
		return VMB_ERROR_PPN_INVALID;
	return vmb_cmd(b, lock ? VMB_CMD_LOCK : VMB_CMD_UNLOCK, pfn, 1, NULL);
}

/**
 * vmb_page_status() - the host's verdict on one page of the last chunk
 * @b: the balloon
 * @i: the page's index in the chunk
 * @overall: the status vmb_send_lock_op() returned
 *
 * A failed command fails every page, whatever its entry says: the status
 * returned is then the command's, which in a batch is not the page's own
 * (see vmb_page_unlocked()).
 *
 * Return: the page's status.
 */
u32 vmb_page_status(const struct vmb_balloon *b, unsigned int i, u32 overall)
{
	if (overall != VMB_SUCCESS)
		return overall;
	return (u32)(b->batch[i] & VMB_ENTRY_STATUS_MASK);
}

/**
 * vmb_chunk_failed() - did the command of the last chunk fail as a whole?
 * @b: the balloon
 * @overall: the status vmb_send_lock_op() returned
 *
 * A batch command fails as a whole with any status but success. In
 * single-page mode the status is the page's own: a PPN_* status is about
 * that page only (the next one may fare better), any other is about the
 * command (a RESET, a busy host, a command it does not know).
 *
 * Return: true if the command failed, not merely the page.
 */
bool vmb_chunk_failed(const struct vmb_balloon *b, u32 overall)
{
	if (overall == VMB_SUCCESS)
		return false;
	if (b->caps & VMB_CAP_BATCHED)
		return true;
	switch (overall) {
	case VMB_ERROR_PPN_INVALID:
	case VMB_ERROR_PPN_LOCKED:
	case VMB_ERROR_PPN_UNLOCKED:
	case VMB_ERROR_PPN_PINNED:
	case VMB_ERROR_PPN_NOTNEEDED:
		return false;
	default:
		return true;
	}
}

/**
 * vmb_page_unlocked() - is a page of the last unlock chunk free to go?
 * @b: the balloon
 * @i: the page's index in the chunk
 * @overall: the status vmb_send_lock_op() returned
 *
 * It is when the host unlocked it, or says it did not hold it
 * (PPN_UNLOCKED). Only the page's own status counts: in a batch, its entry
 * of a command that succeeded as a whole; in single-page mode, the
 * command's status, which is that one page's. A batch that failed as a
 * whole unlocked nothing, whatever status it failed with.
 *
 * Return: true if the host no longer holds the page.
 */
bool vmb_page_unlocked(const struct vmb_balloon *b, unsigned int i,
		       u32 overall)
{
	u32 status;

	if ((b->caps & VMB_CAP_BATCHED) && overall != VMB_SUCCESS)
		return false;
	status = vmb_page_status(b, i, overall);
	return status == VMB_SUCCESS || status == VMB_ERROR_PPN_UNLOCKED;
}
