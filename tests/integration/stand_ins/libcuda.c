/* Stand-in for the NVIDIA driver's libcuda.so.1 (no GPU here), mounted into lab containers by the
 * NVIDIA runtime stand-in. Like the driver, it sees the GPUs whose device files the process may
 * open: a /dev/nvidia<N> the devices cgroup refuses (EPERM) is not a device; a fake one that
 * opens or answers ENXIO (no driver behind the lab's character devices) is. CUDA_VISIBLE_DEVICES
 * then picks among them by index, as CUDA does. Names and sizes are the lab's fixed A100s.
 * Error codes are CUDA's: 100 CUDA_ERROR_NO_DEVICE, 101 CUDA_ERROR_INVALID_DEVICE,
 * 3 CUDA_ERROR_NOT_INITIALIZED. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int devices = -1;

static int openable(int minor) {
    char path[32];
    snprintf(path, sizeof path, "/dev/nvidia%d", minor);
    int fd = open(path, O_RDWR);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return errno == ENXIO || errno == ENODEV;
}

int cuInit(unsigned flags) {
    (void)flags;
    int present = 0;
    for (int minor = 0; minor < 16; minor++) present += openable(minor);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible) {
        int listed = 0;
        char *copy = strdup(visible), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (atoi(t) < present) listed++;
            else break; /* CUDA stops at the first index that names no device */
        }
        free(copy);
        present = listed;
    }
    devices = present;
    return devices > 0 ? 0 : 100;
}

int cuDriverGetVersion(int *version) {
    *version = 12040;
    return 0;
}

int cuDeviceGetCount(int *count) {
    if (devices < 0) return 3;
    *count = devices;
    return 0;
}

int cuDeviceGet(int *device, int ordinal) {
    if (devices < 0) return 3;
    if (ordinal < 0 || ordinal >= devices) return 101;
    *device = ordinal;
    return 0;
}

int cuDeviceGetName(char *name, int len, int device) {
    if (device < 0 || device >= devices) return 101;
    snprintf(name, (size_t)len, "NVIDIA A100 80GB PCIe");
    return 0;
}

int cuDeviceTotalMem_v2(size_t *bytes, int device) {
    if (device < 0 || device >= devices) return 101;
    *bytes = (size_t)81920 << 20;
    return 0;
}

int cuGetErrorName(int error, const char **text) {
    switch (error) {
    case 3: *text = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *text = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *text = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    default: *text = "CUDA_ERROR_UNKNOWN"; return 0;
    }
}
