# Sourced by scripts/run-local and scripts/test: make .venv and install the
# project into it with the extras in ADVISOR_EXTRAS (run-local: the optional
# quantization methods; test: those, GPTQ and the test tools). Safe to run
# again; a no-op when nothing changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
EXTRAS=${ADVISOR_EXTRAS:-quant}
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)-${EXTRAS//,/-}
if [ ! -f "$stamp" ]; then
  python -m pip install -q --upgrade pip
  # torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
  # GPU workers install their own CUDA build of torch instead (docs/fleet.md).
  python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
  python -m pip install -q -e ".[$EXTRAS]"
  touch "$stamp"
fi
