#include "table.h"

#include <stdlib.h>
#include <string.h>

static unsigned long hash(const char *s) {
  unsigned long h = 5381;
  while (*s) h = h * 33 + (unsigned char)*s++;
  return h;
}

void table_init(struct table *t, size_t nbuckets) {
  t->buckets = calloc(nbuckets, sizeof(*t->buckets));
  t->nbuckets = nbuckets;
  t->size = 0;
}

void table_add(struct table *t, const char *word) {
  struct entry **slot = &t->buckets[hash(word) % t->nbuckets];
  for (struct entry *e = *slot; e != NULL; e = e->next) {
    if (strcmp(e->word, word) == 0) {
      e->count++;
      return;
    }
  }
  struct entry *e = malloc(sizeof(*e));
  e->word = strdup(word);
  e->count = 1;
  e->next = *slot;
  *slot = e;
  t->size++;
}

struct entry **table_entries(const struct table *t) {
  struct entry **out = malloc((t->size + 1) * sizeof(*out));
  size_t n = 0;
  for (size_t i = 0; i < t->nbuckets; i++) {
    for (struct entry *e = t->buckets[i]; e != NULL; e = e->next) out[n++] = e;
  }
  return out;
}

void table_free(struct table *t) {
  for (size_t i = 0; i < t->nbuckets; i++) {
    struct entry *e = t->buckets[i];
    while (e != NULL) {
      struct entry *next = e->next;
      free(e->word);
      free(e);
      e = next;
    }
  }
  free(t->buckets);
}
