/* The module object of regionscan's compiled kernels: the method table is
 * RS_METHODS of regionscan_native.h (add kernels there, not here). */
#include "regionscan_native.h"

/* Every kernel is entered through rs_entry_<name>, which first clears the upper halves of the
 * vector registers (vzeroupper) where the CPU has AVX.  Why: ISA-L's CRC-32 (storage/checksum.py,
 * run on every block and WAL record a read checks) leaves them dirty, and on this project's
 * Xeons the kernels' SSE code then ran up to 10x slower until something cleared them (key_triples
 * on one region's 72,465 YCSB keys: 11.4 ms after a checksum, 1.06 ms after vzeroupper; see
 * docs/decisions/2026-12-07-keys-of-several-widths.md).  The kernels are compiled for the
 * baseline instruction set, so the instruction runs only where the CPU is known to have it. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx"))) static void rs_vzeroupper(void) { __builtin_ia32_vzeroupper(); }
static int rs_avx;  /* the CPU has AVX: set once at module init */
static inline void rs_clean_upper(void) {
    if (rs_avx) rs_vzeroupper();
}
static void rs_cpu_init(void) {
    __builtin_cpu_init();
    rs_avx = __builtin_cpu_supports("avx") != 0;
}
#else
static inline void rs_clean_upper(void) {}
static void rs_cpu_init(void) {}
#endif

#undef RS_METHOD
#define RS_METHOD(name, doc)                                                  \
    static PyObject *rs_entry_##name(PyObject *self, PyObject *args) {        \
        rs_clean_upper();                                                     \
        return rs_##name(self, args);                                         \
    }
RS_METHODS
#undef RS_METHOD
#define RS_METHOD(name, doc) {#name, (PyCFunction)rs_entry_##name, METH_VARARGS, doc},

static PyMethodDef rs_methods[] = {
    RS_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef rs_module = {
    PyModuleDef_HEAD_INIT, "_native_ext",
    "regionscan's compiled kernels; storage.native loads them (REGIONSCAN_NATIVE=0 turns them off).",
    -1, rs_methods,
};

PyMODINIT_FUNC PyInit__native_ext(void) {
    rs_cpu_init();
    return PyModule_Create(&rs_module);
}
