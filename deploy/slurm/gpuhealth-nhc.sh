#!/usr/bin/env bash
# gpuhealth as Slurm's HealthCheckProgram (see docs/slurm-nhc.md).
#
#   gpuhealth says nothing drains -> resume this node, but only if gpuhealth drained it
#                                    (its drain reason starts with "gpuhealth:")
#   gpuhealth finds a node or GPU  -> drain this node with gpuhealth's one-line reason (it names the GPU, the
#   that cannot be used              impact and the action), unless it is already drained or down (an admin's or
#                                    another tool's reason is kept)
#   gpuhealth cannot run or judge  -> change nothing (never drain, never resume) and log it at error priority
#   (exit 3, missing: 127, 126,      (syslog user.err, tag gpuhealth-nhc): a typo, a bad config or a missing
#   killed by the timeout, crash)    gpuhealth must not empty the cluster, nor pass unseen
#
# What drains is gpuhealth's choice, by each finding's impact (docs/actions.md): node_unusable and gpu_unusable;
# GPUHEALTH_FAIL_ON=degraded adds degraded. A user's environment (a CPU-only PyTorch) never drains.
#
# The check is read-only: no framework probe (--no-frameworks: it would compute on busy GPUs), every command
# bounded by GPUHEALTH_COMMAND_TIMEOUT_S, the whole run by GPUHEALTH_TIMEOUT_S (Slurm kills a HealthCheckProgram
# after 60 s). Its one write is the count of GPUs it saw (--gpu-state), so a node whose GPUs all left the PCI bus
# stays drained without gpu_count configured.
#
# Settings (environment): GPUHEALTH (the gpuhealth command), SCONTROL, NODENAME (default: SLURMD_NODENAME, which
# slurmd sets, else hostname -s),
# GPUHEALTH_TIMEOUT_S (default 50), GPUHEALTH_COMMAND_TIMEOUT_S (per command, default 10), GPUHEALTH_GPU_STATE
# (default /var/lib/gpuhealth/gpus-seen; empty: none). Extra arguments go to `gpuhealth check` (e.g. --gpu-count 8).
set -euo pipefail
# slurmd runs a HealthCheckProgram with an almost empty environment: no PATH, only SLURMD_NODENAME
export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}

GPUHEALTH=${GPUHEALTH:-/usr/local/bin/gpuhealth}
SCONTROL=${SCONTROL:-scontrol}
NODENAME=${NODENAME:-${SLURMD_NODENAME:-$(hostname -s)}}  # Slurm's name for this node, which need not be its hostname
TIMEOUT_S=${GPUHEALTH_TIMEOUT_S:-50}
COMMAND_TIMEOUT_S=${GPUHEALTH_COMMAND_TIMEOUT_S:-10}
GPU_STATE=${GPUHEALTH_GPU_STATE-/var/lib/gpuhealth/gpus-seen}
PREFIX="gpuhealth:"

# log PRIORITY MESSAGE: to syslog (facility user) and to stderr (slurmd's log)
log() {
    local priority=$1
    shift
    if command -v logger >/dev/null 2>&1; then
        logger -p "user.$priority" -t gpuhealth-nhc -- "$*" || true
    fi
    printf 'gpuhealth-nhc: %s\n' "$*" >&2
}

# The node's state (e.g. IDLE+DRAIN) and drain reason as scontrol shows them.
node_info=$("$SCONTROL" show node "$NODENAME") || { log err "scontrol show node $NODENAME failed"; exit 1; }
state=$(sed -n 's/^[[:space:]]*State=\([^[:space:]]*\).*/\1/p' <<<"$node_info" | head -n 1)
current_reason=$(sed -n 's/^[[:space:]]*Reason=//p' <<<"$node_info" | head -n 1)

drained=0
case "$state" in
    *DRAIN*|*DOWN*|*FAIL*) drained=1 ;;
esac
ours=0
case "$current_reason" in
    "$PREFIX"*) ours=1 ;;
esac

args=(check --format nhc --no-frameworks --timeout "$COMMAND_TIMEOUT_S")
[[ -n $GPU_STATE ]] && args+=(--gpu-state "$GPU_STATE")
rc=0
output=$(timeout "$TIMEOUT_S" "$GPUHEALTH" "${args[@]}" "$@" 2>&1) || rc=$?
reason=$(grep -m 1 "^$PREFIX" <<<"$output" || true)
said=$(tail -n 1 <<<"$output")

case "$rc" in
    0)
        if [[ $drained -eq 1 && $ours -eq 1 && $state == *DRAIN* ]]; then
            log notice "nothing drains now: resuming $NODENAME (was: $current_reason)"
            "$SCONTROL" update nodename="$NODENAME" state=resume
        fi
        ;;
    1|2)
        [[ -n $reason ]] || reason="$PREFIX gpuhealth check exited $rc"
        if [[ $drained -eq 0 ]]; then
            log warning "draining $NODENAME: $reason"
            "$SCONTROL" update nodename="$NODENAME" state=drain reason="$reason"
        fi
        ;;
    *)
        # 3: gpuhealth could not judge (a bad config or bundle, a check that failed inside it); 126/127: not
        # executable or not installed; 124/137: killed by the timeout; anything else: a crash. Nothing changes.
        case "$rc" in
            124|137) why="gpuhealth ran past ${TIMEOUT_S} s" ;;
            126|127) why="gpuhealth cannot be run ($GPUHEALTH: exit $rc)" ;;
            *) why="gpuhealth could not judge (exit $rc)" ;;
        esac
        log err "$why; $NODENAME left as it is (${state:-unknown}): ${said:-no output}"
        ;;
esac
exit 0
