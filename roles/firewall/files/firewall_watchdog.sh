#!/usr/bin/env bash
# dgx_spark.vllm firewall watchdog (role firewall; run by its watchdog unit):
# loads the collection's nftables table again whenever something removes it -
# a `flush ruleset` (nftables.service's start, stop or restart, or its
# configuration on a reload), an `nft delete table`, a tool that resets the
# ruleset. It loads the rules file, the same single nft transaction as the
# firewall's unit, and logs each time it had to.
#   firewall-watchdog FAMILY TABLE RULES_FILE INTERVAL_SECONDS
set -u
if [ "$#" -ne 4 ]; then
    echo "usage: $0 FAMILY TABLE RULES_FILE INTERVAL_SECONDS" >&2
    exit 2
fi
family=$1 table=$2 rules=$3 interval=$4

# Loads the table when it is not loaded (a message with a syslog priority
# prefix: the journal records it as such).
restore() {
    nft list table "$family" "$table" >/dev/null 2>&1 && return 0
    echo "<4>table $family $table is gone: loading $rules again"
    if nft -f "$rules"; then
        echo "<4>table $family $table loaded again"
    else
        echo "<3>table $family $table: loading $rules failed (nft's reason above)"
    fi
}

# nft reports every change of the ruleset's tables as it happens; a check
# every INTERVAL seconds besides covers a change it did not see (one before
# it listened, say).
coproc monitor { exec nft monitor tables; }
# Systemd stops the whole unit; a watchdog run by hand takes its monitor along.
# shellcheck disable=SC2154  # monitor_PID: set by coproc above
trap 'kill "$monitor_PID" 2>/dev/null' EXIT
trap 'exit 0' TERM INT
restore
while :; do
    read -r -t "$interval" -u "${monitor[0]}" _
    status=$?
    # 0: an event; above 128: the interval passed; else the monitor ended
    # (systemd starts the watchdog again, which checks first).
    if [ "$status" -ne 0 ] && [ "$status" -le 128 ]; then
        echo "<3>nft monitor ended"
        exit 1
    fi
    restore
done
