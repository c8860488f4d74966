$ bench/dma_sweep.sh    # added after the run: default build/ (RelWithDebInfo)
