/* json.c: JSON string escaping; see json.h. */
#include "common/json.h"

void json_str(FILE *f, const char *s)
{
    putc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else putc(*p, f);
        }
    }
    putc('"', f);
}
