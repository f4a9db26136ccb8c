/* fuzz_cfg.c: libFuzzer harness of the INI loader (common/cfg.c) with
 * command-line overrides.
 *
 * An input is a config file's text, optionally followed by a NUL byte and
 * NUL-separated "section.key=value" overrides, as dhsim's --set gives them.
 * The text is loaded from a file (cfg_load), the overrides applied
 * (cfg_set_arg), and every entry read back through each typed getter and the
 * text form, so that any value reaches every parser.
 *
 *   make fuzz && build-fuzz/fuzz_cfg tests/fuzz/corpus/cfg */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/dh_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

/* The keys a getter is tried on: the ones of the entry texts, found by the
 * text form's "key = value" lines under each "[section]". */
static void read_all(cfg *c)
{
    char *text = cfg_to_string(c), *save = NULL, sec[256] = "";
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(line);
        if (line[0] == '[' && n >= 2 && line[n - 1] == ']') {
            snprintf(sec, sizeof sec, "%.*s", (int)(n - 2), line + 1);
            continue;
        }
        char *eq = strstr(line, " = ");
        if (!eq) continue;
        *eq = 0;
        double d, v[8];
        long l;
        int b;
        size_t nv;
        const char *s;
        cfg_get_double(c, sec, line, &d, CFG_REQUIRED, -1e300, 1e300);
        cfg_get_int(c, sec, line, &l, CFG_REQUIRED, -1000000, 1000000);
        cfg_get_bool(c, sec, line, &b, CFG_REQUIRED);
        cfg_get_doubles(c, sec, line, v, 8, &nv, -1e300, 1e300);
        cfg_get_string(c, sec, line, &s, CFG_REQUIRED);
    }
    free(text);
    cfg_check_unused(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_cfg.%ld.ini", (long)getpid());
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (text_len && fwrite(data, 1, text_len, f) != text_len) abort();
    if (fclose(f) != 0) abort();
    cfg *c;
    if (cfg_load(path, &c) == 0) {
        /* The overrides: NUL-separated strings after the text. */
        if (nul) {
            size_t rest = size - text_len - 1;
            char *sets = malloc(rest + 1);
            if (!sets) abort();
            memcpy(sets, nul + 1, rest);
            sets[rest] = 0;
            for (char *p = sets; p < sets + rest; p += strlen(p) + 1)
                if (*p) cfg_set_arg(c, p);
            free(sets);
        }
        read_all(c);
        cfg_free(c);
    }
    unlink(path);
    return 0;
}
