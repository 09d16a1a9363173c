/* The module object of regionscan's compiled kernels: the method table is
 * RS_METHODS of regionscan_native.h (add kernels there, not here). */
#include "regionscan_native.h"

static PyMethodDef rs_methods[] = {
    RS_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef rs_module = {
    PyModuleDef_HEAD_INIT, "_native_ext",
    "regionscan's compiled kernels; storage.native loads them (REGIONSCAN_NATIVE=0 turns them off).",
    -1, rs_methods,
};

PyMODINIT_FUNC PyInit__native_ext(void) { return PyModule_Create(&rs_module); }
