#!/bin/sh
# Runs inside the freshly bootstrapped root file system of the execution environment's
# base image (chroot), as root.
set -eu

# ansible-builder's install-from-bindep step runs `$PKGMGR install -y PACKAGES` for the
# system packages the collections declare (bindep.txt); the build is offline, so the
# package manager of this image only accepts packages already installed and names the
# missing ones (add them to ee/base/packages.txt).
cat > /usr/local/sbin/ee-pkgmgr <<'SCRIPT'
#!/bin/sh
# ansible-builder's package manager in an offline build: see ee/base/customize.sh.
set -eu
verb=${1:-}
[ $# -gt 0 ] && shift
case $verb in
  install)
    missing=""
    for arg in "$@"; do
      case $arg in -*) continue ;; esac
      dpkg-query -W -f='${Status}\n' "$arg" 2>/dev/null | grep -q '^install ok installed$' \
        || missing="$missing $arg"
    done
    if [ -n "$missing" ]; then
      echo "ee-pkgmgr: not in the base image:$missing (the build is offline: add them to ee/base/packages.txt)" >&2
      exit 1
    fi
    ;;
  clean) ;;
  *) echo "ee-pkgmgr: unsupported: $verb" >&2; exit 2 ;;
esac
SCRIPT
chmod 0755 /usr/local/sbin/ee-pkgmgr

apt-get clean
rm -rf /var/cache/apt/*.bin /var/lib/apt/lists/* /var/log/*.log /tmp/* \
       /usr/share/doc/* /usr/share/man/* /usr/share/info/*
