#!/usr/bin/env bash
# A fleet repo that adopts the collection from its BUILT artifact, outside this checkout:
#   tests/fleet_repo/run.sh CORE_SERIES PYTHON HOST CHECKOUT LOCK_CACHE [first-may-change]
# A fresh directory and venv with only ansible-core, the collection installed from the tarball through
# a requirements.yml, an inventory of its own (HOST, a converged sandbox container, with the sandbox's
# group variables, and the lock cache HOST's release was resolved into), then: a missing controller dependency must fail with the documented one-line fix;
# after that one step, the collection's site playbook and the repo's own play (host_prep + vllm_serve
# by FQCN with its own pre_tasks) run, every run with changed=0 except, with first-may-change, the
# site run (the host may have been converged with other variables; the caller's next run, held to
# changed=0, is its idempotence check).
set -euo pipefail
core="$1" py="$2" host="$3" checkout="$(cd "$4" && pwd)" lock_cache="$5" first="${6:-unchanged}"
# Nothing of the checkout's own Ansible or Python setup may leak into the fleet repo.
for name in $(compgen -e | grep -E '^(ANSIBLE_|MOLECULE_|VIRTUAL_ENV$|PYTHONPATH$|UV_PROJECT)'); do unset "$name"; done
here="$(cd "$(dirname "$0")" && pwd)"
source "$checkout/scripts/lib.sh"
step() { printf '\n--- fleet repo (ansible-core %s): %s\n' "$core" "$*"; }

repo="$(mktemp -d "${TMPDIR:-/tmp}/fleet-repo-$core.XXXXXX")"
trap 'rm -rf "$repo"' EXIT
cp -r "$here/repo/." "$repo/"
cd "$repo"

step "venv with only ansible-core (Python $py)"
uv venv --quiet --seed -p "$(python_path "$py")" .venv
uv pip install --quiet --python .venv/bin/python "ansible-core==$core.*"
export PATH="$repo/.venv/bin:$PATH"
ansible --version | sed -n 1p

step "the collection from its built tarball, through requirements.yml"
"$checkout/scripts/build-collection" "$repo/dist" >/dev/null
tarball="$(ls "$repo"/dist/sparkfleet-vllm-*.tar.gz)"
# The sandbox is reached through podman: its connection plugin comes from the checkout's environment,
# as a fleet's ssh needs nothing (no Galaxy server is reachable here).
podman_collection="$(ls -d "$checkout"/.venv/lib/python*/site-packages/ansible_collections/containers/podman)"
cat >requirements.yml <<YAML
---
collections:
  - name: $tarball
    type: file
  - name: $podman_collection
    type: dir
YAML
ansible-galaxy collection install -r requirements.yml >/dev/null
installed="$repo/collections/ansible_collections/sparkfleet/vllm"
test -f "$installed/MANIFEST.json"

mkdir -p inventory/group_vars
cp "$checkout/inventories/sandbox/group_vars/sparks.yml" inventory/group_vars/sparks.yml
cat >inventory/hosts.yml <<YAML
---
sparks:
  hosts:
    $host:
  vars:
    ansible_connection: containers.podman.podman
    ansible_python_interpreter: /usr/bin/python3
    sandbox_checkout: $checkout
    vllm_install_lock_cache: $lock_cache
YAML

step "a missing controller dependency names the one-line fix"
if out="$(ansible-playbook site.yml 2>&1)"; then
  echo "site.yml ran without the controller requirements installed" >&2; exit 1
fi
fix="$repo/.venv/bin/python -m pip install -r $installed/requirements.txt"
grep -qF "run '$fix'" <<<"$out" || { echo "$out" | tail -20; echo "the error does not name: $fix" >&2; exit 1; }
echo "refused with: run '$fix'"

step "the one documented step"
uv pip install --quiet --python .venv/bin/python -r "$installed/requirements.txt"

run() {  # run PLAYBOOK N: no failure, and changed=0 unless this is a first run allowed to change
  local log="$repo/$1.$2.log" start
  start=$(date +%s)
  ansible-playbook "$1" >"$log" 2>&1 || { tail -40 "$log"; echo "$1 failed" >&2; exit 1; }
  grep -A3 "PLAY RECAP" "$log" | grep -E "^$host " | tee "$log.recap"
  if [ "$1.$2" != "site.yml.1" ] || [ "$first" != first-may-change ]; then
    grep -qE "changed=0 +unreachable=0 +failed=0" "$log.recap" || {
      # The tasks that changed, each with its banner, so the failure says what moved.
      grep -B8 -E "^changed: " "$log" | grep -E "^(TASK \[|changed: |[-+@]{1,3} )" | tail -40
      echo "$1 run $2 changed the host" >&2; exit 1; }
  fi
  echo "$1 run $2: $(( $(date +%s) - start )) s"
}
step "site.yml, then the repo's own play"
run site.yml 1
run serve-only.yml 1
