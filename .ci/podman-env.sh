# Source this to run podman on the CI machine kind (no Docker engine, no image registry):
# writes the two settings podman needs there into a private config, and makes the Debian
# bookworm base image locally with debootstrap unless it is already present.
# Exports CONTAINER_ENGINE=podman, CONTAINERS_CONF and BASE_IMAGE for build.sh / test.sh.

export CONTAINER_ENGINE=podman
export BASE_IMAGE=localhost/debian-base:bookworm
_podman_dir="${PODMAN_CONFIG_DIR:-${TMPDIR:-/tmp}/evaluation-podman}"
mkdir -p "$_podman_dir"
_nofile=$(ulimit -Hn)
_nproc=$(ulimit -Hu)
[ "$_nproc" = unlimited ] && _nproc=32768
[ "$_nproc" -gt 32768 ] && _nproc=32768
cat > "$_podman_dir/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=${_nofile}:${_nofile}", "nproc=${_nproc}:${_nproc}"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$_podman_dir/containers.conf"

# The Debian archive this machine's apt uses (deb822 .sources or one-line .list files), never
# a guessed host: the base image is made from the same packages as the machine.
apt_mirror() {
  local files=() file
  for file in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] && files+=("$file")
  done
  [ "${#files[@]}" -gt 0 ] || return 0
  { awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "${files[@]}"
    awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' "${files[@]}"
  } | { grep -v -- '-security' || true; } | sed -n 1p
}

if ! podman image exists "$BASE_IMAGE"; then
  _mirror=$(apt_mirror)
  if [ -z "$_mirror" ]; then
    echo "no Debian archive in this machine's apt sources (/etc/apt/sources.list*): cannot make $BASE_IMAGE" >&2
    return 1 2>/dev/null || exit 1
  fi
  _rootfs=$(mktemp -d)
  echo "making $BASE_IMAGE with debootstrap from $_mirror" >&2
  debootstrap --variant=minbase bookworm "$_rootfs" "$_mirror" >/dev/null
  rm -rf "$_rootfs"/var/cache/apt/archives/*.deb "$_rootfs"/var/lib/apt/lists/*
  tar --numeric-owner -C "$_rootfs" -c . | podman import - "$BASE_IMAGE" >/dev/null
  rm -rf "$_rootfs"
fi
