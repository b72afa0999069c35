// SPDX-License-Identifier: GPL-2.0
/*
 * The balloon's policy, independent of any OS.
 *
 * Once a cycle (when vmb_next_wakeup() says, or at once when the host
 * rings the doorbell) the core resets the connection if the host asked
 * for it, fetches the target and inflates or deflates towards it.
 * This file decides how much, in which page size, and what each of the
 * host's answers means; protocol.c encodes the commands and the OS glue
 * behind os.h allocates and frees the pages. Between cycles the OS may
 * move a ballooned page with vmb_migrate().
 *
 * One place for each decision:
 * - when to poll: vmb_poll_update() moves the state at the end of a cycle,
 *   vmb_next_wakeup() turns it into the next wakeup;
 * - when to give memory back: vmb_reclaim_decide(), from the facts the OS
 *   reports (vmb_reclaim() then does it, vmb_oom_wait_ms() bounds the OOM
 *   notifier's wait);
 * - how much one deflation may cost: vmb_deflate() (VMB_MAX_REFUSED);
 * - how unload waits for pages the OS holds away: vmb_drain_wait_ms().
 */
#include "balloon.h"
#include "os.h"
#include "protocol.h"

static enum vmb_list vmb_balloon_list(enum vmb_page_size size)
{
	return size == VMB_PAGE_2M ? VMB_LIST_BALLOON_2M : VMB_LIST_BALLOON_4K;
}

static enum vmb_list vmb_refused_list(enum vmb_page_size size)
{
	return size == VMB_PAGE_2M ? VMB_LIST_REFUSED_2M : VMB_LIST_REFUSED_4K;
}

static enum vmb_list vmb_held_list(enum vmb_page_size size)
{
	return size == VMB_PAGE_2M ? VMB_LIST_HELD_2M : VMB_LIST_HELD_4K;
}

/* The size is read without the lock (debugfs): see platform.h. */
static void vmb_size_add(struct vmb_balloon *b, u64 frames)
{
	VMB_WRITE_ONCE(b->size, b->size + frames);
}

static void vmb_size_sub(struct vmb_balloon *b, u64 frames)
{
	VMB_WRITE_ONCE(b->size, b->size - frames);
}

static void vmb_warn_once(struct vmb_balloon *b, unsigned int flag,
			  const char *msg)
{
	if (b->warned & flag)
		return;
	b->warned |= flag;
	vmb_os_log(b, VMB_LOG_WARN, "%s", msg);
}

/**
 * vmb_init() - prepare a balloon; the first cycle connects to the host
 * @b: the balloon, zeroed by the caller
 * @requested_caps: the capabilities START asks for
 * @batch: a zeroed 4 KiB page for batch commands
 * @batch_pfn: the PFN of @batch
 */
void vmb_init(struct vmb_balloon *b, u32 requested_caps, u64 *batch,
	      u64 batch_pfn)
{
	VMB_WRITE_ONCE(b->requested_caps, requested_caps & VMB_CAPS_ALL);
	b->batch = batch;
	b->batch_pfn = batch_pfn;
	VMB_WRITE_ONCE(b->reset_required, true);
}

/* Free every page on a list, counting them under @stat if it is valid. */
static void vmb_release_list(struct vmb_balloon *b, enum vmb_list list,
			     enum vmb_page_size size, enum vmb_page_stat stat)
{
	struct vmb_page *page;

	while ((page = vmb_os_list_pop(b, list))) {
		vmb_os_page_free(b, page, size);
		if (stat < VMB_NR_PAGE_STATS)
			vmb_stat_inc(&b->page_stats[stat][size]);
	}
}

/* Refused pages were set aside so the allocator would not hand them back. */
static void vmb_release_refused(struct vmb_balloon *b)
{
	vmb_release_list(b, VMB_LIST_REFUSED_4K, VMB_PAGE_4K,
			 VMB_PAGE_STAT_REFUSED_FREE);
	vmb_release_list(b, VMB_LIST_REFUSED_2M, VMB_PAGE_2M,
			 VMB_PAGE_STAT_REFUSED_FREE);
	vmb_release_list(b, VMB_LIST_SPLIT_4K, VMB_PAGE_4K,
			 VMB_PAGE_STAT_REFUSED_FREE);
}

/* Move a page the host would not unlock to the back of the held queue. */
static void vmb_hold(struct vmb_balloon *b, enum vmb_page_size size,
		     struct vmb_page *page)
{
	vmb_os_list_add(b, vmb_held_list(size), page);
	b->held[size]++;
}

/*
 * The order in which a deflation takes pages, pass by pass: the fresh
 * ones of @first size, then those of the other, and only then the held
 * ones, @first size first too. Pages of one size the host keeps must not
 * stop the other size from deflating: the held queue is tried last.
 */
#define VMB_DEFLATE_PASSES	(2 * VMB_NR_PAGE_SIZES)

static enum vmb_page_size vmb_pass_size(unsigned int pass,
					enum vmb_page_size first)
{
	if (!(pass & 1))
		return first;
	return first == VMB_PAGE_4K ? VMB_PAGE_2M : VMB_PAGE_4K;
}

static bool vmb_pass_held(unsigned int pass)
{
	return pass >= VMB_NR_PAGE_SIZES;
}

/* The held pages of each size as the deflation begins: those it may try. */
static void vmb_held_snapshot(const struct vmb_balloon *b,
			      unsigned long old[VMB_NR_PAGE_SIZES])
{
	enum vmb_page_size size;

	for (size = VMB_PAGE_4K; size < VMB_NR_PAGE_SIZES; size++)
		old[size] = b->held[size];
}

/*
 * The next page of @size to unlock in a pass: a fresh one from the
 * balloon list, or, in a pass over the held queue, up to @*old of the
 * pages held since earlier deflations, oldest first (pages this deflation
 * sets aside join the queue behind them, and are not tried twice).
 */
static struct vmb_page *vmb_deflate_next(struct vmb_balloon *b,
					 enum vmb_page_size size, bool held,
					 unsigned long *old)
{
	struct vmb_page *page;

	if (!held)
		return vmb_os_list_pop(b, vmb_balloon_list(size));
	if (!*old)
		return NULL;
	page = vmb_os_list_pop(b, vmb_held_list(size));
	if (page) {
		(*old)--;
		b->held[size]--;
	}
	return page;
}

/*
 * Free ballooned pages without telling the host, 4 KiB pages first, held
 * ones after the others, until at least @frames frames are freed or the
 * lists are empty: the host no longer holds them (a reset is pending, or
 * START(0) closed the connection). Returns the frames freed.
 */
static u64 vmb_forget(struct vmb_balloon *b, u64 frames)
{
	unsigned long old[VMB_NR_PAGE_SIZES];
	struct vmb_page *page;
	unsigned int pass;
	u64 freed = 0;

	vmb_held_snapshot(b, old);
	for (pass = 0; pass < VMB_DEFLATE_PASSES; pass++) {
		enum vmb_page_size size = vmb_pass_size(pass, VMB_PAGE_4K);
		bool held = vmb_pass_held(pass);
		u64 per_page = vmb_frames_per_page(size);

		while (freed < frames &&
		       (page = vmb_deflate_next(b, size, held, &old[size]))) {
			vmb_os_page_free(b, page, size);
			vmb_stat_inc(&b->page_stats[VMB_PAGE_STAT_FREE][size]);
			vmb_size_sub(b, per_page);
			freed += per_page;
			vmb_os_yield(b);
		}
	}
	return freed;
}

/*
 * Free every ballooned page without telling the host: after a reset, or
 * after START(0) on unload, the host no longer holds them.
 */
static void vmb_pop(struct vmb_balloon *b)
{
	vmb_forget(b, ~0ULL);
	vmb_release_refused(b);
}

/**
 * vmb_stop_doorbell() - take the doorbell away from the host
 * @b: the balloon
 *
 * The OS glue calls this before it stops the worker on unload, so that no
 * doorbell can start the worker again.
 */
void vmb_stop_doorbell(struct vmb_balloon *b)
{
	if (!b->doorbell_set)
		return;
	vmb_send_doorbell_set(b, VMB_VMCI_INVALID_ID, VMB_VMCI_INVALID_ID);
	vmb_os_doorbell_destroy(b);
	b->doorbell_set = false;
}

static void vmb_start_doorbell(struct vmb_balloon *b)
{
	u64 context, resource;

	if (!(b->caps & VMB_CAP_DOORBELL))
		return;
	if (vmb_os_doorbell_create(b, &context, &resource)) {
		vmb_warn_once(b, VMB_WARNED_DOORBELL,
			      "cannot create a doorbell; polling every second");
		return;
	}
	if (vmb_send_doorbell_set(b, context, resource) != VMB_SUCCESS) {
		vmb_os_doorbell_destroy(b);
		vmb_warn_once(b, VMB_WARNED_DOORBELL,
			      "host refused the doorbell; polling every second");
		return;
	}
	b->doorbell_set = true;
}

/* Choose the commands and page sizes the granted capabilities allow. */
static void vmb_configure(struct vmb_balloon *b)
{
	b->max_size = VMB_PAGE_4K;
	if (b->caps & VMB_CAP_BATCHED) {
		b->batch_max = VMB_BATCH_MAX_ENTRIES;
		/* 2 MiB pages travel in batches only */
		if (b->caps & VMB_CAP_BATCHED_2M)
			b->max_size = VMB_PAGE_2M;
	} else if (b->caps & VMB_CAP_BASIC) {
		b->batch_max = 1;
	} else {
		b->batch_max = 0;
		vmb_warn_once(b, VMB_WARNED_NO_LOCKING,
			      "host granted neither basic nor batched commands; not ballooning");
	}
}

/*
 * Start over after the host asked for a reset (or on the first cycle):
 * every page is freed without UNLOCK, since the host has forgotten them,
 * then START, GUEST_ID and the doorbell. A failed START leaves the reset
 * pending, to be retried next cycle; nothing inflates or deflates meanwhile.
 */
static void vmb_reset(struct vmb_balloon *b)
{
	u32 status;

	vmb_stop_doorbell(b);
	vmb_pop(b);

	status = vmb_send_start(b, b->requested_caps);
	if (status != VMB_SUCCESS && status != VMB_SUCCESS_WITH_CAPABILITIES)
		return;

	vmb_configure(b);
	VMB_WRITE_ONCE(b->reset_required, false);
	vmb_stat_inc(&b->stats[VMB_STAT_RESET]);

	vmb_start_doorbell(b);
	if (vmb_send_guest_id(b) != VMB_SUCCESS)
		vmb_warn_once(b, VMB_WARNED_GUEST_ID,
			      "host did not accept the guest type");
}

/**
 * vmb_effective_target() - the target the balloon really moves towards
 * @b: the balloon
 *
 * The host's target, never more than the guest's RAM minus the floor
 * (%VMB_FLOOR_SHIFT): a host asking for more, by mistake or malice, is not
 * chased into an out-of-memory situation.
 *
 * Return: the target in 4 KiB frames.
 */
u64 vmb_effective_target(struct vmb_balloon *b)
{
	u64 ram = vmb_os_total_ram_frames(b);
	u64 most = ram - (ram >> VMB_FLOOR_SHIFT);

	return b->target < most ? b->target : most;
}

/*
 * Lock the chunk of @n pages in b->pages. Pages the host accepts join the
 * balloon; the others are set aside on the refused list until the cycle
 * ends. Returns the overall status; counts refusals in *@refused.
 */
static u32 vmb_lock_chunk(struct vmb_balloon *b, enum vmb_page_size size,
			  unsigned int n, unsigned int *refused)
{
	u32 overall = vmb_send_lock_op(b, size, n, true);
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (vmb_page_status(b, i, overall) == VMB_SUCCESS) {
			vmb_os_list_add(b, vmb_balloon_list(size), b->pages[i]);
			vmb_size_add(b, vmb_frames_per_page(size));
		} else {
			vmb_os_list_add(b, vmb_refused_list(size), b->pages[i]);
			vmb_stat_inc(&b->page_stats[VMB_PAGE_STAT_REFUSED_ALLOC][size]);
			(*refused)++;
		}
	}
	return overall;
}

/* Refused 2 MiB pages are retried as 4 KiB ones: the host may take those. */
static void vmb_split_refused(struct vmb_balloon *b)
{
	struct vmb_page *page;

	while ((page = vmb_os_list_pop(b, VMB_LIST_REFUSED_2M)))
		vmb_os_page_split(b, page, VMB_LIST_SPLIT_4K);
}

static struct vmb_page *vmb_alloc(struct vmb_balloon *b,
				  enum vmb_page_size size)
{
	struct vmb_page *page = NULL;

	if (size == VMB_PAGE_4K)
		page = vmb_os_list_pop(b, VMB_LIST_SPLIT_4K);
	if (page)
		return page;

	page = vmb_os_page_alloc(b, size);
	if (page)
		vmb_stat_inc(&b->page_stats[VMB_PAGE_STAT_ALLOC][size]);
	else
		vmb_stat_inc(&b->page_stats[VMB_PAGE_STAT_ALLOC_FAIL][size]);
	return page;
}

/* The guest needs memory: no inflation for a while, from now. */
static void vmb_pressure_seen(struct vmb_balloon *b)
{
	VMB_WRITE_ONCE(b->pressure_pending, false);
	vmb_stat_inc(&b->stats[VMB_STAT_SHRINK]);
	b->inflate_after_ms = vmb_os_now_ms(b) + VMB_PRESSURE_HOLDOFF_MS;
}

/* Take a request vmb_pressure() left while the core was busy, if any. */
static bool vmb_take_pressure(struct vmb_balloon *b)
{
	if (!VMB_READ_ONCE(b->pressure_pending))
		return false;
	vmb_pressure_seen(b);
	return true;
}

static bool vmb_holding_off(struct vmb_balloon *b)
{
	return vmb_os_now_ms(b) < b->inflate_after_ms;
}

/*
 * Inflate towards the target in chunks of up to one batch, largest pages
 * first. The cycle ends at the first allocation failure, after too many
 * refusals in batches, at any refusal in single-page mode, when the host
 * fails a whole command, when it asks for a reset, or when the guest asks
 * for memory back (vmb_pressure()); a 2 MiB failure steps down to 4 KiB
 * instead. There is no rate limit: the allocations themselves give up
 * early under memory pressure.
 */
static void vmb_inflate(struct vmb_balloon *b)
{
	enum vmb_page_size size = b->max_size;
	unsigned int refused = 0;

	while (!b->reset_required && !vmb_take_pressure(b)) {
		u64 target = vmb_effective_target(b);
		u64 per_page = vmb_frames_per_page(size);
		u64 wanted, n_max;
		u32 status = VMB_SUCCESS;
		bool alloc_failed = false;
		unsigned int n = 0;

		if (b->size >= target)
			break;
		wanted = (target - b->size) / per_page;
		if (!wanted) {
			/* less than one 2 MiB page to go */
			vmb_split_refused(b);
			size = VMB_PAGE_4K;
			continue;
		}
		n_max = wanted < b->batch_max ? wanted : b->batch_max;
		if (size == VMB_PAGE_2M && n_max > VMB_BATCH_MAX_2M)
			n_max = VMB_BATCH_MAX_2M;

		/* the guest needs memory: lock what we have, and stop */
		while (n < n_max && !VMB_READ_ONCE(b->pressure_pending)) {
			struct vmb_page *page = vmb_alloc(b, size);

			if (!page) {
				alloc_failed = true;
				break;
			}
			b->pages[n++] = page;
		}

		if (n)
			status = vmb_lock_chunk(b, size, n, &refused);
		/*
		 * A batch failed as a whole, or in single-page mode the page
		 * was refused: either way, as upstream does, the cycle ends.
		 */
		if (status != VMB_SUCCESS)
			break;

		if (alloc_failed || refused >= VMB_MAX_REFUSED) {
			if (size == VMB_PAGE_4K)
				break;
			vmb_split_refused(b);
			size = VMB_PAGE_4K;
			refused = 0;
		}
		vmb_os_yield(b);
	}
	vmb_release_refused(b);
}

/*
 * Unlock and free up to @frames frames, @first size first; with @whole, a
 * remainder smaller than a page still takes one whole page (memory
 * pressure wants at least what it asked for). A page the host will not
 * unlock stays in the balloon, on the held queue of its size: still
 * ballooned (the host holds it; the OS keeps it marked and counted, see
 * vmb_list_ballooned()), but out of the way of the fresh pages, which
 * every deflation tries first; the held pages get their turn, oldest
 * first, once the fresh ones of both sizes run out (a host that keeps
 * the 4 KiB pages does not stop the 2 MiB ones from deflating, nor the
 * other way round). Each page is tried once per
 * deflation at most, and the deflation ends with the chunk that brings
 * the pages refused to VMB_MAX_REFUSED, as an inflation does: a host
 * that refuses every unlock costs at most 16 UNLOCKs in single-page mode,
 * one command in batches, whatever the balloon's size and whoever asks
 * (the worker, the shrinker, the OOM notifier). A page the host says is
 * not locked is free to go, but only on its own status: a command that
 * failed as a whole unlocked nothing, and ends the deflation. A list is
 * done when the OS gives no more pages from it: it may hold some back for
 * migration. Returns the frames freed.
 */
static u64 vmb_deflate(struct vmb_balloon *b, u64 frames, bool whole,
		       enum vmb_page_size first)
{
	unsigned long old[VMB_NR_PAGE_SIZES];
	unsigned int pass, refused = 0;
	u64 freed = 0;

	vmb_held_snapshot(b, old);
	for (pass = 0; pass < VMB_DEFLATE_PASSES; pass++) {
		enum vmb_page_size size = vmb_pass_size(pass, first);
		bool held = vmb_pass_held(pass);
		u64 per_page = vmb_frames_per_page(size);

		while (frames && !b->reset_required) {
			u64 n_max = whole ? (frames + per_page - 1) / per_page :
					    frames / per_page;
			unsigned int n = 0, i;
			u32 overall;

			if (!n_max)
				break;
			if (n_max > b->batch_max)
				n_max = b->batch_max;
			for (n = 0; n < n_max; n++) {
				b->pages[n] = vmb_deflate_next(b, size, held,
							       &old[size]);
				if (!b->pages[n])
					break;
			}
			if (!n)
				break;	/* this pass's list is exhausted */

			overall = vmb_send_lock_op(b, size, n, false);
			for (i = 0; i < n; i++) {
				if (vmb_page_unlocked(b, i, overall)) {
					vmb_os_page_free(b, b->pages[i], size);
					vmb_stat_inc(&b->page_stats[VMB_PAGE_STAT_FREE][size]);
					vmb_size_sub(b, per_page);
					freed += per_page;
					frames -= frames < per_page ? frames :
								      per_page;
				} else {
					vmb_hold(b, size, b->pages[i]);
					refused++;
				}
			}
			if (vmb_chunk_failed(b, overall) ||
			    refused >= VMB_MAX_REFUSED)
				return freed;
			vmb_os_yield(b);
		}
	}
	return freed;
}

/*
 * Deflate at least @frames and VMB_PRESSURE_MIN_FRAMES, @first size first,
 * for memory pressure; see vmb_shrink().
 */
static u64 vmb_give_back(struct vmb_balloon *b, u64 frames,
			 enum vmb_page_size first)
{
	u64 freed = 0;

	if (frames < VMB_PRESSURE_MIN_FRAMES)
		frames = VMB_PRESSURE_MIN_FRAMES;
	if (!b->reset_required && b->batch_max)
		freed = vmb_deflate(b, frames, true, first);
	if (b->reset_required && freed < frames)
		freed += vmb_forget(b, frames - freed);
	vmb_stat_add(&b->stats[VMB_STAT_SHRINK_FREE], freed);
	return freed;
}

/**
 * vmb_shrink() - give memory back because the guest needs it
 * @b: the balloon
 * @frames: how many 4 KiB frames the guest asks for
 *
 * Deflates at least @frames, and at least VMB_PRESSURE_MIN_FRAMES, if the
 * balloon has them (a 2 MiB page whole, if that is what is left), 4 KiB
 * pages first, unlocking every page with the host as any deflation does:
 * that is how the host learns what the guest took back. While a reset is
 * pending (the host asked for it, perhaps in answer to this very
 * deflation), the host has forgotten every page: they are freed without
 * UNLOCK, which the host would only answer with RESET.
 * The balloon then stays below its target for VMB_PRESSURE_HOLDOFF_MS,
 * counted from the latest request. Serialised like vmb_work(). Whether to
 * give at all is vmb_reclaim_decide()'s call; this is how.
 *
 * Return: the frames given back.
 */
u64 vmb_shrink(struct vmb_balloon *b, u64 frames)
{
	vmb_pressure_seen(b);
	return vmb_give_back(b, frames, VMB_PAGE_4K);
}

/**
 * vmb_pressure() - the guest needs memory, but the core is busy
 * @b: the balloon
 *
 * For the OS's reclaim when it cannot take the lock that serialises the
 * core, the worker being in a cycle: it needs no lock and never waits.
 * An inflation under way stops after the chunk it is locking, and the
 * hold-off of vmb_shrink() begins; the OS's next request, once the lock is
 * free, is the one that deflates.
 */
void vmb_pressure(struct vmb_balloon *b)
{
	VMB_WRITE_ONCE(b->pressure_pending, true);
}

/**
 * vmb_reclaim_decide() - whether, and how, to answer a request for memory
 * @r: the facts of the request
 *
 * The one place that decides when the balloon gives memory back. In this
 * order:
 *
 * - the balloon's own allocations, and hibernation preparing its image,
 *   get nothing: neither is a shortage the balloon could end (hibernation
 *   skips ballooned pages anyway);
 * - the OOM notifier gets memory back, 4 KiB pages first, or, if the core
 *   is busy, the worker is stopped: the guest is as short as it gets;
 * - memory.reclaim and node reclaim get nothing: there is memory to spare,
 *   and the balloon's pages are the guest's, not one node's;
 * - kswapd gets nothing unless a zone is below its min watermark: it
 *   restores the low watermark, which the balloon's own inflation may have
 *   crossed a moment ago, and answering it would undo that inflation;
 * - others get something only if the guest is short: a zone below its
 *   min watermark, or below its low one while kswapd works to refill it.
 *   Below low with kswapd asleep is a gap nobody is refilling (an
 *   allocation there would have woken kswapd): not a shortage;
 * - short and busy: an order-0 request stops the worker's inflation; a
 *   compound one leaves it alone (compaction may help it, the worker's
 *   next chunk does not hurt it);
 * - short: a compound request gets 2 MiB pages first, others 4 KiB first.
 *
 * Every answer that gives (or notes) starts the hold-off over: a
 * compound allocation that keeps reclaiming (khugepaged's 2 MiB pages)
 * keeps the balloon from growing back into it every second.
 *
 * Return: the action, &enum vmb_reclaim_action.
 */
enum vmb_reclaim_action vmb_reclaim_decide(const struct vmb_reclaim *r)
{
	bool short_of_memory;

	if (r->own || r->hibernation)
		return VMB_RECLAIM_NOTHING;
	if (r->caller == VMB_RECLAIM_OOM)
		return r->busy ? VMB_RECLAIM_NOTE : VMB_RECLAIM_GIVE_4K;
	if (r->proactive || r->node_reclaim)
		return VMB_RECLAIM_NOTHING;
	if (r->kswapd && !r->below_min)
		return VMB_RECLAIM_NOTHING;
	short_of_memory = r->below_min || (r->below_low && r->kswapd_awake);
	if (!short_of_memory)
		return VMB_RECLAIM_NOTHING;
	if (r->busy)
		return r->compound ? VMB_RECLAIM_NOTHING : VMB_RECLAIM_NOTE;
	return r->compound ? VMB_RECLAIM_GIVE_2M : VMB_RECLAIM_GIVE_4K;
}

/**
 * vmb_reclaim() - answer one request for memory back
 * @b: the balloon
 * @r: the request; vmb_reclaim() sets @r->scanned
 *
 * Does what vmb_reclaim_decide() says. A give-back deflates at least
 * VMB_PRESSURE_MIN_FRAMES and at most VMB_PRESSURE_MAX_FRAMES (a 2 MiB
 * page whole, if that is what is left), and like every deflation ends at
 * VMB_MAX_REFUSED pages the host would not unlock: the work of one
 * request is bounded whatever the balloon's size and the host's answers
 * (see vmb_oom_wait_ms() for the OOM notifier's whole bound). Called with
 * the lock that serialises the core held, unless @r->busy.
 *
 * Every answer counts the whole request as scanned, at least what was
 * given back: the kernel then keeps no backlog for the balloon. A request
 * it took as not done (SHRINK_STOP) would be deferred whole to the next
 * one, which on kernels before 5.11 may then ask for half of the balloon
 * at once.
 *
 * Return: the frames given back.
 */
u64 vmb_reclaim(struct vmb_balloon *b, struct vmb_reclaim *r)
{
	enum vmb_reclaim_action action = vmb_reclaim_decide(r);
	u64 frames = r->frames, freed = 0;

	r->scanned = r->frames;
	if (frames > VMB_PRESSURE_MAX_FRAMES)
		frames = VMB_PRESSURE_MAX_FRAMES;
	switch (action) {
	case VMB_RECLAIM_NOTE:
		vmb_pressure(b);
		return 0;
	case VMB_RECLAIM_GIVE_4K:
		freed = vmb_shrink(b, frames);
		break;
	case VMB_RECLAIM_GIVE_2M:
		vmb_pressure_seen(b);
		freed = vmb_give_back(b, frames, VMB_PAGE_2M);
		break;
	default:
		return 0;
	}
	if (freed > r->scanned)
		r->scanned = freed;
	return freed;
}

/**
 * vmb_oom_wait_ms() - how long the OOM notifier waits for the core's lock
 * @b: the balloon
 * @tries: how many times it found the lock taken so far
 *
 * The OOM notifier runs under the kernel's oom_lock, and the worker may
 * hold the core's lock while it allocates with direct reclaim, which can
 * take long when memory is this short. So the notifier never waits for
 * the lock without a bound: each time it finds it taken, the worker is
 * told of the pressure (it ends its cycle after the page it is allocating
 * and the command it is sending), and the notifier sleeps
 * VMB_OOM_WAIT_MS; after VMB_OOM_TRIES of those (100 ms in all) it gives
 * up, and the OOM killer goes ahead. Once it has the lock, its request
 * (vmb_reclaim(), %VMB_RECLAIM_OOM) deflates fewer than
 * 2 * VMB_PRESSURE_MIN_FRAMES (4 MiB), at least VMB_PRESSURE_MIN_FRAMES if
 * the balloon has them and the host unlocks them, and stops at the
 * command that brings the refusals to VMB_MAX_REFUSED: at most
 * VMB_PRESSURE_MIN_FRAMES + VMB_MAX_REFUSED - 1 commands in single-page
 * mode, 2 * (VMB_MAX_REFUSED + 1) in batches. No allocation, no other
 * lock.
 *
 * Return: milliseconds to sleep before trying the lock again; 0 to give up.
 */
unsigned int vmb_oom_wait_ms(struct vmb_balloon *b, unsigned int tries)
{
	if (tries >= VMB_OOM_TRIES)
		return 0;
	vmb_pressure(b);
	return VMB_OOM_WAIT_MS;
}

/* Move towards the target, within the deflate slack. */
static void vmb_change(struct vmb_balloon *b)
{
	u64 target = vmb_effective_target(b);

	if (b->reset_required || !b->batch_max)
		return;

	if (b->size < target) {
		/* not while, or right after, the guest needed memory back */
		if (!vmb_holding_off(b))
			vmb_inflate(b);
	} else if (b->size > target) {
		u64 excess = b->size - target;

		/* a little above target is fine: no ping-pong */
		if (target && excess < VMB_DEFLATE_SLACK)
			return;
		vmb_deflate(b, excess, false, VMB_PAGE_4K);
	}
}

/**
 * vmb_migrate() - move one ballooned 4 KiB page's lock to another page
 * @b: the balloon
 * @old_page: a 4 KiB balloon page the OS has taken off its balloon list
 * @new_page: a fresh 4 KiB page to balloon in its place
 *
 * The OS calls this to move a ballooned page out of the way (to compact
 * memory), serialised with vmb_work() like every other call into the core.
 * The host unlocks @old_page, then locks @new_page, each in the same way
 * as deflation and inflation do. Neither page goes on or off a list here,
 * and neither is freed: what becomes of them is the OS's business, from
 * the result. The balloon's size and statistics follow the result.
 *
 * A page the OS holds off its list stays counted in the size, a reset
 * included: a reset frees only what is on the lists. Migrated after the
 * reset, it is simply locked again (the host answers PPN_UNLOCKED to the
 * unlock); put back on the list, it counts as ballooned though the host
 * does not hold it, until a deflation frees it (again on PPN_UNLOCKED).
 *
 * Nothing changed, the answer says whether to try again: soon, if what
 * stood in the way passes by itself (a reset pending, which the next
 * cycle does, or a host that said it was busy); not at all otherwise (no
 * commands to lock with, or the host refused to unlock @old_page).
 *
 * Return: %VMB_MIGRATE_AGAIN or %VMB_MIGRATE_BUSY if nothing changed, as
 * above; %VMB_MIGRATE_DONE if @new_page took its place,
 * %VMB_MIGRATE_OLD_ONLY if @old_page left the balloon but the host did not
 * take @new_page.
 */
enum vmb_migrate_result vmb_migrate(struct vmb_balloon *b,
				    struct vmb_page *old_page,
				    struct vmb_page *new_page)
{
	u32 status;

	if (b->reset_required)
		return VMB_MIGRATE_AGAIN;
	if (!b->batch_max)
		return VMB_MIGRATE_BUSY;

	b->pages[0] = old_page;
	status = vmb_send_lock_op(b, VMB_PAGE_4K, 1, false);
	if (!vmb_page_unlocked(b, 0, status)) {
		/* the kernel retries -EAGAIN at once, and gives up on -EBUSY */
		if (b->reset_required ||
		    vmb_page_status(b, 0, status) == VMB_ERROR_BUSY)
			return VMB_MIGRATE_AGAIN;
		return VMB_MIGRATE_BUSY;
	}

	b->pages[0] = new_page;
	status = vmb_send_lock_op(b, VMB_PAGE_4K, 1, true);
	if (vmb_page_status(b, 0, status) == VMB_SUCCESS) {
		vmb_stat_inc(&b->stats[VMB_STAT_MIGRATE]);
		return VMB_MIGRATE_DONE;
	}

	/* A RESET here leaves reset_required set: the next cycle handles it. */
	vmb_stat_inc(&b->page_stats[VMB_PAGE_STAT_FREE][VMB_PAGE_4K]);
	vmb_size_sub(b, vmb_frames_per_page(VMB_PAGE_4K));
	return VMB_MIGRATE_OLD_ONLY;
}

/*
 * When to poll, decided here and nowhere else: vmb_poll_update() moves
 * the state at the end of each cycle, from what the cycle learned;
 * vmb_next_wakeup() turns the state into the wait. The OS has one timer
 * for it, and runs vmb_work() when it fires.
 *
 * A doorbell comes first: the host rings when the target moves, so
 * polling faster than once a second would only ask a question the host
 * answers unasked. Then a cycle that got no target (GET_TARGET failed, or
 * the reset's START did): once a second, however fast the balloon polled
 * before, so a failing host is asked at most once a second. Then a moved
 * target: fast polling, a host that moved it is likely to move it again.
 * Not when the balloon merely falls short of an unchanged target: memory
 * is scarce then, and retrying sooner would not help; nor without the
 * commands to follow a move. Otherwise the fast polling counts down, then
 * the glancing backs off, wait after wait, into settled.
 */
static void vmb_poll_update(struct vmb_balloon *b, bool answered, bool moved)
{
	enum vmb_poll_state state = b->poll_state;

	if (b->doorbell_set) {
		state = VMB_POLL_DOORBELL;
	} else if (!answered) {
		state = VMB_POLL_FAILING;
	} else if (moved && b->batch_max) {
		state = VMB_POLL_FAST;
		b->fast_left = VMB_POLL_FAST_CYCLES;
	} else if (state == VMB_POLL_FAST) {
		if (!--b->fast_left) {
			state = VMB_POLL_GLANCING;
			VMB_WRITE_ONCE(b->glance_wait_ms, VMB_POLL_GLANCE_MS);
		}
	} else if (state == VMB_POLL_GLANCING) {
		/* every glance, whatever it found, backs the next one off */
		VMB_WRITE_ONCE(b->glance_wait_ms, b->glance_wait_ms * 2);
		if (b->glance_wait_ms >= VMB_POLL_SLOW_MS / 2)
			state = VMB_POLL_SETTLED;
	} else {
		state = VMB_POLL_SETTLED;
	}
	VMB_WRITE_ONCE(b->poll_state, state);
}

/**
 * vmb_next_wakeup() - when the OS should run the next cycle
 * @b: the balloon
 *
 * The one place that says when the balloon polls. Lockless, like
 * vmb_doorbell(): the OS asks again after it queued the next cycle, to
 * catch a ring that came in between.
 *
 * Return: at once if the host rang since the last cycle began; else by
 * &enum vmb_poll_state: %VMB_POLL_FAST_MS while polling fast, the growing
 * wait while glancing (neither deferrable: their point is to be on time),
 * and %VMB_POLL_SLOW_MS, deferrable, when settled, failing, or with a
 * doorbell.
 */
struct vmb_wakeup vmb_next_wakeup(const struct vmb_balloon *b)
{
	struct vmb_wakeup next = { .ms = VMB_POLL_SLOW_MS, .deferrable = true };

	if (VMB_READ_ONCE(b->doorbell_rung)) {
		next.ms = 0;
		next.deferrable = false;
		return next;
	}
	switch (VMB_READ_ONCE(b->poll_state)) {
	case VMB_POLL_FAST:
		next.ms = VMB_POLL_FAST_MS;
		next.deferrable = false;
		break;
	case VMB_POLL_GLANCING:
		next.ms = VMB_READ_ONCE(b->glance_wait_ms);
		next.deferrable = false;
		break;
	default:
		break;
	}
	return next;
}

/**
 * vmb_work() - one cycle of the balloon
 * @b: the balloon
 *
 * Resets the connection if needed, then fetches the target and moves the
 * balloon towards it. The OS glue runs this on its one timer, when the
 * wakeup it returns is due, or at once when the host rings
 * (vmb_doorbell()), serialised with everything else that touches @b.
 *
 * Return: the next wakeup, as vmb_next_wakeup() gives it: at once if the
 * host rang while this cycle ran.
 */
struct vmb_wakeup vmb_work(struct vmb_balloon *b)
{
	bool doorbell = VMB_XCHG(b->doorbell_rung, false);
	u64 prev_target = b->target;
	bool answered = false;

	vmb_stat_inc(&b->stats[VMB_STAT_TIMER]);
	if (doorbell)
		vmb_stat_inc(&b->stats[VMB_STAT_DOORBELL]);
	/* memory pressure while the last cycle ran: the hold-off starts now */
	vmb_take_pressure(b);

	if (b->reset_required)
		vmb_reset(b);
	if (!b->reset_required && vmb_send_get_target(b) == VMB_SUCCESS) {
		answered = true;
		vmb_change(b);
	}
	vmb_poll_update(b, answered, b->target != prev_target);
	return vmb_next_wakeup(b);
}

/**
 * vmb_doorbell() - the host rang the doorbell: it wants a cycle now
 * @b: the balloon
 *
 * For the OS's doorbell handler, at any time: it needs no lock and never
 * waits. The next vmb_work() counts the ring and asks for the target
 * anew; until it begins, vmb_next_wakeup() says "at once", so that a ring
 * that comes while a cycle runs is not pushed back by that cycle's own
 * rescheduling. The handler then kicks the worker itself.
 */
void vmb_doorbell(struct vmb_balloon *b)
{
	(void)VMB_XCHG(b->doorbell_rung, true);
}

/**
 * vmb_shutdown() - close the connection and free every page
 * @b: the balloon
 *
 * START(0) comes first: the host then forgets every lock, so the pages are
 * freed without UNLOCK and the guest touching them causes no spurious reset.
 * No command goes out after it: vmb_migrate() then refuses every page, and
 * a shrink gives nothing. A page the OS holds off its list at the time (for
 * migration) stays counted until it comes back; vmb_shutdown_rest() frees
 * it then. Once only: the OS calls it on unload.
 */
void vmb_shutdown(struct vmb_balloon *b)
{
	vmb_stop_doorbell(b);
	vmb_send_start(b, 0);
	b->batch_max = 0;
	vmb_pop(b);
}

/**
 * vmb_shutdown_rest() - free the pages that came back after vmb_shutdown()
 * @b: the balloon, shut down
 *
 * Pages the OS had taken off its list when vmb_shutdown() ran, put back
 * since, are freed as vmb_shutdown() freed the others, without a command:
 * the host forgot them at START(0). The OS calls this until it has none
 * left anywhere.
 */
void vmb_shutdown_rest(struct vmb_balloon *b)
{
	vmb_pop(b);
}

/**
 * vmb_drain_wait_ms() - how long unload sleeps before it looks again
 * @waited_ms: how long it has waited so far for pages to come back
 *
 * After vmb_shutdown(), unload waits for the ballooned pages the OS held
 * away from its lists (4 KiB pages compaction had isolated): each comes
 * back through the kernel's putback or the end of its migration, and
 * until then the kernel may still touch the list and call the driver's
 * code, so neither may go away. How long that takes is the kernel's
 * business, not the driver's: unload waits as long as it takes, but
 * spends next to nothing doing so. Each look is one lock, one count and
 * vmb_shutdown_rest() (no command: the host forgot every page at
 * START(0)); the looks come ever further apart, each wait as long as all
 * before it, from VMB_DRAIN_FIRST_MS up to VMB_DRAIN_MAX_MS: seven looks
 * in the first 1.28 s, then one a second.
 *
 * Return: milliseconds to sleep before the next look.
 */
unsigned int vmb_drain_wait_ms(u64 waited_ms)
{
	if (waited_ms < VMB_DRAIN_FIRST_MS)
		return VMB_DRAIN_FIRST_MS;
	if (waited_ms > VMB_DRAIN_MAX_MS)
		return VMB_DRAIN_MAX_MS;
	return (unsigned int)waited_ms;
}

/* 0 before VMB_DRAIN_SAY_FIRST_MS, then one more every ..._EVERY_MS. */
static u64 vmb_drain_mentions(u64 waited_ms)
{
	if (waited_ms < VMB_DRAIN_SAY_FIRST_MS)
		return 0;
	return 1 + (waited_ms - VMB_DRAIN_SAY_FIRST_MS) /
		   VMB_DRAIN_SAY_EVERY_MS;
}

/**
 * vmb_drain_say() - should unload say what it is waiting for?
 * @waited_ms: how long it had waited before the last sleep
 * @slept_ms: that sleep
 *
 * Once VMB_DRAIN_SAY_FIRST_MS have passed, and every
 * VMB_DRAIN_SAY_EVERY_MS after, so that a page that never comes back
 * leaves a line a minute, not one per look.
 *
 * Return: true if the last sleep crossed one of those moments.
 */
bool vmb_drain_say(u64 waited_ms, unsigned int slept_ms)
{
	return vmb_drain_mentions(waited_ms + slept_ms) >
	       vmb_drain_mentions(waited_ms);
}

/**
 * vmb_drain_overdue() - has unload waited past its bound, just now?
 * @waited_ms: how long it had waited before the last sleep
 * @slept_ms: that sleep
 *
 * No page compaction takes stays away VMB_DRAIN_OVERDUE_MS (10 minutes)
 * unless something is stuck: the OS then says, once and loudly, that
 * unload cannot finish. It keeps waiting: the OS's list and its
 * callbacks must outlive every page the OS holds.
 *
 * Return: true if the last sleep crossed VMB_DRAIN_OVERDUE_MS.
 */
bool vmb_drain_overdue(u64 waited_ms, unsigned int slept_ms)
{
	return waited_ms < VMB_DRAIN_OVERDUE_MS &&
	       waited_ms + slept_ms >= VMB_DRAIN_OVERDUE_MS;
}

static const char * const vmb_stat_names[VMB_NR_SHOWN_STATS] = {
	[VMB_STAT_TIMER]	= "timer",
	[VMB_STAT_DOORBELL]	= "doorbell",
	[VMB_STAT_RESET]	= "reset",
	[VMB_STAT_SHRINK]	= "shrink",
	[VMB_STAT_SHRINK_FREE]	= "shrinkFree",
};

static const char * const vmb_page_stat_names[VMB_NR_PAGE_STATS] = {
	[VMB_PAGE_STAT_ALLOC]		= "alloc",
	[VMB_PAGE_STAT_ALLOC_FAIL]	= "allocFail",
	[VMB_PAGE_STAT_REFUSED_ALLOC]	= "errAlloc",
	[VMB_PAGE_STAT_REFUSED_FREE]	= "errFree",
	[VMB_PAGE_STAT_FREE]		= "free",
};

static void vmb_emit_value(vmb_emit_fn emit, void *ctx, const char *name,
			   u64 value, bool hex)
{
	char line[80];

	if (hex)
		snprintf(line, sizeof(line), "%-22s: %#16llx", name,
			 (unsigned long long)value);
	else
		snprintf(line, sizeof(line), "%-22s: %16llu", name,
			 (unsigned long long)value);
	emit(ctx, line);
}

/**
 * vmb_stats_show() - the balloon's statistics, in upstream's debugfs format
 * @b: the balloon
 * @emit: called with each line, without its newline
 * @ctx: passed to @emit
 *
 * Needs no lock, and never waits for a cycle: every field is read whole
 * (see platform.h), though the lines may come from different moments.
 */
void vmb_stats_show(const struct vmb_balloon *b, vmb_emit_fn emit, void *ctx)
{
	char line[80];
	int i, j;

	vmb_emit_value(emit, ctx, "balloon capabilities",
		       VMB_READ_ONCE(b->requested_caps), true);
	vmb_emit_value(emit, ctx, "used capabilities",
		       VMB_READ_ONCE(b->caps), true);
	snprintf(line, sizeof(line), "%-22s: %16s", "is resetting",
		 VMB_READ_ONCE(b->reset_required) ? "y" : "n");
	emit(ctx, line);
	vmb_emit_value(emit, ctx, "target", VMB_READ_ONCE(b->target), false);
	vmb_emit_value(emit, ctx, "current", VMB_READ_ONCE(b->size), false);

	for (i = 0; i < VMB_CMD_NUM; i++) {
		unsigned long calls, fails;

		if (!vmb_cmd_names[i])
			continue;
		calls = VMB_READ_ONCE(b->cmd_calls[i]);
		fails = VMB_READ_ONCE(b->cmd_fails[i]);
		snprintf(line, sizeof(line), "%-22s: %16lu (%lu failed)",
			 vmb_cmd_names[i], calls, fails);
		emit(ctx, line);
	}

	for (i = 0; i < VMB_NR_SHOWN_STATS; i++)
		vmb_emit_value(emit, ctx, vmb_stat_names[i],
			       VMB_READ_ONCE(b->stats[i]), false);

	for (i = 0; i < VMB_NR_PAGE_STATS; i++) {
		for (j = 0; j < VMB_NR_PAGE_SIZES; j++) {
			unsigned long count = VMB_READ_ONCE(b->page_stats[i][j]);

			snprintf(line, sizeof(line), "%-18s(%s): %16lu",
				 vmb_page_stat_names[i], vmb_page_sizes[j].name,
				 count);
			emit(ctx, line);
		}
	}
}
