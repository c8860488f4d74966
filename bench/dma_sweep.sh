#!/usr/bin/env bash
# The Active RDMA paper's "DMA cost" axis: the list and hash table operations, active vs RDMA, as each memory
# access by active code is made to cost more (ardmad --dma-cost-ns, a model: a busy-wait per
# access). One-sided operations are not charged: the model asks how slow next-to-the-data access
# may get before shipping code stops paying off.
#
#   bench/dma_sweep.sh            (prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin  # scripts/build.sh builds there (BUILD_DIR, BUILD_TYPE honoured)
./scripts/build.sh list_dht_bench >/dev/null
echo "| dma cost (ns) | benchmark | active (us) | RDMA (us) | RDMA / active |"
echo "|---:|---|---:|---:|---:|"
for cost in 0 100 1000 10000; do
  ARDMA_BENCH_DMA_COST_NS=$cost "$bin"/list_dht_bench \
    --benchmark_filter='BM_ListAppendAt200|BM_DhtGet/rdma:./value:3/real_time/threads:1$|BM_DhtPut/rdma:./value:3/real_time/threads:1$' \
    --benchmark_min_time=0.2 --benchmark_format=csv 2>/dev/null |
    awk -F, -v cost="$cost" '
      /^"BM_/ {
        name = $1; gsub(/"/, "", name)
        t = $3; unit = $5; gsub(/"/, "", unit)
        us = (unit == "ns") ? t / 1000 : (unit == "ms" ? t * 1000 : t)
        key = name; sub(/\/rdma:[01]/, "", key)
        if (name ~ /rdma:1/) rdma[key] = us; else active[key] = us
        order[key] = ++n
      }
      END {
        for (k in active) printf "| %s | %s | %.1f | %.1f | %.1fx |\n", cost, k, active[k], rdma[k], rdma[k] / active[k]
      }' | sort -t'|' -k3
done
