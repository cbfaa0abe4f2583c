/* A fake libcuda.so.1 for the probe's unit tests: each FAKE_* variable picks one behaviour. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

#define UUID_TEXT "GPU-8f3c1e22-5a6b-4c7d-9e0f-102132435465"

int cuGetErrorName(int code, const char **out) {
    switch (code) {
    case 2: *out = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 100: *out = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 803: *out = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    case 999: *out = "CUDA_ERROR_UNKNOWN"; return 0;
    default: *out = "CUDA_ERROR_FAKE"; return 0;
    }
}

int cuGetErrorString(int code, const char **out) {
    switch (code) {
    case 2: *out = "out of memory"; return 0;
    case 100: *out = "no CUDA-capable device is detected"; return 0;
    case 803: *out = "system has unsupported display driver / cuda driver combination"; return 0;
    case 999: *out = "unknown error"; return 0;
    default: *out = "fake error"; return 0;
    }
}

/* FAKE_RENDEZVOUS=DIR: cuInit marks DIR/cuinit, then waits up to 5 s for DIR/import, which the
   fake CuPy marks when it is imported (harness.py) and which waits for DIR/cuinit in turn: both
   pass only when the import runs while cuInit does; cuInit returns 999 otherwise. */
static int rendezvous(void) {
    const char *dir = getenv("FAKE_RENDEZVOUS");
    char mine[4096], theirs[4096];
    if (!dir || !*dir) return 0;
    snprintf(mine, sizeof mine, "%s/cuinit", dir);
    snprintf(theirs, sizeof theirs, "%s/import", dir);
    FILE *mark = fopen(mine, "w");
    if (mark) fclose(mark);
    for (int waited_ms = 0; waited_ms < 5000; waited_ms++) {
        if (access(theirs, F_OK) == 0) return 0;
        usleep(1000);
    }
    return 999;
}

int cuInit(unsigned flags) {
    (void)flags;
    usleep(1000 * env_int("FAKE_CUDA_INIT_SLEEP_MS", 0));
    if (rendezvous()) return 999;
    /* Like the real driver: a CUDA_VISIBLE_DEVICES entry that names no device hides everything. */
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && (!*cvd || (strcmp(cvd, "0") != 0 && strncmp(cvd, UUID_TEXT, strlen(cvd)) != 0)))
        return 100;
    return env_int("FAKE_CUDA_INIT_ERROR", 0);
}

int cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_DRIVER_VERSION", 13000); return 0; }
int cuDeviceGetCount(int *n) { *n = env_int("FAKE_CUDA_DEVICE_COUNT", 1); return 0; }
int cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return 0; }

int cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    strncpy(name, "Fake H200", (size_t)len);
    return 0;
}

#ifndef OMIT_UUID /* the "broken driver" build leaves this symbol out */
int cuDeviceGetUuid(unsigned char *uuid, int dev) {
    static const unsigned char bytes[16] = {0x8f, 0x3c, 0x1e, 0x22, 0x5a, 0x6b, 0x4c, 0x7d,
                                            0x9e, 0x0f, 0x10, 0x21, 0x32, 0x43, 0x54, 0x65};
    (void)dev;
    memcpy(uuid, bytes, 16);
    return 0;
}
#endif

int cuDeviceTotalMem_v2(size_t *bytes, int dev) { (void)dev; *bytes = 143771ULL << 20; return 0; }

int cuDeviceGetAttribute(int *value, int attribute, int dev) {
    (void)dev;
    if (attribute == 75) *value = env_int("FAKE_CC_MAJOR", 9);
    else if (attribute == 76) *value = env_int("FAKE_CC_MINOR", 0);
    else return 1;
    return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    (void)dev;
    *ctx = (void *)0x1;
    return env_int("FAKE_CUDA_CTX_ERROR", 0);
}

int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }

int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
    (void)bytes;
    *ptr = 0x7f0000000000ULL;
    return env_int("FAKE_CUDA_ALLOC_ERROR", 0);
}

int cuMemFree_v2(unsigned long long ptr) { (void)ptr; return 0; }

int cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)env_int("FAKE_CUDA_FREE_MIB", 143000) << 20;
    *total = 143771ULL << 20;
    return 0;
}
