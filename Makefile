# vmw-balloon-dkms: the VMware memory balloon driver as DKMS packages.
#
#   make            build src/vmw_balloon.ko against KDIR (default: the
#                   running kernel's headers, else the newest installed)
#   make check      run every test (tests/run); `tests/run --list` names them
#   make check-long those and the long ones: the guest suite on Debian sid
#                   (tests/run --long; `tests/run --list-long` names them)
#   make deb        build/deb/vmw-balloon-dkms_<version>_all.deb
#   make rpm        build/rpm/RPMS/noarch/vmw-balloon-dkms-<version>-1.noarch.rpm
#   make repo       publish the .deb in REPO_DIR (default build/repo/), a
#                   signed apt repository that keeps every version published
#                   (debian/make-repo; keys: VMB_SIGNING_KEY, see
#                   tests/lib/project-key), with the keyring package and
#                   cloud-init-user-data.yaml for it (URI: VMB_REPO_URI)
#   make qemu       the QEMU with the vmware-balloon device (cached); prints its path
#   make qemu-series  the device as a git format-patch series against the
#                   QEMU 10.0 source that `make qemu` builds (which builds
#                   from that series): build/qemu-series/
#                   and the series for QEMU master (to submit), with the
#                   lab-only patch beside it: build/qemu-series-master/
#   make image      the Debian guest disk (cached); prints its path
#                   (bookworm; VMB_SUITE=bullseye, trixie or sid for the others,
#                   VMB_IMAGE_VARIANT=genericcloud for one without dkms,
#                   compiler or headers, =secureboot for the UEFI Secure
#                   Boot one)
#   make demo       boot a VMware-like guest and watch it balloon
#                   (SECURE_BOOT=1: with Secure Boot, no key enrolled)
#   make bench      the balloon benchmark: this package vs the kernel's own
#                   vmw_balloon vs virtio_balloon, in bookworm guests
#                   (bench/run; results in build/bench/)
#   make matrix     build the module W=1 against the newest kernel of every
#                   Debian release from bullseye to sid, each in a cached
#                   root of that release (tests/matrix/run)
#
# The version is PACKAGE_VERSION in dkms.conf; Kbuild reads it for
# MODULE_VERSION. debian/changelog and rpm/vmw-balloon-dkms.spec must repeat
# it (their formats want it literally): tests/checks/version.sh fails when
# they disagree.

SHELL := /bin/bash
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$$/\1/p' dkms.conf)
BUILD := build
PACKAGER ?= vmw-balloon-dkms developers <dev@vmw-balloon-dkms.invalid>
KDIR ?= $(shell tests/lib/find-kdir 2>/dev/null)

# What the packages ship under /usr/src/vmw_balloon-<version>/, besides
# dkms.conf: src/ as it is, without what a build leaves there.
MODULE_SOURCES := src/Kbuild src/conftest.sh \
	$(sort $(filter-out %.mod.c,$(wildcard src/*.c))) \
	$(sort $(filter-out src/vmb_features.h,$(wildcard src/*.h))) \
	$(sort $(wildcard src/probes/*.c))

DEB := $(BUILD)/deb/vmw-balloon-dkms_$(VERSION)_all.deb
RPM := $(BUILD)/rpm/RPMS/noarch/vmw-balloon-dkms-$(VERSION)-1.noarch.rpm

.PHONY: all module clean check check-long unit deb rpm repo qemu qemu-series image demo bench matrix \
	print-module-sources

all: module

module:
	@test -n "$(KDIR)" || tests/lib/find-kdir
	$(MAKE) -C $(KDIR) M=$(CURDIR)/src modules

unit:
	$(MAKE) -C tests/unit run

check:
	tests/run

check-long:
	tests/run --long

deb: $(DEB)
$(DEB): dkms.conf $(MODULE_SOURCES) $(wildcard debian/* debian/source/* debian/modprobe.d/*)
	tests/lib/need-packages dpkg-dev debhelper dh-dkms fakeroot
	rm -rf $(BUILD)/deb
	mkdir -p $(BUILD)/deb/vmw-balloon-$(VERSION)
	cp dkms.conf $(BUILD)/deb/vmw-balloon-$(VERSION)/
	cp -r debian $(BUILD)/deb/vmw-balloon-$(VERSION)/
	cp --parents $(MODULE_SOURCES) $(BUILD)/deb/vmw-balloon-$(VERSION)/
	cd $(BUILD)/deb/vmw-balloon-$(VERSION) && dpkg-buildpackage -us -uc -b
	@ls -l $@

REPO_DIR ?= $(BUILD)/repo
repo: $(DEB)
	debian/make-repo $(REPO_DIR) $(DEB)

rpm: $(RPM)
# The loader, its modprobe.d rule and the kernel hook are the .deb's
# (debian/), the kernel-install plugin that runs the hook the .rpm's;
# COPYING, the GPL-2.0 text, is Debian's copy (base-files) for %license.
RPM_EXTRA := debian/load-vmw-balloon debian/modprobe.d/vmw-balloon-dkms.conf \
	debian/kernel-hook rpm/39-vmw-balloon-dkms.install
$(RPM): dkms.conf README.md $(MODULE_SOURCES) $(RPM_EXTRA) rpm/vmw-balloon-dkms.spec
	tests/lib/need-packages rpm
	rm -rf $(BUILD)/rpm
	mkdir -p $(BUILD)/rpm/SOURCES $(BUILD)/rpm/vmw-balloon-$(VERSION)
	cp dkms.conf README.md $(RPM_EXTRA) $(BUILD)/rpm/vmw-balloon-$(VERSION)/
	cp /usr/share/common-licenses/GPL-2 $(BUILD)/rpm/vmw-balloon-$(VERSION)/COPYING
	cd src && cp --parents $(MODULE_SOURCES:src/%=%) $(CURDIR)/$(BUILD)/rpm/vmw-balloon-$(VERSION)/
	tar -C $(BUILD)/rpm -czf $(BUILD)/rpm/SOURCES/vmw-balloon-$(VERSION).tar.gz \
		--owner=0 --group=0 --sort=name vmw-balloon-$(VERSION)
	rpmbuild --define "_topdir $(CURDIR)/$(BUILD)/rpm" --define "packager $(PACKAGER)" \
		-ba rpm/vmw-balloon-dkms.spec
	tests/lib/rpm-sign $@ $(BUILD)/rpm/SRPMS/vmw-balloon-dkms-$(VERSION)-1.src.rpm
	@ls -l $@

qemu:
	@qemu-cloud/qemu/build.sh

qemu-series:
	@qemu-cloud/qemu/series.sh $(BUILD)/qemu-series
	@qemu-cloud/qemu-master/series.sh $(BUILD)/qemu-series-master

image:
	@qemu-cloud/image/build.sh

demo:
	qemu-cloud/demo

bench:
	bench/run

matrix:
	tests/matrix/run

# for tests/matrix/run, which copies the packaged layout
print-module-sources:
	@echo $(MODULE_SOURCES)

clean:
	rm -rf $(BUILD)
	$(MAKE) -C tests/unit clean
	rm -f src/*.o src/*.ko src/*.mod src/*.mod.c src/.*.cmd src/Module.symvers \
		src/modules.order src/vmb_features.h src/vmb_probes.log
	rm -rf src/.vmb_probes
