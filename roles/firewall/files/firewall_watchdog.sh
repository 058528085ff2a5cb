#!/usr/bin/env bash
# dgx_spark.vllm firewall watchdog (role firewall; run by its watchdog unit):
# loads the collection's nftables table again whenever something removes it -
# a `flush ruleset` (nftables.service's start, stop or restart, or its
# configuration on a reload), an `nft delete table`, a tool that resets the
# ruleset. It loads the rules file, the same single nft transaction as the
# firewall's unit, and logs each time it had to. With METRICS_DIR, every
# check rewrites METRICS_DIR/firewall.prom for the node exporter's textfile
# collector: the table loaded or not, its restores since the watchdog
# started, the time of the check.
#   firewall-watchdog FAMILY TABLE RULES_FILE INTERVAL_SECONDS [METRICS_DIR]
set -u
if [ "$#" -ne 4 ] && [ "$#" -ne 5 ]; then
    echo "usage: $0 FAMILY TABLE RULES_FILE INTERVAL_SECONDS [METRICS_DIR]" >&2
    exit 2
fi
family=$1 table=$2 rules=$3 interval=$4 metrics_dir=${5:-}
loaded=0 restores=0

# Loads the table when it is not loaded (a message with a syslog priority
# prefix: the journal records it as such).
restore() {
    if nft list table "$family" "$table" >/dev/null 2>&1; then
        loaded=1
        return 0
    fi
    echo "<4>table $family $table is gone: loading $rules again"
    if nft -f "$rules"; then
        loaded=1 restores=$((restores + 1))
        echo "<4>table $family $table loaded again"
    else
        loaded=0
        echo "<3>table $family $table: loading $rules failed (nft's reason above)"
    fi
}

# Replaces firewall.prom at once (a temporary file in the same folder, then a
# rename: the collector never reads half a file, and skips names not ending
# in .prom). A folder it cannot write costs the metrics, not the watchdog.
write_metrics() {
    [ -n "$metrics_dir" ] || return 0
    local now temporary
    printf -v now '%(%s)T' -1
    temporary=$(mktemp "$metrics_dir/.firewall.prom.XXXXXX") || return 0
    if printf '%s\n' \
        "# HELP dgx_spark_firewall_table_loaded 1 when the firewall's table is loaded after the watchdog's check." \
        "# TYPE dgx_spark_firewall_table_loaded gauge" \
        "dgx_spark_firewall_table_loaded $loaded" \
        "# HELP dgx_spark_firewall_table_restores_total Times the watchdog loaded the gone table again since it started." \
        "# TYPE dgx_spark_firewall_table_restores_total counter" \
        "dgx_spark_firewall_table_restores_total $restores" \
        "# HELP dgx_spark_firewall_last_check_timestamp_seconds Unix time of the watchdog's last check." \
        "# TYPE dgx_spark_firewall_last_check_timestamp_seconds gauge" \
        "dgx_spark_firewall_last_check_timestamp_seconds $now" >"$temporary" &&
        chmod 0644 "$temporary" && mv -f "$temporary" "$metrics_dir/firewall.prom"; then
        return 0
    fi
    echo "<4>could not write $metrics_dir/firewall.prom"
    rm -f "$temporary"
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
write_metrics
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
    write_metrics
done
