#include <stdio.h>
#include <stdlib.h>

#include "sort.h"
#include "table.h"
#include "words.h"

int main(int argc, char **argv) {
  size_t top = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 10;
  struct table t;
  table_init(&t, 1024);
  count_words(stdin, &t);
  struct entry **all = table_entries(&t);
  sort_entries(all, t.size);
  for (size_t i = 0; i < t.size && i < top; i++) printf("%lu %s\n", all[i]->count, all[i]->word);
  free(all);
  table_free(&t);
  return 0;
}
