#!/bin/sh
# The deb's postinst. electron-builder fills in the app's install folder and executable name.
app_dir='/opt/${sanitizedProductName}'
app_bin='${executable}'

# The app on the PATH.
ln -sf "$app_dir/$app_bin" "/usr/bin/$app_bin"

# Chromium's sandbox helper is setuid root only where unprivileged user namespaces do not work.
if unshare --user true >/dev/null 2>&1; then
  chmod 0755 "$app_dir/chrome-sandbox" || true
else
  chmod 4755 "$app_dir/chrome-sandbox" || true
fi

if command -v update-desktop-database >/dev/null 2>&1; then
  update-desktop-database -q /usr/share/applications || true
fi

# Where AppArmor restricts unprivileged user namespaces (Ubuntu 24 and later), the app's profile, when the
# running AppArmor can read it.
profile="$app_dir/resources/apparmor-profile"
if [ -f "$profile" ] && command -v apparmor_parser >/dev/null 2>&1 && apparmor_parser --skip-kernel-load --debug "$profile" >/dev/null 2>&1; then
  cp -f "$profile" "/etc/apparmor.d/$app_bin"
  apparmor_parser --replace --write-cache --skip-read-cache "/etc/apparmor.d/$app_bin" >/dev/null 2>&1 || true
fi

# The agent's socket belongs to the berth group: its members' apps drive the agent.
if ! getent group berth >/dev/null 2>&1; then
  groupadd --system berth || addgroup --system berth
fi

# The agent service, now and at every boot.
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  systemctl enable berth-agent.service || true
  systemctl restart berth-agent.service || echo "berth-agent.service did not start: journalctl -u berth-agent.service says why" >&2
fi

echo "Berth: add each user who runs the app to the berth group (usermod -aG berth USER), then log in again."
exit 0
