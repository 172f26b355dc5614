/* faulty_vfs.c — the fault-injecting VFS (faulty_vfs.h).
 *
 * A shim in the usual SQLite way: our sqlite3_file is the real one's
 * prefix-extended copy (szOsFile = ours + the real size), and every method
 * forwards to the real file's methods after deciding whether to fail. */
#include "faulty_vfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

typedef struct faulty_file {
  sqlite3_file base; /* pMethods = &faulty_io */
  sqlite3_file *real;
} faulty_file;

static sqlite3_vfs *real_vfs;
static sqlite3_vfs faulty;
static sqlite3_io_methods faulty_io;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static faulty_plan plan;
static faulty_counts counts;
static uint64_t rng;

/* Whether this call fails, at `per_mille`; counts it in *n. */
static int roll(int per_mille, uint64_t *n) {
  if (per_mille <= 0)
    return 0;
  pthread_mutex_lock(&mu);
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  int fail = per_mille >= 1000 || (int)(rng % 1000) < per_mille;
  if (fail)
    (*n)++;
  pthread_mutex_unlock(&mu);
  return fail;
}

static int plan_of(const int *field) {
  pthread_mutex_lock(&mu);
  int v = *field;
  pthread_mutex_unlock(&mu);
  return v;
}

#define REAL(f) (((faulty_file *)(f))->real)

static int f_close(sqlite3_file *f) {
  int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
  return rc;
}

static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
  if (roll(plan_of(&plan.read_per_mille), &counts.reads))
    return SQLITE_IOERR_READ;
  return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}

static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
  if (roll(plan_of(&plan.write_per_mille), &counts.writes))
    return SQLITE_FULL;
  return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}

static int f_truncate(sqlite3_file *f, sqlite3_int64 size) {
  if (roll(plan_of(&plan.write_per_mille), &counts.writes))
    return SQLITE_FULL;
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int f_sync(sqlite3_file *f, int flags) {
  if (roll(plan_of(&plan.sync_per_mille), &counts.syncs))
    return SQLITE_IOERR_FSYNC;
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int f_size(sqlite3_file *f, sqlite3_int64 *size) {
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int f_unlock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int f_check(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_fcntl(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int f_caps(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int ext,
                     void volatile **p) {
  return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, p);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int f_shm_unmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p) {
  return REAL(f)->pMethods->xFetch(REAL(f), off, n, p);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
                  int flags, int *out_flags) {
  (void)vfs;
  faulty_file *ff = (faulty_file *)f;
  ff->real = (sqlite3_file *)(ff + 1);
  ff->base.pMethods = NULL;
  if (roll(plan_of(&plan.open_per_mille), &counts.opens))
    return SQLITE_CANTOPEN;
  int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
  if (rc == SQLITE_OK && ff->real->pMethods) {
    /* Only what the real file has: a method of a later version it lacks
     * stays NULL. */
    faulty_io.iVersion = ff->real->pMethods->iVersion;
    ff->base.pMethods = &faulty_io;
  }
  return rc;
}

static int v_delete(sqlite3_vfs *v, const char *name, int sync) {
  (void)v;
  return real_vfs->xDelete(real_vfs, name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int v_fullpath(sqlite3_vfs *v, const char *name, int n, char *out) {
  (void)v;
  return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) {
  (void)v;
  return real_vfs->xDlOpen(real_vfs, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  real_vfs->xDlError(real_vfs, n, out);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void) {
  (void)v;
  return real_vfs->xDlSym(real_vfs, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) {
  (void)v;
  real_vfs->xDlClose(real_vfs, h);
}
static int v_random(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return real_vfs->xRandomness(real_vfs, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return real_vfs->xSleep(real_vfs, us);
}
static int v_time(sqlite3_vfs *v, double *out) {
  (void)v;
  return real_vfs->xCurrentTime(real_vfs, out);
}
static int v_lasterr(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return real_vfs->xGetLastError(real_vfs, n, out);
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
  (void)v;
  return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

void faulty_vfs_install(uint64_t seed) {
  rng = seed ? seed : 0x9e3779b97f4a7c15ull;
  if (real_vfs)
    return;
  real_vfs = sqlite3_vfs_find(NULL);
  faulty_io = (sqlite3_io_methods){
      .iVersion = 3,
      .xClose = f_close,
      .xRead = f_read,
      .xWrite = f_write,
      .xTruncate = f_truncate,
      .xSync = f_sync,
      .xFileSize = f_size,
      .xLock = f_lock,
      .xUnlock = f_unlock,
      .xCheckReservedLock = f_check,
      .xFileControl = f_fcntl,
      .xSectorSize = f_sector,
      .xDeviceCharacteristics = f_caps,
      .xShmMap = f_shm_map,
      .xShmLock = f_shm_lock,
      .xShmBarrier = f_shm_barrier,
      .xShmUnmap = f_shm_unmap,
      .xFetch = f_fetch,
      .xUnfetch = f_unfetch,
  };
  faulty = (sqlite3_vfs){
      .iVersion = 2,
      .szOsFile = (int)sizeof(faulty_file) + real_vfs->szOsFile,
      .mxPathname = real_vfs->mxPathname,
      .zName = "faulty",
      .xOpen = v_open,
      .xDelete = v_delete,
      .xAccess = v_access,
      .xFullPathname = v_fullpath,
      .xDlOpen = v_dlopen,
      .xDlError = v_dlerror,
      .xDlSym = v_dlsym,
      .xDlClose = v_dlclose,
      .xRandomness = v_random,
      .xSleep = v_sleep,
      .xCurrentTime = v_time,
      .xGetLastError = v_lasterr,
      .xCurrentTimeInt64 = v_time64,
  };
  sqlite3_vfs_register(&faulty, 1);
}

void faulty_vfs_set(const faulty_plan *p) {
  pthread_mutex_lock(&mu);
  plan = p ? *p : (faulty_plan){0};
  pthread_mutex_unlock(&mu);
}

void faulty_vfs_counts(faulty_counts *out) {
  pthread_mutex_lock(&mu);
  *out = counts;
  pthread_mutex_unlock(&mu);
}
