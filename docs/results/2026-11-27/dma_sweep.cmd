$ env ARDMA_BENCH_TRANSPORT=tcp bench/dma_sweep.sh
