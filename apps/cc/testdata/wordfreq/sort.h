#ifndef WORDFREQ_SORT_H
#define WORDFREQ_SORT_H
#include "table.h"
/* Most frequent first; ties in word order. */
void sort_entries(struct entry **entries, size_t n);
#endif
