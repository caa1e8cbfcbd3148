#!/usr/bin/env bash
# A single-node Slurm on this machine, from Debian's packages (slurm-wlm, munge), to try i6_shard's
# recipe example on Sisyphus' Slurm engine (recipe_examples/settings_slurm.py) or to run
# tests/cluster/test_slurm.py. Everything it starts lives in one state directory and stops with `stop`.
#
#   scripts/start_local_slurm.sh install         # apt-get install -y slurm-wlm munge (Debian packages only)
#   scripts/start_local_slurm.sh start DIR       # write DIR/slurm.conf, start munged, slurmctld and slurmd
#   export SLURM_CONF=DIR/slurm.conf             # so that sbatch, squeue, sinfo find this cluster
#   scripts/start_local_slurm.sh status DIR
#   scripts/start_local_slurm.sh stop DIR        # cancel its jobs, stop the daemons (DIR keeps their logs)
#
# Runs as root (slurmd starts the jobs as their user); use sudo otherwise. The ports are
# I6_SHARD_SLURMCTLD_PORT and I6_SHARD_SLURMD_PORT (default 6817 and 6818). Nothing but Debian packages
# is fetched, and only by `install`.
set -euo pipefail

usage() {
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

die() {
    echo "start_local_slurm: $*" >&2
    exit 1
}

need_root() {
    [ "$(id -u)" = 0 ] || die "run as root (slurmd starts the jobs as their user), e.g. sudo $0 $*"
}

need_binaries() {
    local missing=()
    for b in munged mungekey slurmctld slurmd sinfo; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing+=("$b")
    done
    [ ${#missing[@]} = 0 ] || die "${missing[*]} not found: install Debian's packages with '$0 install' \
(apt-get install -y slurm-wlm munge)"
}

export PATH="$PATH:/usr/sbin:/sbin"

cmd_install() {
    need_root install
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge
}

pid_alive() {  # pid_alive FILE: the pid in FILE runs
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

cmd_start() {
    local dir="$1"
    need_root start "$dir"
    need_binaries
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    chmod 0700 "$dir"
    for pidfile in munged.pid slurmctld.pid slurmd.pid; do
        ! pid_alive "$dir/$pidfile" || die "$dir already runs a cluster ($pidfile); stop it first: $0 stop $dir"
    done
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
    chmod 0700 "$dir/munge"
    local host cpus mem_mb ctld_port d_port
    host="$(hostname -s)"
    cpus="$(nproc)"
    mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
    ctld_port="${I6_SHARD_SLURMCTLD_PORT:-6817}"
    d_port="${I6_SHARD_SLURMD_PORT:-6818}"

    # Whatever fails from here on stops what was started.
    trap '"$0" stop "$dir" >/dev/null 2>&1 || true' ERR
    # munge: its own key and socket in DIR, not the system's (the system's munged may be absent or another key's).
    [ -s "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key"
    chmod 0600 "$dir/munge/munge.key"
    munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"

    cat > "$dir/slurm.conf" <<CONF
# Single-node Slurm written by i6_shard's scripts/start_local_slurm.sh
ClusterName=i6shardlocal
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmdPort=${d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=${dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool
SlurmctldPidFile=${dir}/slurmctld.pid
SlurmdPidFile=${dir}/slurmd.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
MinJobAge=300
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$dir/slurm.conf"
    slurmd -f "$dir/slurm.conf"
    # Ready when the node takes jobs.
    local state=""
    for _ in $(seq 1 60); do
        state="$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)"
        case "$state" in
            idle|mixed|allocated) break ;;
        esac
        sleep 0.5
    done
    case "$state" in
        idle|mixed|allocated) ;;
        *) "$0" stop "$dir" || true
           die "the node did not come up (state '${state}'); see $dir/log/slurmctld.log and $dir/log/slurmd.log" ;;
    esac
    trap - ERR
    echo "single-node Slurm up: node ${host}, ${cpus} CPUs, ${mem_mb} MB; state in $dir"
    echo "export SLURM_CONF=$dir/slurm.conf"
}

cmd_stop() {
    local dir="$1" pidfile pid
    [ -d "$dir" ] || die "$dir does not exist"
    dir="$(cd "$dir" && pwd)"
    # Cancel the jobs of this cluster and let their steps end, while the daemons still run.
    if pid_alive "$dir/slurmctld.pid" && [ -f "$dir/slurm.conf" ]; then
        SLURM_CONF="$dir/slurm.conf" scancel --user="$(id -un)" 2>/dev/null || true
        for _ in $(seq 1 40); do
            [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h 2>/dev/null)" ] && break
            sleep 0.25
        done
    fi
    # slurmd first, then slurmctld, then munged.
    for pidfile in slurmd.pid slurmctld.pid munged.pid; do
        if pid_alive "$dir/$pidfile"; then
            pid="$(cat "$dir/$pidfile")"
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 40); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.25
            done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/$pidfile"
    done
    # A job step that outlived slurmd: a slurmstepd that still writes to this cluster's slurmd log.
    for pid in $(pgrep -x slurmstepd 2>/dev/null || true); do
        if ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF -- "-> $dir/"; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    echo "stopped the cluster in $dir"
}

cmd_status() {
    local dir="$1" pidfile
    for pidfile in munged.pid slurmctld.pid slurmd.pid; do
        if pid_alive "$dir/$pidfile"; then echo "${pidfile%.pid}: running (pid $(cat "$dir/$pidfile"))"
        else echo "${pidfile%.pid}: not running"; fi
    done
    SLURM_CONF="$dir/slurm.conf" sinfo 2>/dev/null || true
}

case "${1:-}" in
    install) [ $# = 1 ] || usage; cmd_install ;;
    start) [ $# = 2 ] || usage; cmd_start "$2" ;;
    stop) [ $# = 2 ] || usage; cmd_stop "$2" ;;
    status) [ $# = 2 ] || usage; cmd_status "$2" ;;
    *) usage ;;
esac
