/*
 * hostcheck: check the hypervisor side of the VMware balloon protocol from
 * inside an x86_64 Linux guest, without any balloon driver loaded.  Talks to
 * I/O port 0x5670 directly and prints TAP.  Run as root.
 *
 *   gcc -O2 -Wall -static -I../../src -o hostcheck hostcheck.c   (src/wire.h)
 *   hostcheck [--caps HEX] [--legacy] [--target FRAMES]
 *       check the device.  --caps: the device's "capabilities" property
 *       (default 0x2e); --legacy: the device runs with x-legacy=on;
 *       --target: the target the host has set, in 4 KiB frames (checked
 *       exactly; a target >= 2^32, set with qom-set x-target-frames, also
 *       enables the 64-bit target checks).
 *   hostcheck --call CMD ARG1 ARG2
 *       one raw call; prints "status=0x.. rbx=0x.. rcx=0x..".
 *   hostcheck --fuzz N [--seed S] [--no-bye]
 *       N random calls with garbage arguments: the host must survive them.
 *       Only this process's own pages and addresses outside RAM are ever
 *       named, so the guest survives too; not the batch page, which the
 *       host may release at any moment once it is locked (see struct
 *       fuzz_model).  Follows the host's answers in a model of
 *       what it holds and prints the model's x-locked-frames and x-locked-2m:
 *       with --no-bye (no START(0) at the end) the host's counters must
 *       equal them.  Fails if the host took a frame that is not ours.
 *   hostcheck --hold MIB [--seconds S] [--lock-on-signal] [--reuse]
 *       START, lock MIB MiB of this process's own pages (batched), report,
 *       wait S seconds (default: until stdin reaches EOF; SIGUSR1 ends the
 *       wait early), unlock, report how many unlocks succeeded, START(0).
 *       With --lock-on-signal, report "touched" once the pages are filled
 *       and lock them only on SIGUSR2, so that the test reads the QEMU
 *       process's memory before any lock however slow the machine is.
 *       With --reuse, write a pattern into the pages right after locking
 *       them, as a guest does that forgot its balloon without telling the
 *       host (a kexec, a driver that died): the host still counts them
 *       locked, yet they hold live data.  At the end of the wait it reports
 *       "pattern intact in K of N pages" before unlocking.
 *       For watching that memory fall, and for keeping frames locked
 *       across a migration.
 *       With --sparse, lock only every other page of the 2 * MIB MiB it
 *       touches: a fragmented balloon, MIB MiB in runs of one frame.
 *   hostcheck --lock-2m N
 *       START, lock up to N 2 MiB pages of its own (as many as the guest
 *       gives it) in one BATCHED_2M_LOCK, timed: prints "hostcheck:
 *       BATCHED_2M_LOCK of K entries: status S, L locked, T ns"; then
 *       waits a second, unlocks them and says goodbye with START(0).
 *   hostcheck --lock-range PFN N
 *       START, then lock frames [PFN, PFN + N) with BATCHED_LOCK (frames
 *       the guest does not use, such as an offline DIMM's); prints
 *       "hostcheck: locked L of N frames at PFN"; no unlock, no goodbye.
 *   hostcheck --lock-singly N
 *       START, then lock N of this process's own pages one single LOCK at
 *       a time.  At the first status that is not SUCCESS, print
 *       "hostcheck: lock K of N: status S" and stop there (no unlock, no
 *       goodbye: for the host's x-reset-at-locked, whose RESET means it
 *       forgot the locks).  If all succeed, print "hostcheck: locked N of
 *       N singly", unlock them and say goodbye with START(0).
 *   hostcheck --time-batch PFN ROUNDS
 *       the host's time for one 512-entry BATCHED_LOCK naming frames
 *       [PFN, PFN + 512) (memory it refuses: nothing changes), against one
 *       naming 512 own pages of ordinary RAM (each unlocked again, untimed):
 *       the median of ROUNDS of each, in ns, and their ratio.
 *   hostcheck --refused PFN N
 *       frames [PFN, PFN + N) are memory the host must refuse to take
 *       (shared memory, NVDIMM, ...): every way of locking them gets
 *       PPN_INVALID, a batch page there is refused, and an own page of
 *       ordinary RAM still locks and unlocks.  Prints TAP.
 *
 * The pages it locks are its own, mlock'ed, and never read after locking:
 * the host throws their contents away.  At the end it unlocks them and says
 * goodbye with START(0), so the device is left with nothing locked.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The protocol's numbers: src/wire.h, the header the guest driver uses. */
#include "wire.h"

#define PAGE            4096UL
#define HUGE            (2UL << 20)
#define FAR_PFN         (1ULL << 36)    /* 256 TiB: no guest has RAM there */
#define MMIO_PFN        0xfee00ULL      /* the local APIC */
#define BIOS_PFN        0xfffffULL      /* BIOS ROM just below 4 GiB */
#define RDI_CANARY      0x0123456789abcdefULL

struct regs {
	uint64_t rax, rbx, rcx, rdx, rsi, rdi;
};

static int tests, failed;
static bool rdi_clobbered;
static uint32_t dev_caps = 0x2e;
static bool legacy;
static long long want_target = -1;
static int pagemap_fd = -1;
static uint64_t vram_pfn;

static void call(struct regs *r)
{
	r->rdx = VMB_PORT;
	r->rdi = RDI_CANARY;
	__asm__ __volatile__("inl %%dx, %%eax"
			     : "+a"(r->rax), "+b"(r->rbx), "+c"(r->rcx),
			       "+d"(r->rdx), "+S"(r->rsi), "+D"(r->rdi)
			     :
			     : "memory");
	if (r->rdi != RDI_CANARY)
		rdi_clobbered = true;
}

/* One command; returns the status, the full RBX and RCX through pointers. */
static uint32_t cmd(uint64_t c, uint64_t arg1, uint64_t arg2, uint64_t *rbx,
		    uint64_t *rcx)
{
	struct regs r = { .rax = VMB_MAGIC, .rbx = arg1, .rcx = c, .rsi = arg2 };

	call(&r);
	if (rbx)
		*rbx = r.rbx;
	if (rcx)
		*rcx = r.rcx;
	return (uint32_t)r.rax;
}

static void ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	tests++;
	if (!cond)
		failed++;
	printf("%sok %d - ", cond ? "" : "not ", tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void skip(const char *why, const char *fmt, ...)
{
	va_list ap;

	tests++;
	printf("ok %d - ", tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP %s\n", why);
	fflush(stdout);
}

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* Compare a status; the message says what was sent. */
static void is_status(uint32_t got, uint32_t want, const char *what)
{
	ok(got == want, "%s: status %#x (want %#x)", what, got, want);
}

static uint32_t grant_for(uint64_t asked)
{
	if (legacy)
		return asked ? VMB_CAP_BASIC : 0;
	return (uint32_t)asked & dev_caps & VMB_CAPS_ALL;
}

/* START asking for @caps; checks nothing, returns what was granted. */
static uint32_t start(uint64_t caps)
{
	uint64_t rcx = 0;
	uint32_t st = cmd(VMB_CMD_START, caps, 0, NULL, &rcx);

	if (st == VMB_SUCCESS_WITH_CAPABILITIES)
		return (uint32_t)rcx;
	if (st == VMB_SUCCESS)
		return VMB_CAP_BASIC;
	return 0;
}

static uint64_t pfn_of(void *p)
{
	uint64_t e = 0;
	off_t off = ((uintptr_t)p / PAGE) * sizeof(e);

	if (pread(pagemap_fd, &e, sizeof(e), off) != sizeof(e))
		return 0;
	if (!(e & (1ULL << 63)))
		return 0;
	return e & ((1ULL << 55) - 1);
}

/* @n mlock'ed, touched pages of our own. */
static void *own_pages(size_t n)
{
	void *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", strerror(errno));
		exit(1);
	}
	memset(p, 0x5a, n * PAGE);
	if (mlock(p, n * PAGE) != 0) {
		printf("Bail out! mlock: %s\n", strerror(errno));
		exit(1);
	}
	return p;
}

/* A 2 MiB aligned, physically contiguous, mlock'ed page, or NULL. */
static void *own_huge_page(uint64_t *pfn)
{
	char *raw = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;
	uint64_t first;
	size_t i;

	if (raw == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
	madvise(p, HUGE, MADV_HUGEPAGE);
	memset(p, 0x5a, HUGE);
	if (mlock(p, HUGE) != 0)
		return NULL;
	first = pfn_of(p);
	if (!first || first % 512)
		return NULL;
	for (i = 1; i < 512; i++)
		if (pfn_of(p + i * PAGE) != first + i)
			return NULL;
	*pfn = first;
	return p;
}

/* The first PFN of a PCI display's first memory BAR, or 0. */
static uint64_t find_vram_pfn(void)
{
	const char *base = "/sys/bus/pci/devices";
	unsigned long long start, end, flags;
	uint64_t pfn = 0;
	struct dirent *d;
	char path[512];
	DIR *dir = opendir(base);
	FILE *f;

	while (dir && !pfn && (d = readdir(dir))) {
		unsigned int cls = 0;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/class", base, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%x", &cls) != 1 || (cls >> 8) != 0x0300) {
			fclose(f);
			continue;
		}
		fclose(f);
		snprintf(path, sizeof(path), "%s/%s/resource", base, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fscanf(f, "%llx %llx %llx", &start, &end, &flags) == 3)
			if ((flags & 0x200) && start) {    /* IORESOURCE_MEM */
				pfn = start >> 12;
				break;
			}
		fclose(f);
	}
	if (dir)
		closedir(dir);
	return pfn;
}

/* ------------------------------------------------------------------------ */

static void check_transport(void)
{
	struct regs r = { .rax = 0x564d5868, .rbx = 0x1111222233334444ULL,
			  .rcx = VMB_CMD_GET_TARGET, .rsi = 0 };
	uint64_t rbx;

	call(&r);
	ok((uint32_t)r.rax == VMB_FAILURE && r.rbx == 0x1111222233334444ULL &&
	   r.rcx == VMB_CMD_GET_TARGET,
	   "wrong magic: FAILURE, RBX and RCX untouched (status %#" PRIx64
	   ", rbx %#" PRIx64 ", rcx %#" PRIx64 ")", r.rax, r.rbx, r.rcx);

	is_status(cmd(5, 0, 0, &rbx, NULL), VMB_ERROR_CMD_INVALID, "command 5");
	is_status(cmd(11, 0, 0, NULL, NULL), VMB_ERROR_CMD_INVALID, "command 11");
	is_status(cmd(0x7fffffff, 0, 0, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "command 0x7fffffff");
	is_status(cmd(0xffffffff00000000ULL | VMB_CMD_GUEST_ID, 1, 0, NULL, NULL),
		  VMB_SUCCESS, "GUEST_ID with garbage above ECX: ECX is read");
	is_status(cmd(VMB_CMD_GUEST_ID, 1, 0, NULL, NULL), VMB_SUCCESS,
		  "GUEST_ID(1)");
}

static void check_start(void)
{
	static const uint64_t asks[] = {
		0x3e, 0x3f, 0x02, 0x04, 0x0e, 0x20, 0x01, 0xffffffffULL,
		0xffffffff00000002ULL,
	};
	uint64_t rcx;
	uint32_t st;
	size_t i;

	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		rcx = 0xdeadbeefdeadbeefULL;
		st = cmd(VMB_CMD_START, asks[i], 0, NULL, &rcx);
		if (legacy) {
			is_status(st, VMB_SUCCESS, "legacy START");
			continue;
		}
		ok(st == VMB_SUCCESS_WITH_CAPABILITIES && rcx == grant_for(asks[i]),
		   "START(%#" PRIx64 ") with capabilities %#x: status %#x "
		   "granted %#" PRIx64 " (want %#x, %#x)", asks[i], dev_caps,
		   st, rcx, VMB_SUCCESS_WITH_CAPABILITIES, grant_for(asks[i]));
	}
	st = cmd(VMB_CMD_START, 0, 0, NULL, &rcx);
	if (legacy)
		is_status(st, VMB_SUCCESS, "legacy START(0)");
	else
		ok(st == VMB_SUCCESS_WITH_CAPABILITIES && rcx == 0,
		   "START(0): status %#x granted %#" PRIx64, st, rcx);
	is_status(cmd(VMB_CMD_LOCK, 0x100, 1, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "LOCK after START(0)");
}

static void check_target(void)
{
	uint64_t t, rbx, big = 1ULL << 40;
	uint32_t g = start(VMB_CAPS_ALL);
	uint32_t st;

	st = cmd(VMB_CMD_GET_TARGET, g & VMB_CAP_64BIT_TARGET ? big : 0xffffffffULL, 0, &t, NULL);
	is_status(st, VMB_SUCCESS, "GET_TARGET(no real limit)");
	diag("device target: %" PRIu64 " frames", t);
	if (want_target >= 0)
		ok(t == (uint64_t)want_target ||
		   (!(g & VMB_CAP_64BIT_TARGET) && t == 0xffffffffULL &&
		    (uint64_t)want_target > t),
		   "target is %" PRIu64 " (want %lld)", t, want_target);

	st = cmd(VMB_CMD_GET_TARGET, 1, 0, &rbx, NULL);
	ok(st == VMB_SUCCESS && rbx == (t < 1 ? t : 1),
	   "GET_TARGET(limit 1) clamps: %" PRIu64, rbx);
	if (t > 1) {
		st = cmd(VMB_CMD_GET_TARGET, t - 1, 0, &rbx, NULL);
		ok(st == VMB_SUCCESS && rbx == t - 1,
		   "GET_TARGET(limit target-1) returns %" PRIu64, rbx);
	} else {
		skip("target is 0 or 1 (set one with QMP balloon)",
		     "GET_TARGET(limit target-1)");
	}
	st = cmd(VMB_CMD_GET_TARGET, t + 1000, 0, &rbx, NULL);
	ok(st == VMB_SUCCESS && rbx == t,
	   "GET_TARGET(limit target+1000) returns the target %" PRIu64, rbx);

	/* Without 64_BIT_TARGET the limit is read as 32 bits and RBX is written
	 * whole: the garbage above bit 31 must be gone. */
	g = start(VMB_CAPS_ALL & ~VMB_CAP_64BIT_TARGET);
	st = cmd(VMB_CMD_GET_TARGET, 0xdeadbeef00000000ULL | 0x10, 0, &rbx, NULL);
	ok(st == VMB_SUCCESS && rbx == (t < 0x10 ? t : 0x10),
	   "no 64-bit cap: limit read as 32 bits, all of RBX written (%#" PRIx64
	   ")", rbx);

	if (t > 0xffffffffULL) {
		st = cmd(VMB_CMD_GET_TARGET, 0xffffffffULL, 0, &rbx, NULL);
		ok(st == VMB_SUCCESS && rbx == 0xffffffffULL,
		   "no 64-bit cap: target clamped to 32 bits (%#" PRIx64 ")",
		   rbx);
		g = start(VMB_CAPS_ALL);
		if (g & VMB_CAP_64BIT_TARGET) {
			st = cmd(VMB_CMD_GET_TARGET, big, 0, &rbx, NULL);
			ok(st == VMB_SUCCESS && rbx == t,
			   "64-bit target %#" PRIx64 " comes back whole (%#"
			   PRIx64 ")", t, rbx);
			st = cmd(VMB_CMD_GET_TARGET, (1ULL << 32) + 5, 0, &rbx, NULL);
			ok(st == VMB_SUCCESS && rbx == (1ULL << 32) + 5,
			   "64-bit limit 2^32+5 clamps (%#" PRIx64 ")", rbx);
		} else {
			skip("64_BIT_TARGET not granted", "64-bit target");
			skip("64_BIT_TARGET not granted", "64-bit limit");
		}
	} else {
		skip("target below 2^32 (qom-set x-target-frames to test)",
		     "no 64-bit cap: 32-bit clamp");
		skip("target below 2^32", "64-bit target");
		skip("target below 2^32", "64-bit limit");
	}
	(void)g;
}

/* LOCK/UNLOCK of single pages; @page/@pfn: an own page. */
static void check_single(uint64_t pfn, uint64_t pfn2)
{
	uint32_t g = start(VMB_CAPS_ALL);
	uint64_t rbx, t;

	cmd(VMB_CMD_GET_TARGET, 0, 0, &t, NULL);
	if (!(g & VMB_CAP_BASIC)) {
		is_status(cmd(VMB_CMD_LOCK, pfn, 1, NULL, NULL), VMB_ERROR_CMD_INVALID,
			  "LOCK without BASIC");
		is_status(cmd(VMB_CMD_UNLOCK, pfn, 1, NULL, NULL), VMB_ERROR_CMD_INVALID,
			  "UNLOCK without BASIC");
		return;
	}
	rbx = ~0ULL;
	is_status(cmd(VMB_CMD_LOCK, pfn, 1, &rbx, NULL), VMB_SUCCESS,
		  "LOCK(own page)");
	ok(rbx == t, "LOCK returns the target in RBX (%" PRIu64 ", want %"
	   PRIu64 ")", rbx, t);
	is_status(cmd(VMB_CMD_LOCK, pfn, 1, NULL, NULL), VMB_ERROR_PPN_LOCKED,
		  "LOCK(same page) again");
	is_status(cmd(VMB_CMD_UNLOCK, pfn, 1, &rbx, NULL), VMB_SUCCESS,
		  "UNLOCK(own page)");
	ok(rbx == t, "UNLOCK returns the target in RBX");
	is_status(cmd(VMB_CMD_UNLOCK, pfn, 1, NULL, NULL), VMB_ERROR_PPN_UNLOCKED,
		  "UNLOCK(same page) again");
	is_status(cmd(VMB_CMD_UNLOCK, pfn2, 1, NULL, NULL), VMB_ERROR_PPN_UNLOCKED,
		  "UNLOCK(never locked page)");
	is_status(cmd(VMB_CMD_LOCK, FAR_PFN, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "LOCK(PFN beyond RAM)");
	is_status(cmd(VMB_CMD_UNLOCK, FAR_PFN, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "UNLOCK(PFN beyond RAM)");
	is_status(cmd(VMB_CMD_LOCK, MMIO_PFN, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "LOCK(local APIC page)");
	if (vram_pfn)
		is_status(cmd(VMB_CMD_LOCK, vram_pfn, 1, NULL, NULL),
			  VMB_ERROR_PPN_INVALID, "LOCK(video memory: device RAM)");
	else
		skip("no PCI display device", "LOCK(video memory)");
	is_status(cmd(VMB_CMD_LOCK, BIOS_PFN, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "LOCK(BIOS ROM)");
	is_status(cmd(VMB_CMD_LOCK, ~0ULL, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "LOCK(PFN 2^64-1)");
	is_status(cmd(VMB_CMD_LOCK, (1ULL << 52) - 1, 1, NULL, NULL),
		  VMB_ERROR_PPN_INVALID, "LOCK(PFN 2^52-1)");

	/* PFN >= 2^32 without 64_BIT_TARGET: the low 32 bits are our own
	 * page, which must not be locked by mistake. */
	start(VMB_CAPS_ALL & ~VMB_CAP_64BIT_TARGET);
	is_status(cmd(VMB_CMD_LOCK, (1ULL << 32) | pfn, 1, NULL, NULL),
		  VMB_ERROR_PPN_INVALID, "LOCK(2^32 + own PFN) without 64-bit cap");
	is_status(cmd(VMB_CMD_UNLOCK, pfn, 1, NULL, NULL), VMB_ERROR_PPN_UNLOCKED,
		  "... and the own page was not locked");

	/* START forgets every lock. */
	start(VMB_CAPS_ALL);
	is_status(cmd(VMB_CMD_LOCK, pfn, 1, NULL, NULL), VMB_SUCCESS, "LOCK again");
	start(VMB_CAPS_ALL);
	is_status(cmd(VMB_CMD_LOCK, pfn, 1, NULL, NULL), VMB_SUCCESS,
		  "START forgot the lock: LOCK succeeds again");
	is_status(cmd(VMB_CMD_UNLOCK, pfn, 1, NULL, NULL), VMB_SUCCESS, "UNLOCK");
}

static uint64_t entry_status(uint64_t e)
{
	return e & 0x1f;
}

static void check_batch(uint64_t *batch, uint64_t batch_pfn, uint64_t *pfns)
{
	uint32_t g = start(VMB_CAPS_ALL);
	uint64_t rbx, t;
	uint32_t st;
	int i;

	cmd(VMB_CMD_GET_TARGET, 0, 0, &t, NULL);
	if (!(g & VMB_CAP_BATCHED)) {
		is_status(cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 0, NULL, NULL),
			  VMB_ERROR_CMD_INVALID, "BATCHED_LOCK without BATCHED");
		return;
	}

	/* mixed statuses */
	memset(batch, 0, PAGE);
	batch[0] = pfns[0] << 12;
	batch[1] = pfns[0] << 12;               /* locked by entry 0 */
	batch[2] = FAR_PFN << 12;
	batch[3] = (pfns[1] << 12) | 0x1f;      /* stale status bits */
	batch[4] = MMIO_PFN << 12;
	batch[5] = (pfns[2] << 12) | 0x20;      /* reserved bit 5 set */
	batch[6] = pfns[3] << 12;
	rbx = ~0ULL;
	st = cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 7, &rbx, NULL);
	is_status(st, VMB_SUCCESS, "BATCHED_LOCK of 7 mixed entries");
	ok(rbx == t, "BATCHED_LOCK returns the target (%" PRIu64 ")", rbx);
	ok(entry_status(batch[0]) == VMB_SUCCESS &&
	   entry_status(batch[1]) == VMB_ERROR_PPN_LOCKED &&
	   entry_status(batch[2]) == VMB_ERROR_PPN_INVALID &&
	   entry_status(batch[3]) == VMB_SUCCESS &&
	   entry_status(batch[4]) == VMB_ERROR_PPN_INVALID &&
	   entry_status(batch[5]) == VMB_ERROR_PPN_INVALID &&
	   entry_status(batch[6]) == VMB_SUCCESS,
	   "entry statuses %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	   " %" PRIu64 " %" PRIu64 " %" PRIu64 " (want 0 3 2 0 2 2 0)",
	   entry_status(batch[0]), entry_status(batch[1]),
	   entry_status(batch[2]), entry_status(batch[3]),
	   entry_status(batch[4]), entry_status(batch[5]),
	   entry_status(batch[6]));
	ok((batch[3] & ~0x1fULL) == pfns[1] << 12 &&
	   (batch[5] & ~0x1fULL) == ((pfns[2] << 12) | 0x20),
	   "the host changes only the status bits");

	is_status(cmd(VMB_CMD_LOCK, pfns[1], 1, NULL, NULL),
		  g & VMB_CAP_BASIC ? VMB_ERROR_PPN_LOCKED : VMB_ERROR_CMD_INVALID,
		  "single LOCK of a batch-locked page");

	memset(batch, 0, PAGE);
	batch[0] = pfns[0] << 12;
	batch[1] = pfns[1] << 12;
	batch[2] = pfns[2] << 12;               /* never locked */
	batch[3] = pfns[3] << 12;
	batch[4] = FAR_PFN << 12;
	st = cmd(VMB_CMD_BATCHED_UNLOCK, batch_pfn, 5, NULL, NULL);
	is_status(st, VMB_SUCCESS, "BATCHED_UNLOCK of 5 entries");
	ok(entry_status(batch[0]) == VMB_SUCCESS &&
	   entry_status(batch[1]) == VMB_SUCCESS &&
	   entry_status(batch[2]) == VMB_ERROR_PPN_UNLOCKED &&
	   entry_status(batch[3]) == VMB_SUCCESS &&
	   entry_status(batch[4]) == VMB_ERROR_PPN_INVALID,
	   "unlock statuses %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	   " %" PRIu64 " (want 0 0 4 0 2)",
	   entry_status(batch[0]), entry_status(batch[1]),
	   entry_status(batch[2]), entry_status(batch[3]),
	   entry_status(batch[4]));

	/* errors that override the whole batch */
	memset(batch, 0, PAGE);
	for (i = 0; i < 4; i++)
		batch[i] = pfns[i] << 12;
	is_status(cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 513, NULL, NULL), VMB_FAILURE,
		  "BATCHED_LOCK with 513 entries");
	is_status(cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 0xffffffffULL, NULL, NULL),
		  VMB_FAILURE, "BATCHED_LOCK with 2^32-1 entries");
	is_status(cmd(VMB_CMD_BATCHED_LOCK, FAR_PFN, 4, NULL, NULL), VMB_FAILURE,
		  "BATCHED_LOCK with the batch page beyond RAM");
	is_status(cmd(VMB_CMD_BATCHED_LOCK, MMIO_PFN, 4, NULL, NULL), VMB_FAILURE,
		  "BATCHED_LOCK with the batch page on the local APIC");
	is_status(cmd(VMB_CMD_BATCHED_LOCK, ~0ULL, 4, NULL, NULL), VMB_FAILURE,
		  "BATCHED_LOCK with batch page PFN 2^64-1");
	is_status(cmd(VMB_CMD_BATCHED_UNLOCK, batch_pfn, 4, NULL, NULL), VMB_SUCCESS,
		  "BATCHED_UNLOCK after the failed calls");
	ok(entry_status(batch[0]) == VMB_ERROR_PPN_UNLOCKED &&
	   entry_status(batch[1]) == VMB_ERROR_PPN_UNLOCKED &&
	   entry_status(batch[2]) == VMB_ERROR_PPN_UNLOCKED &&
	   entry_status(batch[3]) == VMB_ERROR_PPN_UNLOCKED,
	   "the failed batches locked nothing");
	is_status(cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 0, NULL, NULL), VMB_SUCCESS,
		  "BATCHED_LOCK with 0 entries");

	/* a full batch of 512 entries, all the same far PFN */
	for (i = 0; i < 512; i++)
		batch[i] = FAR_PFN << 12;
	st = cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 512, NULL, NULL);
	for (i = 0; i < 512 && entry_status(batch[i]) == VMB_ERROR_PPN_INVALID; i++)
		;
	ok(st == VMB_SUCCESS && i == 512,
	   "BATCHED_LOCK of 512 invalid entries: all PPN_INVALID");

	/* batched commands missing from the grant */
	if (g & VMB_CAP_BASIC) {
		start(VMB_CAP_BASIC);
		is_status(cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 0, NULL, NULL),
			  VMB_ERROR_CMD_INVALID, "BATCHED_LOCK with only BASIC granted");
		is_status(cmd(VMB_CMD_BATCHED_UNLOCK, batch_pfn, 0, NULL, NULL),
			  VMB_ERROR_CMD_INVALID,
			  "BATCHED_UNLOCK with only BASIC granted");
	}
	start(VMB_CAP_BATCHED);
	is_status(cmd(VMB_CMD_LOCK, pfns[0], 1, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "LOCK with only BATCHED granted");
	is_status(cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 0, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "BATCHED_2M_LOCK without BATCHED_2M");
	start(VMB_CAP_BATCHED_2M);
	is_status(cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 0, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "BATCHED_2M_LOCK with BATCHED_2M but not BATCHED");
}

static void check_2m(uint64_t *batch, uint64_t batch_pfn, uint64_t own_pfn)
{
	uint32_t g = start(VMB_CAPS_ALL);
	uint64_t hpfn = 0;
	void *huge;

	if ((g & (VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M)) != (VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M)) {
		is_status(cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 0, NULL, NULL),
			  VMB_ERROR_CMD_INVALID, "BATCHED_2M_LOCK not granted");
		is_status(cmd(VMB_CMD_BATCHED_2M_UNLOCK, batch_pfn, 0, NULL, NULL),
			  VMB_ERROR_CMD_INVALID, "BATCHED_2M_UNLOCK not granted");
		return;
	}

	memset(batch, 0, PAGE);
	batch[0] = (own_pfn | 1) << 12;             /* misaligned */
	batch[1] = (FAR_PFN & ~511ULL) << 12;       /* beyond RAM */
	batch[2] = 0;                               /* 0-2M: VGA, BIOS */
	batch[3] = (0xfee00ULL & ~511ULL) << 12;    /* MMIO */
	is_status(cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 4, NULL, NULL), VMB_SUCCESS,
		  "BATCHED_2M_LOCK of 4 bad entries");
	ok(entry_status(batch[0]) == VMB_ERROR_PPN_INVALID &&
	   entry_status(batch[1]) == VMB_ERROR_PPN_INVALID &&
	   entry_status(batch[2]) == VMB_ERROR_PPN_INVALID &&
	   entry_status(batch[3]) == VMB_ERROR_PPN_INVALID,
	   "misaligned, beyond RAM, low 2 MiB, MMIO: all PPN_INVALID (%"
	   PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 ")",
	   entry_status(batch[0]), entry_status(batch[1]),
	   entry_status(batch[2]), entry_status(batch[3]));
	is_status(cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 513, NULL, NULL), VMB_FAILURE,
		  "BATCHED_2M_LOCK with 513 entries");

	huge = own_huge_page(&hpfn);
	if (!huge) {
		skip("no 2 MiB page available", "2M lock of an own huge page");
		return;
	}
	diag("own 2 MiB page at PFN %#" PRIx64, hpfn);
	memset(batch, 0, PAGE);
	batch[0] = hpfn << 12;
	batch[1] = hpfn << 12;
	is_status(cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 2, NULL, NULL), VMB_SUCCESS,
		  "BATCHED_2M_LOCK of an own 2 MiB page, twice");
	ok(entry_status(batch[0]) == VMB_SUCCESS &&
	   entry_status(batch[1]) == VMB_ERROR_PPN_LOCKED,
	   "2M entries: SUCCESS then PPN_LOCKED (%" PRIu64 " %" PRIu64 ")",
	   entry_status(batch[0]), entry_status(batch[1]));
	if (g & VMB_CAP_BASIC) {
		is_status(cmd(VMB_CMD_LOCK, hpfn + 7, 1, NULL, NULL),
			  VMB_ERROR_PPN_LOCKED, "LOCK of a frame inside the 2 MiB lock");
		is_status(cmd(VMB_CMD_UNLOCK, hpfn + 7, 1, NULL, NULL),
			  VMB_ERROR_PPN_INVALID,
			  "UNLOCK of a frame inside the 2 MiB lock");
	}
	memset(batch, 0, PAGE);
	batch[0] = (hpfn + 3) << 12;
	is_status(cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 1, NULL, NULL), VMB_SUCCESS,
		  "4 KiB BATCHED_LOCK inside the 2 MiB lock");
	ok(entry_status(batch[0]) == VMB_ERROR_PPN_LOCKED, "... is PPN_LOCKED");
	memset(batch, 0, PAGE);
	batch[0] = hpfn << 12;
	batch[1] = hpfn << 12;
	is_status(cmd(VMB_CMD_BATCHED_2M_UNLOCK, batch_pfn, 2, NULL, NULL), VMB_SUCCESS,
		  "BATCHED_2M_UNLOCK of it, twice");
	ok(entry_status(batch[0]) == VMB_SUCCESS &&
	   entry_status(batch[1]) == VMB_ERROR_PPN_UNLOCKED,
	   "2M entries: SUCCESS then PPN_UNLOCKED (%" PRIu64 " %" PRIu64 ")",
	   entry_status(batch[0]), entry_status(batch[1]));

	/* 4 KiB locks inside a 2 MiB range: a 2M lock or unlock of it fails */
	memset(batch, 0, PAGE);
	batch[0] = (hpfn + 5) << 12;
	cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 1, NULL, NULL);
	memset(batch, 0, PAGE);
	batch[0] = hpfn << 12;
	cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, 1, NULL, NULL);
	ok(entry_status(batch[0]) == VMB_ERROR_PPN_LOCKED,
	   "2M lock over a locked 4 KiB frame: PPN_LOCKED (%" PRIu64 ")",
	   entry_status(batch[0]));
	batch[0] = hpfn << 12;
	cmd(VMB_CMD_BATCHED_2M_UNLOCK, batch_pfn, 1, NULL, NULL);
	ok(entry_status(batch[0]) == VMB_ERROR_PPN_INVALID,
	   "2M unlock of a range with a 4 KiB lock: PPN_INVALID (%" PRIu64
	   ")", entry_status(batch[0]));
	memset(batch, 0, PAGE);
	batch[0] = (hpfn + 5) << 12;
	cmd(VMB_CMD_BATCHED_UNLOCK, batch_pfn, 1, NULL, NULL);
	ok(entry_status(batch[0]) == VMB_SUCCESS, "4 KiB unlock of it");
	munlock(huge, HUGE);
}

static void check_doorbell(void)
{
	uint32_t g = start(VMB_CAPS_ALL);

	if (g & VMB_CAP_DOORBELL) {
		is_status(cmd(VMB_CMD_VMCI_DOORBELL_SET, 5, 7, NULL, NULL), VMB_SUCCESS,
			  "VMCI_DOORBELL_SET granted");
		is_status(cmd(VMB_CMD_VMCI_DOORBELL_SET, 0xffffffffULL, 0xffffffffULL,
			      NULL, NULL), VMB_SUCCESS,
			  "VMCI_DOORBELL_SET(invalid) unsets");
	} else {
		is_status(cmd(VMB_CMD_VMCI_DOORBELL_SET, 5, 7, NULL, NULL), VMB_ERROR_CMD_INVALID,
			  "VMCI_DOORBELL_SET not granted");
	}
}

static void check_legacy(uint64_t pfn)
{
	uint64_t rcx = 0x1234;
	uint32_t st = cmd(VMB_CMD_START, VMB_CAPS_ALL, 0, NULL, &rcx);

	ok(st == VMB_SUCCESS, "legacy START(0x3e): plain SUCCESS (%#x)", st);
	is_status(cmd(VMB_CMD_BATCHED_LOCK, pfn, 0, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "legacy: BATCHED_LOCK not available");
	is_status(cmd(VMB_CMD_LOCK, pfn, 1, NULL, NULL), VMB_SUCCESS,
		  "legacy: LOCK(own page)");
	is_status(cmd(VMB_CMD_UNLOCK, pfn, 1, NULL, NULL), VMB_SUCCESS,
		  "legacy: UNLOCK(own page)");
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	is_status(cmd(VMB_CMD_LOCK, pfn, 1, NULL, NULL), VMB_ERROR_CMD_INVALID,
		  "legacy: START(0) grants nothing");
}

/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t hold_released, lock_allowed;

static void release_hold(int sig)
{
	(void)sig;
	hold_released = 1;
}

static void allow_lock(int sig)
{
	(void)sig;
	lock_allowed = 1;
}

/* A word of page @page of the --reuse pattern: no page reads as another. */
static uint64_t reuse_word(size_t page, size_t word)
{
	return (page * 0x9e3779b97f4a7c15ULL) ^ (word + 1);
}

/* Fill @n pages at @mem with the --reuse pattern, or count those that hold it. */
static size_t reuse_pattern(char *mem, size_t n, bool write)
{
	size_t page, word, intact = 0;

	for (page = 0; page < n; page++) {
		uint64_t *w = (uint64_t *)(mem + page * PAGE);
		bool same = true;

		for (word = 0; word < PAGE / sizeof(*w); word++) {
			if (write)
				w[word] = reuse_word(page, word);
			else if (w[word] != reuse_word(page, word))
				same = false;
		}
		intact += same;
	}
	return intact;
}

static int hold(long mib, long seconds, bool lock_on_signal, bool reuse,
		bool sparse)
{
	struct sigaction sa = { .sa_handler = release_hold };
	struct sigaction go = { .sa_handler = allow_lock };
	sigset_t usr2, old;
	size_t n = (size_t)mib * 256, done = 0, locked = 0, unlocked = 0, i;
	size_t stride = sparse ? 2 : 1;
	char *mem = own_pages(n * stride);
	uint64_t *batch = own_pages(1);
	uint64_t batch_pfn = pfn_of(batch), buf;
	uint32_t g, st;

	if (lock_on_signal) {
		/* block SIGUSR2 until sigsuspend() so that none is missed */
		sigemptyset(&usr2);
		sigaddset(&usr2, SIGUSR2);
		sigprocmask(SIG_BLOCK, &usr2, &old);
		sigaction(SIGUSR2, &go, NULL);
		printf("hostcheck: touched %zu pages (%ld MiB)\n", n, mib);
		fflush(stdout);
		while (!lock_allowed)
			sigsuspend(&old);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	g = start(VMB_CAPS_ALL);

	if (!(g & VMB_CAP_BATCHED) || !batch_pfn) {
		fprintf(stderr, "hostcheck: BATCHED not granted or no PFN\n");
		return 1;
	}
	while (done < n) {
		size_t k = n - done < 512 ? n - done : 512;

		for (i = 0; i < k; i++)
			batch[i] = pfn_of(mem + (done + i) * stride * PAGE) << 12;
		st = cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, k, NULL, NULL);
		for (i = 0; st == VMB_SUCCESS && i < k; i++)
			locked += entry_status(batch[i]) == VMB_SUCCESS;
		done += k;
	}
	printf("hostcheck: locked %zu of %zu pages (%zu MiB)\n", locked, n,
	       locked / 256);
	if (reuse && !sparse) {
		/*
		 * The host releases locked memory shortly after the lock; a
		 * guest that reuses locked frames (a kexec'd kernel, say) does
		 * so long after.
		 */
		sleep(1);
		reuse_pattern(mem, n, true);
		printf("hostcheck: reused %zu pages the host counts as locked\n", n);
	}
	fflush(stdout);
	/* no SA_RESTART: the signal cuts sleep() and read() short */
	sigaction(SIGUSR1, &sa, NULL);
	if (seconds > 0) {
		unsigned int left = seconds;

		while (left && !hold_released)
			left = sleep(left);
	} else {
		while (!hold_released && read(0, &buf, sizeof(buf)) > 0)
			;
	}
	if (reuse && !sparse)
		printf("hostcheck: pattern intact in %zu of %zu pages\n",
		       reuse_pattern(mem, n, false), n);
	for (done = 0; done < n;) {
		size_t k = n - done < 512 ? n - done : 512;

		for (i = 0; i < k; i++)
			batch[i] = pfn_of(mem + (done + i) * stride * PAGE) << 12;
		st = cmd(VMB_CMD_BATCHED_UNLOCK, batch_pfn, k, NULL, NULL);
		for (i = 0; st == VMB_SUCCESS && i < k; i++)
			unlocked += entry_status(batch[i]) == VMB_SUCCESS;
		done += k;
	}
	printf("hostcheck: unlocked %zu of %zu pages\n", unlocked, n);
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	printf("hostcheck: unlocked, said goodbye\n");
	return 0;
}

static uint64_t now_ns(void);

static int lock_2m(long n)
{
	uint64_t *batch = own_pages(1), batch_pfn = pfn_of(batch), pfn, t;
	long k = 0, tries, locked = 0, i;
	uint32_t st;

	if (n < 1 || n > 512 || !batch_pfn ||
	    (start(VMB_CAPS_ALL) & (VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M)) !=
		    (VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M)) {
		fprintf(stderr, "hostcheck: N not 1..512, no PFN or BATCHED_2M not granted\n");
		return 1;
	}
	for (tries = 0; k < n && tries < 2 * n; tries++)
		if (own_huge_page(&pfn))
			batch[k++] = pfn << 12;
	t = now_ns();
	st = cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, k, NULL, NULL);
	t = now_ns() - t;
	for (i = 0; st == VMB_SUCCESS && i < k; i++)
		locked += entry_status(batch[i]) == VMB_SUCCESS;
	printf("hostcheck: BATCHED_2M_LOCK of %ld entries: status %#x, %ld locked, %" PRIu64 " ns\n",
	       k, st, locked, t);
	fflush(stdout);
	sleep(1);
	for (i = 0; i < k; i++)
		batch[i] &= ~0xfffULL;
	cmd(VMB_CMD_BATCHED_2M_UNLOCK, batch_pfn, k, NULL, NULL);
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	return 0;
}

static int lock_range(uint64_t first, long n)
{
	uint64_t *batch = own_pages(1), batch_pfn = pfn_of(batch);
	long done = 0, locked = 0, k, i;
	uint32_t st;

	if (n < 1 || !batch_pfn || !(start(VMB_CAPS_ALL) & VMB_CAP_BATCHED)) {
		fprintf(stderr, "hostcheck: N < 1, no PFN or BATCHED not granted\n");
		return 1;
	}
	while (done < n) {
		k = n - done < 512 ? n - done : 512;
		for (i = 0; i < k; i++)
			batch[i] = (first + done + i) << 12;
		st = cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, k, NULL, NULL);
		for (i = 0; st == VMB_SUCCESS && i < k; i++)
			locked += entry_status(batch[i]) == VMB_SUCCESS;
		done += k;
	}
	printf("hostcheck: locked %ld of %ld frames at %#" PRIx64 "\n", locked,
	       n, first);
	return 0;
}

static int lock_singly(long n)
{
	char *mem = own_pages(n);
	uint32_t st;
	long i;

	if (!(start(VMB_CAPS_ALL) & VMB_CAP_BASIC)) {
		fprintf(stderr, "hostcheck: START granted nothing\n");
		return 1;
	}
	for (i = 0; i < n; i++) {
		st = cmd(VMB_CMD_LOCK, pfn_of(mem + i * PAGE), 0, NULL, NULL);
		if (st != VMB_SUCCESS) {
			printf("hostcheck: lock %ld of %ld: status %#x\n", i + 1,
			       n, st);
			return 0;
		}
	}
	printf("hostcheck: locked %ld of %ld singly\n", n, n);
	for (i = 0; i < n; i++)
		cmd(VMB_CMD_UNLOCK, pfn_of(mem + i * PAGE), 0, NULL, NULL);
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median ns of @rounds BATCHED_LOCKs of 512 entries: @pfns, or own pages. */
static uint64_t batch_ns(uint64_t *batch, uint64_t batch_pfn,
			 const uint64_t *pfns, int rounds, bool unlock)
{
	uint64_t *ns = calloc(rounds, sizeof(*ns)), t, median;
	int r, i;

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 512; i++)
			batch[i] = pfns[i] << 12;
		t = now_ns();
		cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, 512, NULL, NULL);
		ns[r] = now_ns() - t;
		if (unlock) {
			for (i = 0; i < 512; i++)
				batch[i] = pfns[i] << 12;
			cmd(VMB_CMD_BATCHED_UNLOCK, batch_pfn, 512, NULL, NULL);
		}
	}
	qsort(ns, rounds, sizeof(*ns), cmp_u64);
	median = ns[rounds / 2];
	free(ns);
	return median;
}

static int time_batch(uint64_t first, int rounds)
{
	uint64_t *batch = own_pages(1), pfns[512], own[512], other, ram;
	uint64_t batch_pfn = pfn_of(batch);
	char *mem = own_pages(512);
	int i;

	if (rounds < 1 || !batch_pfn || !(start(VMB_CAPS_ALL) & VMB_CAP_BATCHED)) {
		fprintf(stderr, "hostcheck: no rounds, no PFN or BATCHED not granted\n");
		return 1;
	}
	for (i = 0; i < 512; i++) {
		pfns[i] = first + i;
		own[i] = pfn_of(mem + i * PAGE);
	}
	other = batch_ns(batch, batch_pfn, pfns, rounds, false);
	ram = batch_ns(batch, batch_pfn, own, rounds, true);
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	printf("hostcheck: 512-entry BATCHED_LOCK, median of %d: PFN %#" PRIx64
	       ": %" PRIu64 " ns, own RAM: %" PRIu64 " ns, ratio %.2f\n",
	       rounds, first, other, ram, ram ? (double)other / ram : 0.0);
	return 0;
}

/* Frames [first, first + n) must never be taken by the host. */
static int refused(uint64_t first, uint64_t n)
{
	uint64_t *batch = own_pages(1), own = pfn_of(own_pages(1));
	uint64_t batch_pfn = pfn_of(batch), head, i, k, bad;
	uint32_t g = start(VMB_CAPS_ALL), st;

	diag("frames %#" PRIx64 "..%#" PRIx64 " must be refused; granted %#x",
	     first, first + n - 1, g);
	if (!n || !own || !batch_pfn ||
	    (g & (VMB_CAP_BASIC | VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M)) !=
	    (VMB_CAP_BASIC | VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M)) {
		printf("Bail out! nothing to check, no own PFN, or the device "
		       "does not grant BASIC, BATCHED and BATCHED_2M\n");
		return 1;
	}
	is_status(cmd(VMB_CMD_LOCK, first, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "LOCK of the first frame");
	is_status(cmd(VMB_CMD_LOCK, first + n / 2, 1, NULL, NULL),
		  VMB_ERROR_PPN_INVALID, "LOCK of the middle frame");
	is_status(cmd(VMB_CMD_LOCK, first + n - 1, 1, NULL, NULL),
		  VMB_ERROR_PPN_INVALID, "LOCK of the last frame");
	is_status(cmd(VMB_CMD_UNLOCK, first, 1, NULL, NULL), VMB_ERROR_PPN_INVALID,
		  "UNLOCK of the first frame");

	/* a batch of up to 512 frames spread over the range */
	k = n < 512 ? n : 512;
	for (i = 0; i < k; i++)
		batch[i] = (first + i * (n / k)) << 12;
	st = cmd(VMB_CMD_BATCHED_LOCK, batch_pfn, k, NULL, NULL);
	for (i = 0, bad = 0; i < k; i++)
		bad += entry_status(batch[i]) != VMB_ERROR_PPN_INVALID;
	ok(st == VMB_SUCCESS && bad == 0,
	   "BATCHED_LOCK of %" PRIu64 " frames: all PPN_INVALID (status %#x, "
	   "%" PRIu64 " other)", k, st, bad);

	/* every 2 MiB page that lies wholly inside the range */
	head = (first + 511) & ~511ULL;
	for (k = 0; k < 512 && head + 512 <= first + n; head += 512)
		batch[k++] = head << 12;
	if (k) {
		st = cmd(VMB_CMD_BATCHED_2M_LOCK, batch_pfn, k, NULL, NULL);
		for (i = 0, bad = 0; i < k; i++)
			bad += entry_status(batch[i]) != VMB_ERROR_PPN_INVALID;
		ok(st == VMB_SUCCESS && bad == 0,
		   "BATCHED_2M_LOCK of %" PRIu64 " 2 MiB pages: all "
		   "PPN_INVALID (status %#x, %" PRIu64 " other)", k, st, bad);
	} else {
		skip("no whole 2 MiB page in the range", "BATCHED_2M_LOCK");
	}

	/* the batch page itself in that memory: the host must not use it */
	is_status(cmd(VMB_CMD_BATCHED_LOCK, first, 1, NULL, NULL), VMB_FAILURE,
		  "BATCHED_LOCK with the batch page there");

	/* ordinary RAM is still taken and given back */
	is_status(cmd(VMB_CMD_LOCK, own, 1, NULL, NULL), VMB_SUCCESS,
		  "LOCK of an own page of ordinary RAM");
	is_status(cmd(VMB_CMD_UNLOCK, own, 1, NULL, NULL), VMB_SUCCESS,
		  "UNLOCK of it");
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	printf("1..%d\n", tests);
	return failed ? 1 : 0;
}

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dULL;
}

/* A PFN that is surely not RAM. */
static uint64_t fuzz_bad_pfn(void)
{
	switch (rnd() % 5) {
	case 0:
		return FAR_PFN + rnd() % 4096;
	case 1:
		return rnd() | 1ULL << 63;          /* any huge value */
	case 2:
		return (1ULL << 52) - 1 - rnd() % 1024;
	case 3:
		return MMIO_PFN + rnd() % 16;
	default:
		return BIOS_PFN - rnd() % 64;       /* BIOS ROM */
	}
}

/* A PFN that is either our own or surely not RAM. */
static uint64_t fuzz_pfn(const uint64_t *own, size_t n_own, uint64_t huge)
{
	switch (rnd() % 9) {
	case 0: case 1: case 2:
		return own[rnd() % n_own];
	case 3:
		return huge ? huge + (rnd() % 4 ? 0 : rnd() % 512) : own[0];
	default:
		return fuzz_bad_pfn();
	}
}

/*
 * The fuzzer's model of what the host holds: the frames it may lock are
 * this process's own (the pages and the 2 MiB page), kept sorted for
 * lookup.  Not the batch page, which it writes before every call: the
 * host releases locked memory after the call that locked it, at a moment
 * the guest cannot know, so a locked batch page may lose the entries
 * written into it (a guest's bug, not the host's).  Every call's status, and every batch entry's, says
 * what the host did; the model follows them, so at the end the host's
 * x-locked-frames must equal the model's count.
 */
struct fuzz_model {
	uint64_t pfn[64 + 512];        /* sorted */
	bool locked[64 + 512];
	size_t n;
	bool huge_locked;               /* the 2 MiB page as one entry */
	uint64_t huge;
	unsigned long foreign;          /* frames the host took that are not ours */
};

static bool *model_frame(struct fuzz_model *m, uint64_t pfn)
{
	uint64_t *hit = bsearch(&pfn, m->pfn, m->n, sizeof(pfn), cmp_u64);

	return hit ? &m->locked[hit - m->pfn] : NULL;
}

static void model_forget(struct fuzz_model *m)
{
	memset(m->locked, 0, sizeof(m->locked));
	m->huge_locked = false;
}

/* One frame, or a 2 MiB entry, that the host says it locked or unlocked. */
static void model_apply(struct fuzz_model *m, uint64_t pfn, bool huge, bool lock)
{
	bool *frame = huge ? NULL : model_frame(m, pfn);

	if (huge && m->huge && pfn == m->huge) {
		m->huge_locked = lock;
	} else if (frame) {
		*frame = lock;
	} else if (lock) {
		m->foreign++;
		printf("# the host took frame %#" PRIx64 "%s, which is not ours\n",
		       pfn, huge ? " (2 MiB)" : "");
	}
}

static unsigned long model_locked_frames(const struct fuzz_model *m)
{
	unsigned long n = m->huge_locked ? 512 : 0;
	size_t i;

	for (i = 0; i < m->n; i++)
		n += m->locked[i];
	return n;
}

static int fuzz(long n, uint64_t seed, bool bye)
{
	enum { N_OWN = 32 };
	char *pages = own_pages(N_OWN + 1);
	uint64_t *batch = (uint64_t *)(pages + N_OWN * PAGE);
	uint64_t own[N_OWN], huge = 0, batch_pfn = pfn_of(batch);
	uint64_t sent[512];
	static struct fuzz_model m;
	unsigned long hist[10] = { 0 };
	long i;
	int k;

	rnd_state = seed ? seed : 0x9e3779b97f4a7c15ULL;
	for (k = 0; k < N_OWN; k++)
		own[k] = pfn_of(pages + k * PAGE);
	own_huge_page(&huge);
	m.huge = huge;
	for (k = 0; k < N_OWN; k++)
		m.pfn[m.n++] = own[k];
	for (k = 0; huge && k < 512; k++)
		m.pfn[m.n++] = huge + k;
	qsort(m.pfn, m.n, sizeof(m.pfn[0]), cmp_u64);
	/* whatever an earlier run left locked is forgotten */
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);

	for (i = 0; i < n; i++) {
		struct regs r = { .rax = VMB_MAGIC };
		uint64_t x = rnd(), arg1;
		uint32_t c, st, count;
		bool magic;

		r.rcx = x % 16 < 13 ? x % 16 : (uint32_t)rnd();
		if (rnd() % 64 == 0)
			r.rax = rnd();
		else if (rnd() % 8 == 0)
			r.rax |= rnd() << 32;       /* garbage above EAX */
		if (r.rcx == VMB_CMD_START || r.rcx == VMB_CMD_GET_TARGET ||
		    r.rcx == VMB_CMD_GUEST_ID || r.rcx == VMB_CMD_VMCI_DOORBELL_SET)
			r.rbx = rnd() % 4 ? rnd() % 64 : rnd();
		else if (r.rcx >= VMB_CMD_BATCHED_LOCK && r.rcx <= VMB_CMD_BATCHED_2M_UNLOCK)
			/* never an own page but the batch page itself: the
			 * contents of another would be taken as entries naming
			 * other memory of the guest */
			r.rbx = rnd() % 4 ? batch_pfn : fuzz_bad_pfn();
		else
			r.rbx = fuzz_pfn(own, N_OWN, huge);
		switch (rnd() % 4) {
		case 0: r.rsi = rnd(); break;
		case 1: r.rsi = 510 + rnd() % 5; break;
		default: r.rsi = rnd() % 40; break;
		}
		if (r.rbx == batch_pfn)
			for (k = 0; k < 512; k++) {
				uint64_t pfn = fuzz_pfn(own, N_OWN, huge);

				/* a 2 MiB entry at an own 4 KiB page would
				 * take the memory around it: misalign it */
				if (r.rcx >= VMB_CMD_BATCHED_2M_LOCK &&
				    pfn != huge && pfn % 512 == 0)
					pfn |= 1;
				sent[k] = pfn << 12 | (rnd() % 4 ? 0 : rnd() % 4096);
				batch[k] = sent[k];
			}
		c = (uint32_t)r.rcx;
		arg1 = r.rbx;
		count = (uint32_t)r.rsi;
		magic = (uint32_t)r.rax == VMB_MAGIC;
		call(&r);
		st = (uint32_t)r.rax;
		hist[st < 9 ? st : st == VMB_SUCCESS_WITH_CAPABILITIES ? 9 : 8]++;

		/* what the host did, as its answers say */
		if (!magic || st == VMB_ERROR_BUSY)
			continue;           /* nothing */
		if (c == VMB_CMD_START || st == VMB_ERROR_RESET) {
			/* every START forgets, even a failing one; so does a
			 * host restart */
			model_forget(&m);
		} else if (st == VMB_SUCCESS &&
			   (c == VMB_CMD_LOCK || c == VMB_CMD_UNLOCK)) {
			model_apply(&m, arg1, false, c == VMB_CMD_LOCK);
		} else if (st == VMB_SUCCESS && arg1 == batch_pfn &&
			   c >= VMB_CMD_BATCHED_LOCK &&
			   c <= VMB_CMD_BATCHED_2M_UNLOCK) {
			bool lock = c == VMB_CMD_BATCHED_LOCK ||
				    c == VMB_CMD_BATCHED_2M_LOCK;
			bool big = c >= VMB_CMD_BATCHED_2M_LOCK;

			/* statuses come back in the page; the PFNs are ours */
			for (k = 0; k < (int)count && k < 512; k++)
				if ((batch[k] & VMB_ENTRY_STATUS_MASK) == VMB_SUCCESS)
					model_apply(&m, sent[k] >> 12, big, lock);
		}
	}
	printf("hostcheck: %ld random calls; statuses: success %lu, "
	       "cmd-invalid %lu, ppn-invalid %lu, ppn-locked %lu, "
	       "ppn-unlocked %lu, pinned %lu, reset %lu, other %lu, "
	       "with-caps %lu\n", n, hist[0], hist[1], hist[2], hist[3],
	       hist[4], hist[5], hist[7], hist[6] + hist[8], hist[9]);
	printf("hostcheck: model: x-locked-frames %lu, x-locked-2m %d, foreign %lu\n",
	       model_locked_frames(&m), m.huge_locked, m.foreign);
	if (bye)
		cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	return rdi_clobbered || m.foreign;
}

static void usage(void)
{
	fprintf(stderr, "usage: hostcheck [--caps HEX] [--legacy] "
		"[--target FRAMES]\n"
		"       hostcheck --call CMD ARG1 ARG2\n"
		"       hostcheck --fuzz N [--seed S] [--no-bye]\n"
		"       hostcheck --hold MIB [--seconds S] [--lock-on-signal] [--reuse] [--sparse]\n"
		"       hostcheck --lock-2m N\n"
		"       hostcheck --lock-range PFN N\n"
		"       hostcheck --lock-singly N\n"
		"       hostcheck --time-batch PFN ROUNDS\n"
		"       hostcheck --refused PFN N\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long hold_mib = -1, seconds = 0, fuzz_n = -1, singly = -1, huge_n = -1;
	uint64_t seed = 0;
	bool bye = true, lock_on_signal = false, reuse = false, sparse = false;
	char **raw = NULL, **refuse = NULL, **timed = NULL, **range = NULL;
	uint64_t *batch, pfns[4];
	char *pages;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--caps") && i + 1 < argc)
			dev_caps = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--legacy"))
			legacy = true;
		else if (!strcmp(argv[i], "--target") && i + 1 < argc)
			want_target = strtoll(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold_mib = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--call") && i + 3 < argc)
			raw = &argv[i + 1], i += 3;
		else if (!strcmp(argv[i], "--refused") && i + 2 < argc)
			refuse = &argv[i + 1], i += 2;
		else if (!strcmp(argv[i], "--time-batch") && i + 2 < argc)
			timed = &argv[i + 1], i += 2;
		else if (!strcmp(argv[i], "--fuzz") && i + 1 < argc)
			fuzz_n = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--no-bye"))
			bye = false;
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--lock-on-signal"))
			lock_on_signal = true;
		else if (!strcmp(argv[i], "--reuse"))
			reuse = true;
		else if (!strcmp(argv[i], "--sparse"))
			sparse = true;
		else if (!strcmp(argv[i], "--lock-2m") && i + 1 < argc)
			huge_n = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--lock-range") && i + 2 < argc)
			range = &argv[i + 1], i += 2;
		else if (!strcmp(argv[i], "--lock-singly") && i + 1 < argc)
			singly = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtol(argv[++i], NULL, 0);
		else
			usage();
	}

	if (ioperm(VMB_PORT, 4, 1) != 0) {
		printf("Bail out! ioperm(0x%x): %s (run as root)\n", VMB_PORT,
		       strerror(errno));
		return 1;
	}
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
	if (pagemap_fd < 0) {
		printf("Bail out! /proc/self/pagemap: %s\n", strerror(errno));
		return 1;
	}
	if (hold_mib > 0)
		return hold(hold_mib, seconds, lock_on_signal, reuse, sparse);
	if (huge_n >= 0)
		return lock_2m(huge_n);
	if (range)
		return lock_range(strtoull(range[0], NULL, 0),
				  strtol(range[1], NULL, 0));
	if (fuzz_n >= 0)
		return fuzz(fuzz_n, seed, bye);
	if (singly > 0)
		return lock_singly(singly);
	if (timed)
		return time_batch(strtoull(timed[0], NULL, 0),
				  (int)strtol(timed[1], NULL, 0));
	if (refuse)
		return refused(strtoull(refuse[0], NULL, 0),
			       strtoull(refuse[1], NULL, 0));
	if (raw) {
		uint64_t rbx, rcx;
		uint32_t st = cmd(strtoull(raw[0], NULL, 0),
				  strtoull(raw[1], NULL, 0),
				  strtoull(raw[2], NULL, 0), &rbx, &rcx);

		printf("status=%#x rbx=%#" PRIx64 " rcx=%#" PRIx64 "\n", st, rbx,
		       rcx);
		return 0;
	}

	vram_pfn = find_vram_pfn();
	pages = own_pages(6);
	batch = (uint64_t *)(pages + 5 * PAGE);
	for (i = 0; i < 4; i++)
		pfns[i] = pfn_of(pages + i * PAGE);
	if (!pfns[0] || !pfn_of(batch)) {
		printf("Bail out! no PFNs in /proc/self/pagemap (not root?)\n");
		return 1;
	}
	diag("device capabilities %#x%s; own PFNs %#" PRIx64 " %#" PRIx64
	     " %#" PRIx64 " %#" PRIx64 ", batch page %#" PRIx64, dev_caps,
	     legacy ? " (legacy)" : "", pfns[0], pfns[1], pfns[2], pfns[3],
	     pfn_of(batch));

	/*
	 * A host that was reset (any reset but a wake-up from S3) answers
	 * RESET to everything but START until a START: a guest's first call
	 * after its boot.  The checks start from a host that has had one.
	 */
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	check_transport();
	check_start();
	if (legacy) {
		check_legacy(pfns[0]);
	} else {
		check_target();
		check_single(pfns[0], pfns[1]);
		check_batch(batch, pfn_of(batch), pfns);
		check_2m(batch, pfn_of(batch), pfns[0]);
		check_doorbell();
	}
	ok(!rdi_clobbered, "RDI is never touched");

	/* goodbye: forget everything we may have left locked */
	cmd(VMB_CMD_START, 0, 0, NULL, NULL);
	printf("1..%d\n", tests);
	if (failed)
		diag("%d of %d checks failed", failed, tests);
	return failed ? 1 : 0;
}
