/* hpc-cuda-query: what a CUDA program sees of the GPUs it was given, through the driver API.
 *
 * The post-deploy check runs it inside a one-GPU Slurm job. It needs no CUDA toolkit: libcuda.so.1
 * is the driver's, mounted into the container by the host's NVIDIA runtime, and is opened at run
 * time (a node without it says so instead of failing to start). Prints
 *   cuda: driver <version>, <n> device(s)
 *   cuda: device <i>: <name>, <MiB> MiB
 * and exits 0; on any failure one line, "cuda: error: <call>: <CUDA's error name>", and exit 1.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int CUresult; /* CUDA_SUCCESS is 0 */
typedef int CUdevice;

static void *lib;

static void *sym(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        printf("cuda: error: %s: not in libcuda.so.1\n", name);
    }
    return f;
}

static int failed(const char *call, CUresult rc) {
    const char *text = "unknown error";
    CUresult (*error_name)(CUresult, const char **) =
        (CUresult (*)(CUresult, const char **))dlsym(lib, "cuGetErrorName");
    if (error_name) {
        error_name(rc, &text);
    }
    printf("cuda: error: %s: %s (%d)\n", call, text, rc);
    return 1;
}

int main(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        printf("cuda: error: dlopen: %s\n", dlerror());
        return 1;
    }
    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))sym("cuInit");
    CUresult (*driver)(int *) = (CUresult (*)(int *))sym("cuDriverGetVersion");
    CUresult (*count)(int *) = (CUresult (*)(int *))sym("cuDeviceGetCount");
    CUresult (*get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))sym("cuDeviceGet");
    CUresult (*name)(char *, int, CUdevice) = (CUresult (*)(char *, int, CUdevice))sym("cuDeviceGetName");
    CUresult (*mem)(size_t *, CUdevice) = (CUresult (*)(size_t *, CUdevice))sym("cuDeviceTotalMem_v2");
    if (!init || !driver || !count || !get || !name || !mem) {
        return 1;
    }
    CUresult rc;
    int version = 0, n = 0;
    if ((rc = init(0)) != 0) return failed("cuInit", rc);
    if ((rc = driver(&version)) != 0) return failed("cuDriverGetVersion", rc);
    if ((rc = count(&n)) != 0) return failed("cuDeviceGetCount", rc);
    printf("cuda: driver %d, %d device(s)\n", version, n);
    for (int i = 0; i < n; i++) {
        CUdevice dev;
        char text[256];
        size_t bytes = 0;
        if ((rc = get(&dev, i)) != 0) return failed("cuDeviceGet", rc);
        if ((rc = name(text, sizeof text, dev)) != 0) return failed("cuDeviceGetName", rc);
        if ((rc = mem(&bytes, dev)) != 0) return failed("cuDeviceTotalMem", rc);
        printf("cuda: device %d: %s, %zu MiB\n", i, text, bytes >> 20);
    }
    return 0;
}
