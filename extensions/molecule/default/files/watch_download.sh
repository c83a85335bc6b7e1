#!/bin/bash
# Look at a running download as other users do (verify_secrets.yml, issue 19): wait until a process whose command
# line matches PATTERN runs in CONTAINER, then record into OUT what is visible of it: the controller's
# process list, the host's process list as the service USER, every environment an unrelated user
# (OTHER) can read, the download's own environment (root's view), and whether the service user can read
# its token file. The environments the service user can read hold its own instances' keys by design:
# they go to PRIVATE, to be searched for root's secrets only.
set -euo pipefail
container="$1" out="$2" private="$3" pattern="$4" user="$5" other="$6"

pid=""
deadline=$((SECONDS + 600))
while [ -z "$pid" ] && [ "$SECONDS" -lt "$deadline" ]; do
  pid="$(podman exec "$container" pgrep -f -- "$pattern" | head -n 1 || true)"
  [ -n "$pid" ] || sleep 0.2
done
[ -n "$pid" ] || { echo "no process matching '$pattern' appeared in $container within 10 minutes" >&2; exit 1; }

ps -eww -o pid=,args= >"$out/controller-ps"
podman exec "$container" runuser -u "$user" -- ps -eww -o pid=,user=,args= >"$out/host-ps-as-$user"
# Only environments a user may read come out; the others fail quietly, which is the point.
environs='for e in /proc/[0-9]*/environ; do tr "\0" "\n" <"$e" 2>/dev/null || true; done'
podman exec "$container" runuser -u "$other" -- sh -c "$environs" >"$out/host-environ-as-$other"
podman exec "$container" runuser -u "$user" -- sh -c "$environs" >"$private/host-environ-as-$user"
podman exec "$container" sh -c "tr '\\0' '\\n' </proc/$pid/environ" >"$out/download-environ"
token_path="$(sed -n 's/^HF_TOKEN_PATH=//p' "$out/download-environ")"
if [ -n "$token_path" ]; then
  podman exec "$container" stat -c '%a %U %n' "$(dirname "$token_path")" "$token_path" >"$out/token-file-modes"
  if podman exec "$container" runuser -u "$user" -- cat "$token_path" >/dev/null 2>&1; then
    echo readable >"$out/token-file-as-$user"
  else
    echo refused >"$out/token-file-as-$user"
  fi
fi
