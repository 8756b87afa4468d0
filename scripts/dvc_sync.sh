#!/usr/bin/env bash
# Move the workflow's artifacts through a DVC remote. Snakemake alone decides what to run: dvc.yaml
# has no stages; each artifact folder is tracked by its own `.dvc` file (`dvc add`).
#
# Usage, in the git + DVC repository root, which is Snakemake's working directory (`make push`,
# `make pull` call this):
#   scripts/dvc_sync.sh push [DVC_PUSH_ARGS...]                 e.g. push -r team
#       dvc add every artifact that exists, then dvc push, then print the exact `git add` of the files
#       dvc add wrote (each artifact's .dvc file and any .gitignore it added a folder to), to commit.
#   scripts/dvc_sync.sh pull [DVC_PULL_ARGS...] [-- SNAKEMAKE_ARGS...]
#       dvc pull, then `snakemake --touch --forceall` so that Snakemake sees the pulled files as
#       up to date (DVC restores them with fresh modification times in no particular order, and
#       Snakemake decides on modification times). Pass the same SNAKEMAKE_ARGS (--configfile,
#       targets) as the run that produced the artifacts. Touching records the current code and
#       config as the artifacts' provenance: pull before you edit the config.
#       If objects are missing on the remote, every artifact that did arrive is still checked out,
#       the missing files are named, and the exit status is 1; nothing is touched.
#
# Artifacts: resources/models (materialized model folders), every folder directly under results/
# (datasets, profiles, scores, tables, figures, ...) and report.html, those that exist.
# DVC_ARTIFACTS (space-separated paths) replaces that list, e.g. to keep models off a public remote:
#   DVC_ARTIFACTS="results/datasets results/profiles results/tables" scripts/dvc_sync.sh push
set -euo pipefail

readonly SNAKEMAKE=${SNAKEMAKE:-snakemake}
readonly DVC=${DVC:-dvc}

log() { echo "dvc_sync: $*" >&2; }

artifacts() { # the artifact paths that exist, one per line
    local path
    if [[ -n ${DVC_ARTIFACTS:-} ]]; then
        for path in $DVC_ARTIFACTS; do
            [[ -e $path ]] && echo "$path"
        done
        return 0
    fi
    [[ -d resources/models ]] && echo resources/models
    for path in results/*/; do
        [[ -d $path ]] && echo "${path%/}"
    done
    [[ -f report.html ]] && echo report.html
    return 0
}

cmd_push() {
    local present=()
    mapfile -t present < <(artifacts)
    if [[ ${#present[@]} -eq 0 ]]; then
        log "error: no artifact to push (resources/models, results/*/, report.html); run the workflow first"
        exit 1
    fi
    log "tracking ${present[*]}"
    "$DVC" add --quiet "${present[@]}"
    "$DVC" push "$@"
    commit_line "${present[@]}"
}

commit_line() { # the exact `git add` of what `dvc add` wrote: each artifact's .dvc file, the .gitignore beside it
    local path candidates=() changed=()
    for path in "$@"; do
        candidates+=("$path.dvc" "$(dirname "$path")/.gitignore")
    done
    mapfile -t changed < <(git status --porcelain --untracked-files=all -- "${candidates[@]}" | cut -c4- | sort -u)
    if [[ ${#changed[@]} -eq 0 ]]; then
        log "nothing new to commit: the committed .dvc files already record these artifacts"
    else
        log "now commit what dvc add wrote: git add ${changed[*]} && git commit -m 'Results of ...'"
    fi
}

report_missing() { # name the tracked files still not in the local cache after a failed pull
    log "error: dvc pull failed; these tracked files could not be fetched:"
    "$DVC" data status --granular 2>/dev/null |
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
    if ! "$DVC" pull "${dvc_args[@]}"; then
        # dvc pull checks out nothing when any object fails to download; restore what did arrive.
        "$DVC" checkout --quiet >/dev/null 2>&1 || true
        report_missing
        exit 1
    fi
    log "marking the pulled files up to date: $SNAKEMAKE ${sm_args[*]} --touch --forceall"
    # Options that take several values (--configfile, --quiet) end at the next option: SNAKEMAKE_ARGS go first.
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
