# Shared by images/build.sh and images/build-app.sh (sourced; set SCRIPT first): output, timing,
# hashing and the engine's images. Nothing here goes into an image, so no build key hashes it.

log() { printf '==> %s\n' "$*" >&2; }
note() { printf '    %s\n' "$*" >&2; }
die() { printf '%s: error: %s\n' "$SCRIPT" "$*" >&2; exit 1; }

now() { echo "${EPOCHREALTIME/./}"; } # microseconds
since() { local us=$(($(now) - $1)); printf '%d.%01ds' $((us / 1000000)) $((us % 1000000 / 100000)); }
sha() { sha256sum | cut -c1-64; }
file_sha() { if [[ -f $1 ]]; then sha256sum <"$1" | cut -c1-64; else echo absent; fi; }

require_engine() {
  command -v docker >/dev/null 2>&1 ||
    die "no docker CLI on PATH; start an engine first: scripts/docker-engine.sh up"
  timeout 15 docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
    die "the Docker engine is not answering (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}); start it with: scripts/docker-engine.sh up"
}

# image_field REF FORMAT: prints the formatted field, or nothing when REF does not exist.
image_field() { docker image inspect --format "$2" "$1" 2>/dev/null || true; }
image_id() { image_field "$1" '{{.Id}}'; }
label_of() { image_field "$1" "{{index .Config.Labels \"$2\"}}"; }

# remove_if_unused ID WHAT: removes an image this project made once no tag points at it.
remove_if_unused() {
  local id=$1 what=$2
  [[ -n $id ]] || return 0
  docker image inspect "$id" >/dev/null 2>&1 || return 0
  [[ $(label_of "$id" "$LABEL_MANAGED") == sandpit ]] || return 0
  [[ $(image_field "$id" '{{len .RepoTags}}') == 0 ]] || return 0
  if docker image rm "$id" >/dev/null 2>&1; then
    note "removed the replaced $what image ${id:7:12}"
  else
    note "kept the replaced $what image ${id:7:12} (still in use)"
  fi
}
