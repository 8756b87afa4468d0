#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for testing the workflow's SLURM profile.
#
# Usage: scripts/slurm_localhost.sh {start|stop|status} [STATE_DIR]
#
# STATE_DIR (or the SLURM_LOCALHOST_DIR environment variable) holds everything this script writes:
# slurm.conf, daemon pid files, logs and spool directories; the one thing outside it is a link
# /etc/slurm/slurm.conf -> STATE_DIR/slurm.conf, which `srun` inside jobs needs (`stop` removes it).
# After `start`, point SLURM's client commands (sinfo, sbatch, squeue, and Snakemake's SLURM
# executor) at the cluster with
#     export SLURM_CONF=STATE_DIR/slurm.conf      (also written to STATE_DIR/env)
#
# `start` installs Debian's slurm-wlm and munge with apt-get when they are missing (needs root;
# a user with passwordless sudo gets the script rerun through sudo),
# writes a one-node slurm.conf (node `localhost` at 127.0.0.1 with this machine's CPUs and
# memory, no accounting database, one GPU-less default partition), starts munged (as the munge
# user, only if no munged answers yet), slurmctld and `slurmd -N localhost`, and waits until
# `sinfo` shows the node idle. It is idempotent: a running cluster for STATE_DIR is left as is.
# `stop` cancels every job, then stops the daemons this script started, by the pids it recorded.
# `status` prints which daemons run and what sinfo says; it exits 0 only when the node is usable.
#
# Exit codes: 0 done; 1 failure (see the message and the logs in STATE_DIR/log); 2 usage error;
# 3 this machine cannot run it (not root, no apt-get, packages not installable) - callers such
# as the test suite skip on 3; 4 another cluster started by this script (other STATE_DIR) runs:
# only one can own /etc/slurm/slurm.conf and munged at a time.
#
# Environment overrides (defaults in brackets):
#   SLURM_LOCALHOST_PARTITION [main]       name of the default partition
#   SLURM_LOCALHOST_CTLD_PORT [6817]       slurmctld port
#   SLURM_LOCALHOST_SLURMD_PORT [6818]     slurmd port
#   SLURM_LOCALHOST_MIN_JOB_AGE [600]      seconds a finished job stays visible to squeue; the
#                                          executor plugin uses `squeue` only when this is at
#                                          least 3 x slurm-init-seconds-before-status-checks
#   SLURM_LOCALHOST_WAIT [60]              seconds to wait for the node to become idle
#   SLURM_LOCALHOST_CPUS [nproc]           CPUs the node offers; more than the machine has lets
#                                          short test jobs run side by side (slurmd then trusts
#                                          slurm.conf: SlurmdParameters=config_overrides)
set -euo pipefail

readonly EXIT_FAILURE=1
readonly EXIT_USAGE=2
readonly EXIT_UNSUPPORTED=3
readonly EXIT_BUSY=4
readonly PACKAGES=(slurm-wlm munge)
readonly MUNGE_RUN_DIR=/run/munge
readonly MUNGE_KEY=/etc/munge/munge.key
# Snakemake's slurm-jobstep plugin (0.6.x) strips SLURM_* variables, SLURM_CONF included, before the
# `srun` it runs inside each job, so srun only finds the configuration at its compiled-in path.
readonly DEFAULT_CONF=/etc/slurm/slurm.conf

PARTITION=${SLURM_LOCALHOST_PARTITION:-main}
CTLD_PORT=${SLURM_LOCALHOST_CTLD_PORT:-6817}
SLURMD_PORT=${SLURM_LOCALHOST_SLURMD_PORT:-6818}
MIN_JOB_AGE=${SLURM_LOCALHOST_MIN_JOB_AGE:-600}
WAIT_SECONDS=${SLURM_LOCALHOST_WAIT:-60}
CPUS=${SLURM_LOCALHOST_CPUS:-$(nproc)}

log() { echo "slurm_localhost: $*" >&2; }
die() {
    local code=$1
    shift
    log "error: $*"
    exit "$code"
}

usage() {
    echo "usage: $0 {start|stop|status} [STATE_DIR]   (or set SLURM_LOCALHOST_DIR)" >&2
    exit "$EXIT_USAGE"
}

# --- helpers -------------------------------------------------------------------------------

pid_alive() { # pid_alive FILE: the pid recorded in FILE runs
    [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

stop_pid() { # stop_pid NAME FILE: SIGTERM the recorded pid, SIGKILL after 10 s, forget it
    local name=$1 file=$2 pid i
    if ! pid_alive "$file"; then
        rm -f "$file"
        return 0
    fi
    pid=$(cat "$file")
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

wait_for() { # wait_for SECONDS CMD...: retry CMD every 0.5 s until it succeeds
    local seconds=$1 i
    shift
    for ((i = 0; i < seconds * 2; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

node_idle() { [[ $(sinfo --noheader --nodes=localhost --format=%t 2>/dev/null) == idle* ]]; }

# --- install -------------------------------------------------------------------------------

ensure_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null &&
        command -v sinfo >/dev/null; then
        return 0
    fi
    [[ $(id -u) -eq 0 ]] || die "$EXIT_UNSUPPORTED" "slurm-wlm/munge are not installed and installing them needs root"
    command -v apt-get >/dev/null || die "$EXIT_UNSUPPORTED" "slurm-wlm/munge are not installed and there is no apt-get"
    log "installing ${PACKAGES[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${PACKAGES[@]}" >"$STATE/log/apt.log" 2>&1; then
        apt-get update >>"$STATE/log/apt.log" 2>&1 || true
        apt-get install -y --no-install-recommends "${PACKAGES[@]}" >>"$STATE/log/apt.log" 2>&1 ||
            die "$EXIT_UNSUPPORTED" "apt-get could not install ${PACKAGES[*]}; see $STATE/log/apt.log"
    fi
}

# --- configuration -------------------------------------------------------------------------

write_conf() {
    local cpus=$CPUS mem_mb def_mem controller overrides=""
    [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "$EXIT_USAGE" "SLURM_LOCALHOST_CPUS must be a positive integer, got '$cpus'"
    # slurmd drains a node that claims more CPUs than it finds, unless told to trust the config.
    if ((cpus > $(nproc))); then
        overrides="SlurmdParameters=config_overrides"
    fi
    # slurmd rejects a node configured with more memory than it finds, so take MemTotal as is.
    mem_mb=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
    def_mem=$((mem_mb / cpus))
    controller=$(hostname -s)
    cat >"$CONF" <<EOF
# Written by scripts/slurm_localhost.sh: a one-node cluster for tests. Regenerated on every start.
ClusterName=localhost
SlurmctldHost=${controller}(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmdPort=${SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
# No slurmdbd: sacct has no database to ask, so clients must poll squeue instead.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Finished jobs stay visible to squeue this long (the executor plugin's status checks rely on it).
MinJobAge=${MIN_JOB_AGE}
ReturnToService=2
StateSaveLocation=${STATE}/slurmctld
SlurmdSpoolDir=${STATE}/slurmd
SlurmctldPidFile=${STATE}/run/slurmctld.pid
SlurmdPidFile=${STATE}/run/slurmd.pid
SlurmctldLogFile=${STATE}/log/slurmctld.log
SlurmdLogFile=${STATE}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
${overrides}
NodeName=localhost NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=${PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=${def_mem}
EOF
    echo "export SLURM_CONF=${CONF}" >"$STATE/env"
}

refuse_if_busy() { # another cluster of this script owns DEFAULT_CONF (and maybe munged): leave it alone
    local other
    other=$(readlink "$DEFAULT_CONF" 2>/dev/null || true)
    if [[ -n $other && $other != "$CONF" ]] && pid_alive "$(dirname "$other")/run/slurmctld.pid"; then
        die "$EXIT_BUSY" "another localhost cluster runs from $(dirname "$other");" \
            "stop it first: $0 stop $(dirname "$other")"
    fi
}

link_default_conf() { # point DEFAULT_CONF at this cluster's slurm.conf (see DEFAULT_CONF above)
    if [[ -e $DEFAULT_CONF && ! -L $DEFAULT_CONF ]]; then
        die "$EXIT_FAILURE" "$DEFAULT_CONF exists and is not a link made by this script; jobs would read it" \
            "instead of $CONF (move it aside to use this script)"
    fi
    mkdir -p "$(dirname "$DEFAULT_CONF")"
    ln -sfn "$CONF" "$DEFAULT_CONF"
    echo "$DEFAULT_CONF" >"$STATE/run/linked_conf"
}

unlink_default_conf() { # remove the link only while it still points at this cluster's slurm.conf
    if [[ -f $STATE/run/linked_conf && -L $DEFAULT_CONF && $(readlink "$DEFAULT_CONF") == "$CONF" ]]; then
        rm -f "$DEFAULT_CONF"
    fi
    rm -f "$STATE/run/linked_conf"
}

# --- daemons -------------------------------------------------------------------------------

start_munge() {
    if munge_works; then
        log "munged already answers; using it"
        return 0
    fi
    install -d -o munge -g munge -m 0755 "$MUNGE_RUN_DIR"
    if [[ ! -s $MUNGE_KEY ]]; then
        log "creating $MUNGE_KEY"
        install -d -o munge -g munge -m 0700 "$(dirname "$MUNGE_KEY")"
        mungekey --create --keyfile="$MUNGE_KEY"
        chown munge:munge "$MUNGE_KEY"
        chmod 0400 "$MUNGE_KEY"
    fi
    log "starting munged as user munge"
    runuser -u munge -- munged
    wait_for 10 munge_works || die "$EXIT_FAILURE" "munged did not start; see /var/log/munge/munged.log"
    # Recorded so that `stop` ends only the munged this script started.
    cp "$MUNGE_RUN_DIR/munged.pid" "$STATE/run/munged.pid"
}

start_slurm() {
    if ! pid_alive "$STATE/run/slurmctld.pid"; then
        log "starting slurmctld"
        slurmctld -f "$CONF" || die "$EXIT_FAILURE" "slurmctld failed to start; see $STATE/log/slurmctld.log"
    fi
    wait_for 30 scontrol ping || die "$EXIT_FAILURE" "slurmctld does not answer; see $STATE/log/slurmctld.log"
    if ! pid_alive "$STATE/run/slurmd.pid"; then
        log "starting slurmd -N localhost"
        slurmd -f "$CONF" -N localhost || die "$EXIT_FAILURE" "slurmd failed to start; see $STATE/log/slurmd.log"
    fi
    if ! wait_for "$WAIT_SECONDS" node_idle; then
        sinfo --long --Node >&2 || true
        die "$EXIT_FAILURE" "node localhost is not idle after ${WAIT_SECONDS}s; see $STATE/log/slurmd.log"
    fi
}

cmd_start() {
    mkdir -p "$STATE/log" "$STATE/run" "$STATE/slurmctld" "$STATE/slurmd"
    ensure_packages
    [[ $(id -u) -eq 0 ]] || die "$EXIT_UNSUPPORTED" "starting munged and slurmd needs root"
    refuse_if_busy
    if pid_alive "$STATE/run/slurmctld.pid" && pid_alive "$STATE/run/slurmd.pid" && node_idle; then
        log "already running"
        link_default_conf
        cat "$STATE/env"
        return 0
    fi
    write_conf
    link_default_conf
    start_munge
    start_slurm
    log "node localhost is idle in partition ${PARTITION}"
    cat "$STATE/env"
}

cmd_stop() {
    [[ -d $STATE ]] || return 0
    if pid_alive "$STATE/run/slurmctld.pid" && [[ -n $(squeue --noheader --format=%i 2>/dev/null) ]]; then
        log "cancelling all jobs"
        scancel --full --partition="$PARTITION" 2>/dev/null || true
        # Jobs may also sit in partitions added by hand; cancel whatever is left by id.
        squeue --noheader --format=%i 2>/dev/null | xargs -r scancel 2>/dev/null || true
        wait_for 15 test -z "$(squeue --noheader --states=RUNNING,COMPLETING --format=%i 2>/dev/null)" || true
    fi
    stop_pid slurmd "$STATE/run/slurmd.pid"
    stop_pid slurmctld "$STATE/run/slurmctld.pid"
    stop_pid munged "$STATE/run/munged.pid"
    unlink_default_conf
}

cmd_status() {
    local name ok=0
    for name in munged slurmctld slurmd; do
        if pid_alive "$STATE/run/$name.pid"; then
            echo "$name: running (pid $(cat "$STATE/run/$name.pid"))"
        elif [[ $name == munged ]] && munge_works; then
            echo "munged: running (not started by this script)"
        else
            echo "$name: stopped"
            ok=1
        fi
    done
    if [[ $ok -eq 0 ]]; then
        sinfo --Node --long || ok=1
    fi
    return "$ok"
}

# --- main ----------------------------------------------------------------------------------

[[ $# -ge 1 ]] || usage
COMMAND=$1
STATE=${2:-${SLURM_LOCALHOST_DIR:-}}
[[ -n $STATE ]] || usage
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
CONF=$STATE/slurm.conf
export SLURM_CONF=$CONF

# Not root: rerun through passwordless sudo where there is one (CI runners), else `start` exits 3.
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    keep=$(compgen -e | grep '^SLURM_LOCALHOST_' | paste -sd, - || true)
    exec sudo -n ${keep:+--preserve-env="$keep"} bash "$0" "$COMMAND" "$STATE"
fi

case $COMMAND in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*) usage ;;
esac
