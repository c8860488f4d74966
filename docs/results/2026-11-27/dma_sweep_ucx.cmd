$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self bench/dma_sweep.sh
