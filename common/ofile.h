/* ofile.h: outputs written whole or not at all.
 *
 * Every file a tool writes (a trace, a JSON report, a timeline, a calibrated
 * profile) is first written under a temporary name in the same folder, so that
 * the final rename is atomic: a reader sees the old file or the complete new
 * one, never a truncated one. A temporary name is registered until it is
 * committed or abandoned; SIGINT and SIGTERM remove every registered one
 * before the process dies, so a killed run leaves nothing behind.
 *
 *   if (ofile_check(path) < 0) ...               // before the run: the folder is writable
 *   char *tmp; if (ofile_begin(path, &tmp) < 0) ...
 *   ... write tmp ...
 *   if (ok) rc = ofile_commit(tmp, path); else ofile_abort(tmp);
 *
 * ofile_open/ofile_close do the same for a stdio stream, checking every byte
 * reached the disk (ferror, fclose) before the rename. */
#ifndef DH_OFILE_H
#define DH_OFILE_H

#include <stdio.h>

/* 0 when path could be written: its folder exists and is writable, and path is
 * not itself a folder; -1 with dh_err() otherwise. Nothing is created. */
int ofile_check(const char *path);

/* A registered temporary name beside path (malloc'd into *tmp); 0 or -1. */
int ofile_begin(const char *path, char **tmp);
/* Rename tmp to path and forget it (tmp is freed); on failure tmp is removed. */
int ofile_commit(char *tmp, const char *path);
/* Remove tmp and forget it (tmp is freed). NULL is a no-op. */
void ofile_abort(char *tmp);

typedef struct {
    FILE *f;
    char *tmp;
    const char *path;
} ofile;

/* Open a stream on a temporary name for path. 0, or -1 with dh_err(). */
int ofile_open(ofile *o, const char *path);
/* Close the stream and rename it into place; any write error removes it. */
int ofile_close(ofile *o);
/* Close and remove without renaming (an error elsewhere). */
void ofile_discard(ofile *o);

#endif
