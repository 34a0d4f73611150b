#!/bin/sh
# reactord's package: the system user the units run as, and its private
# data directory. The units are not enabled: the configuration in
# /etc/reactord/reactord.conf has no rules until you give it some, and the
# daemon's unit needs salt-api's credentials (see the unit).
set -e
if ! getent passwd reactord >/dev/null; then
  useradd --system --home-dir /var/lib/reactord --no-create-home \
    --shell /usr/sbin/nologin --comment "reactord SaltStack event reactor" reactord
fi
install -d -m 0700 -o reactord -g reactord /var/lib/reactord
chgrp reactord /etc/reactord /etc/reactord/reactord.conf 2>/dev/null || true
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
