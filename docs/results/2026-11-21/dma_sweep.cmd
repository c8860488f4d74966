$ bench/dma_sweep.sh
