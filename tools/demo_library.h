// The "demo" active-code library, used by ardma-demo and the core tests: a linked list of u64
// values, the Active RDMA paper's first example of why shipping code beats one round trip per node.
//
// Arguments and results are little-endian u64s.
//   demo.build_list  n     -> head address of a new list of n nodes holding 1..n
//                             node := next:u64 value:u64 (16 bytes, heap-allocated)
//   demo.sum_list    head  -> sum of the values, number of nodes (one READ per node)
#ifndef ARDMA_TOOLS_DEMO_LIBRARY_H_
#define ARDMA_TOOLS_DEMO_LIBRARY_H_

#include "core/active/active_library.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(demo);

#endif  // ARDMA_TOOLS_DEMO_LIBRARY_H_
