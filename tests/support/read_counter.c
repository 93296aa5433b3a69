// LD_PRELOAD library for tests: counts the bytes a process reads from files whose path contains
// $CHIMERA_READ_COUNT_MATCH (read, pread, readv, preadv and their 64-bit names; mmap is not
// counted, and HDF5 does not map files), and at exit appends "<pid> <bytes>" to the file
// $CHIMERA_READ_COUNT_OUT. It measures a program's reads from outside the program.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536
static atomic_char tracked[MAX_FDS];
static atomic_llong bytes_read;

static int matches(const char* path) {
  const char* match = getenv("CHIMERA_READ_COUNT_MATCH");
  return path != NULL && match != NULL && match[0] != '\0' && strstr(path, match) != NULL;
}

static int track(int fd, const char* path) {
  if (fd >= 0 && fd < MAX_FDS) atomic_store(&tracked[fd], (char)matches(path));
  return fd;
}

static void count(int fd, ssize_t n) {
  if (n > 0 && fd >= 0 && fd < MAX_FDS && atomic_load(&tracked[fd])) atomic_fetch_add(&bytes_read, n);
}

typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef int (*close_fn)(int);
typedef ssize_t (*read_fn)(int, void*, size_t);
typedef ssize_t (*pread_fn)(int, void*, size_t, off_t);
typedef ssize_t (*readv_fn)(int, const struct iovec*, int);
typedef ssize_t (*preadv_fn)(int, const struct iovec*, int, off_t);

// The next definition of `name` (libc's), looked up once.
#define REAL(name, type)                                            \
  static type real_##name = NULL;                                   \
  if (real_##name == NULL) real_##name = (type)dlsym(RTLD_NEXT, #name)

static mode_t mode_of(int flags, va_list args) {
  return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(args, int) : 0;
}

int open(const char* path, int flags, ...) {
  REAL(open, open_fn);
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_of(flags, args);
  va_end(args);
  return track(real_open(path, flags, mode), path);
}
int open64(const char* path, int flags, ...) {
  REAL(open64, open_fn);
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_of(flags, args);
  va_end(args);
  return track(real_open64(path, flags, mode), path);
}
int openat(int dir, const char* path, int flags, ...) {
  REAL(openat, openat_fn);
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_of(flags, args);
  va_end(args);
  return track(real_openat(dir, path, flags, mode), path);
}
int openat64(int dir, const char* path, int flags, ...) {
  REAL(openat64, openat_fn);
  va_list args;
  va_start(args, flags);
  const mode_t mode = mode_of(flags, args);
  va_end(args);
  return track(real_openat64(dir, path, flags, mode), path);
}
int close(int fd) {
  REAL(close, close_fn);
  if (fd >= 0 && fd < MAX_FDS) atomic_store(&tracked[fd], 0);
  return real_close(fd);
}
ssize_t read(int fd, void* buf, size_t n) {
  REAL(read, read_fn);
  const ssize_t r = real_read(fd, buf, n);
  count(fd, r);
  return r;
}
ssize_t pread(int fd, void* buf, size_t n, off_t offset) {
  REAL(pread, pread_fn);
  const ssize_t r = real_pread(fd, buf, n, offset);
  count(fd, r);
  return r;
}
ssize_t pread64(int fd, void* buf, size_t n, off_t offset) {
  REAL(pread64, pread_fn);
  const ssize_t r = real_pread64(fd, buf, n, offset);
  count(fd, r);
  return r;
}
ssize_t readv(int fd, const struct iovec* iov, int n) {
  REAL(readv, readv_fn);
  const ssize_t r = real_readv(fd, iov, n);
  count(fd, r);
  return r;
}
ssize_t preadv(int fd, const struct iovec* iov, int n, off_t offset) {
  REAL(preadv, preadv_fn);
  const ssize_t r = real_preadv(fd, iov, n, offset);
  count(fd, r);
  return r;
}
ssize_t preadv64(int fd, const struct iovec* iov, int n, off_t offset) {
  REAL(preadv64, preadv_fn);
  const ssize_t r = real_preadv64(fd, iov, n, offset);
  count(fd, r);
  return r;
}

__attribute__((destructor)) static void report(void) {
  const char* out = getenv("CHIMERA_READ_COUNT_OUT");
  if (out == NULL || out[0] == '\0') return;
  char line[64];
  const int len = snprintf(line, sizeof line, "%d %lld\n", (int)getpid(), (long long)atomic_load(&bytes_read));
  REAL(open, open_fn);
  const int fd = real_open(out, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  if (write(fd, line, (size_t)len) < 0) {
  }
  REAL(close, close_fn);
  real_close(fd);
}
