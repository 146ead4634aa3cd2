#!/bin/sh
# The deb's prerm: the agent stops with the package's removal (an upgrade restarts it in the postinst).
# Containers it started keep running under conmon until stopped.
case "$1" in
  remove|purge|deconfigure)
    if [ -d /run/systemd/system ]; then
      systemctl stop berth-agent.service || true
      systemctl disable berth-agent.service || true
    fi
    ;;
esac
exit 0
