$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self bench/scaling.sh 20000
