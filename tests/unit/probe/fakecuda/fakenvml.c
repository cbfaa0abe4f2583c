/* A fake libnvidia-ml.so.1 for the probe's unit tests: each FAKE_NVML_* variable picks one
   behaviour. Like the real NVML it ignores CUDA_VISIBLE_DEVICES. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

#define UUID_TEXT "GPU-8f3c1e22-5a6b-4c7d-9e0f-102132435465"

int nvmlInit_v2(void) { return env_int("FAKE_NVML_INIT_ERROR", 0); }

const char *nvmlErrorString(int code) {
    switch (code) {
    case 9: return "Driver Not Loaded";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *buf, unsigned len) {
    const char *v = getenv("FAKE_NVML_DRIVER");
    snprintf(buf, len, "%s", v ? v : "580.159.04");
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned *n) { *n = (unsigned)env_int("FAKE_NVML_DEVICE_COUNT", 1); return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)(size_t)(i + 1); return 0; }
int nvmlDeviceGetUUID(void *h, char *buf, unsigned len) { (void)h; snprintf(buf, len, UUID_TEXT); return 0; }

int nvmlDeviceGetHandleByUUID(const char *uuid, void **h) {
    if (strcmp(uuid, UUID_TEXT) != 0) return 6; /* NOT_FOUND */
    *h = (void *)1;
    return 0;
}

int nvmlDeviceGetMigMode(void *h, unsigned *cur, unsigned *pending) {
    (void)h;
    if (!env_int("FAKE_NVML_MIG", 0)) return 3; /* NOT_SUPPORTED */
    *cur = *pending = 1;
    return 0;
}

int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *count) {
    (void)h; (void)type; (void)counter;
    *count = (unsigned long long)env_int("FAKE_NVML_ECC_UNCORRECTED", 0);
    return 0;
}

int nvmlDeviceGetRemappedRows(void *h, unsigned *corr, unsigned *unc, unsigned *pending,
                              unsigned *failure) {
    (void)h;
    *corr = 0;
    *unc = 0;
    *pending = (unsigned)env_int("FAKE_NVML_REMAP_PENDING", 0);
    *failure = (unsigned)env_int("FAKE_NVML_REMAP_FAILURE", 0);
    return 0;
}
