// SPDX-License-Identifier: GPL-2.0
/*
 * The simulated guest OS (the hooks of src/os.h) and the simulated host
 * the balloon core talks to in the unit tests. The host follows
 * protocol.md, and counts every way the guest could break it.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static struct sim *to_sim(struct vmb_balloon *b)
{
	return (struct sim *)b;	/* the core is the first member */
}

static struct sim_frame *to_frame(struct vmb_page *page)
{
	return (struct sim_frame *)page;
}

static u64 frame_index(const struct sim *s, const struct sim_frame *f)
{
	return (u64)(f - s->frames);
}

/* ---- the host ---------------------------------------------------------- */

static struct sim_frame *host_frame(struct sim *s, u64 pfn)
{
	if (pfn < s->pfn_base || pfn - s->pfn_base >= s->nframes)
		return NULL;
	return &s->frames[pfn - s->pfn_base];
}

static void host_forget_locks(struct sim *s)
{
	u64 i;

	for (i = 0; i < s->nframes; i++) {
		s->frames[i].locked = false;
		s->frames[i].locked_2m_head = false;
	}
	s->host.locked_frames = 0;
}

static bool host_refuses_now(struct sim_host *h)
{
	if (!h->refuse_every)
		return false;
	return ++h->refuse_count % h->refuse_every == 0;
}

/* Lock or unlock one 4 KiB or 2 MiB page; the status of that one page. */
static u32 host_lock_one(struct sim *s, u64 pfn, bool is_2m, bool lock,
			 bool single)
{
	struct sim_host *h = &s->host;
	u64 frames = is_2m ? VMB_2M_FRAMES : 1, i;
	struct sim_frame *f = host_frame(s, pfn);

	if (!f || !host_frame(s, pfn + frames - 1))
		return VMB_ERROR_PPN_INVALID;
	if (is_2m && (pfn % VMB_2M_FRAMES))
		return VMB_ERROR_PPN_INVALID;
	if (single && pfn > VMB_U32_MAX) {
		h->protocol_errors++;	/* the guest must not even ask */
		return VMB_ERROR_PPN_INVALID;
	}
	if (lock) {
		for (i = 0; i < frames; i++)
			if (f[i].locked)
				return VMB_ERROR_PPN_LOCKED;
		if ((!h->refuse_2m_only || is_2m) && host_refuses_now(h))
			return h->refuse_status;
		for (i = 0; i < frames; i++)
			f[i].locked = true;
		f->locked_2m_head = is_2m;
		h->locked_frames += frames;
		return VMB_SUCCESS;
	}
	if (!f->locked || f->locked_2m_head != is_2m)
		return VMB_ERROR_PPN_UNLOCKED;
	if (h->refuse_unlock || f->pinned) {
		h->unlocks_refused++;
		return h->refuse_unlock ? h->refuse_unlock :
					  VMB_ERROR_PPN_PINNED;
	}
	for (i = 0; i < frames; i++)
		f[i].locked = false;
	f->locked_2m_head = false;
	h->locked_frames -= frames;
	return VMB_SUCCESS;
}

static u32 host_batch(struct sim *s, u64 batch_pfn, u64 n, bool is_2m,
		      bool lock)
{
	u64 i;

	if (batch_pfn != s->batch_pfn || n > VMB_BATCH_MAX_ENTRIES) {
		s->host.protocol_errors++;
		return VMB_FAILURE;
	}
	for (i = 0; i < n; i++) {
		u64 entry = s->batch[i];
		u32 status;

		if (entry & (VMB_ENTRY_STATUS_MASK | VMB_ENTRY_RESERVED_MASK))
			s->host.protocol_errors++;
		status = host_lock_one(s, entry >> VMB_FRAME_SHIFT, is_2m, lock,
				       false);
		entry = (entry >> VMB_FRAME_SHIFT << VMB_FRAME_SHIFT) | status;
		if (s->host.entry_garbage)
			entry ^= 0xabcdULL << VMB_FRAME_SHIFT;
		s->batch[i] = entry;
	}
	return VMB_SUCCESS;
}

static bool host_granted(const struct sim_host *h, u32 cmd)
{
	switch (cmd) {
	case VMB_CMD_LOCK:
	case VMB_CMD_UNLOCK:
		return h->granted & VMB_CAP_BASIC;
	case VMB_CMD_BATCHED_LOCK:
	case VMB_CMD_BATCHED_UNLOCK:
		return h->granted & VMB_CAP_BATCHED;
	case VMB_CMD_BATCHED_2M_LOCK:
	case VMB_CMD_BATCHED_2M_UNLOCK:
		return (h->granted & VMB_CAP_BATCHED) &&
		       (h->granted & VMB_CAP_BATCHED_2M);
	case VMB_CMD_VMCI_DOORBELL_SET:
		return h->granted & VMB_CAP_DOORBELL;
	default:
		return true;
	}
}

/* The target, never above the limit the guest sent with GET_TARGET. */
static u64 host_target(const struct sim_host *h)
{
	return h->target < h->last_limit ? h->target : h->last_limit;
}

/* What RBX carries: without 64-bit, a host clamps to 32 bits. */
static u64 host_target_reg(const struct sim_host *h, u64 target)
{
	if (h->wide_target)
		return h->target;
	if (!(h->granted & VMB_CAP_64BIT_TARGET) && target > VMB_U32_MAX)
		target = VMB_U32_MAX;
	return target;
}

/*
 * The frames the host holds are marked ballooned by the guest (PG_offline
 * in Linux, for kdump and hibernation), but for those of the command
 * under way and those migration holds (which stay marked in Linux too).
 */
static void host_check_marks(struct sim *s, u32 cmd, u64 a1, u64 a2)
{
	u64 i, j, n = 0;
	bool batch = cmd >= VMB_CMD_BATCHED_LOCK &&
		     cmd <= VMB_CMD_BATCHED_2M_UNLOCK && a1 == s->batch_pfn &&
		     a2 <= VMB_BATCH_MAX_ENTRIES;
	bool single = cmd == VMB_CMD_LOCK || cmd == VMB_CMD_UNLOCK;

	for (i = 0; i < s->nframes; i++) {
		u64 pfn = s->pfn_base + i;
		bool in_cmd = single && pfn == a1;

		if (!s->frames[i].locked || s->frames[i].marked ||
		    s->frames[i].isolated)
			continue;
		for (j = 0; batch && j < a2 && !in_cmd; j++) {
			u64 first = s->batch[j] >> VMB_FRAME_SHIFT;
			u64 len = cmd == VMB_CMD_BATCHED_2M_LOCK ||
				  cmd == VMB_CMD_BATCHED_2M_UNLOCK ?
				  VMB_2M_FRAMES : 1;

			in_cmd = pfn >= first && pfn < first + len;
		}
		if (!in_cmd)
			n++;
	}
	s->host.unmarked_held += n;
}

static u32 host_call(struct sim *s, u32 cmd, u64 a1, u64 a2, u64 *rbx,
		     u64 *rcx)
{
	struct sim_host *h = &s->host;

	h->calls[cmd < VMB_CMD_NUM ? cmd : VMB_CMD_NUM]++;
	host_check_marks(s, cmd, a1, a2);
	if (h->ring_on_cmd == (int)cmd) {
		h->ring_on_cmd = -1;
		vmb_doorbell(&s->b);
	}
	*rbx = 0x5a5a5a5a5a5a5a5aULL;	/* clobbered unless set below */
	*rcx = 0xa5a5a5a5a5a5a5a5ULL;

	if (cmd == VMB_CMD_START && h->fail_start) {
		h->fail_start--;
		return VMB_FAILURE;
	}
	if (h->reset_on_cmd == (int)cmd) {
		/* like a host that restarted: every lock is forgotten */
		h->reset_on_cmd = -1;
		h->needs_start = true;
		host_forget_locks(s);
		h->resets_sent++;
		return VMB_ERROR_RESET;
	}
	if (h->needs_start && cmd != VMB_CMD_START) {
		h->resets_sent++;
		return VMB_ERROR_RESET;
	}
	if (h->busy_on_cmd == (int)cmd) {
		h->busy_on_cmd = -1;
		return VMB_ERROR_BUSY;
	}
	if (h->fail_on_cmd == (int)cmd) {
		h->fail_on_cmd = -1;
		return VMB_FAILURE;
	}
	if (h->fail_always_cmd == (int)cmd)
		return VMB_FAILURE;
	if (h->status_on_cmd == (int)cmd) {
		h->status_on_cmd = -1;
		return h->status_once;
	}
	if (cmd >= VMB_CMD_NUM || cmd == 5 || !host_granted(h, cmd))
		return VMB_ERROR_CMD_INVALID;

	switch (cmd) {
	case VMB_CMD_START:
		host_forget_locks(s);
		h->needs_start = false;
		if (h->n_starts < 16)
			h->start_args[h->n_starts] = a1;
		h->n_starts++;
		if (a1 & 1)
			h->protocol_errors++;	/* bit 0 is never asked for */
		if (h->legacy) {
			h->granted = VMB_CAP_BASIC;
			return VMB_SUCCESS;
		}
		h->granted = (u32)a1 & h->caps & VMB_CAPS_ALL;
		*rcx = h->granted;
		return VMB_SUCCESS_WITH_CAPABILITIES;
	case VMB_CMD_GET_TARGET:
		h->last_limit = a1;
		if (!(h->granted & VMB_CAP_64BIT_TARGET) && a1 > VMB_U32_MAX)
			h->protocol_errors++;
		*rbx = host_target_reg(h, host_target(h));
		return VMB_SUCCESS;
	case VMB_CMD_GUEST_ID:
		h->guest_id = a1;
		return VMB_SUCCESS;
	case VMB_CMD_VMCI_DOORBELL_SET:
		h->doorbell_context = a1;
		h->doorbell_resource = a2;
		return h->doorbell_status;
	case VMB_CMD_LOCK:
	case VMB_CMD_UNLOCK:
		if (a2 != 1)
			h->protocol_errors++;
		*rbx = host_target_reg(h, host_target(h));
		return host_lock_one(s, a1, false, cmd == VMB_CMD_LOCK, true);
	default:
		*rbx = host_target_reg(h, host_target(h));
		return host_batch(s, a1, a2,
				  cmd == VMB_CMD_BATCHED_2M_LOCK ||
				  cmd == VMB_CMD_BATCHED_2M_UNLOCK,
				  cmd == VMB_CMD_BATCHED_LOCK ||
				  cmd == VMB_CMD_BATCHED_2M_LOCK);
	}
}

/* The host restarted: it forgot every lock and wants a new START. */
void sim_host_restart(struct sim *s)
{
	host_forget_locks(s);
	s->host.needs_start = true;
}

/* ---- the guest OS: the hooks of os.h ----------------------------------- */

u32 vmb_os_backdoor(struct vmb_balloon *b, u32 cmd, u64 arg1, u64 arg2,
		    u64 *rbx, u64 *rcx)
{
	return host_call(to_sim(b), cmd, arg1, arg2, rbx, rcx);
}

static bool range_free(const struct sim *s, u64 first, u64 n)
{
	u64 i;

	for (i = first; i < first + n; i++)
		if (s->frames[i].state != SIM_FREE)
			return false;
	return true;
}

static struct sim_frame *take(struct sim *s, u64 first, unsigned int order)
{
	u64 n = 1ULL << order, i;

	for (i = first; i < first + n; i++) {
		s->frames[i].state = SIM_ALLOCATED;
		s->frames[i].head = false;
		s->frames[i].list = SIM_NO_LIST;
	}
	s->frames[first].head = true;
	s->frames[first].order = (unsigned char)order;
	s->allocated += n;
	return &s->frames[first];
}

static struct sim_frame *alloc_4k(struct sim *s)
{
	u64 i;

	if (s->allocated + 1 > s->alloc_limit)
		return NULL;
	/* like a real allocator, hand back the page freed last */
	if (s->last_freed < s->nframes && range_free(s, s->last_freed, 1))
		return take(s, s->last_freed, 0);
	for (i = 0; i < s->nframes; i++)
		if (s->frames[i].state == SIM_FREE)
			return take(s, i, 0);
	return NULL;
}

struct vmb_page *vmb_os_page_alloc(struct vmb_balloon *b,
				   enum vmb_page_size size)
{
	struct sim *s = to_sim(b);
	unsigned int order = vmb_page_sizes[size].order;
	u64 n = 1ULL << order, i;

	if (++s->n_allocs == s->pressure_at_alloc) {
		vmb_pressure(b);	/* as if from another thread */
		s->locks_at_pressure = s->host.calls[VMB_CMD_LOCK] +
				       s->host.calls[VMB_CMD_BATCHED_LOCK] +
				       s->host.calls[VMB_CMD_BATCHED_2M_LOCK];
	}
	if (s->allocated + n > s->alloc_limit)
		return NULL;
	if (size == VMB_PAGE_2M) {
		if (s->no_2m)
			return NULL;
		for (i = (n - s->pfn_base % n) % n; i + n <= s->nframes; i += n)
			if (range_free(s, i, n))
				return (struct vmb_page *)take(s, i, order);
		return NULL;
	}
	if (s->fail_4k_after && ++s->n_4k_allocs > s->fail_4k_after)
		return NULL;
	return (struct vmb_page *)alloc_4k(s);
}

void vmb_os_page_free(struct vmb_balloon *b, struct vmb_page *page,
		      enum vmb_page_size size)
{
	struct sim *s = to_sim(b);
	struct sim_frame *f = to_frame(page);
	unsigned int order = vmb_page_sizes[size].order;
	u64 first = frame_index(s, f), i;

	if (!f->head || f->order != order || f->list != SIM_NO_LIST ||
	    f->isolated) {
		s->errors++;
		return;
	}
	for (i = first; i < first + (1ULL << order); i++) {
		if (s->frames[i].state != SIM_ALLOCATED || s->frames[i].marked)
			s->errors++;
		if (s->frames[i].locked)
			s->freed_while_locked++;
		s->frames[i].state = SIM_FREE;
		s->frames[i].head = false;
	}
	s->allocated -= 1ULL << order;
	s->last_freed = first;
}

u64 vmb_os_page_pfn(struct vmb_balloon *b, struct vmb_page *page)
{
	struct sim *s = to_sim(b);

	return s->pfn_base + frame_index(s, to_frame(page));
}

void vmb_os_page_split(struct vmb_balloon *b, struct vmb_page *page,
		       enum vmb_list to)
{
	struct sim *s = to_sim(b);
	struct sim_frame *f = to_frame(page);
	unsigned int i;

	if (!f->head || f->order != 9 || f->list != SIM_NO_LIST) {
		s->errors++;
		return;
	}
	for (i = 0; i < VMB_2M_FRAMES; i++) {
		f[i].head = true;
		f[i].order = 0;
		f[i].list = SIM_NO_LIST;
		vmb_os_list_add(b, to, (struct vmb_page *)&f[i]);
	}
}

/* Mark a page's frames ballooned, or no longer: PG_offline in Linux. */
static void sim_mark(struct sim_frame *f, bool marked)
{
	unsigned int i;

	for (i = 0; i < (1U << f->order); i++)
		f[i].marked = marked;
}

void vmb_os_list_add(struct vmb_balloon *b, enum vmb_list list,
		     struct vmb_page *page)
{
	struct sim *s = to_sim(b);
	struct sim_frame *f = to_frame(page);

	if (f->list != SIM_NO_LIST || !f->head || f->state != SIM_ALLOCATED ||
	    f->isolated) {
		s->errors++;
		return;
	}
	f->list = list;
	if (vmb_list_ballooned(list))
		sim_mark(f, true);
	if (list == VMB_LIST_HELD_4K || list == VMB_LIST_HELD_2M) {
		/* a queue: behind the others */
		struct sim_frame **link = &s->lists[list];

		while (*link)
			link = &(*link)->next;
		f->next = NULL;
		*link = f;
		return;
	}
	f->next = s->lists[list];
	s->lists[list] = f;
}

struct vmb_page *vmb_os_list_pop(struct vmb_balloon *b, enum vmb_list list)
{
	struct sim *s = to_sim(b);
	struct sim_frame *f = s->lists[list];

	if (!f)
		return NULL;
	s->lists[list] = f->next;
	f->next = NULL;
	f->list = SIM_NO_LIST;
	if (vmb_list_ballooned(list))
		sim_mark(f, false);
	return (struct vmb_page *)f;
}

u64 vmb_os_total_ram_frames(struct vmb_balloon *b)
{
	return to_sim(b)->reported_ram;
}

u64 vmb_os_now_ms(struct vmb_balloon *b)
{
	return to_sim(b)->now_ms;
}

void vmb_os_yield(struct vmb_balloon *b)
{
}

int vmb_os_doorbell_create(struct vmb_balloon *b, u64 *context,
			   u64 *resource)
{
	struct sim *s = to_sim(b);

	if (s->doorbell_fails)
		return -1;
	if (s->doorbell_exists)
		s->errors++;
	s->doorbell_exists = true;
	s->doorbells_created++;
	*context = 42;
	*resource = 7;
	return 0;
}

void vmb_os_doorbell_destroy(struct vmb_balloon *b)
{
	struct sim *s = to_sim(b);

	if (!s->doorbell_exists)
		s->errors++;
	s->doorbell_exists = false;
}

void vmb_os_log(struct vmb_balloon *b, enum vmb_log_level level,
		const char *fmt, ...)
{
	struct sim *s = to_sim(b);
	va_list args;

	if (s->n_log >= SIM_MAX_LOG)
		return;
	va_start(args, fmt);
	vsnprintf(s->log[s->n_log++], sizeof(s->log[0]), fmt, args);
	va_end(args);
}

/* ---- setup and checks -------------------------------------------------- */

void sim_init(struct sim *s, const struct sim_config *cfg)
{
	u64 i;

	memset(s, 0, sizeof(*s));
	s->nframes = cfg->nframes ? cfg->nframes : 16384;	/* 64 MiB */
	s->pfn_base = cfg->pfn_base;
	s->now_ms = 100000;
	s->reported_ram = s->nframes;
	s->alloc_limit = s->nframes;
	s->last_freed = ~0ULL;
	s->frames = calloc(s->nframes, sizeof(*s->frames));
	if (!s->frames)
		abort();
	for (i = 0; i < s->nframes; i++)
		s->frames[i].list = SIM_NO_LIST;
	/* the batch page lives outside the simulated RAM */
	s->batch_pfn = s->pfn_base + s->nframes + 3;

	s->host.caps = cfg->host_caps;
	s->host.legacy = cfg->legacy;
	s->host.reset_on_cmd = -1;
	s->host.busy_on_cmd = -1;
	s->host.fail_on_cmd = -1;
	s->host.fail_always_cmd = -1;
	s->host.status_on_cmd = -1;
	s->host.ring_on_cmd = -1;
	s->host.refuse_status = VMB_ERROR_PPN_PINNED;
	s->host.doorbell_status = VMB_SUCCESS;

	vmb_init(&s->b, cfg->requested_caps ? cfg->requested_caps : VMB_CAPS_ALL,
		 s->batch, s->batch_pfn);
}

void sim_destroy(struct sim *s)
{
	free(s->frames);
	s->frames = NULL;
}

/* One cycle; returns when the core wants the next one, in ms. */
unsigned int sim_cycle(struct sim *s)
{
	return vmb_work(&s->b).ms;
}

void sim_cycles(struct sim *s, unsigned int n)
{
	while (n--)
		sim_cycle(s);
}

/* Frames on the balloon lists, walking the lists themselves. */
u64 sim_list_frames(const struct sim *s)
{
	const struct sim_frame *f;
	u64 n = 0;

	for (f = s->lists[VMB_LIST_BALLOON_4K]; f; f = f->next)
		n += 1;
	for (f = s->lists[VMB_LIST_BALLOON_2M]; f; f = f->next)
		n += VMB_2M_FRAMES;
	for (f = s->lists[VMB_LIST_HELD_4K]; f; f = f->next)
		n += 1;
	for (f = s->lists[VMB_LIST_HELD_2M]; f; f = f->next)
		n += VMB_2M_FRAMES;
	return n;
}

/* Frames the OS has taken off the balloon list to migrate them. */
u64 sim_isolated_frames(const struct sim *s)
{
	u64 i, n = 0;

	for (i = 0; i < s->nframes; i++)
		n += s->frames[i].isolated;
	return n;
}

/*
 * What Linux's compaction does first: take the @nth page of the 4 KiB
 * balloon list off it (the list's own lock is all it needs; the balloon's
 * worker may be running). NULL if the list is shorter.
 */
struct sim_frame *sim_isolate(struct sim *s, unsigned int nth)
{
	struct sim_frame **link = &s->lists[VMB_LIST_BALLOON_4K], *f;

	while (*link && nth--)
		link = &(*link)->next;
	f = *link;
	if (!f)
		return NULL;
	*link = f->next;
	f->next = NULL;
	f->list = SIM_NO_LIST;
	f->isolated = true;
	return f;
}

/* Migration gave up: the page goes back on the balloon list. */
void sim_putback(struct sim *s, struct sim_frame *f)
{
	if (!f->isolated) {
		s->errors++;
		return;
	}
	f->isolated = false;
	f->marked = true;
	f->list = VMB_LIST_BALLOON_4K;
	f->next = s->lists[VMB_LIST_BALLOON_4K];
	s->lists[VMB_LIST_BALLOON_4K] = f;
}

/*
 * Migrate an isolated page as Linux does: a new page from the allocator,
 * the driver's migrate call, then by its result the new page joins the
 * balloon list and the old one is freed (DONE), both are freed
 * (OLD_ONLY), or the old one goes back and the new one is freed (BUSY).
 * Both pages are marked isolated during the call, so the core touching
 * them through the list or free hooks counts as an error.
 */
enum vmb_migrate_result sim_migrate(struct sim *s, struct sim_frame *old)
{
	struct sim_frame *new = alloc_4k(s);
	enum vmb_migrate_result r;

	if (!new) {
		sim_putback(s, old);
		return VMB_MIGRATE_BUSY;
	}
	new->isolated = true;
	r = vmb_migrate(&s->b, (struct vmb_page *)old, (struct vmb_page *)new);
	new->isolated = false;
	if (r <= VMB_MIGRATE_BUSY)
		s->migrations[r]++;
	switch (r) {
	case VMB_MIGRATE_DONE:
		old->isolated = false;
		old->marked = false;
		vmb_os_page_free(&s->b, (struct vmb_page *)old, VMB_PAGE_4K);
		new->isolated = true;
		sim_putback(s, new);
		break;
	case VMB_MIGRATE_OLD_ONLY:
		old->isolated = false;
		old->marked = false;
		vmb_os_page_free(&s->b, (struct vmb_page *)old, VMB_PAGE_4K);
		vmb_os_page_free(&s->b, (struct vmb_page *)new, VMB_PAGE_4K);
		break;
	default:
		sim_putback(s, old);
		vmb_os_page_free(&s->b, (struct vmb_page *)new, VMB_PAGE_4K);
		break;
	}
	return r;
}

unsigned int sim_log_count(const struct sim *s, const char *needle)
{
	unsigned int i, n = 0;

	for (i = 0; i < s->n_log; i++)
		if (strstr(s->log[i], needle))
			n++;
	return n;
}

/* The host holds exactly the frames ballooned: listed or isolated. */
static bool host_holds_ballooned(const struct sim *s, char *why, size_t len)
{
	bool *ballooned = calloc(s->nframes, sizeof(*ballooned));
	const struct sim_frame *f;
	u64 i, j;
	bool same = true;

	if (!ballooned)
		abort();
	for (f = s->lists[VMB_LIST_BALLOON_4K]; f; f = f->next)
		ballooned[frame_index(s, f)] = true;
	for (f = s->lists[VMB_LIST_BALLOON_2M]; f; f = f->next)
		for (j = 0; j < VMB_2M_FRAMES; j++)
			ballooned[frame_index(s, f) + j] = true;
	for (f = s->lists[VMB_LIST_HELD_4K]; f; f = f->next)
		ballooned[frame_index(s, f)] = true;
	for (f = s->lists[VMB_LIST_HELD_2M]; f; f = f->next)
		for (j = 0; j < VMB_2M_FRAMES; j++)
			ballooned[frame_index(s, f) + j] = true;
	for (i = 0; i < s->nframes; i++)
		if (s->frames[i].isolated)
			ballooned[i] = true;
	for (i = 0; i < s->nframes && same; i++) {
		if (s->frames[i].locked != ballooned[i]) {
			snprintf(why, len, "frame %llu: %s by the host, %s",
				 (unsigned long long)i,
				 s->frames[i].locked ? "locked" : "not locked",
				 ballooned[i] ? "ballooned" : "not ballooned");
			same = false;
		}
	}
	free(ballooned);
	return same;
}

/* The OS marks exactly the frames on ballooned lists and the isolated. */
static bool marks_match(const struct sim *s, char *why, size_t len)
{
	bool *want = calloc(s->nframes, sizeof(*want));
	const struct sim_frame *f;
	unsigned int list;
	u64 i, j;
	bool same = true;

	if (!want)
		abort();
	for (list = 0; list < VMB_NR_LISTS; list++) {
		if (!vmb_list_ballooned(list))
			continue;
		for (f = s->lists[list]; f; f = f->next)
			for (j = 0; j < (1ULL << f->order); j++)
				want[frame_index(s, f) + j] = true;
	}
	for (i = 0; i < s->nframes; i++)
		if (s->frames[i].isolated)
			want[i] = true;
	for (i = 0; i < s->nframes && same; i++) {
		if (s->frames[i].marked != want[i]) {
			snprintf(why, len, "frame %llu: %s, but %s",
				 (unsigned long long)i,
				 s->frames[i].marked ? "marked" : "not marked",
				 want[i] ? "ballooned" : "not ballooned");
			same = false;
		}
	}
	free(want);
	return same;
}

/*
 * Between cycles: the balloon's size is what its lists hold plus what is
 * isolated for migration, nothing else is allocated (refused pages were
 * freed), and, unless a reset is pending, the host holds exactly those
 * frames, no more, no fewer, no others.
 */
bool sim_consistent(const struct sim *s, char *why, size_t len)
{
	u64 listed = sim_list_frames(s) + sim_isolated_frames(s);

	if (s->errors || s->freed_while_locked || s->host.protocol_errors ||
	    s->host.unmarked_held) {
		snprintf(why, len, "errors %u, freed while locked %u, protocol errors %u, held unmarked %llu",
			 s->errors, s->freed_while_locked, s->host.protocol_errors,
			 (unsigned long long)s->host.unmarked_held);
		return false;
	}
	if (listed != s->b.size || s->allocated != s->b.size) {
		snprintf(why, len, "size %llu, listed+isolated %llu, allocated %llu",
			 (unsigned long long)s->b.size,
			 (unsigned long long)listed,
			 (unsigned long long)s->allocated);
		return false;
	}
	if (!s->b.reset_required && s->host.locked_frames != s->b.size) {
		snprintf(why, len, "size %llu, host holds %llu",
			 (unsigned long long)s->b.size,
			 (unsigned long long)s->host.locked_frames);
		return false;
	}
	if (!marks_match(s, why, len))
		return false;
	if (!s->b.reset_required && !host_holds_ballooned(s, why, len))
		return false;
	return true;
}
