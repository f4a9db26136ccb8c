/* json.h: the pieces of JSON text the reports need that printf cannot write.
 *
 * Numbers are written with printf formats by the report itself (their digits
 * are part of the golden outputs); strings come from configs, paths and
 * trace attributes, so they are escaped here: quote, backslash and control
 * characters per RFC 8259, everything else (UTF-8 included) as is. An
 * ordinary string gives the same bytes as "\"%s\"" did. */
#ifndef DH_JSON_H
#define DH_JSON_H

#include <stdio.h>

/* Write s as a quoted JSON string. */
void json_str(FILE *f, const char *s);

#endif
