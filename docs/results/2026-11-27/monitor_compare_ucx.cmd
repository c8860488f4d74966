$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self bench/monitor_compare.sh docs/results/2026-11-27 _ucx
