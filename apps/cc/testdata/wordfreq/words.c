#include "words.h"

#include <ctype.h>

unsigned long count_words(FILE *in, struct table *t) {
  char word[MAX_WORD + 1];
  size_t len = 0;
  unsigned long n = 0;
  int c;
  do {
    c = getc(in);
    if (c != EOF && isalpha(c)) {
      if (len < MAX_WORD) word[len++] = (char)tolower(c);
      continue;
    }
    if (len > 0) {
      word[len] = '\0';
      table_add(t, word);
      n++;
      len = 0;
    }
  } while (c != EOF);
  return n;
}
