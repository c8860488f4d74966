#include "sort.h"

#include <stdlib.h>
#include <string.h>

static int by_count(const void *a, const void *b) {
  const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return strcmp(x->word, y->word);
}

void sort_entries(struct entry **entries, size_t n) { qsort(entries, n, sizeof(*entries), by_count); }
