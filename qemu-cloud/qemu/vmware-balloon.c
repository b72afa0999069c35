/*
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * vmware-balloon: the hypervisor side of VMware's memory-balloon protocol
 *
 * Written for the vmw-balloon-dkms project so that its guest driver can be
 * tested end to end under QEMU.  The wire protocol is described in the
 * project's protocol reference (one "inl" on I/O port 0x5670, magic
 * 0x456c6d6f in EAX, command in ECX, arguments in EBX and ESI, status back
 * in EAX, the balloon target in RBX, START's granted capabilities in RCX).
 *
 * Usage:  -device vmware-balloon,id=vmb0[,capabilities=0x2e][,x-legacy=on]
 * It is an ISA device (the pc machine has an ISA bus) and registers as
 * QEMU's balloon handler, so HMP "balloon N" / "info balloon" and QMP
 * "balloon" / "query-balloon" work as for virtio-balloon: the value given is
 * the memory the guest should keep.  Only one balloon device may exist.
 * The device migrates (and so allows savevm), see "Migration" below.
 *
 * The public interface is the "capabilities" property and QMP balloon /
 * query-balloon (and the BALLOON_CHANGE event, sent when the balloon moves,
 * as virtio-balloon sends it).  Everything else is for testing and
 * debugging, hence "x-": it may change at any time.
 *
 *   capabilities    uint32, default 0x2e, fixed at creation.  START grants
 *                   arg1 & capabilities.  Only bits 1-5 (0x3e) are
 *                   defined: realize fails for any other bit.  0x10 (VMCI
 *                   doorbell) is off by default: QEMU has no VMCI.
 *   x-legacy        bool, default off, fixed at creation.  Answer START
 *                   like a protocol-v2 host: plain SUCCESS, nothing written
 *                   to RCX, BASIC granted (nothing at all for START(0)).
 *
 * Read/write at run time (qom-get / qom-set on /machine/peripheral/<id>;
 * they may also be given with -device):
 *   x-offered-capabilities  uint32: "capabilities", changed while the
 *                   guest runs; the next START grants from it (send a
 *                   reset to make the guest ask again).
 *   x-target-frames uint64: the balloon target in 4 KiB frames.  QMP
 *                   "balloon" sets it to (RAM - value) / 4096, RAM being
 *                   the size x-ram-frames shows; qom-set may set anything
 *                   (e.g. beyond 32 bits).  Not changed by a guest reset.
 *
 * Fault injection (read/write at run time):
 *   x-reset-next    bool: the next command returns RESET (7).
 *   x-reset-every   uint32 N: every Nth command returns RESET; 0 = off.
 *                   Commands are counted from 1 over all calls with the
 *                   right magic.
 *                   Returning RESET makes the device behave like a host
 *                   that restarted: every lock is forgotten, nothing is
 *                   granted, and every command but START returns RESET
 *                   until the guest sends START.
 *   x-busy-next     bool: the next command returns BUSY (8), doing nothing.
 *   x-busy-every    uint32 N: every Nth command returns BUSY; 0 = off.
 *   x-refuse-every  uint32 N: every Nth frame the guest asks to lock (a
 *                   single LOCK, or one batch entry, 4 KiB or 2 MiB) is
 *                   refused with x-refuse-status instead of being locked;
 *                   0 = off.  Only requests for valid guest RAM count.
 *   x-refuse-status uint32, default 5 (PPN_PINNED): the status used for
 *                   refused frames.  Only the error statuses a batch
 *                   entry's 5-bit status field can hold are accepted,
 *                   1 (CMD_INVALID) to 8 (BUSY); setting anything else
 *                   fails and keeps the old value.
 *   x-fail-start    uint32 N: the next N START calls return FAILURE (-1);
 *                   after a failed START every other command returns RESET
 *                   until a START succeeds.
 *   x-reset-at-locked  uint64 N: the first LOCK command (single or
 *                   batched) after which the host holds at least N 4 KiB
 *                   frames locked (a 2 MiB entry counts 512) makes the
 *                   host restart at that point, as x-reset-next does:
 *                   every lock is forgotten, that command returns RESET (a
 *                   batch stops there and gets no entry statuses written),
 *                   and so does every command until the next START.  Then
 *                   the property is back at 0 (one shot); 0 = off.  This
 *                   puts a RESET at a fixed point of an inflation, however
 *                   fast the driver is.
 *   x-fail-discards uint32 N: the next N releases of locked memory fail
 *                   as if the host refused them (see the retry rule
 *                   below); 0 = off.
 *   Priority: pending RESET, x-reset-next, x-reset-every, x-busy-next,
 *   x-busy-every, then the command itself.
 *
 * Read-only counters (plain integers):
 *   x-locked-frames   4 KiB frames currently locked (a 2M entry is 512)
 *   x-locked-2m       2 MiB entries currently locked
 *   x-granted-capabilities  what the last START granted (0 after a reset)
 *   x-guest-id        last GUEST_ID argument
 *   x-doorbell-cid, x-doorbell-rid  last VMCI_DOORBELL_SET arguments
 *   x-resets-sent     RESET statuses returned
 *   x-busy-sent       BUSY statuses returned
 *   x-start-zero      START calls with arg1 == 0 (a driver saying bye)
 *   x-calls-<cmd>, x-failures-<cmd>  per command: calls, and calls whose
 *                     status was not SUCCESS (SUCCESS_WITH_CAPABILITIES
 *                     counts as success); <cmd> is one of start, target,
 *                     lock, unlock, guest-id, batch-lock, batch-unlock,
 *                     2m-lock, 2m-unlock, doorbell-set
 *   x-calls-unknown   commands 5 and >= 11 (answered CMD_INVALID)
 *   x-bad-magic       port reads with a wrong magic (answered FAILURE,
 *                     nothing else changes)
 *   x-refused-frames  lock requests refused through x-refuse-every
 *   x-discarded-frames  4 KiB frames whose host memory was released
 *   x-ram-frames      the guest's RAM size in 4 KiB frames: boot RAM plus
 *                     plugged pc-dimm devices (not NVDIMM, virtio-pmem or
 *                     virtio-mem memory)
 *   x-ram-classified  RAM blocks classified as guest RAM or not: once per
 *                     block mapped, never per port call
 *   x-discard-max-ns  the longest time one run of the bottom half that
 *                     releases locked memory took, in ns
 *   x-lock-resident-frames  frames the host had resident (mincore) when
 *                     the guest locked them, summed over every lock: host
 *                     memory that stayed in use until the lock gave it
 *                     back (memory the guest used, or zeroed to allocate)
 *   x-lock-resident-peak  the most frames one LOCK command (single or
 *                     batched) found resident; writable, so that a client
 *                     can start a new measurement with 0
 *   x-backed-locked-frames  locked frames whose host memory is resident
 *                     now, counted on each read (one mincore per run of
 *                     locked frames): what a lock has not given back yet
 *
 * Trace events (hw/i386/trace-events, "vmware_balloon_*"): every call with
 * its status and the target returned, START's grant, batches, each frame
 * locked or unlocked, host restarts, resets, each release of host memory
 * and each one skipped, targets set, and what migration saves and loads.
 *
 * Rules the device applies:
 *   - GET_TARGET returns the target clamped to arg1 (the guest's RAM in
 *     frames; 0 means "no limit from the guest", the RAM size is used).
 *     LOCK/UNLOCK and the batched commands return the same value, clamped
 *     by the last limit seen.  Without 64_BIT_TARGET (or outside 64-bit
 *     mode) the target is clamped to 32 bits and the limit is read as 32
 *     bits.  The command (ECX) and arg2 (ESI) are always read as 32 bits,
 *     arg1 as the whole RBX in 64-bit mode.
 *   - Every frame must be ordinary guest RAM: the machine's RAM (including
 *     NUMA nodes' memory) or a plugged pc-dimm.  Not MMIO, ROM, read-only
 *     memory, device RAM such as video memory, or absent memory; and not
 *     memory that is not the guest's alone: ivshmem (shared with other
 *     processes), NVDIMM and virtio-pmem (host files), virtio-mem and any
 *     other region with a RAM discard manager (its device decides what is
 *     backed).  Those are PPN_INVALID and nothing is discarded; the batch
 *     page must be ordinary guest RAM too.  Which RAM blocks are ordinary
 *     guest RAM is decided once per block, when it is mapped; a DIMM
 *     unplugged takes the locks of its frames with it, so "actual" stays
 *     the guest's RAM less what it really handed over.  The whole 2 MiB
 *     must be such RAM for 2M entries, which must be 2 MiB aligned.  A
 *     single LOCK/UNLOCK PFN >= 2^32 is PPN_INVALID unless 64_BIT_TARGET
 *     was granted, and a batch page there fails the batch (FAILURE) by the
 *     same rule.  Batch entries with bits 5-11 set are PPN_INVALID.
 *     Unlocking one 4 KiB frame of a locked 2 MiB entry, or a 2 MiB range
 *     that holds 4 KiB locks, is PPN_INVALID.
 *   - A batch page outside RAM or more than 512 entries: FAILURE, nothing
 *     done.  Per-entry statuses go into bits 0-4 of each entry.
 *   - Locked frames have their host memory discarded (unless discards are
 *     disabled, e.g. by VFIO); unlocked ones refault as zero pages.  The
 *     port call only records the lock; a bottom half releases the memory
 *     soon after, in runs of at most about a millisecond, so that a
 *     BATCHED_2M_LOCK of 1 GiB does not hold the BQL while the host frees
 *     it.  It releases only what is still locked when it gets to it.
 *     RAM with host pages larger than the lock (hugetlbfs) is released a
 *     whole host page at a time, once every 4 KiB frame of it is locked.  RAM
 *     that is a private mapping of a file (memory-backend-file,share=off)
 *     only loses QEMU's private copies of the pages (madvise DONTNEED):
 *     the file is never written or punched, and unlocked frames read as
 *     the file's contents again.  Shared RAM (share=on, memfd) is the
 *     guest's own, and is discarded like anonymous RAM, as virtio-balloon
 *     does.
 *   - START forgets every lock.  A guest reset (system_reset, and any
 *     reset but the wake-up one) forgets every lock and the grant but keeps
 *     the target, and every command but START answers RESET until START:
 *     a reset while the guest is suspended to RAM (running or stopped) may
 *     be taken by the firmware for a wake-up that resumes the guest.  Suspend
 *     to RAM and the wake-up (system_wakeup, a reset of type
 *     RESET_TYPE_WAKEUP) keep everything: the guest kept its memory.  A
 *     suspended guest migrates as such, and its wake-up on the new host is
 *     that same kind of reset, so nothing about sleep needs to travel.
 *   - What a guest gets wrong (bad batch pages, invalid entries, ...) is
 *     logged as a guest error (-d guest_errors), host memory it fails to
 *     release as a warning; both at most 10 messages a minute, so that a
 *     guest cannot flood the host's log.  A RAM block whose memory cannot
 *     be released is tried again after a pause (1 s, doubling with each
 *     failure in a row) and given up after 8 failures in a row; frames
 *     locked during a pause keep their memory.
 *
 * Migration (and savevm/loadvm): the protocol state moves whole: the grant,
 * a pending RESET, the target, the guest's last limit, GUEST_ID and doorbell
 * arguments, and the set of locked frames (4 KiB frames and the heads of
 * 2 MiB entries).  The guest does not notice the move: its locks stay
 * locked and it unlocks them later as usual.  The other way, answering
 * RESET after the move, would look simpler but make every guest throw its
 * whole balloon back and inflate it again right after each migration: a
 * burst of guest activity and memory churn on the new host just when it is
 * least welcome, and a savevm snapshot would not restore the balloon it
 * was taken with.  Loading releases no memory: a lock the host holds is
 * not proof that the guest still leaves the frame alone (a kexec'd kernel,
 * or a driver that died without saying goodbye, uses frames the host
 * still counts as locked), and releasing them again would wipe live guest
 * data on the destination.  virtio-balloon does the same.  After an
 * incoming migration this costs nothing (released memory travels as zero
 * pages, which a new QEMU never allocates); a loadvm into a running guest
 * writes the saved contents back, and that memory stays until the guest
 * unlocks and locks those frames again.
 * The state is standard VMState fields (version 3; older streams are not
 * accepted), compact (8 bytes per 2 MiB entry, at most a bit per frame for
 * 4 KiB locks), and checked whole when loaded: a stream whose locks are
 * not ordinary guest RAM, not aligned, out of order or do not add up fails
 * the load with the reason, see vmb_load_locks().  Counters (x-calls-*,
 * x-discarded-frames, ...) and the fault injection settings are the
 * host's and start afresh; capabilities and x-legacy come from the new
 * device's own properties: if it would not grant what the guest holds, it
 * answers RESET and the guest starts over.  A load ends with a
 * BALLOON_CHANGE event, so that QMP clients learn the loaded balloon.
 * Checking the locks costs a binary search in a map of guest RAM built
 * once per load, not a memory map lookup per run of locked frames.
 *
 * While an incoming postcopy migration or a background snapshot runs, a
 * LOCK only records the lock and releases no memory (as virtio-balloon
 * does): both need the guest's memory to stay where it is.
 *
 * This work is licensed under the terms of the GNU GPL, version 2 or later.
 */

#include "qemu/osdep.h"
#include "qemu/bitmap.h"
#include "qemu/bitops.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "qemu/madvise.h"
#include "qemu/main-loop.h"
#include "qemu/rcu.h"
#include "qapi/error.h"
#include "qapi/qapi-events-machine.h"
#include "qapi/qapi-types-machine.h"
#include "hw/isa/isa.h"
#include "hw/qdev-properties.h"
#include "hw/resettable.h"
#include "hw/boards.h"
#include "hw/mem/pc-dimm.h"
#include "qemu/timer.h"
#include "qapi/visitor.h"
#include "migration/vmstate.h"
#include "migration/misc.h"
#include "system/balloon.h"
#include "system/hostmem.h"
#include "system/hw_accel.h"
#include "system/runstate.h"
#include "exec/address-spaces.h"
#include "exec/cpu-common.h"
#include "exec/memory.h"
#include "cpu.h"
#include "qom/object.h"
#include "trace.h"

#define TYPE_VMWARE_BALLOON "vmware-balloon"
OBJECT_DECLARE_SIMPLE_TYPE(VMBalloonState, VMWARE_BALLOON)

/* The protocol's numbers, shared with the guest driver */
#include "hw/i386/vmware-balloon-wire.h"

#define VMB_IO_SIZE         4
#define VMB_FRAME_SIZE      (1ULL << VMB_FRAME_SHIFT)
#define VMB_CAP_DEFAULT     0x2eu   /* all but the doorbell: no VMCI here */

/* Counter names; NULL marks a command number that does not exist. */
static const char *const vmb_cmd_name[VMB_CMD_NUM] = {
    [VMB_CMD_START]        = "start",
    [VMB_CMD_GET_TARGET]       = "target",
    [VMB_CMD_LOCK]         = "lock",
    [VMB_CMD_UNLOCK]       = "unlock",
    [VMB_CMD_GUEST_ID]     = "guest-id",
    [VMB_CMD_BATCHED_LOCK]   = "batch-lock",
    [VMB_CMD_BATCHED_UNLOCK] = "batch-unlock",
    [VMB_CMD_BATCHED_2M_LOCK]      = "2m-lock",
    [VMB_CMD_BATCHED_2M_UNLOCK]    = "2m-unlock",
    [VMB_CMD_VMCI_DOORBELL_SET] = "doorbell-set",
};

/*
 * A set of guest frame numbers: bitmaps of 2^15 frames (128 MiB of guest
 * memory) each, created on first use and looked up by frame >> 15.  Any
 * 64-bit frame number can be stored, and a 2 MiB aligned range never
 * straddles two bitmaps.
 */
#define VMB_CHUNK_SHIFT     15
#define VMB_CHUNK_FRAMES    (1UL << VMB_CHUNK_SHIFT)

typedef struct VMBFrameSet {
    GHashTable *chunks;     /* uint64_t * chunk number -> unsigned long * */
} VMBFrameSet;

static void vmb_frames_init(VMBFrameSet *set)
{
    set->chunks = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                        g_free, g_free);
}

static void vmb_frames_destroy(VMBFrameSet *set)
{
    if (set->chunks) {
        g_hash_table_destroy(set->chunks);
        set->chunks = NULL;
    }
}

static void vmb_frames_clear_all(VMBFrameSet *set)
{
    g_hash_table_remove_all(set->chunks);
}

/* The bitmap holding @frame, NULL if none yet and !@create. */
static unsigned long *vmb_frames_chunk(VMBFrameSet *set, uint64_t frame,
                                       bool create)
{
    uint64_t key = frame >> VMB_CHUNK_SHIFT;
    unsigned long *bits = g_hash_table_lookup(set->chunks, &key);

    if (!bits && create) {
        uint64_t *k = g_new(uint64_t, 1);

        *k = key;
        bits = bitmap_new(VMB_CHUNK_FRAMES);
        g_hash_table_insert(set->chunks, k, bits);
    }
    return bits;
}

/*
 * Number of frames of [frame, frame + n) in the set; the range is 1 frame
 * or an aligned 2 MiB range, so it lies in one chunk.
 */
static uint64_t vmb_frames_count(VMBFrameSet *set, uint64_t frame,
                                 unsigned long n)
{
    unsigned long *bits = vmb_frames_chunk(set, frame, false);
    unsigned long first = frame & (VMB_CHUNK_FRAMES - 1);
    unsigned long i, count = 0;

    if (!bits) {
        return 0;
    }
    for (i = find_next_bit(bits, first + n, first); i < first + n;
         i = find_next_bit(bits, first + n, i + 1)) {
        count++;
    }
    return count;
}

/* Is every frame of [frame, frame + n) in the set?  Any range. */
static bool vmb_frames_all_set(VMBFrameSet *set, uint64_t frame, uint64_t n)
{
    uint64_t end = frame + n;

    if (end < frame) {
        return false;
    }
    while (frame < end) {
        uint64_t chunk_end = (frame | (VMB_CHUNK_FRAMES - 1)) + 1;
        unsigned long *bits = vmb_frames_chunk(set, frame, false);
        unsigned long first = frame & (VMB_CHUNK_FRAMES - 1);
        unsigned long last = first + (MIN(end, chunk_end) - frame);

        if (!bits || find_next_zero_bit(bits, last, first) < last) {
            return false;
        }
        frame = MIN(end, chunk_end);
    }
    return true;
}

static void vmb_frames_set(VMBFrameSet *set, uint64_t frame, unsigned long n)
{
    bitmap_set(vmb_frames_chunk(set, frame, true),
               frame & (VMB_CHUNK_FRAMES - 1), n);
}

static void vmb_frames_clear(VMBFrameSet *set, uint64_t frame,
                             unsigned long n)
{
    unsigned long *bits = vmb_frames_chunk(set, frame, false);

    if (bits) {
        bitmap_clear(bits, frame & (VMB_CHUNK_FRAMES - 1), n);
    }
}

/*
 * What the device knows of a RAM block mapped into guest memory, decided
 * once when it appears (vmb_classify_ram): whether it is ordinary guest
 * RAM, and how much of it a pc-dimm adds to the guest's RAM.  @sections
 * counts its sections in the flat view: the block is forgotten when the
 * last one goes.
 */
typedef struct VMBRamBlock {
    bool guest_ram;
    uint64_t dimm_bytes;
    unsigned int sections;
} VMBRamBlock;

/* A range of guest frames */
typedef struct VMBFrameRange {
    uint64_t frame;
    uint64_t nframes;
} VMBFrameRange;

/*
 * A RAM block whose memory could not be released: it is tried again after
 * a pause that doubles with each failure, and given up after
 * VMB_DISCARD_MAX_FAILURES failures in a row.
 */
typedef struct VMBDiscardFailure {
    unsigned int failures;
    int64_t retry_at_ms;        /* QEMU_CLOCK_REALTIME; INT64_MAX: given up */
} VMBDiscardFailure;

#define VMB_DISCARD_RETRY_MS        1000
#define VMB_DISCARD_MAX_FAILURES    8

/*
 * Locked memory is released by a bottom half, not by the port call that
 * locked it, and each run of the bottom half stops after this much time
 * (and goes on in the next main loop iteration): a BATCHED_2M_LOCK names
 * up to 1 GiB, which the host may take tens of milliseconds to release.
 */
#define VMB_DISCARD_SLICE_NS        (1 * SCALE_MS)

/* A range of guest RAM unmapped during a memory topology update */
typedef struct VMBRamRange {
    RAMBlock *block;
    uint64_t frame;
    uint64_t nframes;
} VMBRamRange;

struct VMBalloonState {
    ISADevice parent_obj;

    MemoryRegion io;
    bool handler_registered;

    /* set at creation */
    uint32_t capabilities;
    bool legacy;

    /* protocol state */
    uint32_t granted;
    bool reset_pending;         /* every command but START returns RESET */
    uint64_t target_frames;
    uint64_t last_limit;        /* last GET_TARGET arg1, 0 = none */
    uint64_t guest_id;
    uint64_t doorbell_cid;
    uint64_t doorbell_rid;
    VMBFrameSet locked;         /* every locked 4 KiB frame */
    VMBFrameSet heads;          /* first frames of locked 2 MiB entries */
    uint64_t locked_frames;
    uint64_t locked_2m;

    /* counters */
    uint64_t granted_caps;      /* property view of 'granted' */
    uint64_t calls[VMB_CMD_NUM];
    uint64_t failures[VMB_CMD_NUM];
    uint64_t calls_unknown;
    uint64_t bad_magic;
    uint64_t start_zero;
    uint64_t resets_sent;
    uint64_t busy_sent;
    uint64_t refused_frames;
    uint64_t discarded_frames;
    uint64_t lock_resident_frames;  /* x-lock-resident-frames */
    uint64_t lock_resident_peak;    /* x-lock-resident-peak */
    uint64_t lock_resident_call;    /* resident frames locked, this call */
    uint64_t commands;          /* for x-reset-every / x-busy-every */
    uint64_t lock_requests;     /* for x-refuse-every */

    /* fault injection */
    bool reset_next;
    bool busy_next;
    uint32_t reset_every;
    uint32_t busy_every;
    uint32_t refuse_every;
    uint32_t refuse_status;
    uint32_t fail_start;
    uint64_t reset_at_locked;   /* 0 = off */
    bool restart_due;           /* reset_at_locked was reached, this call */

    /* the log rate limit, see vmb_log() */
    int64_t log_window_start;   /* QEMU_CLOCK_REALTIME, ms */
    unsigned int log_in_window;
    uint64_t log_suppressed;

    /* releasing locked memory, see vmb_discard_bh() */
    GArray *discards;           /* VMBFrameRange: locked, to be released */
    guint discards_next;        /* the first of them not done yet */
    QEMUBH *discard_bh;
    uint64_t discard_max_ns;    /* x-discard-max-ns: longest run */
    GHashTable *no_discard;     /* idstr -> VMBDiscardFailure */
    uint32_t fail_discards;     /* x-fail-discards */
    uint64_t reset_locked_before;   /* locked_frames before a reset */

    /* the RAM blocks mapped into guest memory, see vmb_ram_region_add() */
    MemoryListener ram_listener;
    GHashTable *ram_blocks;     /* RAMBlock * -> VMBRamBlock * */
    GArray *ram_gone;           /* VMBRamRange: unmapped during an update */
    uint64_t ram_bytes;         /* boot RAM + plugged pc-dimms */
    uint64_t ram_classified;    /* RAM blocks classified (x-ram-classified) */

    /* the locks in the migration stream, see vmb_pre_save() */
    uint32_t mig_nheads;
    uint64_t *mig_heads;
    uint32_t mig_nblocks;
    uint64_t *mig_blocks;
    uint32_t mig_bitmap_bytes;
    uint8_t *mig_bitmaps;
};

/* One decoded port call. */
typedef struct VMBCall {
    uint64_t cmd;
    uint64_t arg1;
    uint64_t arg2;
    bool wide;          /* the vCPU runs 64-bit code: registers are 64 bits */
    bool set_rbx;
    bool set_rcx;
    uint64_t rbx;
    uint64_t rcx;
} VMBCall;

/*
 * The guest's ordinary RAM: what the machine booted with plus every
 * plugged pc-dimm (kept up to date by vmb_ram_commit()).  NVDIMMs,
 * virtio-pmem and virtio-mem are memory the balloon never takes (see
 * vmb_classify_ram), so they take no part in targets either.
 */
static uint64_t vmb_ram_size(VMBalloonState *s)
{
    return s->ram_bytes;
}

/*
 * Report something a guest can cause (bad arguments, or host failures that
 * a guest can make happen over and over).  A guest may do that thousands of
 * times a second, so at most VMB_LOG_BURST messages go out per
 * VMB_LOG_WINDOW_MS; the rest are counted and the count is reported when
 * the next window opens.  Guest mistakes are LOG_GUEST_ERROR (shown with
 * "-d guest_errors"); host failures are warnings.
 */
#define VMB_LOG_BURST       10
#define VMB_LOG_WINDOW_MS   60000

static void G_GNUC_PRINTF(3, 4) vmb_log(VMBalloonState *s, bool guest_error,
                                        const char *fmt, ...)
{
    int64_t now = qemu_clock_get_ms(QEMU_CLOCK_REALTIME);
    g_autofree char *msg = NULL;
    va_list ap;

    if (guest_error && !qemu_loglevel_mask(LOG_GUEST_ERROR)) {
        return;
    }
    if (now - s->log_window_start >= VMB_LOG_WINDOW_MS) {
        if (s->log_suppressed) {
            warn_report("vmware-balloon: %" PRIu64 " more messages were "
                        "suppressed", s->log_suppressed);
        }
        s->log_window_start = now;
        s->log_in_window = 0;
        s->log_suppressed = 0;
    }
    if (s->log_in_window >= VMB_LOG_BURST) {
        s->log_suppressed++;
        return;
    }
    s->log_in_window++;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (guest_error) {
        qemu_log_mask(LOG_GUEST_ERROR, "vmware-balloon: %s%s\n", msg,
                      s->log_in_window == VMB_LOG_BURST ?
                      " (more messages suppressed for a minute)" : "");
    } else {
        warn_report("vmware-balloon: %s%s", msg,
                    s->log_in_window == VMB_LOG_BURST ?
                    " (more messages suppressed for a minute)" : "");
    }
}

/* Free the arrays of the migration stream, see vmb_pre_save(). */
static void vmb_stream_free(VMBalloonState *s)
{
    g_clear_pointer(&s->mig_heads, g_free);
    g_clear_pointer(&s->mig_blocks, g_free);
    g_clear_pointer(&s->mig_bitmaps, g_free);
    s->mig_nheads = 0;
    s->mig_nblocks = 0;
    s->mig_bitmap_bytes = 0;
}

/*
 * Forget every lock: what a restarted host, a new START or a guest reset
 * amounts to.  The released memory stays released.
 */
static void vmb_forget_locks(VMBalloonState *s)
{
    vmb_frames_clear_all(&s->locked);
    vmb_frames_clear_all(&s->heads);
    s->locked_frames = 0;
    s->locked_2m = 0;
    /* nothing is locked: nothing is left to release */
    g_array_set_size(s->discards, 0);
    s->discards_next = 0;
}

static void vmb_set_granted(VMBalloonState *s, uint32_t granted)
{
    s->granted = granted;
    s->granted_caps = granted;
}

/*
 * What QMP query-balloon reports as "actual": the guest's RAM less the
 * locked frames.
 */
static uint64_t vmb_actual(VMBalloonState *s)
{
    uint64_t ram = vmb_ram_size(s);
    uint64_t locked = s->locked_frames << VMB_FRAME_SHIFT;

    return locked >= ram ? 0 : ram - locked;
}

/*
 * Tell QMP clients that the balloon moved (BALLOON_CHANGE, which the
 * monitor rate-limits), as virtio-balloon does when its guest changes
 * "actual".  Called once per port call or reset with the count from
 * before it, so that a batch makes one event, not one per entry.
 */
static void vmb_locked_changed(VMBalloonState *s, uint64_t locked_before)
{
    if (s->locked_frames != locked_before) {
        qapi_event_send_balloon_change(vmb_actual(s));
    }
}

/* The device answers RESET: it acts like a host that was restarted. */
static uint32_t vmb_host_restart(VMBalloonState *s)
{
    trace_vmware_balloon_host_restart(s->locked_frames);
    vmb_forget_locks(s);
    vmb_set_granted(s, 0);
    s->doorbell_cid = s->doorbell_rid = UINT32_MAX;
    s->reset_pending = true;
    return VMB_ERROR_RESET;
}

static bool vmb_wide_target(VMBalloonState *s, const VMBCall *c)
{
    return c->wide && (s->granted & VMB_CAP_64BIT_TARGET);
}

/* The target as the guest sees it. */
static uint64_t vmb_guest_target(VMBalloonState *s, const VMBCall *c)
{
    uint64_t target = s->target_frames;
    uint64_t limit = s->last_limit ? s->last_limit
                                   : vmb_ram_size(s) >> VMB_FRAME_SHIFT;

    target = MIN(target, limit);
    if (!vmb_wide_target(s, c)) {
        target = MIN(target, (uint64_t)UINT32_MAX);
    }
    return target;
}

static int vmb_dimm_has_region(Object *obj, void *opaque)
{
    MemoryRegion *mr = opaque;

    /* not ->realized: a DIMM maps its memory while being plugged */
    return !strcmp(object_get_typename(obj), TYPE_PC_DIMM) &&
           PC_DIMM(obj)->hostmem &&
           host_memory_backend_get_memory(PC_DIMM(obj)->hostmem) == mr;
}

/*
 * Is @mr ordinary guest RAM, memory the guest may give up?  That is the
 * machine's RAM (its memory backend, or a NUMA node's backend inside it)
 * and the backend of a plugged pc-dimm.  Anything else backed by a memory
 * backend belongs to something the guest does not own alone: ivshmem
 * memory is shared with other processes, NVDIMM and virtio-pmem memory is
 * a file the host keeps, and virtio-mem (any region with a RAM discard
 * manager) decides itself which of its memory is backed.  Discarding any
 * of those would damage something outside the guest's RAM.  Decided once
 * per RAM block, when it is mapped (vmb_ram_region_add), since it walks
 * the machine's objects.
 */
static void vmb_classify_ram(MemoryRegion *mr, VMBRamBlock *block)
{
    MachineState *ms = MACHINE(qdev_get_machine());

    block->guest_ram = false;
    block->dimm_bytes = 0;
    if (!object_dynamic_cast(memory_region_owner(mr), TYPE_MEMORY_BACKEND) ||
        memory_region_has_ram_discard_manager(mr)) {
        return;
    }
    if (ms->ram && (mr == ms->ram || mr->container == ms->ram)) {
        block->guest_ram = true;
    } else if (object_child_foreach_recursive(OBJECT(ms),
                                              vmb_dimm_has_region, mr)) {
        block->guest_ram = true;
        block->dimm_bytes = memory_region_size(mr);
    }
}

static bool vmb_is_guest_ram(VMBalloonState *s, MemoryRegion *mr)
{
    VMBRamBlock *block = g_hash_table_lookup(s->ram_blocks, mr->ram_block);

    return block && block->guest_ram;
}

/*
 * Is [frame, frame + nframes) ordinary guest RAM, in a single region (see
 * vmb_is_guest_ram)?  MMIO, ROM, read-only memory and device RAM such as
 * video memory are not.  On success fill *section, which holds a
 * reference the caller must drop with memory_region_unref(section->mr).
 */
static bool vmb_find_ram(VMBalloonState *s, uint64_t frame, uint64_t nframes,
                         MemoryRegionSection *section)
{
    MemoryRegionSection sec;
    hwaddr gpa, len;

    if (nframes == 0 || frame > (UINT64_MAX >> VMB_FRAME_SHIFT) - nframes) {
        return false;
    }
    gpa = frame << VMB_FRAME_SHIFT;
    len = nframes << VMB_FRAME_SHIFT;

    sec = memory_region_find(get_system_memory(), gpa, len);
    if (!sec.mr) {
        return false;
    }
    if (sec.offset_within_address_space != gpa ||
        int128_ne(sec.size, int128_make64(len)) ||
        !memory_region_is_ram(sec.mr) ||
        memory_region_is_ram_device(sec.mr) ||
        memory_region_is_rom(sec.mr) ||
        memory_region_is_romd(sec.mr) ||
        sec.readonly ||
        !sec.mr->ram_block ||
        !vmb_is_guest_ram(s, sec.mr)) {
        memory_region_unref(sec.mr);
        return false;
    }
    *section = sec;
    return true;
}

/*
 * May locked memory be released now?  Not while discards are disabled
 * (e.g. by VFIO), and not while an incoming postcopy migration or a
 * background snapshot runs: the first fills guest RAM from the source as
 * it is touched, the second write-protects it to save each page before it
 * changes, and neither can cope with memory that vanishes under it.
 * Meanwhile a LOCK only records the lock, as virtio-balloon does; the
 * memory stays backed.
 */
static bool vmb_discard_allowed(uint64_t len)
{
    if (ram_block_discard_is_disabled()) {
        trace_vmware_balloon_discard_skipped("discards disabled", len);
        return false;
    }
    if (migration_in_incoming_postcopy()) {
        trace_vmware_balloon_discard_skipped("incoming postcopy", len);
        return false;
    }
    if (migration_in_bg_snapshot()) {
        trace_vmware_balloon_discard_skipped("background snapshot", len);
        return false;
    }
    return true;
}

/*
 * May the memory of @rb be released, after earlier failures?  A block
 * that failed is tried again once its pause is over (VMB_DISCARD_RETRY_MS,
 * doubling with each failure in a row), and given up after
 * VMB_DISCARD_MAX_FAILURES of them, so that a guest cannot make the host
 * try (and log) a failing release on every lock.
 */
static bool vmb_discard_retry_ok(VMBalloonState *s, RAMBlock *rb,
                                 uint64_t len)
{
    VMBDiscardFailure *f = g_hash_table_lookup(s->no_discard,
                                               qemu_ram_get_idstr(rb));

    if (f && qemu_clock_get_ms(QEMU_CLOCK_REALTIME) < f->retry_at_ms) {
        trace_vmware_balloon_discard_skipped("failed before", len);
        return false;
    }
    return true;
}

static void vmb_discard_result(VMBalloonState *s, RAMBlock *rb, int ret)
{
    const char *id = qemu_ram_get_idstr(rb);
    VMBDiscardFailure *f;
    int64_t pause;

    if (ret == 0) {
        g_hash_table_remove(s->no_discard, id);
        return;
    }
    f = g_hash_table_lookup(s->no_discard, id);
    if (!f) {
        f = g_new0(VMBDiscardFailure, 1);
        g_hash_table_insert(s->no_discard, g_strdup(id), f);
    }
    f->failures++;
    if (f->failures >= VMB_DISCARD_MAX_FAILURES) {
        f->retry_at_ms = INT64_MAX;
        vmb_log(s, false, "cannot release the host memory of %s (%u "
                "failures in a row); locked frames there keep their memory "
                "from now on", id, f->failures);
        return;
    }
    pause = (int64_t)VMB_DISCARD_RETRY_MS << (f->failures - 1);
    f->retry_at_ms = qemu_clock_get_ms(QEMU_CLOCK_REALTIME) + pause;
    vmb_log(s, false, "cannot release the host memory of %s; trying again "
            "in %" PRId64 " ms", id, pause);
}

/*
 * Give the host memory behind a locked range back to the host: @sec is
 * [frame, frame + nframes) of guest RAM.  When the RAM's host pages are
 * larger than the range (hugetlbfs), the host page is released once every
 * frame of it is locked, and not before.
 */
static void vmb_discard(VMBalloonState *s, MemoryRegionSection *sec,
                        uint64_t frame, uint64_t nframes)
{
    uint64_t len = nframes << VMB_FRAME_SHIFT;
    MemoryRegionSection page_sec;
    ram_addr_t rb_offset;
    RAMBlock *rb;
    size_t pagesize;
    void *host;
    int ret;

    if (!vmb_discard_allowed(len)) {
        return;
    }

    RCU_READ_LOCK_GUARD();
    host = (uint8_t *)memory_region_get_ram_ptr(sec->mr) +
           sec->offset_within_region;
    rb = qemu_ram_block_from_host(host, false, &rb_offset);
    if (!rb) {
        return;
    }
    pagesize = qemu_ram_pagesize(rb);
    if (len < pagesize) {
        uint64_t page_frames = pagesize >> VMB_FRAME_SHIFT;
        uint64_t first = frame - ((rb_offset % pagesize) >> VMB_FRAME_SHIFT);

        if (!vmb_frames_all_set(&s->locked, first, page_frames)) {
            trace_vmware_balloon_discard_skipped("host page partly locked",
                                                 len);
            return;
        }
        /* the whole host page, which must be guest RAM of the same block */
        if (!vmb_find_ram(s, first, page_frames, &page_sec)) {
            trace_vmware_balloon_discard_skipped("host page not guest RAM",
                                                 len);
            return;
        }
        memory_region_unref(page_sec.mr);
        host = (uint8_t *)host - (rb_offset % pagesize);
        rb_offset -= rb_offset % pagesize;
        len = pagesize;
        nframes = page_frames;
    }
    if (rb_offset % pagesize || len % pagesize) {
        warn_report_once("vmware-balloon: guest RAM uses %zu-byte host pages;"
                         " a locked range that does not fit them is not "
                         "released", pagesize);
        return;
    }
    if (!vmb_discard_retry_ok(s, rb, len)) {
        return;
    }
    if (s->fail_discards) {
        s->fail_discards--;
        ret = -EIO;
    } else if (memory_region_get_fd(sec->mr) >= 0 &&
               !qemu_ram_is_shared(rb)) {
        /*
         * A private mapping of a file (memory-backend-file,share=off):
         * ram_block_discard_range would punch a hole in the file itself,
         * which is not the guest's to change.  Dropping our private copies
         * of the pages is enough; they read as the file's contents again.
         */
        ret = qemu_madvise(host, len, QEMU_MADV_DONTNEED);
    } else {
        ret = ram_block_discard_range(rb, rb_offset, len);
    }
    trace_vmware_balloon_discard(qemu_ram_get_idstr(rb), rb_offset, len, ret);
    if (ret == 0) {
        s->discarded_frames += nframes;
    }
    vmb_discard_result(s, rb, ret);
}

/*
 * Release the memory of the ranges locked since the last run, oldest
 * first, for at most VMB_DISCARD_SLICE_NS (and one range more); the rest
 * waits for the next run, in the next main loop iteration, so that the BQL
 * is never held for long.  A range is released only if it is still
 * locked: an UNLOCK, START, guest reset or unplug in between (all of them
 * under the BQL, as this is) took it back, and the guest may already use
 * it again.  Nothing of this travels with a migration: the destination
 * releases nothing it loads, see "Migration" at the top.
 */
static void vmb_discard_bh(void *opaque)
{
    VMBalloonState *s = opaque;
    int64_t start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    int64_t spent = 0;
    guint done = 0;

    while (s->discards_next < s->discards->len &&
           spent < VMB_DISCARD_SLICE_NS) {
        VMBFrameRange r = g_array_index(s->discards, VMBFrameRange,
                                        s->discards_next);
        MemoryRegionSection sec;

        s->discards_next++;
        done++;
        if (vmb_frames_all_set(&s->locked, r.frame, r.nframes) &&
            vmb_find_ram(s, r.frame, r.nframes, &sec)) {
            vmb_discard(s, &sec, r.frame, r.nframes);
            memory_region_unref(sec.mr);
        }
        spent = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start;
    }
    s->discard_max_ns = MAX(s->discard_max_ns, spent);
    trace_vmware_balloon_discard_run(done, s->discards->len -
                                     s->discards_next, spent);
    if (s->discards_next == s->discards->len) {
        g_array_set_size(s->discards, 0);
        s->discards_next = 0;
        return;
    }
    /*
     * A guest that keeps locking may never let the queue run empty: drop
     * the ranges done once they are half of it, so that it holds no more
     * than what is still to be done (twice over).
     */
    if (s->discards_next >= s->discards->len / 2) {
        g_array_remove_range(s->discards, 0, s->discards_next);
        s->discards_next = 0;
    }
    qemu_bh_schedule(s->discard_bh);
}

/*
 * A newly locked range, @sec: release its memory soon, see
 * vmb_discard_bh().  In RAM whose host pages are larger than the range
 * (hugetlbfs), only the lock that makes the host page wholly locked
 * queues it, so that the page is released once, not once per lock in it.
 */
static void vmb_queue_discard(VMBalloonState *s, MemoryRegionSection *sec,
                              uint64_t frame, uint64_t nframes)
{
    uint64_t page_frames = qemu_ram_pagesize(sec->mr->ram_block) >>
                           VMB_FRAME_SHIFT;
    VMBFrameRange r = { .frame = frame, .nframes = nframes };

    if (!vmb_discard_allowed(nframes << VMB_FRAME_SHIFT)) {
        return;
    }
    if (nframes < page_frames) {
        uint64_t in_page = (sec->offset_within_region >> VMB_FRAME_SHIFT) %
                           page_frames;

        if (frame < in_page ||
            !vmb_frames_all_set(&s->locked, frame - in_page, page_frames)) {
            trace_vmware_balloon_discard_skipped("host page partly locked",
                                                 nframes << VMB_FRAME_SHIFT);
            return;
        }
    }
    g_array_append_val(s->discards, r);
    qemu_bh_schedule(s->discard_bh);
}

/*
 * How many of the @nframes frames at @sec the host has resident now:
 * what mincore() says of their host pages (a host page larger than a frame
 * counts for the frames of it in the range).  0 where mincore() is not
 * available or fails.
 */
static uint64_t vmb_resident_frames(MemoryRegionSection *sec,
                                    uint64_t nframes)
{
#ifdef CONFIG_POSIX
    uintptr_t page = qemu_real_host_page_size();
    uintptr_t start = (uintptr_t)memory_region_get_ram_ptr(sec->mr) +
                      sec->offset_within_region;
    uintptr_t end = start + (nframes << VMB_FRAME_SHIFT);
    uintptr_t addr = QEMU_ALIGN_DOWN(start, page);
    uint64_t resident = 0;
    unsigned char vec[64];

    while (addr < end) {
        uintptr_t len = MIN(end - addr, sizeof(vec) * page);
        size_t i, pages = DIV_ROUND_UP(len, page);

        if (mincore((void *)addr, len, vec) < 0) {
            return 0;
        }
        for (i = 0; i < pages; i++) {
            uintptr_t lo = MAX(addr + i * page, start);
            uintptr_t hi = MIN(addr + (i + 1) * page, end);

            if (vec[i] & 1) {
                resident += (hi - lo) >> VMB_FRAME_SHIFT;
            }
        }
        addr += pages * page;
    }
    return resident;
#else
    return 0;
#endif
}

/*
 * Lock or unlock one entry: a 4 KiB frame (nframes 1) or a 2 MiB page
 * (nframes 512, frame aligned).  Returns the entry's status.
 */
static uint32_t vmb_frame_op(VMBalloonState *s, uint64_t frame,
                             uint64_t nframes, bool lock)
{
    MemoryRegionSection sec;
    uint64_t head = frame & ~(VMB_2M_FRAMES - 1);
    uint32_t status = VMB_SUCCESS;
    uint64_t held;

    if (nframes == VMB_2M_FRAMES && frame != head) {
        return VMB_ERROR_PPN_INVALID;
    }
    if (!vmb_find_ram(s, frame, nframes, &sec)) {
        return VMB_ERROR_PPN_INVALID;
    }

    held = vmb_frames_count(&s->locked, frame, nframes);
    if (lock) {
        s->lock_requests++;
        if (s->refuse_every && s->lock_requests % s->refuse_every == 0) {
            s->refused_frames++;
            status = s->refuse_status;
        } else if (held) {
            status = VMB_ERROR_PPN_LOCKED;
        } else {
            s->lock_resident_call += vmb_resident_frames(&sec, nframes);
            vmb_frames_set(&s->locked, frame, nframes);
            s->locked_frames += nframes;
            if (nframes == VMB_2M_FRAMES) {
                vmb_frames_set(&s->heads, frame, 1);
                s->locked_2m++;
            }
            vmb_queue_discard(s, &sec, frame, nframes);
            if (s->reset_at_locked &&
                s->locked_frames >= s->reset_at_locked) {
                s->restart_due = true;
            }
        }
    } else if (nframes == 1) {
        if (!held) {
            status = VMB_ERROR_PPN_UNLOCKED;
        } else if (vmb_frames_count(&s->heads, head, 1)) {
            status = VMB_ERROR_PPN_INVALID;   /* part of a locked 2 MiB page */
        } else {
            vmb_frames_clear(&s->locked, frame, 1);
            s->locked_frames--;
        }
    } else {
        if (vmb_frames_count(&s->heads, frame, 1)) {
            vmb_frames_clear(&s->heads, frame, 1);
            vmb_frames_clear(&s->locked, frame, nframes);
            s->locked_frames -= nframes;
            s->locked_2m--;
        } else if (!held) {
            status = VMB_ERROR_PPN_UNLOCKED;
        } else {
            status = VMB_ERROR_PPN_INVALID;   /* holds 4 KiB locks */
        }
    }

    memory_region_unref(sec.mr);
    trace_vmware_balloon_frame(frame, nframes, lock, status);
    return status;
}

/*
 * x-reset-at-locked was reached by the lock just made: the host restarts
 * right there (one shot), and the command that made it gets RESET.
 */
static uint32_t vmb_restart_at_locked(VMBalloonState *s)
{
    s->restart_due = false;
    s->reset_at_locked = 0;
    return vmb_host_restart(s);
}

/*
 * A PFN the guest passes in a register (single LOCK/UNLOCK, the batch
 * page) needs 64_BIT_TARGET if it does not fit 32 bits.
 */
static bool vmb_pfn_fits(VMBalloonState *s, uint64_t pfn)
{
    return !(pfn >> 32) || (s->granted & VMB_CAP_64BIT_TARGET);
}

static uint32_t vmb_cmd_single(VMBalloonState *s, VMBCall *c, bool lock)
{
    uint32_t status;

    if (!(s->granted & VMB_CAP_BASIC)) {
        return VMB_ERROR_CMD_INVALID;
    }
    if (!vmb_pfn_fits(s, c->arg1)) {
        vmb_log(s, true, "%s of PFN 0x%" PRIx64 " >= 2^32 without "
                "64_BIT_TARGET", lock ? "LOCK" : "UNLOCK", c->arg1);
        return VMB_ERROR_PPN_INVALID;
    }
    status = vmb_frame_op(s, c->arg1, 1, lock);
    if (s->restart_due) {
        return vmb_restart_at_locked(s);
    }
    if (status == VMB_ERROR_PPN_INVALID) {
        vmb_log(s, true, "%s of PFN 0x%" PRIx64 ": PPN_INVALID (not ordinary "
                "guest RAM, or part of a 2 MiB lock)",
                lock ? "LOCK" : "UNLOCK", c->arg1);
    }
    return status;
}

static uint32_t vmb_cmd_batch(VMBalloonState *s, VMBCall *c, bool lock,
                              bool huge)
{
    uint64_t entries[VMB_BATCH_MAX_ENTRIES];
    MemoryRegionSection page;
    uint64_t count = c->arg2;
    const char *name = vmb_cmd_name[c->cmd];
    uint64_t i, invalid = 0;
    hwaddr page_gpa;
    MemTxResult res;

    if (!(s->granted & VMB_CAP_BATCHED) ||
        (huge && !(s->granted & VMB_CAP_BATCHED_2M))) {
        return VMB_ERROR_CMD_INVALID;
    }
    if (count > VMB_BATCH_MAX_ENTRIES) {
        vmb_log(s, true, "%s of %" PRIu64 " entries (at most %d)", name,
                count, VMB_BATCH_MAX_ENTRIES);
        return VMB_FAILURE;
    }
    if (!vmb_pfn_fits(s, c->arg1)) {
        vmb_log(s, true, "%s: the batch page, PFN 0x%" PRIx64 ", is >= 2^32 "
                "without 64_BIT_TARGET", name, c->arg1);
        return VMB_FAILURE;
    }
    if (!vmb_find_ram(s, c->arg1, 1, &page)) {
        vmb_log(s, true, "%s: the batch page, PFN 0x%" PRIx64 ", is not "
                "guest RAM", name, c->arg1);
        return VMB_FAILURE;
    }
    memory_region_unref(page.mr);
    if (count == 0) {
        return VMB_SUCCESS;
    }

    page_gpa = c->arg1 << VMB_FRAME_SHIFT;
    res = address_space_read(&address_space_memory, page_gpa,
                             MEMTXATTRS_UNSPECIFIED, entries, count * 8);
    if (res != MEMTX_OK) {
        vmb_log(s, true, "%s: cannot read the batch page at PFN 0x%" PRIx64,
                name, c->arg1);
        return VMB_FAILURE;
    }

    for (i = 0; i < count; i++) {
        uint64_t entry = le64_to_cpu(entries[i]);
        uint32_t status;

        if (entry & VMB_ENTRY_RESERVED_MASK) {
            status = VMB_ERROR_PPN_INVALID;
        } else {
            status = vmb_frame_op(s, entry >> VMB_FRAME_SHIFT,
                                  huge ? VMB_2M_FRAMES : 1, lock);
        }
        if (s->restart_due) {
            /* the host restarts mid-batch: no statuses are written */
            return vmb_restart_at_locked(s);
        }
        invalid += status == VMB_ERROR_PPN_INVALID;
        entry = (entry & ~VMB_ENTRY_STATUS_MASK) |
                (status & VMB_ENTRY_STATUS_MASK);
        entries[i] = cpu_to_le64(entry);
    }

    res = address_space_write(&address_space_memory, page_gpa,
                              MEMTXATTRS_UNSPECIFIED, entries, count * 8);
    if (res != MEMTX_OK) {
        vmb_log(s, true, "%s: cannot write the statuses back to the batch "
                "page at PFN 0x%" PRIx64, name, c->arg1);
    }
    trace_vmware_balloon_batch(c->cmd, c->arg1, count, invalid);
    if (invalid) {
        vmb_log(s, true, "%s: %" PRIu64 " of %" PRIu64 " entries are invalid "
                "(reserved bits set, not guest RAM, or misplaced)", name,
                invalid, count);
    }
    return VMB_SUCCESS;
}

static uint32_t vmb_cmd_start(VMBalloonState *s, VMBCall *c)
{
    if (c->arg1 == 0) {
        s->start_zero++;
    }
    vmb_forget_locks(s);
    s->doorbell_cid = s->doorbell_rid = UINT32_MAX;

    if (s->fail_start) {
        s->fail_start--;
        vmb_set_granted(s, 0);
        s->reset_pending = true;
        c->set_rcx = true;
        c->rcx = 0;
        return VMB_FAILURE;
    }

    s->reset_pending = false;
    s->last_limit = 0;
    if (s->legacy) {
        vmb_set_granted(s, c->arg1 ? VMB_CAP_BASIC : 0);
        trace_vmware_balloon_start(c->arg1, s->granted);
        return VMB_SUCCESS;
    }
    vmb_set_granted(s, c->arg1 & s->capabilities & VMB_CAPS_ALL);
    trace_vmware_balloon_start(c->arg1, s->granted);
    c->set_rcx = true;
    c->rcx = s->granted;
    return VMB_SUCCESS_WITH_CAPABILITIES;
}

/* Injected faults and a pending reset; 0 when the command should run. */
static uint32_t vmb_injected(VMBalloonState *s, int cmd)
{
    if (s->reset_pending && cmd != VMB_CMD_START) {
        return VMB_ERROR_RESET;
    }
    if (s->reset_next) {
        s->reset_next = false;
        return vmb_host_restart(s);
    }
    if (s->reset_every && s->commands % s->reset_every == 0) {
        return vmb_host_restart(s);
    }
    if (s->busy_next) {
        s->busy_next = false;
        return VMB_ERROR_BUSY;
    }
    if (s->busy_every && s->commands % s->busy_every == 0) {
        return VMB_ERROR_BUSY;
    }
    return 0;
}

static uint32_t vmb_dispatch(VMBalloonState *s, VMBCall *c)
{
    int cmd = -1;
    uint32_t status;

    if (c->cmd < VMB_CMD_NUM && vmb_cmd_name[c->cmd]) {
        cmd = c->cmd;
        s->calls[cmd]++;
    } else {
        s->calls_unknown++;
    }
    s->commands++;

    status = vmb_injected(s, cmd);
    if (status == 0) {
        switch (cmd) {
        case VMB_CMD_START:
            status = vmb_cmd_start(s, c);
            break;
        case VMB_CMD_GET_TARGET:
            s->last_limit = vmb_wide_target(s, c) ? c->arg1
                                                  : (uint32_t)c->arg1;
            status = VMB_SUCCESS;
            break;
        case VMB_CMD_LOCK:
            status = vmb_cmd_single(s, c, true);
            break;
        case VMB_CMD_UNLOCK:
            status = vmb_cmd_single(s, c, false);
            break;
        case VMB_CMD_GUEST_ID:
            s->guest_id = c->arg1;
            status = VMB_SUCCESS;
            break;
        case VMB_CMD_BATCHED_LOCK:
            status = vmb_cmd_batch(s, c, true, false);
            break;
        case VMB_CMD_BATCHED_UNLOCK:
            status = vmb_cmd_batch(s, c, false, false);
            break;
        case VMB_CMD_BATCHED_2M_LOCK:
            status = vmb_cmd_batch(s, c, true, true);
            break;
        case VMB_CMD_BATCHED_2M_UNLOCK:
            status = vmb_cmd_batch(s, c, false, true);
            break;
        case VMB_CMD_VMCI_DOORBELL_SET:
            if (!(s->granted & VMB_CAP_DOORBELL)) {
                status = VMB_ERROR_CMD_INVALID;
            } else {
                s->doorbell_cid = c->arg1;
                s->doorbell_rid = c->arg2;
                status = VMB_SUCCESS;
            }
            break;
        default:
            status = VMB_ERROR_CMD_INVALID;
            break;
        }
    }
    s->lock_resident_frames += s->lock_resident_call;
    s->lock_resident_peak = MAX(s->lock_resident_peak, s->lock_resident_call);
    s->lock_resident_call = 0;

    if (status == VMB_ERROR_RESET) {
        s->resets_sent++;
    } else if (status == VMB_ERROR_BUSY) {
        s->busy_sent++;
    }
    if (cmd >= 0 && status != VMB_SUCCESS &&
        status != VMB_SUCCESS_WITH_CAPABILITIES) {
        s->failures[cmd]++;
    }
    if (cmd != VMB_CMD_START) {
        c->set_rbx = true;
        c->rbx = vmb_guest_target(s, c);
    }
    trace_vmware_balloon_call(c->cmd, c->arg1, c->arg2, status, c->rbx);
    return status;
}

static uint64_t vmb_io_read(void *opaque, hwaddr addr, unsigned size)
{
    VMBalloonState *s = opaque;
    CPUState *cs = current_cpu;
    CPUX86State *env;
    VMBCall c = { 0 };
    uint64_t locked_before = s->locked_frames;
    uint32_t status;

    /* Only a 32-bit read of the port itself, from a vCPU, is a call. */
    if (addr != 0 || size != 4 || !cs ||
        !object_dynamic_cast(OBJECT(cs), TYPE_X86_CPU)) {
        return UINT32_MAX;
    }
    env = &X86_CPU(cs)->env;
    cpu_synchronize_state(cs);

    if ((uint32_t)env->regs[R_EAX] != VMB_MAGIC) {
        s->bad_magic++;
        status = VMB_FAILURE;
    } else {
        /*
         * The command (ECX) and arg2 (ESI) are 32 bits; arg1 is all of
         * RBX in 64-bit code (PFNs and limits may need more than 32).
         */
        c.wide = (env->hflags & HF_CS64_MASK) != 0;
        c.cmd = (uint32_t)env->regs[R_ECX];
        c.arg1 = c.wide ? env->regs[R_EBX] : (uint32_t)env->regs[R_EBX];
        c.arg2 = (uint32_t)env->regs[R_ESI];
        status = vmb_dispatch(s, &c);
        vmb_locked_changed(s, locked_before);
        if (c.set_rbx) {
            env->regs[R_EBX] = c.rbx;
        }
        if (c.set_rcx) {
            env->regs[R_ECX] = c.rcx;
        }
    }
    /*
     * As hw/i386/vmport.c explains: after cpu_synchronize_state() the
     * accelerator gets QEMU's copy of the registers back, so the result of
     * the read has to be in EAX there too.  A 32-bit IN zero-extends.
     */
    env->regs[R_EAX] = status;
    return status;
}

static void vmb_io_write(void *opaque, hwaddr addr, uint64_t val,
                         unsigned size)
{
    /* Writes to the port mean nothing. */
}

static const MemoryRegionOps vmb_io_ops = {
    .read = vmb_io_read,
    .write = vmb_io_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
};

/* QEMU's balloon interface: @keep is the memory the guest should keep. */
static void vmb_balloon_event(void *opaque, ram_addr_t keep)
{
    VMBalloonState *s = opaque;
    uint64_t ram = vmb_ram_size(s);

    s->target_frames = keep >= ram ? 0 : (ram - keep) >> VMB_FRAME_SHIFT;
    trace_vmware_balloon_target(s->target_frames);
}

static void vmb_balloon_status(void *opaque, BalloonInfo *info)
{
    info->actual = vmb_actual(opaque);
}

static bool vmb_get_reset_next(Object *obj, Error **errp)
{
    return VMWARE_BALLOON(obj)->reset_next;
}

static void vmb_set_reset_next(Object *obj, bool value, Error **errp)
{
    VMWARE_BALLOON(obj)->reset_next = value;
}

static bool vmb_get_busy_next(Object *obj, Error **errp)
{
    return VMWARE_BALLOON(obj)->busy_next;
}

static void vmb_set_busy_next(Object *obj, bool value, Error **errp)
{
    VMWARE_BALLOON(obj)->busy_next = value;
}

static void vmb_get_ram_frames(Object *obj, Visitor *v, const char *name,
                               void *opaque, Error **errp)
{
    uint64_t frames = vmb_ram_size(VMWARE_BALLOON(obj)) >> VMB_FRAME_SHIFT;

    visit_type_uint64(v, name, &frames, errp);
}

/* x-backed-locked-frames: every run of locked frames, asked of mincore() */
static void vmb_get_backed_locked(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    VMBalloonState *s = VMWARE_BALLOON(obj);
    uint64_t backed = 0;
    GHashTableIter iter;
    gpointer key, bits;

    g_hash_table_iter_init(&iter, s->locked.chunks);
    while (g_hash_table_iter_next(&iter, &key, &bits)) {
        uint64_t base = *(uint64_t *)key << VMB_CHUNK_SHIFT;
        unsigned long i = find_first_bit(bits, VMB_CHUNK_FRAMES);

        while (i < VMB_CHUNK_FRAMES) {
            /* a run, cut at 2 MiB boundaries: each piece is one RAM block */
            unsigned long end = find_next_zero_bit(bits, VMB_CHUNK_FRAMES, i);
            unsigned long piece = MIN(end, (i | (VMB_2M_FRAMES - 1)) + 1);
            MemoryRegionSection sec;
            unsigned long f;

            if (vmb_find_ram(s, base + i, piece - i, &sec)) {
                backed += vmb_resident_frames(&sec, piece - i);
                memory_region_unref(sec.mr);
            } else {
                for (f = i; f < piece; f++) {
                    if (vmb_find_ram(s, base + f, 1, &sec)) {
                        backed += vmb_resident_frames(&sec, 1);
                        memory_region_unref(sec.mr);
                    }
                }
            }
            i = piece < end ? piece : find_next_bit(bits, VMB_CHUNK_FRAMES,
                                                    end);
        }
    }
    visit_type_uint64(v, name, &backed, errp);
}

static void vmb_get_refuse_status(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    visit_type_uint32(v, name, &VMWARE_BALLOON(obj)->refuse_status, errp);
}

/*
 * A refusal goes into a batch entry's 5-bit status: only the error
 * statuses 1..8 make sense there (0 would be SUCCESS).
 */
static void vmb_set_refuse_status(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    uint32_t value;

    if (!visit_type_uint32(v, name, &value, errp)) {
        return;
    }
    if (value < VMB_ERROR_CMD_INVALID || value > VMB_ERROR_BUSY) {
        error_setg(errp, "vmware-balloon: x-refuse-status %" PRIu32 " is not "
                   "an error status a batch entry can hold (1..8)", value);
        return;
    }
    VMWARE_BALLOON(obj)->refuse_status = value;
}

static void vmb_instance_init(Object *obj)
{
    VMBalloonState *s = VMWARE_BALLOON(obj);
    const ObjectPropertyFlags ro = OBJ_PROP_FLAG_READ;
    const ObjectPropertyFlags rw = OBJ_PROP_FLAG_READWRITE;
    int i;

    vmb_frames_init(&s->locked);
    vmb_frames_init(&s->heads);
    s->no_discard = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                          g_free);
    s->discards = g_array_new(false, false, sizeof(VMBFrameRange));
    s->ram_blocks = g_hash_table_new_full(g_direct_hash, g_direct_equal,
                                          NULL, g_free);
    s->ram_gone = g_array_new(false, false, sizeof(VMBRamRange));
    s->refuse_status = VMB_ERROR_PPN_PINNED;
    s->doorbell_cid = s->doorbell_rid = UINT32_MAX;

    object_property_add_uint64_ptr(obj, "x-target-frames", &s->target_frames,
                                   rw);
    object_property_add_uint32_ptr(obj, "x-offered-capabilities",
                                   &s->capabilities, rw);
    object_property_add_bool(obj, "x-reset-next", vmb_get_reset_next,
                             vmb_set_reset_next);
    object_property_add_uint32_ptr(obj, "x-reset-every", &s->reset_every, rw);
    object_property_add_bool(obj, "x-busy-next", vmb_get_busy_next,
                             vmb_set_busy_next);
    object_property_add_uint32_ptr(obj, "x-busy-every", &s->busy_every, rw);
    object_property_add_uint32_ptr(obj, "x-refuse-every", &s->refuse_every, rw);
    object_property_add(obj, "x-refuse-status", "uint32", vmb_get_refuse_status,
                        vmb_set_refuse_status, NULL, NULL);
    object_property_add_uint32_ptr(obj, "x-fail-start", &s->fail_start, rw);
    object_property_add_uint64_ptr(obj, "x-reset-at-locked",
                                   &s->reset_at_locked, rw);
    object_property_add_uint32_ptr(obj, "x-fail-discards", &s->fail_discards,
                                   rw);

    object_property_add_uint64_ptr(obj, "x-locked-frames", &s->locked_frames,
                                   ro);
    object_property_add_uint64_ptr(obj, "x-locked-2m", &s->locked_2m, ro);
    object_property_add_uint64_ptr(obj, "x-granted-capabilities",
                                   &s->granted_caps, ro);
    object_property_add_uint64_ptr(obj, "x-guest-id", &s->guest_id, ro);
    object_property_add_uint64_ptr(obj, "x-doorbell-cid", &s->doorbell_cid, ro);
    object_property_add_uint64_ptr(obj, "x-doorbell-rid", &s->doorbell_rid, ro);
    object_property_add_uint64_ptr(obj, "x-resets-sent", &s->resets_sent, ro);
    object_property_add_uint64_ptr(obj, "x-busy-sent", &s->busy_sent, ro);
    object_property_add_uint64_ptr(obj, "x-start-zero", &s->start_zero, ro);
    object_property_add_uint64_ptr(obj, "x-calls-unknown", &s->calls_unknown,
                                   ro);
    object_property_add_uint64_ptr(obj, "x-bad-magic", &s->bad_magic, ro);
    object_property_add_uint64_ptr(obj, "x-refused-frames", &s->refused_frames,
                                   ro);
    object_property_add_uint64_ptr(obj, "x-discarded-frames",
                                   &s->discarded_frames, ro);
    object_property_add(obj, "x-ram-frames", "uint64", vmb_get_ram_frames,
                        NULL, NULL, NULL);
    object_property_add_uint64_ptr(obj, "x-ram-classified",
                                   &s->ram_classified, ro);
    object_property_add_uint64_ptr(obj, "x-discard-max-ns",
                                   &s->discard_max_ns, ro);
    object_property_add_uint64_ptr(obj, "x-lock-resident-frames",
                                   &s->lock_resident_frames, ro);
    object_property_add_uint64_ptr(obj, "x-lock-resident-peak",
                                   &s->lock_resident_peak, rw);
    object_property_add(obj, "x-backed-locked-frames", "uint64",
                        vmb_get_backed_locked, NULL, NULL, NULL);

    for (i = 0; i < VMB_CMD_NUM; i++) {
        g_autofree char *calls = NULL;
        g_autofree char *failures = NULL;

        if (!vmb_cmd_name[i]) {
            continue;
        }
        calls = g_strdup_printf("x-calls-%s", vmb_cmd_name[i]);
        failures = g_strdup_printf("x-failures-%s", vmb_cmd_name[i]);
        object_property_add_uint64_ptr(obj, calls, &s->calls[i], ro);
        object_property_add_uint64_ptr(obj, failures, &s->failures[i], ro);
    }
}

static void vmb_instance_finalize(Object *obj)
{
    VMBalloonState *s = VMWARE_BALLOON(obj);

    vmb_frames_destroy(&s->locked);
    vmb_frames_destroy(&s->heads);
    g_hash_table_destroy(s->no_discard);
    g_array_free(s->discards, true);
    g_hash_table_destroy(s->ram_blocks);
    g_array_free(s->ram_gone, true);
    vmb_stream_free(s);
}

/*
 * Forget the locks in [frame, frame + nframes): that memory is no longer
 * the guest's.  A 2 MiB entry lies inside one RAM block, so it is either
 * wholly inside the range or wholly outside.
 */
static void vmb_forget_range(VMBalloonState *s, uint64_t frame,
                             uint64_t nframes)
{
    uint64_t end = frame + nframes;
    uint64_t forgotten = 0;

    while (frame < end) {
        uint64_t chunk_end = (frame | (VMB_CHUNK_FRAMES - 1)) + 1;
        unsigned long n = MIN(end, chunk_end) - frame;

        s->locked_2m -= vmb_frames_count(&s->heads, frame, n);
        vmb_frames_clear(&s->heads, frame, n);
        forgotten += vmb_frames_count(&s->locked, frame, n);
        vmb_frames_clear(&s->locked, frame, n);
        frame += n;
    }
    s->locked_frames -= forgotten;
    trace_vmware_balloon_ram_gone(end - nframes, nframes, forgotten);
}

/*
 * The device follows guest memory with a MemoryListener, so that a port
 * call only looks a RAM block up (vmb_is_guest_ram) and never walks the
 * machine's objects: each RAM block is classified once, when its first
 * section is mapped (at realize for boot RAM, on plug for a DIMM).
 */
static void vmb_ram_region_add(MemoryListener *listener,
                               MemoryRegionSection *section)
{
    VMBalloonState *s = container_of(listener, VMBalloonState, ram_listener);
    RAMBlock *rb = section->mr->ram_block;
    VMBRamBlock *block;

    if (!rb) {
        return;
    }
    block = g_hash_table_lookup(s->ram_blocks, rb);
    if (!block) {
        block = g_new0(VMBRamBlock, 1);
        vmb_classify_ram(section->mr, block);
        s->ram_classified++;
        g_hash_table_insert(s->ram_blocks, rb, block);
    }
    block->sections++;
}

static void vmb_ram_region_del(MemoryListener *listener,
                               MemoryRegionSection *section)
{
    VMBalloonState *s = container_of(listener, VMBalloonState, ram_listener);
    RAMBlock *rb = section->mr->ram_block;
    VMBRamBlock *block = rb ? g_hash_table_lookup(s->ram_blocks, rb) : NULL;

    if (!block) {
        return;
    }
    if (block->guest_ram) {
        VMBRamRange gone = {
            .block = rb,
            .frame = section->offset_within_address_space >> VMB_FRAME_SHIFT,
            .nframes = int128_get64(section->size) >> VMB_FRAME_SHIFT,
        };

        g_array_append_val(s->ram_gone, gone);
    }
    if (--block->sections == 0) {
        g_hash_table_remove(s->ram_blocks, rb);
    }
}

/*
 * The end of a memory topology update.  Guest RAM whose block is no
 * longer mapped at all was unplugged: the guest cannot hold its frames
 * any more, so their locks go, and "actual" stays the guest's RAM less
 * what it really handed over.  (A block that only moved between sections
 * keeps its locks.)
 */
static void vmb_ram_commit(MemoryListener *listener)
{
    VMBalloonState *s = container_of(listener, VMBalloonState, ram_listener);
    MachineState *ms = MACHINE(qdev_get_machine());
    uint64_t locked_before = s->locked_frames;
    GHashTableIter iter;
    gpointer value;
    guint i;

    for (i = 0; i < s->ram_gone->len; i++) {
        VMBRamRange *gone = &g_array_index(s->ram_gone, VMBRamRange, i);

        if (!g_hash_table_contains(s->ram_blocks, gone->block)) {
            vmb_forget_range(s, gone->frame, gone->nframes);
        }
    }
    g_array_set_size(s->ram_gone, 0);

    s->ram_bytes = ms->ram_size;
    g_hash_table_iter_init(&iter, s->ram_blocks);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        s->ram_bytes += ((VMBRamBlock *)value)->dimm_bytes;
    }
    vmb_locked_changed(s, locked_before);
}

static void vmb_realize(DeviceState *dev, Error **errp)
{
    VMBalloonState *s = VMWARE_BALLOON(dev);

    if (s->capabilities & ~VMB_CAPS_ALL) {
        error_setg(errp, "capabilities 0x%" PRIx32 " has unknown bits 0x%"
                   PRIx32, s->capabilities, s->capabilities & ~VMB_CAPS_ALL);
        error_append_hint(errp, "Only bits 1-5 (0x%x) are defined.\n",
                          VMB_CAPS_ALL);
        return;
    }
    if (qemu_add_balloon_handler(vmb_balloon_event, vmb_balloon_status,
                                 s) < 0) {
        error_setg(errp, "Only one balloon device is supported");
        return;
    }
    s->handler_registered = true;
    s->discard_bh = qemu_bh_new_guarded(vmb_discard_bh, s,
                                        &DEVICE(s)->mem_reentrancy_guard);

    s->ram_listener = (MemoryListener) {
        .name = TYPE_VMWARE_BALLOON,
        .region_add = vmb_ram_region_add,
        .region_del = vmb_ram_region_del,
        .commit = vmb_ram_commit,
    };
    /* calls region_add for what is mapped now, then commit */
    memory_listener_register(&s->ram_listener, &address_space_memory);

    memory_region_init_io(&s->io, OBJECT(s), &vmb_io_ops, s,
                          TYPE_VMWARE_BALLOON, VMB_IO_SIZE);
    isa_register_ioport(ISA_DEVICE(dev), &s->io, VMB_PORT);
}

static void vmb_unrealize(DeviceState *dev)
{
    VMBalloonState *s = VMWARE_BALLOON(dev);

    if (s->handler_registered) {
        qemu_remove_balloon_handler(s);
        s->handler_registered = false;
        memory_listener_unregister(&s->ram_listener);
        g_hash_table_remove_all(s->ram_blocks);
    }
    g_clear_pointer(&s->discard_bh, qemu_bh_delete);
    vmb_forget_locks(s);
}

/*
 * Guest reset: the guest forgot its balloon, so does the host.  The
 * wake-up from suspend to RAM resets the machine's devices too
 * (RESET_TYPE_WAKEUP), but the guest kept its RAM and its driver its
 * balloon: that reset changes nothing.  Every other kind (a cold reset,
 * the reset before loadvm) forgets every lock, and every command but START
 * answers RESET until the guest sends START.  A guest that boots afresh
 * sends START first anyway; but a reset need not be a reboot: while the
 * guest sleeps in S3 (whether the VM runs or was stopped since) SeaBIOS
 * takes it for the wake-up and resumes the guest, whose driver still
 * counts its balloon and must be told that the host forgot it.  The
 * device's state changes in the enter phase; BALLOON_CHANGE, which
 * leaves QEMU, goes out in the exit phase.
 */
static void vmb_reset_enter(Object *obj, ResetType type)
{
    VMBalloonState *s = VMWARE_BALLOON(obj);

    s->reset_locked_before = s->locked_frames;
    trace_vmware_balloon_reset(type, type == RESET_TYPE_WAKEUP ? 0 :
                               s->locked_frames);
    if (type == RESET_TYPE_WAKEUP) {
        return;
    }
    vmb_forget_locks(s);
    vmb_set_granted(s, 0);
    s->reset_pending = true;
    s->last_limit = 0;
    s->doorbell_cid = s->doorbell_rid = UINT32_MAX;
}

static void vmb_reset_exit(Object *obj, ResetType type)
{
    VMBalloonState *s = VMWARE_BALLOON(obj);

    vmb_locked_changed(s, s->reset_locked_before);
}

/*
 * Migration.  The locks travel in three standard arrays, built before
 * saving and read back into the frame sets after loading:
 *   mig_heads    the first frame of every locked 2 MiB entry, ascending
 *   mig_blocks   the numbers (frame >> 12) of the 16 MiB blocks that hold
 *                4 KiB locks outside 2 MiB entries, ascending
 *   mig_bitmaps  one little-endian bitmap of 4096 bits per such block
 * plus locked_frames, the count they must add up to.  A guest that
 * ballooned with 2 MiB pages sends 8 bytes per 2 MiB; 4 KiB locks cost at
 * most a bit per frame of the blocks they are in.  Nothing of the stream
 * is trusted: see vmb_load_locks().
 */
#define VMB_BLOCK_SHIFT     12
#define VMB_BLOCK_FRAMES    (1UL << VMB_BLOCK_SHIFT)
#define VMB_BLOCK_BYTES     (VMB_BLOCK_FRAMES / 8)
/* a block's first frame must have an address below 2^64 */
#define VMB_BLOCK_LAST      ((UINT64_MAX >> VMB_FRAME_SHIFT) >> VMB_BLOCK_SHIFT)

static gint vmb_cmp_u64(gconstpointer a, gconstpointer b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int vmb_pre_save(void *opaque)
{
    VMBalloonState *s = opaque;
    g_autofree unsigned long *bits = bitmap_new(VMB_CHUNK_FRAMES);
    g_autofree unsigned long *le = bitmap_new(VMB_BLOCK_FRAMES);
    GArray *keys = g_array_new(false, false, sizeof(uint64_t));
    GArray *heads = g_array_new(false, false, sizeof(uint64_t));
    GArray *blocks = g_array_new(false, false, sizeof(uint64_t));
    GByteArray *maps = g_byte_array_new();
    GHashTableIter iter;
    gpointer key;
    guint k;

    vmb_stream_free(s);
    g_hash_table_iter_init(&iter, s->locked.chunks);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        g_array_append_val(keys, *(uint64_t *)key);
    }
    g_array_sort(keys, vmb_cmp_u64);

    for (k = 0; k < keys->len; k++) {
        uint64_t base = g_array_index(keys, uint64_t, k) << VMB_CHUNK_SHIFT;
        unsigned long *head_bits = vmb_frames_chunk(&s->heads, base, false);
        unsigned long i, b;

        bitmap_copy(bits, vmb_frames_chunk(&s->locked, base, false),
                    VMB_CHUNK_FRAMES);
        /* 2 MiB entries travel as their heads only */
        if (head_bits) {
            for (i = find_first_bit(head_bits, VMB_CHUNK_FRAMES);
                 i < VMB_CHUNK_FRAMES;
                 i = find_next_bit(head_bits, VMB_CHUNK_FRAMES, i + 1)) {
                uint64_t head = base + i;

                g_array_append_val(heads, head);
                bitmap_clear(bits, i, VMB_2M_FRAMES);
            }
        }
        for (b = 0; b < VMB_CHUNK_FRAMES / VMB_BLOCK_FRAMES; b++) {
            unsigned long *block = bits + b * (VMB_BLOCK_FRAMES /
                                               BITS_PER_LONG);
            uint64_t number = (base >> VMB_BLOCK_SHIFT) + b;

            if (find_first_bit(block, VMB_BLOCK_FRAMES) >= VMB_BLOCK_FRAMES) {
                continue;
            }
            g_array_append_val(blocks, number);
            bitmap_to_le(le, block, VMB_BLOCK_FRAMES);
            g_byte_array_append(maps, (const guint8 *)le, VMB_BLOCK_BYTES);
        }
    }
    g_array_free(keys, true);

    s->mig_nheads = heads->len;
    s->mig_heads = (uint64_t *)g_array_free(heads, false);
    s->mig_nblocks = blocks->len;
    s->mig_blocks = (uint64_t *)g_array_free(blocks, false);
    s->mig_bitmap_bytes = maps->len;
    s->mig_bitmaps = g_byte_array_free(maps, false);
    trace_vmware_balloon_save(s->locked_frames, s->mig_nheads,
                              s->mig_nblocks);
    return 0;
}

static int vmb_post_save(void *opaque)
{
    vmb_stream_free(opaque);
    return 0;
}

static int vmb_pre_load(void *opaque)
{
    /* the arrays are allocated by the load itself */
    vmb_stream_free(opaque);
    return 0;
}

static int vmb_count_dimm(Object *obj, void *opaque)
{
    unsigned int *count = opaque;

    if (!strcmp(object_get_typename(obj), TYPE_PC_DIMM)) {
        (*count)++;
    }
    return 0;
}

/*
 * Checked before the arrays are read, so that a bad stream cannot make
 * the load allocate more than the guest's RAM can justify: at most every
 * frame locked, and at most the blocks that RAM can touch (each RAM
 * region, two for the boot RAM split at 4 GiB, may start and end in a
 * block of its own).
 */
static bool vmb_stream_sizes_ok(void *opaque, int version_id)
{
    VMBalloonState *s = opaque;
    uint64_t ram_frames = vmb_ram_size(s) >> VMB_FRAME_SHIFT;
    uint64_t in_2m = (uint64_t)s->mig_nheads * VMB_2M_FRAMES;
    unsigned int regions = 2;
    uint64_t max_blocks;

    object_child_foreach_recursive(qdev_get_machine(), vmb_count_dimm,
                                   &regions);
    max_blocks = DIV_ROUND_UP(ram_frames, VMB_BLOCK_FRAMES) + 2 * regions;
    if (s->locked_frames > ram_frames || in_2m > s->locked_frames ||
        s->mig_nblocks > s->locked_frames - in_2m ||
        s->mig_nblocks > max_blocks ||
        s->mig_bitmap_bytes != (uint64_t)s->mig_nblocks * VMB_BLOCK_BYTES) {
        error_report("vmware-balloon: the migration stream's sizes do not "
                     "fit this guest: %" PRIu64 " frames locked of %" PRIu64
                     ", %" PRIu32 " 2 MiB entries, %" PRIu32 " blocks in %"
                     PRIu32 " bytes", s->locked_frames, ram_frames,
                     s->mig_nheads, s->mig_nblocks, s->mig_bitmap_bytes);
        return false;
    }
    return true;
}

/*
 * The guest RAM map for checking a loaded stream: the ranges of frames
 * that are ordinary guest RAM (as vmb_find_ram decides it for a port call),
 * in address order, one per range of the flat view.  Built once per load,
 * so that checking a lock costs a binary search, not a lookup in the
 * memory map: a fragmented 4 KiB balloon has millions of runs of locks.
 */
typedef struct VMBRamMap {
    VMBalloonState *s;
    GArray *ranges;             /* VMBFrameRange */
} VMBRamMap;

static bool vmb_ram_map_add(Int128 start, Int128 len, const MemoryRegion *mr,
                            hwaddr offset_in_region, void *opaque)
{
    VMBRamMap *map = opaque;
    MemoryRegionSection sec;
    uint64_t first, end;

    /* cheap checks first: RAM never reaches the end of the address space */
    if (!memory_region_is_ram((MemoryRegion *)mr) || !mr->ram_block ||
        !vmb_is_guest_ram(map->s, (MemoryRegion *)mr)) {
        return false;
    }
    first = ROUND_UP(int128_get64(start), VMB_FRAME_SIZE) >> VMB_FRAME_SHIFT;
    end = int128_get64(int128_add(start, len)) >> VMB_FRAME_SHIFT;
    /*
     * Then the port call's own test, once per range: the range's mapping
     * may be read-only (a PAM alias of RAM, say), which @mr does not tell
     */
    if (end > first && vmb_find_ram(map->s, first, end - first, &sec)) {
        VMBFrameRange r = { .frame = first, .nframes = end - first };

        memory_region_unref(sec.mr);
        g_array_append_val(map->ranges, r);
    }
    return false;
}

static GArray *vmb_ram_map_new(VMBalloonState *s)
{
    VMBRamMap map = {
        .s = s,
        .ranges = g_array_new(false, false, sizeof(VMBFrameRange)),
    };

    RCU_READ_LOCK_GUARD();
    flatview_for_each_range(address_space_to_flatview(&address_space_memory),
                            vmb_ram_map_add, &map);
    return map.ranges;
}

/*
 * Is [frame, frame + n) ordinary guest RAM in @ranges?  With @one_range
 * it must lie in a single range (a 2 MiB entry, as a port call requires
 * it); otherwise it may run on into adjacent ranges.
 */
static bool vmb_ram_map_has(GArray *ranges, uint64_t frame, uint64_t n,
                            bool one_range)
{
    guint lo = 0, hi = ranges->len;
    uint64_t end = frame + n;

    if (n == 0 || end < frame) {
        return false;
    }
    /* the last range that starts at or before frame */
    while (hi - lo > 1) {
        guint mid = lo + (hi - lo) / 2;

        if (g_array_index(ranges, VMBFrameRange, mid).frame <= frame) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    for (; lo < ranges->len; lo++) {
        VMBFrameRange *r = &g_array_index(ranges, VMBFrameRange, lo);
        uint64_t r_end = r->frame + r->nframes;

        if (frame < r->frame || frame >= r_end) {
            return false;
        }
        if (end <= r_end) {
            return true;
        }
        if (one_range) {
            return false;
        }
        frame = r_end;
    }
    return false;
}

/*
 * Rebuild the frame sets from the stream, checking everything: the grant
 * is one this protocol knows and allows locks of the kinds present; 2 MiB
 * heads are aligned, ascending, and whole 2 MiB of ordinary guest RAM;
 * blocks are ascending, in range, not empty, and every frame they name is
 * ordinary guest RAM outside the 2 MiB entries; and the frames add up to
 * the count the stream carries.
 */
static bool vmb_load_locks(VMBalloonState *s, Error **errp)
{
    uint64_t want = s->locked_frames;
    g_autofree unsigned long *bits = bitmap_new(VMB_BLOCK_FRAMES);
    g_autoptr(GArray) ram = NULL;
    uint32_t i;

    vmb_forget_locks(s);
    if (s->granted & ~VMB_CAPS_ALL) {
        error_setg(errp, "unknown capabilities granted: 0x%" PRIx32,
                   s->granted);
        return false;
    }
    if (s->reset_pending && (s->granted || want)) {
        error_setg(errp, "a RESET is pending, yet capabilities are granted "
                   "or frames locked");
        return false;
    }
    if (want && !(s->granted & (VMB_CAP_BASIC | VMB_CAP_BATCHED))) {
        error_setg(errp, "frames are locked, but no lock command was "
                   "granted");
        return false;
    }
    if (s->mig_nheads && !(s->granted & VMB_CAP_BATCHED_2M)) {
        error_setg(errp, "2 MiB entries are locked, but BATCHED_2M was not "
                   "granted");
        return false;
    }

    ram = vmb_ram_map_new(s);

    for (i = 0; i < s->mig_nheads; i++) {
        uint64_t head = s->mig_heads[i];

        if (head % VMB_2M_FRAMES || (i && head <= s->mig_heads[i - 1])) {
            error_setg(errp, "2 MiB entry at frame 0x%" PRIx64 " is not "
                       "2 MiB aligned or out of order", head);
            return false;
        }
        if (!vmb_ram_map_has(ram, head, VMB_2M_FRAMES, true)) {
            error_setg(errp, "2 MiB entry at frame 0x%" PRIx64 " is not "
                       "ordinary guest RAM", head);
            return false;
        }
        vmb_frames_set(&s->locked, head, VMB_2M_FRAMES);
        vmb_frames_set(&s->heads, head, 1);
        s->locked_frames += VMB_2M_FRAMES;
        s->locked_2m++;
    }

    for (i = 0; i < s->mig_nblocks; i++) {
        uint64_t block = s->mig_blocks[i];
        uint64_t base = block << VMB_BLOCK_SHIFT;
        unsigned long first, end;

        if (block > VMB_BLOCK_LAST || (i && block <= s->mig_blocks[i - 1])) {
            error_setg(errp, "4 KiB block 0x%" PRIx64 " is out of range or "
                       "out of order", block);
            return false;
        }
        bitmap_from_le(bits, (unsigned long *)(s->mig_bitmaps +
                                               i * VMB_BLOCK_BYTES),
                       VMB_BLOCK_FRAMES);
        first = find_first_bit(bits, VMB_BLOCK_FRAMES);
        if (first >= VMB_BLOCK_FRAMES) {
            error_setg(errp, "4 KiB block 0x%" PRIx64 " is empty", block);
            return false;
        }
        for (; first < VMB_BLOCK_FRAMES;
             first = find_next_bit(bits, VMB_BLOCK_FRAMES, end)) {
            end = find_next_zero_bit(bits, VMB_BLOCK_FRAMES, first);
            if (vmb_frames_count(&s->locked, base + first, end - first)) {
                error_setg(errp, "4 KiB frames at 0x%" PRIx64 " lie in a "
                           "locked 2 MiB entry", base + first);
                return false;
            }
            if (!vmb_ram_map_has(ram, base + first, end - first, false)) {
                error_setg(errp, "4 KiB frames at 0x%" PRIx64 " are not all "
                           "ordinary guest RAM", base + first);
                return false;
            }
            vmb_frames_set(&s->locked, base + first, end - first);
            s->locked_frames += end - first;
        }
    }

    if (s->locked_frames != want) {
        error_setg(errp, "the stream counts %" PRIu64 " locked frames, its "
                   "sets hold %" PRIu64, want, s->locked_frames);
        return false;
    }
    return true;
}

static int vmb_post_load(void *opaque, int version_id)
{
    VMBalloonState *s = opaque;
    uint32_t grantable = s->legacy ? VMB_CAP_BASIC
                                   : s->capabilities & VMB_CAPS_ALL;
    int64_t start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    Error *err = NULL;
    bool ok = vmb_load_locks(s, &err);

    vmb_stream_free(s);
    if (!ok) {
        /* what is left is a host with nothing locked, waiting for START */
        vmb_forget_locks(s);
        vmb_set_granted(s, 0);
        s->reset_pending = true;
        error_reportf_err(err, "vmware-balloon: bad migration stream: ");
        return -EINVAL;
    }
    trace_vmware_balloon_load(s->locked_frames, s->locked_2m, s->granted,
                              qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start);
    vmb_set_granted(s, s->granted);

    /*
     * This host would not grant what the guest has: answer RESET, as a
     * restarted host does, and the guest negotiates again.
     */
    if (s->granted & ~grantable) {
        warn_report("vmware-balloon: the guest was granted 0x%x, this "
                    "device grants at most 0x%x: it has to start over",
                    s->granted, grantable);
        vmb_host_restart(s);
    }
    /* QMP clients learn the balloon of the loaded guest, as after a LOCK */
    qapi_event_send_balloon_change(vmb_actual(s));
    return 0;
}

/*
 * The protocol state travels whole, so that a guest does not notice the
 * move: see "Migration" at the top of this file.  Counters and fault
 * injection settings do not; they belong to the host.
 */
static const VMStateDescription vmb_vmstate = {
    .name = TYPE_VMWARE_BALLOON,
    .version_id = 3,
    .minimum_version_id = 3,
    .pre_save = vmb_pre_save,
    .post_save = vmb_post_save,
    .pre_load = vmb_pre_load,
    .post_load = vmb_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(granted, VMBalloonState),
        VMSTATE_BOOL(reset_pending, VMBalloonState),
        VMSTATE_UINT64(target_frames, VMBalloonState),
        VMSTATE_UINT64(last_limit, VMBalloonState),
        VMSTATE_UINT64(guest_id, VMBalloonState),
        VMSTATE_UINT64(doorbell_cid, VMBalloonState),
        VMSTATE_UINT64(doorbell_rid, VMBalloonState),
        VMSTATE_UINT64(locked_frames, VMBalloonState),
        VMSTATE_UINT32(mig_nheads, VMBalloonState),
        VMSTATE_UINT32(mig_nblocks, VMBalloonState),
        VMSTATE_UINT32(mig_bitmap_bytes, VMBalloonState),
        VMSTATE_VALIDATE("sizes fit the guest", vmb_stream_sizes_ok),
        VMSTATE_VARRAY_UINT32_ALLOC(mig_heads, VMBalloonState, mig_nheads,
                                    0, vmstate_info_uint64, uint64_t),
        VMSTATE_VARRAY_UINT32_ALLOC(mig_blocks, VMBalloonState, mig_nblocks,
                                    0, vmstate_info_uint64, uint64_t),
        VMSTATE_VBUFFER_ALLOC_UINT32(mig_bitmaps, VMBalloonState, 0, NULL,
                                     mig_bitmap_bytes),
        VMSTATE_END_OF_LIST()
    },
};

static const Property vmb_properties[] = {
    DEFINE_PROP_UINT32("capabilities", VMBalloonState, capabilities,
                       VMB_CAP_DEFAULT),
    DEFINE_PROP_BOOL("x-legacy", VMBalloonState, legacy, false),
};

static void vmb_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    dc->realize = vmb_realize;
    dc->unrealize = vmb_unrealize;
    rc->phases.enter = vmb_reset_enter;
    rc->phases.exit = vmb_reset_exit;
    dc->vmsd = &vmb_vmstate;
    dc->desc = "VMware memory balloon (hypervisor side, port 0x5670)";
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
    device_class_set_props(dc, vmb_properties);
}

static const TypeInfo vmb_type_info = {
    .name              = TYPE_VMWARE_BALLOON,
    .parent            = TYPE_ISA_DEVICE,
    .instance_size     = sizeof(VMBalloonState),
    .instance_init     = vmb_instance_init,
    .instance_finalize = vmb_instance_finalize,
    .class_init        = vmb_class_init,
};

static void vmb_register_types(void)
{
    type_register_static(&vmb_type_info);
}

type_init(vmb_register_types)
