#ifndef WORDFREQ_WORDS_H
#define WORDFREQ_WORDS_H
#include <stdio.h>
#include "table.h"

#define MAX_WORD 64
/* Adds every word of `in` (letters, folded to lower case) to `t`; returns how many. */
unsigned long count_words(FILE *in, struct table *t);
#endif
