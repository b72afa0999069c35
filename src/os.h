/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the OS-independent balloon core needs from the system it runs on.
 *
 * linux_glue.c implements these for the kernel; tests/unit/sim.c
 * implements them against simulated RAM and a simulated host, which is what
 * lets the core run under ASan and UBSan in userspace.
 *
 * The OS owns the pages and the lists they sit on; the core owns the
 * decisions, the commands and the counts (the balloon's size among them).
 */
#ifndef VMB_OS_H
#define VMB_OS_H

#include "platform.h"
#include "protocol.h"

struct vmb_balloon;

/* An allocated guest page: a struct page in Linux, a simulated frame in tests. */
struct vmb_page;

/*
 * The lists a page can be on. The core decides which list a page belongs
 * to; the OS stores the lists and may keep its own counts. Pages on the
 * balloon lists and the held queues are ballooned: the host holds them,
 * and the OS marks them so (PG_offline in Linux) and counts them, from
 * vmb_os_list_add() to vmb_os_list_pop() (see vmb_list_ballooned()). The
 * OS may take a 4 KiB balloon page off its list at any time to migrate it
 * (see vmb_migrate()); the core does not count what is on a list, so such
 * a page is simply not found there. The held queues keep ballooned pages
 * the host would not unlock, out of the way of the others, until a later
 * deflation tries them again: the OS never migrates them, and gives them
 * back in the order they came (first in, first out); every other list
 * gives any of its pages.
 */
enum vmb_list {
	VMB_LIST_BALLOON_4K,
	VMB_LIST_BALLOON_2M,
	VMB_LIST_REFUSED_4K,	/* refused by the host this cycle */
	VMB_LIST_REFUSED_2M,
	VMB_LIST_SPLIT_4K,	/* pieces of refused 2 MiB pages, tried as 4 KiB */
	VMB_LIST_HELD_4K,	/* the host would not unlock them: set aside, */
	VMB_LIST_HELD_2M,	/* still ballooned, until tried again */
	VMB_NR_LISTS
};

/**
 * vmb_list_ballooned() - are the pages on a list ballooned?
 * @list: the list
 *
 * The host holds the pages on the balloon lists and on the held queues:
 * the OS keeps them marked as ballooned, and counts them, for as long as
 * they are on the list. The others hold pages the host does not.
 *
 * Return: true for a balloon list or a held queue.
 */
static inline bool vmb_list_ballooned(enum vmb_list list)
{
	return list == VMB_LIST_BALLOON_4K || list == VMB_LIST_BALLOON_2M ||
	       list == VMB_LIST_HELD_4K || list == VMB_LIST_HELD_2M;
}

enum vmb_log_level {
	VMB_LOG_ERR,
	VMB_LOG_WARN,
	VMB_LOG_INFO,
};

/**
 * vmb_os_backdoor() - one raw balloon hypercall
 * @b: the balloon
 * @cmd: command number (ECX)
 * @arg1: first argument (EBX)
 * @arg2: second argument (ESI)
 * @rbx: set to RBX after the call (the target for most commands)
 * @rcx: set to RCX after the call (the capabilities for START)
 *
 * Return: the status from EAX.
 */
u32 vmb_os_backdoor(struct vmb_balloon *b, u32 cmd, u64 arg1, u64 arg2,
		    u64 *rbx, u64 *rcx);

/**
 * vmb_os_page_alloc() - allocate a page to put in the balloon
 * @b: the balloon
 * @size: 4 KiB, or 2 MiB (an order-9 page, 2 MiB aligned)
 *
 * Never waits for long, never dips into reserves and never wakes the OOM
 * killer: a failure simply ends the inflation.
 *
 * Return: the page, or NULL.
 */
struct vmb_page *vmb_os_page_alloc(struct vmb_balloon *b,
				   enum vmb_page_size size);

/**
 * vmb_os_page_free() - give a page back to the system
 * @b: the balloon
 * @page: a page from vmb_os_page_alloc(), or a piece of a split one
 * @size: the size it was allocated (or split) with
 */
void vmb_os_page_free(struct vmb_balloon *b, struct vmb_page *page,
		      enum vmb_page_size size);

/**
 * vmb_os_page_pfn() - the guest frame number of a page's first 4 KiB
 * @b: the balloon
 * @page: the page
 *
 * Return: the PFN.
 */
u64 vmb_os_page_pfn(struct vmb_balloon *b, struct vmb_page *page);

/**
 * vmb_os_page_split() - split a 2 MiB page into 512 pages of 4 KiB
 * @b: the balloon
 * @page: a 2 MiB page that is on no list
 * @to: the list every 4 KiB piece is added to (never a balloon list), by
 *	the OS itself: the core does not count them
 */
void vmb_os_page_split(struct vmb_balloon *b, struct vmb_page *page,
		       enum vmb_list to);

/**
 * vmb_os_list_add() - put a page on one of the balloon's lists
 * @b: the balloon
 * @list: the list
 * @page: a page that is on no list
 */
void vmb_os_list_add(struct vmb_balloon *b, enum vmb_list list,
		     struct vmb_page *page);

/**
 * vmb_os_list_pop() - take a page off one of the balloon's lists
 * @b: the balloon
 * @list: the list
 *
 * Return: a page, or NULL when the list has none to give: it is empty, or
 * the OS has taken every page on it away for the moment. NULL is the only
 * way the core learns that a list is exhausted.
 */
struct vmb_page *vmb_os_list_pop(struct vmb_balloon *b, enum vmb_list list);

/**
 * vmb_os_total_ram_frames() - the guest's RAM, in 4 KiB frames
 * @b: the balloon
 *
 * Return: the number of frames the OS manages.
 */
u64 vmb_os_total_ram_frames(struct vmb_balloon *b);

/**
 * vmb_os_now_ms() - a clock for the hold-off after memory pressure
 * @b: the balloon
 *
 * Return: milliseconds since any fixed point; never goes back.
 */
u64 vmb_os_now_ms(struct vmb_balloon *b);

/**
 * vmb_os_yield() - let others run between two chunks of work
 * @b: the balloon
 */
void vmb_os_yield(struct vmb_balloon *b);

/**
 * vmb_os_doorbell_create() - create the doorbell the host may ring
 * @b: the balloon
 * @context: set to the doorbell's context id
 * @resource: set to the doorbell's resource id
 *
 * Return: 0, or a negative error when no doorbell can be made.
 */
int vmb_os_doorbell_create(struct vmb_balloon *b, u64 *context,
			   u64 *resource);

/**
 * vmb_os_doorbell_destroy() - destroy the doorbell made by
 * vmb_os_doorbell_create()
 * @b: the balloon
 */
void vmb_os_doorbell_destroy(struct vmb_balloon *b);

/**
 * vmb_os_log() - report something to the administrator
 * @b: the balloon
 * @level: how serious it is
 * @fmt: printf-style format, one line without the newline
 */
__printf(3, 4)
void vmb_os_log(struct vmb_balloon *b, enum vmb_log_level level,
		const char *fmt, ...);

#endif /* VMB_OS_H */
