#ifndef WORDFREQ_TABLE_H
#define WORDFREQ_TABLE_H
#include <stddef.h>

struct entry {
  char *word;
  unsigned long count;
  struct entry *next;
};

struct table {
  struct entry **buckets;
  size_t nbuckets, size;
};

void table_init(struct table *t, size_t nbuckets);
void table_add(struct table *t, const char *word);
/* Every entry, in a new array of t->size pointers (free it, not the entries). */
struct entry **table_entries(const struct table *t);
void table_free(struct table *t);
#endif
