/*
 * QTest testcase for the vmware-balloon device
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "hw/i386/vmware-balloon-wire.h"

#define RAM_MIB     256
#define RAM_BYTES   ((uint64_t)RAM_MIB << 20)
#define DEVICE_PATH "/machine/peripheral/vmb0"
#define BASE_ARGS   "-machine pc -m 256M -nodefaults "

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

/* The device, its default capabilities, and QMP balloon/query-balloon */
static void test_qmp(void)
{
    QTestState *qts = qtest_init(BASE_ARGS "-device vmware-balloon,id=vmb0");

    g_assert_cmpuint(get_uint(qts, "capabilities"), ==,
                     VMB_CAP_BASIC | VMB_CAP_BATCHED | VMB_CAP_BATCHED_2M |
                     VMB_CAP_64BIT_TARGET);
    g_assert_cmpuint(get_uint(qts, "x-ram-frames"), ==,
                     RAM_BYTES >> VMB_FRAME_SHIFT);
    g_assert_cmpuint(get_uint(qts, "x-target-frames"), ==, 0);

    /* nothing is ballooned yet: the guest has all of its RAM */
    g_assert_cmpint(query_balloon(qts), ==, RAM_BYTES);

    /* "balloon" names what the guest keeps; the target is the rest */
    qtest_qmp_assert_success(qts, "{ 'execute': 'balloon', 'arguments': "
                             "{ 'value': %" PRIu64 " } }",
                             RAM_BYTES - (16 << 20));
    g_assert_cmpuint(get_uint(qts, "x-target-frames"), ==,
                     (16 << 20) >> VMB_FRAME_SHIFT);
    /* no guest driver took anything */
    g_assert_cmpint(query_balloon(qts), ==, RAM_BYTES);

    /* a read of the port from outside a vCPU is not a call */
    g_assert_cmphex(qtest_inl(qts, VMB_PORT), ==, UINT32_MAX);
    g_assert_cmpuint(get_uint(qts, "x-calls-start"), ==, 0);
    g_assert_cmpuint(get_uint(qts, "x-bad-magic"), ==, 0);

    qtest_quit(qts);
}

/*
 * Start QEMU with these -device options, which must make it fail; return
 * what it wrote to standard error.
 */
static char *run_failing(const char *device1, const char *device2)
{
    const char *binary = g_getenv("QTEST_QEMU_BINARY");
    g_auto(GStrv) qemu = NULL;
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    char *err = NULL;
    int status = -1;
    int i;

    /* QTEST_QEMU_BINARY may carry options of its own */
    g_assert(binary);
    g_assert(g_shell_parse_argv(binary, NULL, &qemu, NULL));
    for (i = 0; qemu[i]; i++) {
        g_ptr_array_add(argv, qemu[i]);
    }
    g_ptr_array_add(argv, (char *)"-machine");
    g_ptr_array_add(argv, (char *)"pc");
    g_ptr_array_add(argv, (char *)"-accel");
    g_ptr_array_add(argv, (char *)"qtest");
    g_ptr_array_add(argv, (char *)"-nodefaults");
    g_ptr_array_add(argv, (char *)"-display");
    g_ptr_array_add(argv, (char *)"none");
    g_ptr_array_add(argv, (char *)"-device");
    g_ptr_array_add(argv, (char *)device1);
    if (device2) {
        g_ptr_array_add(argv, (char *)"-device");
        g_ptr_array_add(argv, (char *)device2);
    }
    g_ptr_array_add(argv, NULL);

    g_assert(g_spawn_sync(NULL, (char **)argv->pdata, NULL,
                          G_SPAWN_STDOUT_TO_DEV_NULL |
                          G_SPAWN_STDIN_FROM_DEV_NULL,
                          NULL, NULL, NULL, &err, &status, NULL));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    return err;
}

/* A second balloon device is refused */
static void test_one_balloon(void)
{
    g_autofree char *err = run_failing("vmware-balloon", "vmware-balloon");

    g_assert_nonnull(strstr(err, "Only one balloon device"));
}

/* Realize refuses capability bits the protocol does not define */
static void test_capabilities(void)
{
    static const char *const bad[] = { "0x1", "0x40", "0x3f", "0x80000000" };
    static const uint32_t good[] = { 0, VMB_CAP_BASIC, VMB_CAPS_ALL };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        g_autofree char *device = g_strdup_printf("vmware-balloon,"
                                                  "capabilities=%s", bad[i]);
        g_autofree char *err = run_failing(device, NULL);

        g_assert_nonnull(strstr(err, "has unknown bits"));
    }
    for (i = 0; i < ARRAY_SIZE(good); i++) {
        QTestState *qts = qtest_initf(BASE_ARGS "-device vmware-balloon,"
                                      "id=vmb0,capabilities=%" PRIu32,
                                      good[i]);

        g_assert_cmphex(get_uint(qts, "capabilities"), ==, good[i]);
        qtest_quit(qts);
    }
}

/* Wait (at most a minute) until @command's answer has @key = @want */
static void wait_for(QTestState *qts, const char *command, const char *key,
                     const char *want)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;

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

/*
 * An idle device migrates, to a file and back, with its state; the load
 * tells QMP clients the balloon it brought (BALLOON_CHANGE)
 */
static void test_migrate(void)
{
    g_autofree char *dir = g_dir_make_tmp("vmware-balloon-test-XXXXXX", NULL);
    g_autofree char *file = g_build_filename(dir, "state", NULL);
    g_autofree char *uri = g_strdup_printf("file:%s", file);
    QTestState *src, *dst;
    QDict *event, *data;

    g_assert(dir);
    src = qtest_init(BASE_ARGS "-device vmware-balloon,id=vmb0");
    qtest_qmp_assert_success(src, "{ 'execute': 'balloon', 'arguments': "
                             "{ 'value': %" PRIu64 " } }",
                             RAM_BYTES - (64 << 20));
    qtest_qmp_assert_success(src, "{ 'execute': 'migrate', 'arguments': "
                             "{ 'uri': %s } }", uri);
    wait_for(src, "query-migrate", "status", "completed");
    qtest_quit(src);

    /* deferred, so that the load comes after QMP is set up */
    dst = qtest_init(BASE_ARGS "-device vmware-balloon,id=vmb0 "
                     "-incoming defer");
    qtest_qmp_assert_success(dst, "{ 'execute': 'migrate-incoming', "
                             "'arguments': { 'uri': %s } }", uri);
    wait_for(dst, "query-status", "status", "running");
    event = qtest_qmp_event_ref(dst, "BALLOON_CHANGE");
    g_assert_nonnull(event);
    data = qdict_get_qdict(event, "data");
    g_assert_cmpint(qdict_get_int(data, "actual"), ==, RAM_BYTES);
    qobject_unref(event);
    g_assert_cmpuint(get_uint(dst, "x-target-frames"), ==,
                     (64 << 20) >> VMB_FRAME_SHIFT);
    g_assert_cmpuint(get_uint(dst, "x-locked-frames"), ==, 0);
    g_assert_cmpuint(get_uint(dst, "x-granted-capabilities"), ==, 0);
    g_assert_cmpint(query_balloon(dst), ==, RAM_BYTES);
    qtest_quit(dst);

    unlink(file);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    qtest_add_func("vmware-balloon/qmp", test_qmp);
    qtest_add_func("vmware-balloon/one-balloon", test_one_balloon);
    qtest_add_func("vmware-balloon/capabilities", test_capabilities);
    qtest_add_func("vmware-balloon/migrate", test_migrate);

    return g_test_run();
}
