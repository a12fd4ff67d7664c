#!/bin/sh
# Runs inside the freshly bootstrapped root file system (chroot), as root.
# Turns it into a host that boots systemd as PID 1 inside a podman container.
set -eu

# Every container gets its own machine id at boot (systemd fills an empty file).
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id

# Units that need a real console, kernel or hardware only add noise in a container.
for unit in getty@tty1.service console-getty.service systemd-udevd.service \
            systemd-udev-trigger.service systemd-firstboot.service \
            systemd-remount-fs.service sys-kernel-config.mount \
            sys-kernel-debug.mount sys-kernel-tracing.mount; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
done

# Keep the journal on disk so it survives a restart of journald, as on a real host.
mkdir -p /var/log/journal

printf 'deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
  > /etc/apt/sources.list

# Package lists stay, so apt tasks without update_cache find packages offline.
apt-get clean
rm -rf /var/cache/apt/*.bin /var/log/*.log /tmp/* \
       /usr/share/doc/* /usr/share/man/* /usr/share/info/*
