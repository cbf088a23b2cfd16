#!/usr/bin/env bash
# Build the stszone image and check it the way deploy/base/deployment.yaml runs it, on a
# machine that reaches Debian's mirrors and a Python package index but no container registry.
#
#   sudo tools/image-check.sh            # needs root (debootstrap, rootful podman)
#
# 1. base:  a Debian bookworm root made with debootstrap (python3, python3-venv,
#           python-is-python3, ca-certificates), trimmed like debian:bookworm-slim and
#           imported with `podman import`; cached in $STSZONE_IMAGE_CACHE
#           (default ~/.cache/stszone-image), so only the first run takes minutes.
# 2. build: `podman build` with PYTHON_IMAGE set to that base, pip using the host's package
#           index and CA bundle (pip config / PIP_INDEX_URL / PIP_CERT).
# 3. run:   read-only root, uid/gid 65532, every capability dropped, /tmp a 16 MiB tmpfs, the
#           serving pair mounted where the Deployment mounts its Secret (0440, group 65532),
#           the Deployment's container args (both as deploy/components/provided-certs renders
#           the Deployment: no cluster here for --manage-certs); then GET /readyz, POST /mutate
#           with a recorded AdmissionReview (tests/fixtures/admission) that must come back with
#           a patch, and
#           SIGTERM, after which the process must exit 0 within the grace period. The
#           installed package must be the tree's webhook/, byte for byte.
# 4. audit: the same run with PYTHONVERBOSE=1 counts modules loaded from bytecode and modules
#           compiled from source at start (which a read-only root repeats at every start).
# 5. sizes: podman image inspect, podman history, du inside the image.
#
# Podman keeps its own store under the cache (vfs driver; runc, as crun fails here), so
# nothing touches the machine's default container storage. Environment: STSZONE_IMAGE (tag,
# default localhost/stszone:check), DEBIAN_MIRROR, STSZONE_IMAGE_CACHE.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${STSZONE_IMAGE_CACHE:-$HOME/.cache/stszone-image}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PACKAGES=python3,python3-venv,python-is-python3,ca-certificates
BASE=localhost/stszone-base:$SUITE
IMAGE=${STSZONE_IMAGE:-localhost/stszone:check}
FIXTURE=$ROOT/tests/fixtures/admission/003-Pod-CREATE.json
CPU_LOCK=/tmp/stszone-cpu.lock
PODMAN=(podman --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs --runtime runc)

say() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
pm() { "${PODMAN[@]}" "$@"; }
# podman gives rootful containers 1048576 open files and 4194304 processes; where the host's
# own hard limits are lower (a sandbox, as here) runc cannot set them ("error setting rlimit"),
# so ask for what the host holds: its open-file limit, and a process limit under its own.
run() { pm run --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 "$@"; }

[ "$(id -u)" = 0 ] || fail "run as root: debootstrap and rootful podman need it"
for tool in debootstrap podman runc curl python3 flock; do
    command -v "$tool" > /dev/null || fail "$tool not found (apt-get install $tool)"
done
mkdir -p "$CACHE"
work=$(mktemp -d)
containers=()
cleanup() {
    for c in "${containers[@]}"; do pm rm --force --time 0 "$c" > /dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# --- 1. base ---------------------------------------------------------------------------
base_tar=$CACHE/$SUITE-$(tr , - <<< "$PACKAGES").tar
if [ ! -s "$base_tar" ]; then
    say "base: debootstrap $SUITE ($PACKAGES) from $MIRROR (once; cached in $base_tar)"
    rootfs=$CACHE/rootfs.tmp
    rm -rf "$rootfs"
    flock -s "$CPU_LOCK" debootstrap --variant=minbase --include="$PACKAGES" \
        "$SUITE" "$rootfs" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 \
        || fail "debootstrap failed; see $CACHE/debootstrap.log"
    # What debian:bookworm-slim leaves out: package lists and caches, man pages, locales,
    # documentation but the copyright files.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/*.log \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/info/*
    find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
    tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
    mv "$base_tar.tmp" "$base_tar"
    rm -rf "$rootfs"
fi
if ! pm image exists "$BASE"; then
    say "base: podman import $base_tar as $BASE"
    pm import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["python3"]' "$base_tar" "$BASE" > /dev/null
fi
echo "base $BASE: $(run --rm "$BASE" python3 --version)"

# --- 2. build --------------------------------------------------------------------------
# The build's pip must use the index the host's pip uses, and trust what the host trusts
# (a TLS-intercepting proxy signs with a CA that only the host's bundle holds).
pip_config() {
    if command -v pip > /dev/null; then pip config get "global.$1" 2> /dev/null || true; fi
}
index=${PIP_INDEX_URL:-$(pip_config index-url)}
ca=${PIP_CERT:-$(pip_config cert)}
ca=${ca:-/etc/ssl/certs/ca-certificates.crt}
build_args=(--build-arg "PYTHON_IMAGE=$BASE")
[ -n "$index" ] && build_args+=(--build-arg "INDEX_URL=$index")
if [ -s "$ca" ]; then
    build_args+=(--volume "$ca:/run/host-ca.crt:ro" --build-arg CA_BUNDLE=/run/host-ca.crt)
fi
say "build: podman build ${build_args[*]} -t $IMAGE"
start=$(date +%s)
flock -s "$CPU_LOCK" "${PODMAN[@]}" build --pull=never --layers "${build_args[@]}" \
    -t "$IMAGE" "$ROOT" > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "build"; }
grep -E '^(precompile|Successfully installed)' "$work/build.log" | cut -c1-160 || true
echo "built $IMAGE in $(($(date +%s) - start)) s"

# --- 3. run as the Deployment runs it ------------------------------------------------------
# The container's args and the Secret's mount path come from the Deployment itself, as the
# provided-certs component renders it: the base's default, --manage-certs, keeps its pair in
# a Secret through the API, and there is no cluster here. The component's patch of the
# Deployment is a JSON Patch, applied with the image's own jsonpatch.
deployment=$(run --rm --user 65532:65532 --volume "$ROOT/deploy:/deploy:ro" \
    --entrypoint python "$IMAGE" -c '
import jsonpatch, yaml
component = yaml.safe_load(open("/deploy/components/provided-certs/kustomization.yaml"))
(ops,) = [p["patch"] for p in component["patches"] if p.get("target", {}).get("kind") == "Deployment"]
for doc in yaml.safe_load_all(open("/deploy/base/deployment.yaml")):
    if doc and doc["kind"] == "Deployment":
        doc = jsonpatch.apply_patch(doc, yaml.safe_load(ops))
        (c,) = doc["spec"]["template"]["spec"]["containers"]
        tls = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "tls")
        print(tls, *c["args"])
')
read -r tls_path serve_args <<< "$deployment"
# shellcheck disable=SC2206 # the args are plain words
args=($serve_args --zones "a,b,c" --offline) # no cluster here: serve the rule offline
echo "serving pair at $tls_path; args: ${args[*]}"

# The Secret stszone-tls as the kubelet mounts it: defaultMode 0440, group fsGroup 65532.
run --rm --user 0:0 --volume "$work:/out" --entrypoint stszone "$IMAGE" certs --out /out/certs \
    > /dev/null
mkdir "$work/tls"
cp "$work/certs/tls.crt" "$work/certs/tls.key" "$work/tls/"
chown -R 0:65532 "$work/tls"
chmod 0440 "$work/tls"/*
chmod 0750 "$work/tls"
host=stszone.stszone-system.svc # the name the API server dials

# serve NAME [podman run flags...]: start the image as the Deployment does; sets $port.
serve() {
    local name=$1
    shift
    containers+=("$name")
    run --detach --name "$name" --read-only --user 65532:65532 --cap-drop ALL \
        --security-opt no-new-privileges --tmpfs /tmp:rw,size=16m,mode=1777 \
        --env POD_NAMESPACE=stszone-system --volume "$work/tls:$tls_path:ro" \
        --publish 127.0.0.1::8443 "$@" "$IMAGE" "${args[@]}" > /dev/null
    port=$(pm port "$name" 8443/tcp | cut -d: -f2)
}
https() {
    curl --silent --show-error --max-time 5 --cacert "$work/certs/ca.crt" \
        --resolve "$host:$port:127.0.0.1" "$@"
}
# wait_ready NAME: poll /readyz every 50 ms for up to 30 s; print the seconds it took.
wait_ready() {
    local t0 code
    t0=$(date +%s.%N)
    for _ in $(seq 600); do
        code=$(https --output /dev/null --write-out '%{http_code}' "https://$host:$port/readyz" \
            2> /dev/null) || true
        if [ "$code" = 200 ]; then
            python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')"
            return
        fi
        sleep 0.05
    done
    pm logs "$1" | tail -20
    fail "/readyz did not answer 200 within 30 s"
}
mutate() {
    https --header 'Content-Type: application/json' --data-binary "@$FIXTURE" \
        "https://$host:$port/mutate" > "$work/answer.json"
    python3 - "$work/answer.json" << 'EOF'
import base64, json, sys
response = json.load(open(sys.argv[1]))["response"]
assert response["allowed"] is True, response
assert response["patchType"] == "JSONPatch", response
patch = json.loads(base64.b64decode(response["patch"]))
zone = next(op["value"] for op in patch if op["path"] == "/metadata/annotations")
print(f"allowed, {len(patch)} patch operations, stszone.io/zone={zone['stszone.io/zone']}")
EOF
}
# stop NAME: SIGTERM, then the exit status and the seconds until exit.
stop() {
    local t0 status
    t0=$(date +%s.%N)
    pm kill --signal TERM "$1" > /dev/null
    status=$(timeout 40 "${PODMAN[@]}" wait "$1") || fail "still running 40 s after SIGTERM"
    echo "exit status $status after $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s"
    [ "$status" = 0 ] || { pm logs "$1" | tail -20; fail "exit status $status after SIGTERM"; }
}

say "run: read-only root, --user 65532:65532, --cap-drop ALL, serving pair at $tls_path"
name=stszone-check-$$
serve "$name"
echo "GET /readyz: 200 after $(wait_ready "$name") s (from podman run returning)"
echo "POST /mutate $(basename "$FIXTURE"): $(mutate)"
echo "SIGTERM: $(stop "$name")"
pm logs "$name" 2>&1 | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        record = json.loads(line)
        line = "%s: %s" % (record.get("level", ""), record.get("message", record))
    except ValueError:
        pass
    print(("  log " + line.strip())[:150])
'

# The runtime's interpreter finds neither pip nor setuptools (nor a pip on PATH).
tools_found=$(run --rm --entrypoint python "$IMAGE" -c '
import importlib.util, shutil
print(" ".join([m for m in ("pip", "setuptools") if importlib.util.find_spec(m)]
               + [p for p in ("pip", "pip3") if shutil.which(p)]))')
[ -z "$tools_found" ] || fail "the image carries $tools_found"
echo "pip, setuptools: not importable by the server's python, no pip on PATH"

# The image runs the code the tests run: the installed package is the tree's webhook/, file for
# file and byte for byte (bytecode aside), and every webhook module the command line imports is
# one of those .py files.
same=$(run --rm --volume "$ROOT/webhook:/tree:ro" --entrypoint python "$IMAGE" -P -c '
import hashlib, pathlib, sys, sysconfig
import webhook.cli
package = pathlib.Path(sysconfig.get_path("purelib")) / "webhook"
def files(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
installed, tree = files(package), files(pathlib.Path("/tree"))
differ = sorted(n for n in installed.keys() | tree.keys() if installed.get(n) != tree.get(n))
if differ:
    sys.exit(f"the installed package differs from the tree in {len(differ)} files: {differ[:8]}")
loaded = [getattr(m, "__file__", None) for n, m in list(sys.modules.items())
          if n.split(".")[0] == "webhook"]
elsewhere = [f for f in loaded if not (f or "").startswith(f"{package}/") or not f.endswith(".py")]
if elsewhere:
    sys.exit(f"webhook modules loaded from elsewhere than the package sources: {elsewhere[:8]}")
print(f"{len(installed)} files in {package}, identical to the tree; importing webhook.cli"
      f" loads {len(loaded)} webhook modules, every one a .py file of them")
') || fail "$same"
echo "package: $same"

# --- 4. bytecode audit ---------------------------------------------------------------------
say "audit: modules loaded from bytecode (a second run, same flags plus PYTHONVERBOSE=1)"
name=stszone-audit-$$
serve "$name" --env PYTHONVERBOSE=1
wait_ready "$name" > /dev/null
mutate > /dev/null
stop "$name" > /dev/null
pm logs "$name" > "$work/verbose.log" 2>&1
# "code object from '<x.pyc>'" is a module read from bytecode; "code object from <x.py>"
# one compiled from source, in memory, at every start.
cached=$(grep -c "^# code object from '" "$work/verbose.log" || true)
compiled=$(grep "^# code object from /" "$work/verbose.log" | sort -u || true)
echo "from bytecode: $cached modules; compiled from source: $(grep -c . <<< "$compiled" || true)"
[ -z "$compiled" ] || printf '  %s\n' "$compiled"

# --- 5. sizes ------------------------------------------------------------------------------
say "sizes"
bytes=$(pm image inspect --format '{{.Size}}' "$IMAGE")
echo "podman image inspect: $IMAGE is $bytes bytes ($((bytes / 1000000)) MB)"
pm history --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE" | cut -c1-140
# shellcheck disable=SC2016 # expanded by the image's shell
run --rm --user 0:0 --entrypoint sh "$IMAGE" -c '
site=$(echo /opt/stszone/lib/python3*/site-packages)
stdlib=$(python -c "import sysconfig; print(sysconfig.get_path(\"stdlib\"))")
echo "du inside the image (KiB):"
for dir in / /usr /var /etc /opt/stszone "$stdlib" /usr/lib/x86_64-linux-gnu /usr/share; do
    du -xsk "$dir"
done | sed "s/^/  /"
echo "largest in $site (KiB):"
du -sk "$site"/* | sort -rn | head -8 | sed "s/^/  /"
echo "largest in $site/kubernetes (KiB):"
du -sk "$site"/kubernetes/* | sort -rn | head -3 | sed "s/^/  /"
pyc() { find "$@" -name "*.pyc" -exec du -ck {} + | awk "/total\$/ {s += \$1} END {print s + 0}"; }
echo "bytecode: $(pyc /opt/stszone) KiB in the venv, $(pyc "$stdlib") KiB in the stdlib"
'
echo "OK: $IMAGE built and checked"
