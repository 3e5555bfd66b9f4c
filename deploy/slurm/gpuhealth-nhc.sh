#!/usr/bin/env bash
# gpuhealth as Slurm's HealthCheckProgram (see docs/slurm-nhc.md).
#
#   gpuhealth says healthy      -> resume this node, but only if gpuhealth drained it
#                                  (its drain reason starts with "gpuhealth:")
#   gpuhealth finds a problem   -> drain this node with gpuhealth's one-line reason, unless it is
#                                  already drained or down (an admin's or another tool's reason is kept)
#   gpuhealth cannot run/judge  -> change nothing; log it (GPUHEALTH_DRAIN_ON_ERROR=1 drains instead)
#
# Which severities drain is gpuhealth's choice: critical findings; GPUHEALTH_FAIL_ON=warning adds
# warnings. Slurm kills a HealthCheckProgram after 60 seconds, so gpuhealth gets at most 50.
#
# Settings (environment): GPUHEALTH (the gpuhealth command), SCONTROL, NODENAME (default: hostname -s),
# GPUHEALTH_TIMEOUT_S (default 50), GPUHEALTH_COMMAND_TIMEOUT_S (per nvidia-smi/dmesg run, default 10),
# GPUHEALTH_DRAIN_ON_ERROR (default 0). Extra arguments go to `gpuhealth check` (e.g. --gpu-count 8).
set -euo pipefail

GPUHEALTH=${GPUHEALTH:-/usr/local/bin/gpuhealth}
SCONTROL=${SCONTROL:-scontrol}
NODENAME=${NODENAME:-$(hostname -s)}
TIMEOUT_S=${GPUHEALTH_TIMEOUT_S:-50}
COMMAND_TIMEOUT_S=${GPUHEALTH_COMMAND_TIMEOUT_S:-10}
DRAIN_ON_ERROR=${GPUHEALTH_DRAIN_ON_ERROR:-0}
PREFIX="gpuhealth:"

log() {
    if command -v logger >/dev/null 2>&1; then
        logger -t gpuhealth-nhc -- "$*" || true
    fi
    printf 'gpuhealth-nhc: %s\n' "$*" >&2
}

# The node's state (e.g. IDLE+DRAIN) and drain reason as scontrol shows them.
node_info=$("$SCONTROL" show node "$NODENAME") || { log "scontrol show node $NODENAME failed"; exit 1; }
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

rc=0
reason=$(timeout "$TIMEOUT_S" "$GPUHEALTH" check --format nhc --timeout "$COMMAND_TIMEOUT_S" "$@") || rc=$?
reason=$(head -n 1 <<<"$reason")

case "$rc" in
    0)
        if [[ $drained -eq 1 && $ours -eq 1 && $state == *DRAIN* ]]; then
            log "healthy again: resuming $NODENAME (was: $current_reason)"
            "$SCONTROL" update nodename="$NODENAME" state=resume
        fi
        ;;
    1|2)
        [[ $reason == "$PREFIX"* ]] || reason="$PREFIX gpuhealth check exited $rc"
        if [[ $drained -eq 0 ]]; then
            log "draining $NODENAME: $reason"
            "$SCONTROL" update nodename="$NODENAME" state=drain reason="$reason"
        fi
        ;;
    *)
        # 3: gpuhealth could not run; 124: it ran past GPUHEALTH_TIMEOUT_S; anything else: a crash.
        log "gpuhealth could not judge $NODENAME (exit $rc)"
        if [[ $DRAIN_ON_ERROR == 1 && $drained -eq 0 ]]; then
            "$SCONTROL" update nodename="$NODENAME" state=drain reason="$PREFIX gpuhealth could not run (exit $rc)"
        fi
        ;;
esac
exit 0
