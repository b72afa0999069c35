/*
 * QTest testcase for the vmware-balloon device
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "libqtest.h"
#include "qobject/qdict.h"

#define RAM_BYTES           (256 * MiB)
#define BASE_ARGS           "-machine pc -m 256M -nodefaults "
#define DEVICE_PATH         "/machine/peripheral/vmb0"

#define VMB_PORT            0x5670
#define VMB_CAP_DEFAULT     0x2e
#define VMB_SUCCESS_CAPS    0x03000000

/* How long a wait for QEMU or the guest may take */
#define WAIT_SECONDS        60

/*
 * A boot sector that speaks the protocol in real mode, with 32-bit
 * registers, and leaves what it got in guest memory:
 *   0x7e00  START's status       0x7e04  the capabilities granted (ECX)
 *   0x7e08  LOCK's status (the 4 KiB frame at 2 MiB)
 *   0x7e0c  GET_TARGET's status  0x7e10  the target (EBX)
 *   0x7e14  how many GET_TARGET calls were made, in a loop
 */
#define GUEST_START_STATUS  0x7e00
#define GUEST_GRANTED       0x7e04
#define GUEST_LOCK_STATUS   0x7e08
#define GUEST_TARGET_STATUS 0x7e0c
#define GUEST_TARGET        0x7e10
#define GUEST_LOOPS         0x7e14
#define GUEST_LOCKED_FRAME  0x200

static const uint8_t guest_code[] = {
    0xfa,                                   /* cli */
    0x31, 0xc0,                             /* xor %ax,%ax */
    0x8e, 0xd8,                             /* mov %ax,%ds */
    /* START, offering every capability */
    0x66, 0xb8, 0x6f, 0x6d, 0x6c, 0x45,     /* mov $0x456c6d6f,%eax */
    0x66, 0xb9, 0x00, 0x00, 0x00, 0x00,     /* mov $0,%ecx */
    0x66, 0xbb, 0x3e, 0x00, 0x00, 0x00,     /* mov $0x3e,%ebx */
    0xba, 0x70, 0x56,                       /* mov $0x5670,%dx */
    0x66, 0xed,                             /* in (%dx),%eax */
    0x66, 0xa3, 0x00, 0x7e,                 /* mov %eax,0x7e00 */
    0x66, 0x89, 0x0e, 0x04, 0x7e,           /* mov %ecx,0x7e04 */
    /* LOCK of frame 0x200 */
    0x66, 0xb8, 0x6f, 0x6d, 0x6c, 0x45,     /* mov $0x456c6d6f,%eax */
    0x66, 0xb9, 0x02, 0x00, 0x00, 0x00,     /* mov $2,%ecx */
    0x66, 0xbb, 0x00, 0x02, 0x00, 0x00,     /* mov $0x200,%ebx */
    0x66, 0xed,                             /* in (%dx),%eax */
    0x66, 0xa3, 0x08, 0x7e,                 /* mov %eax,0x7e08 */
    /* 1: GET_TARGET, for ever */
    0x66, 0xb8, 0x6f, 0x6d, 0x6c, 0x45,     /* mov $0x456c6d6f,%eax */
    0x66, 0xb9, 0x01, 0x00, 0x00, 0x00,     /* mov $1,%ecx */
    0x66, 0x31, 0xdb,                       /* xor %ebx,%ebx */
    0x66, 0xed,                             /* in (%dx),%eax */
    0x66, 0xa3, 0x0c, 0x7e,                 /* mov %eax,0x7e0c */
    0x66, 0x89, 0x1e, 0x10, 0x7e,           /* mov %ebx,0x7e10 */
    0x66, 0xff, 0x06, 0x14, 0x7e,           /* incl 0x7e14 */
    0xeb, 0xdf,                             /* jmp 1b */
};

static char *make_boot_disk(char **dir)
{
    g_autoptr(GError) err = NULL;
    uint8_t sector[512] = { 0 };
    char *file;

    *dir = g_dir_make_tmp("vmware-balloon-test-XXXXXX", &err);
    g_assert_no_error(err);
    file = g_build_filename(*dir, "boot.img", NULL);
    memcpy(sector, guest_code, sizeof(guest_code));
    sector[510] = 0x55;
    sector[511] = 0xaa;
    g_file_set_contents(file, (char *)sector, sizeof(sector), &err);
    g_assert_no_error(err);
    return file;
}

static uint64_t get_uint(QTestState *qts, const char *property)
{
    QDict *rsp = qtest_qmp(qts, "{ 'execute': 'qom-get', 'arguments': "
                           "{ 'path': %s, 'property': %s } }",
                           DEVICE_PATH, property);
    uint64_t value;

    g_assert(qdict_haskey(rsp, "return"));
    value = qdict_get_int(rsp, "return");
    qobject_unref(rsp);
    return value;
}

static int64_t query_balloon(QTestState *qts)
{
    QDict *rsp = qtest_qmp_assert_success_ref(qts,
                     "{ 'execute': 'query-balloon' }");
    int64_t actual = qdict_get_int(rsp, "actual");

    qobject_unref(rsp);
    return actual;
}

static void set_balloon(QTestState *qts, uint64_t keep)
{
    qtest_qmp_assert_success(qts, "{ 'execute': 'balloon', 'arguments': "
                             "{ 'value': %" PRIu64 " } }", keep);
}

/* Wait until the guest has made @loops more GET_TARGET calls */
static void wait_guest_loops(QTestState *qts, uint32_t loops)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_SECONDS * G_USEC_PER_SEC;
    uint32_t start = qtest_readl(qts, GUEST_LOOPS);

    while (qtest_readl(qts, GUEST_LOOPS) - start < loops) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
}

/* Wait until @command's answer has @key = @want */
static void wait_for(QTestState *qts, const char *command, const char *key,
                     const char *want)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_SECONDS * G_USEC_PER_SEC;

    for (;;) {
        QDict *rsp = qtest_qmp_assert_success_ref(qts, "{ 'execute': %s }",
                                                  command);
        const char *got = qdict_get_try_str(rsp, key);
        bool done = got && !strcmp(got, want);

        g_assert(!got || (strcmp(got, "failed") && strcmp(got, "error")));
        qobject_unref(rsp);
        if (done) {
            return;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
}

/* The device, its default capabilities, and QMP balloon/query-balloon */
static void test_qmp(void)
{
    QTestState *qts = qtest_init(BASE_ARGS "-device vmware-balloon,id=vmb0");

    g_assert_cmphex(get_uint(qts, "capabilities"), ==, VMB_CAP_DEFAULT);
    g_assert_cmpint(query_balloon(qts), ==, RAM_BYTES);

    /* no guest driver takes anything */
    set_balloon(qts, RAM_BYTES - 16 * MiB);
    g_assert_cmpint(query_balloon(qts), ==, RAM_BYTES);

    /* a read of the port that does not come from a vCPU is not a call */
    g_assert_cmphex(qtest_inl(qts, VMB_PORT), ==, UINT32_MAX);

    qtest_quit(qts);
}

/* QEMU started with @args fails at startup with exit status 1 */
static void check_start_fails(const char *args)
{
    /* not connected: QEMU exits before it would answer */
    QTestState *qts = qtest_init_ext(NULL, args, NULL, false);
    gint64 deadline = g_get_monotonic_time() + WAIT_SECONDS * G_USEC_PER_SEC;

    qtest_set_expected_status(qts, 1);
    while (qtest_probe_child(qts)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(10 * 1000);
    }
    qtest_quit(qts);
}

/* Only one balloon device: a second one fails to realize */
static void test_one_balloon(void)
{
    check_start_fails(BASE_ARGS "-device vmware-balloon "
                      "-device vmware-balloon");
}

/* Realize refuses capability bits the protocol does not define */
static void test_capabilities(void)
{
    static const char *const bad[] = { "0x1", "0x40", "0x3f", "0x80000000" };
    static const uint32_t good[] = { 0, 0x2, 0x3e };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        g_autofree char *args = g_strdup_printf(BASE_ARGS "-device "
                                                "vmware-balloon,"
                                                "capabilities=%s", bad[i]);

        check_start_fails(args);
    }
    for (i = 0; i < ARRAY_SIZE(good); i++) {
        QTestState *qts = qtest_initf(BASE_ARGS "-device vmware-balloon,"
                                      "id=vmb0,capabilities=%" PRIu32,
                                      good[i]);

        g_assert_cmphex(get_uint(qts, "capabilities"), ==, good[i]);
        qtest_quit(qts);
    }
}

static QTestState *start_guest(const char *disk, const char *extra)
{
    return qtest_initf("-accel tcg " BASE_ARGS
                       "-drive file=%s,format=raw,if=ide "
                       "-device vmware-balloon,id=vmb0 %s", disk, extra);
}

/*
 * A guest that calls the device: START grants what it offers of the
 * device's capabilities, a LOCK takes a frame out of "actual", and
 * GET_TARGET follows QMP "balloon".
 */
static void test_guest(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *disk = make_boot_disk(&dir);
    QTestState *qts = start_guest(disk, "");

    set_balloon(qts, RAM_BYTES - 8 * MiB);
    wait_guest_loops(qts, 1);
    g_assert_cmphex(qtest_readl(qts, GUEST_START_STATUS), ==,
                    VMB_SUCCESS_CAPS);
    g_assert_cmphex(qtest_readl(qts, GUEST_GRANTED), ==, VMB_CAP_DEFAULT);
    g_assert_cmphex(qtest_readl(qts, GUEST_LOCK_STATUS), ==, 0);
    g_assert_cmpint(query_balloon(qts), ==, RAM_BYTES - 4096);

    set_balloon(qts, RAM_BYTES - 32 * MiB);
    wait_guest_loops(qts, 2);
    g_assert_cmphex(qtest_readl(qts, GUEST_TARGET_STATUS), ==, 0);
    g_assert_cmpuint(qtest_readl(qts, GUEST_TARGET), ==, 32 * MiB / 4096);

    qtest_quit(qts);
    unlink(disk);
    rmdir(dir);
}

/*
 * The device's state migrates, to a file and back: the destination's
 * guest keeps its lock and its target; the load tells QMP clients the
 * balloon it brought (BALLOON_CHANGE).
 */
static void test_migrate(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *disk = make_boot_disk(&dir);
    g_autofree char *file = g_build_filename(dir, "state", NULL);
    g_autofree char *uri = g_strdup_printf("file:%s", file);
    QTestState *src, *dst;
    QDict *event;

    src = start_guest(disk, "");
    set_balloon(src, RAM_BYTES - 64 * MiB);
    wait_guest_loops(src, 2);
    g_assert_cmpint(query_balloon(src), ==, RAM_BYTES - 4096);
    qtest_qmp_assert_success(src, "{ 'execute': 'migrate', 'arguments': "
                             "{ 'uri': %s } }", uri);
    wait_for(src, "query-migrate", "status", "completed");
    qtest_quit(src);

    /* deferred, so that the load comes after QMP is set up */
    dst = start_guest(disk, "-incoming defer");
    qtest_qmp_assert_success(dst, "{ 'execute': 'migrate-incoming', "
                             "'arguments': { 'uri': %s } }", uri);
    wait_for(dst, "query-status", "status", "running");
    /* sent by the load, before the guest ran again */
    event = qtest_qmp_event_ref(dst, "BALLOON_CHANGE");
    g_assert_nonnull(event);
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(event, "data"), "actual"),
                    ==, RAM_BYTES - 4096);
    qobject_unref(event);
    wait_guest_loops(dst, 2);
    g_assert_cmpint(query_balloon(dst), ==, RAM_BYTES - 4096);
    g_assert_cmpuint(qtest_readl(dst, GUEST_TARGET), ==, 64 * MiB / 4096);
    qtest_quit(dst);

    unlink(file);
    unlink(disk);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("vmware-balloon/qmp", test_qmp);
    qtest_add_func("vmware-balloon/one-balloon", test_one_balloon);
    qtest_add_func("vmware-balloon/capabilities", test_capabilities);
    if (qtest_has_accel("tcg")) {
        qtest_add_func("vmware-balloon/guest", test_guest);
        qtest_add_func("vmware-balloon/migrate", test_migrate);
    }

    return g_test_run();
}
