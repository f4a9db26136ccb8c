/* ofile.c: atomic outputs through a temporary name; see ofile.h.
 *
 * The registry of temporary names is a small fixed table: a tool has a few
 * outputs open at once (a JSON report and a timeline's two files), and a
 * signal handler may only walk memory that is already there. The handler
 * calls unlink(), which is async-signal-safe, then dies of the same signal. */
#include "common/ofile.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OFILE_MAX 16 /* temporary names open at once */

static char *volatile ofile_live[OFILE_MAX];
static pthread_mutex_t ofile_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ofile_once = PTHREAD_ONCE_INIT;

static void ofile_on_signal(int sig)
{
    for (int i = 0; i < OFILE_MAX; i++) {
        char *t = ofile_live[i];
        if (t) unlink(t);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Only a signal left at its default is taken over: a tool started under
 * nohup (SIGINT ignored) keeps ignoring it. */
static void ofile_install(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = ofile_on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static int ofile_register(char *tmp)
{
    pthread_once(&ofile_once, ofile_install);
    pthread_mutex_lock(&ofile_lock);
    int slot = -1;
    for (int i = 0; i < OFILE_MAX && slot < 0; i++)
        if (!ofile_live[i]) slot = i;
    if (slot >= 0) ofile_live[slot] = tmp;
    pthread_mutex_unlock(&ofile_lock);
    return slot < 0 ? dh_err("more than %d outputs open at once", OFILE_MAX) : 0;
}

static void ofile_forget(const char *tmp)
{
    pthread_mutex_lock(&ofile_lock);
    for (int i = 0; i < OFILE_MAX; i++)
        if (ofile_live[i] == tmp) ofile_live[i] = NULL;
    pthread_mutex_unlock(&ofile_lock);
}

int ofile_check(const char *path)
{
    if (!path[0]) return dh_err("output path is empty");
    if (strlen(path) >= PATH_MAX - 32) return dh_err("output '%.64s...': path is longer than %d bytes", path, PATH_MAX - 32);
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    const char *base = slash ? slash + 1 : path;
    if (!base[0]) return dh_err("unable to write '%s': not a file name", path);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dh_err("unable to write '%s': folder '%s' does not exist", path, dir);
    if (access(dir, W_OK | X_OK) != 0) return dh_err("unable to write '%s': folder '%s' is not writable", path, dir);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return dh_err("unable to write '%s': it is a folder", path);
    return 0;
}

int ofile_begin(const char *path, char **tmp)
{
    size_t n = strlen(path) + 32;
    *tmp = dh_malloc(n);
    snprintf(*tmp, n, "%s.tmp.%ld", path, (long)getpid());
    if (ofile_register(*tmp) < 0) {
        free(*tmp);
        *tmp = NULL;
        return -1;
    }
    return 0;
}

int ofile_commit(char *tmp, const char *path)
{
    int rc = 0;
    if (rename(tmp, path) != 0) {
        rc = dh_err("unable to rename '%s' to '%s': %s", tmp, path, strerror(errno));
        unlink(tmp);
    }
    ofile_forget(tmp);
    free(tmp);
    return rc;
}

void ofile_abort(char *tmp)
{
    if (!tmp) return;
    unlink(tmp);
    ofile_forget(tmp);
    free(tmp);
}

int ofile_open(ofile *o, const char *path)
{
    o->f = NULL;
    o->path = path;
    if (ofile_begin(path, &o->tmp) < 0) return -1;
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        int e = errno;
        ofile_abort(o->tmp);
        o->tmp = NULL;
        return dh_err("unable to write '%s': %s", path, strerror(e));
    }
    return 0;
}

int ofile_close(ofile *o)
{
    if (!o->f) return dh_err("unable to write '%s'", o->path);
    int bad = ferror(o->f);
    int e = fclose(o->f) != 0 ? errno : 0;
    o->f = NULL;
    if (bad || e) {
        ofile_abort(o->tmp);
        o->tmp = NULL;
        return dh_err("write error on '%s'%s%s", o->path, e ? ": " : "", e ? strerror(e) : "");
    }
    int rc = ofile_commit(o->tmp, o->path);
    o->tmp = NULL;
    return rc;
}

void ofile_discard(ofile *o)
{
    if (o->f) fclose(o->f);
    o->f = NULL;
    ofile_abort(o->tmp);
    o->tmp = NULL;
}
