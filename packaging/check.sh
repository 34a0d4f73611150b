#!/bin/sh
# Checks the packages packaging/build.sh made, without installing them
# system-wide: the .deb's contents, its binary run from an extraction, and
# its systemd units verified (where systemd-analyze is available).
set -eu
cd "$(dirname "$0")/.."
deb=$(ls dist/reactord_*_amd64.deb)
for arch in amd64 arm64; do
  ls dist/reactord_*_"$arch".deb dist/reactord-*."$( [ "$arch" = amd64 ] && echo x86_64 || echo aarch64)".rpm >/dev/null
done
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/reactord ./lib/systemd/system/reactord.service ./lib/systemd/system/reactord-bridge.service ./etc/reactord/reactord.conf ./usr/share/reactord/salt-engine/reactord.py; do
  echo "$contents" | grep -q " $f\$" || { echo "$deb lacks $f"; exit 1; }
done
dpkg-deb -f "$deb" Package Version Architecture
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
"$root/usr/bin/reactord" version
file "$root/usr/bin/reactord" | grep -q "statically linked" || { echo "the binary is not static"; exit 1; }
# The packaged configuration has no rules yet, and check says so.
if "$root/usr/bin/reactord" check -c "$root/etc/reactord" >/dev/null 2>&1; then
  echo "the packaged configuration passed check without rules"; exit 1
fi
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir "$root/units"
  for u in "$root"/lib/systemd/system/*.service; do
    sed "s|/usr/bin/reactord|$root/usr/bin/reactord|" "$u" > "$root/units/$(basename "$u")"
  done
  systemd-analyze verify "$root"/units/*.service
  echo "systemd-analyze verify: units OK"
fi
echo "packages OK"
