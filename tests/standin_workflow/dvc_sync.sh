#!/usr/bin/env bash
# Move the workflow's artifacts through a DVC remote. Snakemake alone decides what to run: there
# is no dvc.yaml; each artifact directory is tracked by its own `.dvc` file (`dvc add`).
#
# Usage (in the workflow directory, which is the git + DVC repository root):
#   dvc_sync.sh push [DVC_PUSH_ARGS...]                 e.g. push -r s3
#       dvc add every artifact that exists, then dvc push. Commit the .dvc files afterwards:
#       git add '*.dvc' '*.gitignore' && git commit -m "results"
#   dvc_sync.sh pull [DVC_PULL_ARGS...] [-- SNAKEMAKE_ARGS...]
#       dvc pull, then `snakemake --touch --forceall` so that Snakemake sees the pulled files as
#       up to date (DVC restores them with fresh modification times in no particular order, and
#       Snakemake decides on modification times). Pass the same SNAKEMAKE_ARGS (--configfile,
#       --config, targets) as the run that produced the artifacts. Touching records the current
#       code and config as the artifacts' provenance: pull before you edit the config.
#       If objects are missing on the remote, every artifact that did arrive is still checked out,
#       the missing files are named, and the exit status is 1; nothing is touched.
#
# DVC_ARTIFACTS (space-separated) overrides the artifact list below.
set -euo pipefail

ARTIFACTS=(${DVC_ARTIFACTS:-results/datasets results/profiles results/tables})
readonly SNAKEMAKE=${SNAKEMAKE:-snakemake}

log() { echo "dvc_sync: $*" >&2; }

cmd_push() {
    local present=() path
    for path in "${ARTIFACTS[@]}"; do
        [[ -e $path ]] && present+=("$path")
    done
    [[ ${#present[@]} -gt 0 ]] || {
        log "error: none of ${ARTIFACTS[*]} exists; run the workflow first"
        exit 1
    }
    dvc add --quiet "${present[@]}"
    dvc push "$@"
    log "now commit the .dvc files: git add '*.dvc' '*.gitignore' && git commit"
}

report_missing() { # name the tracked files still not in the local cache after a failed pull
    log "error: dvc pull failed; these tracked files could not be fetched:"
    dvc data status --granular 2>/dev/null |
        awk '/^Not in cache:/ {on = 1; next} /^[^ ]/ {on = 0} on && /^        / && !/\/$/ {print "  " $1}' >&2
    log "every other artifact was checked out. Push the missing files from a complete copy and pull again,"
    log "or recompute them: $SNAKEMAKE --touch --forceall --cores 1 && $SNAKEMAKE --cores all"
}

cmd_pull() {
    local dvc_args=() sm_args=()
    while [[ $# -gt 0 && $1 != -- ]]; do
        dvc_args+=("$1")
        shift
    done
    [[ $# -gt 0 ]] && shift
    sm_args=("$@")
    if ! dvc pull "${dvc_args[@]}"; then
        # dvc pull checks out nothing when any object fails to download; restore what did arrive.
        dvc checkout --quiet >/dev/null 2>&1 || true
        report_missing
        exit 1
    fi
    # Options that take several values (--config, --quiet) end at the next option: SNAKEMAKE_ARGS go first.
    "$SNAKEMAKE" "${sm_args[@]}" --touch --forceall --cores 1 --quiet
}

case ${1:-} in
push) shift && cmd_push "$@" ;;
pull) shift && cmd_pull "$@" ;;
*)
    echo "usage: $0 {push [DVC_PUSH_ARGS...] | pull [DVC_PULL_ARGS...] [-- SNAKEMAKE_ARGS...]}" >&2
    exit 2
    ;;
esac
