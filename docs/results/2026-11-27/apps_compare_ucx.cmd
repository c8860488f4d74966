$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self bench/apps_compare.sh 3
