$ env ARDMA_BENCH_TRANSPORT=tcp bench/monitor_compare.sh docs/results/2026-11-27 
