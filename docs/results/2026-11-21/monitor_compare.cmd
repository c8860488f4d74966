$ bench/monitor_compare.sh docs/results/2026-11-21
