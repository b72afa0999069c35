#!/usr/bin/env python3
#
# Functional test: Linux's own vmw_balloon driver against vmware-balloon
#
# The guest is Debian 11's cloud kernel with a tiny initramfs built here
# (busybox, the kernel's vmw_vmci and vmw_balloon modules).  QEMU makes the
# machine look like VMware to it (VMware SMBIOS serial, the vmport
# backdoor, no CPUID hypervisor bit), so that the in-tree driver loads and
# talks to the device on port 0x5670.
#
# SPDX-License-Identifier: GPL-2.0-or-later

import stat
import time

from qemu_test import LinuxKernelTest, Asset
from qemu_test import exec_command_and_wait_for_pattern

KVER = '5.10.0-32-cloud-amd64'
MIB = 1024 * 1024


def cpio_newc(entries):
    """An uncompressed "newc" cpio archive of @entries: tuples of (name,
    mode, data) for files and links (data: contents, or a link's target)
    and (name, mode, (major, minor)) for character devices."""
    out = bytearray()

    def add(name, mode, data=b'', rdev=(0, 0), ino=0):
        name_z = name.encode() + b'\0'
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
                  len(name_z), 0)
        out.extend(b'070701' + b''.join(b'%08x' % f for f in fields))
        out.extend(name_z)
        out.extend(b'\0' * (-len(out) % 4))
        out.extend(data)
        out.extend(b'\0' * (-len(out) % 4))

    for ino, (name, mode, data) in enumerate(entries, start=1):
        if stat.S_ISCHR(mode):
            add(name, mode, rdev=data, ino=ino)
        else:
            add(name, mode, data, ino=ino)
    add('TRAILER!!!', 0)
    return bytes(out)


INIT = b'''#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
insmod /vmw_vmci.ko
insmod /vmw_balloon.ko
grep -q "^vmw_balloon " /proc/modules && echo "vmw_balloon is loaded"
exec setsid cttyhack sh
'''


class VMwareBalloon(LinuxKernelTest):

    timeout = 300

    ASSET_KERNEL_DEB = Asset(
        ('http://deb.debian.org/debian/pool/main/l/linux-signed-amd64/'
         'linux-image-5.10.0-32-cloud-amd64_5.10.223-1_amd64.deb'),
        'fb4a1229952d892138532c1d9f40a7fd0bd408e4dcf969c12e4524b6a89fdcb8')

    ASSET_BUSYBOX_DEB = Asset(
        ('http://deb.debian.org/debian/pool/main/b/busybox/'
         'busybox-static_1.30.1-6+b3_amd64.deb'),
        '8ce5bf3d1c6dbb964325e99f319e40cd8e0e995323481942080bd17d5d5acf89')

    def make_initrd(self):
        mods = f'lib/modules/{KVER}/kernel/drivers/misc'

        def read(asset, member):
            path = self.archive_extract(asset, format='deb', member=member)
            with open(path, 'rb') as f:
                return f.read()

        d, f, ln, c = 0o40755, 0o100755, 0o120777, 0o20600
        entries = [('bin', d, b''), ('dev', d, b''), ('proc', d, b''),
                   ('sys', d, b''),
                   ('dev/console', c, (5, 1)),
                   ('bin/busybox', f,
                    read(self.ASSET_BUSYBOX_DEB, 'bin/busybox')),
                   ('bin/sh', ln, b'busybox'),
                   ('init', f, INIT),
                   ('vmw_vmci.ko', 0o100644,
                    read(self.ASSET_KERNEL_DEB,
                         f'{mods}/vmw_vmci/vmw_vmci.ko')),
                   ('vmw_balloon.ko', 0o100644,
                    read(self.ASSET_KERNEL_DEB, f'{mods}/vmw_balloon.ko'))]
        kernel = self.archive_extract(self.ASSET_KERNEL_DEB, format='deb',
                                      member=f'boot/vmlinuz-{KVER}')
        initrd = self.scratch_file('initrd.cpio')
        with open(initrd, 'wb') as out:
            out.write(cpio_newc(entries))
        return kernel, initrd

    def balloon_prop(self, name):
        return self.vm.cmd('qom-get', path='/machine/peripheral/balloon0',
                           property=name)

    def wait_for_actual(self, actual, seconds):
        """Wait until query-balloon reports @actual bytes."""
        deadline = time.monotonic() + seconds
        while True:
            now = self.vm.cmd('query-balloon')['actual']
            if now == actual or time.monotonic() > deadline:
                return now
            time.sleep(1)

    def test_vmw_balloon(self):
        self.set_machine('pc')
        self.require_device('vmware-balloon')
        kernel, initrd = self.make_initrd()
        ram = 512 * MIB
        self.vm.add_args('-m', '512M',
                         '-machine', 'vmport=on',
                         '-cpu', 'qemu64,hypervisor=off',
                         '-smbios', 'type=1,manufacturer=VMware,, Inc.,'
                         'product=VMware Virtual Platform,'
                         'serial=VMware-56 4d 00 00 00 00 00 00-'
                         '00 00 00 00 00 00 00 01',
                         '-device', 'vmware-balloon,id=balloon0',
                         '-append', self.KERNEL_COMMON_COMMAND_LINE +
                         'console=ttyS0 quiet')
        self.launch_kernel(kernel, initrd, wait_for='vmw_balloon is loaded')
        self.assertEqual(self.vm.cmd('query-balloon')['actual'], ram)

        # 128 MiB into the balloon: the driver hands the pages over, the
        # device holds them, and the guest's own statistics agree
        self.vm.cmd('balloon', value=ram - 128 * MIB)
        self.assertEqual(self.wait_for_actual(ram - 128 * MIB, 180),
                         ram - 128 * MIB)
        self.assertEqual(self.balloon_prop('x-locked-frames'), 32768)
        self.assertNotEqual(self.balloon_prop('x-granted-capabilities'), 0)
        exec_command_and_wait_for_pattern(
            self, "echo driver holds $(awk '$1 == \"current\" "
            "{ print $NF }' /sys/kernel/debug/vmmemctl) pages",
            'driver holds 32768 pages')

        # and back out
        self.vm.cmd('balloon', value=ram)
        self.assertEqual(self.wait_for_actual(ram, 180), ram)
        self.assertEqual(self.balloon_prop('x-locked-frames'), 0)


if __name__ == '__main__':
    LinuxKernelTest.main()
