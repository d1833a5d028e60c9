#!/usr/bin/env bash
# `make image`: build the Folio OCI image without a Docker engine or a registry.
#
#   1. build/image/base-rootfs-<key>.tar: a minimal Debian bookworm (python3,
#      python3-venv, passwd) made by mmdebstrap from Debian's packages; cached,
#      <key> being a hash of the mmdebstrap arguments, so it is made again only
#      when they change (`rm build/image/base-rootfs-*` forces it);
#   2. build/image/wheels/: the folio wheel (built from this tree) and the wheels
#      of its runtime dependencies and of every runtime extra a chart value can
#      turn on (FOLIO_EXTRAS: cluster for --metadata-url zk://..., security for
#      tokens, kafka for --kafka-port; deploy/Containerfile installs the same) for CPython 3.11 on glibc Linux x86_64 (the
#      base's Python), downloaded from PyPI on the host: the image build itself
#      needs no network and no compiler;
#   3. buildah (vfs storage and chroot isolation, so it runs as a plain process in a
#      CI container; its storage under build/containers/, not the machine's) builds
#      deploy/Containerfile and writes build/folio-image.tar, an OCI archive
#      tagged folio:<version>, then forgets the image (the archive is the product).
#
# Load it elsewhere with `skopeo copy oci-archive:build/folio-image.tar ...` or
# `podman load -i build/folio-image.tar`. Needs buildah and mmdebstrap (Debian
# packages; .ci/run installs them) and root (mmdebstrap's and buildah's root modes).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
OUT=build/image
STORE=build/containers
ARCHIVE=build/folio-image.tar
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
# The extras the image installs: keep in step with deploy/Containerfile's RUN
# (tests/image/test_image.py checks both against pyproject.toml).
FOLIO_EXTRAS=cluster,security,kafka

for tool in buildah mmdebstrap; do
    command -v "$tool" >/dev/null || {
        echo "make image: $tool is not installed (apt-get install buildah mmdebstrap;" \
            ".ci/run does)" >&2
        exit 1
    }
done
[ "$(id -u)" -eq 0 ] || { echo "make image: run as root (buildah and mmdebstrap root modes)" >&2; exit 1; }

# The version is written once, in folio/_version.py (pyproject.toml reads it there).
VERSION=$("$PYTHON" -c 'import runpy; print(runpy.run_path("folio/_version.py")["__version__"])')
mkdir -p "$OUT"

# 1. The base. Docs, man pages and locales are left out (copyright files kept);
# no recommends: only what `python3 -m venv` and `useradd` need.
MMDEBSTRAP_ARGS=(
    --variant=minbase
    --include=python3,python3-venv,passwd,ca-certificates
    --aptopt='APT::Install-Recommends "false"'
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    "$SUITE"
)
MIRRORS=(
    "deb $MIRROR $SUITE main"
    "deb $MIRROR $SUITE-updates main"
    "deb $MIRROR-security $SUITE-security main"
)
KEY=$(printf '%s\n' "${MMDEBSTRAP_ARGS[@]}" "${MIRRORS[@]}" | sha256sum | cut -c1-12)
BASE="$OUT/base-rootfs-$KEY.tar"
if [ ! -s "$BASE" ]; then
    echo "make image: making the Debian $SUITE base with mmdebstrap ($BASE)"
    rm -f "$OUT"/base-rootfs-*.tar
    mmdebstrap --quiet --mode=root --format=tar "${MMDEBSTRAP_ARGS[@]}" "$BASE.part" "${MIRRORS[@]}"
    mv "$BASE.part" "$BASE"
else
    echo "make image: reusing the base $BASE"
fi
ln -f "$BASE" "$OUT/base-rootfs.tar"

# 2. The wheels. setuptools builds under ./build/lib: a stale copy there could
# slip into the wheel, so it goes first.
rm -rf "$OUT/wheels" build/lib build/bdist.*
mkdir -p "$OUT/wheels"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$OUT/wheels" .
rm -rf build/lib build/bdist.*
PLATFORMS=()
for minor in $(seq 36 -1 17); do PLATFORMS+=(--platform "manylinux_2_${minor}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform linux_x86_64)
"$PYTHON" -m pip download --quiet --dest "$OUT/wheels" --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    "${PLATFORMS[@]}" "folio[$FOLIO_EXTRAS] @ file://$PWD/$(ls "$OUT"/wheels/folio-"$VERSION"-*.whl)"

# 3. The image.
export BUILDAH_ISOLATION=chroot
buildah_() {
    buildah --root "$PWD/$STORE/root" --runroot "$PWD/$STORE/run" --storage-driver vfs "$@"
}
TAG="localhost/folio:$VERSION"
# Working containers a killed test run left behind (each a full vfs copy) go first.
buildah_ rm --all >/dev/null 2>&1 || true
buildah_ bud --quiet --isolation chroot --layers=false --file deploy/Containerfile \
    --tag "$TAG" "$OUT" >/dev/null
rm -f "$ARCHIVE"
buildah_ push --quiet "$TAG" "oci-archive:$ARCHIVE:folio:$VERSION"
buildah_ rmi --all --force >/dev/null
echo "make image: wrote $ARCHIVE (folio:$VERSION, $(du -h "$ARCHIVE" | cut -f1))"
